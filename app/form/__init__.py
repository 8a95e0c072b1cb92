"""The form side of the window: the recipe's fields as views of the session (`FormPanel`).

Owns the widgets that show and edit a recipe — the Model group (`ModelForm`), the inputs and
outputs tables, the Options group, the dynamic-axes dialog — and the export bar under them
(output file, why Export is disabled, progress, Export / Validate / Cancel). Every edit goes
through the session (`ExportSession.edit`); `marks` tints a field the session found wrong.
"""

from app.form.dynamic_axes import DynamicAxesDialog
from app.form.export_bar import ExportBar
from app.form.model_form import ModelForm
from app.form.options_form import OptionsForm
from app.form.panel import Banner, FormPanel
from app.form.tensor_tables import InputsTable, OutputsTable

__all__ = ["Banner", "DynamicAxesDialog", "ExportBar", "FormPanel", "InputsTable", "ModelForm",
           "OptionsForm", "OutputsTable"]
