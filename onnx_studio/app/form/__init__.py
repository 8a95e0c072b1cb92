"""The form side of the window: the recipe's fields as views of the session (`FormPanel`).

Owns the widgets that show and edit a recipe — the Model group (`ModelForm`), the inputs and
outputs tables, the Options group, the dynamic-axes dialog — and the export bar under them
(output file, why Export is disabled, progress, Export / Validate / Cancel). Every edit goes
through the session (`ExportSession.edit`); `marks` tints a field the session found wrong.
The dynamic-axes dialog is imported when first looked up (the first paint opens no dialog).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from onnx_studio.app.form.export_bar import ExportBar
from onnx_studio.app.form.model_form import ModelForm
from onnx_studio.app.form.options_form import OptionsForm
from onnx_studio.app.form.panel import Banner, FormPanel
from onnx_studio.app.form.tensor_tables import InputsTable, OutputsTable

if TYPE_CHECKING:
    from onnx_studio.app.form.dynamic_axes import DynamicAxesDialog

__all__ = ["Banner", "DynamicAxesDialog", "ExportBar", "FormPanel", "InputsTable", "ModelForm",
           "OptionsForm", "OutputsTable"]


def __getattr__(name: str) -> Any:
    if name == "DynamicAxesDialog":
        return importlib.import_module("onnx_studio.app.form.dynamic_axes").DynamicAxesDialog
    raise AttributeError(f"module 'onnx_studio.app.form' has no attribute {name!r}")
