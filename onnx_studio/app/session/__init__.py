"""The window's state, one object its views subscribe to: `ExportSession` (napari's
ViewerModel is the model), split by concern:

- recipe_edits.py  the recipe, its file, its problems, the dirty flag, every edit (the base)
- results.py       every result with its provenance; what is current; a new tolerance judged
                   again (rejudge.py: a new Validation from the stored differences)
- jobs.py          one handler follows every job in the worker; the export and validation jobs
- describing.py    what the model source offers (describe jobs); hugging_face.py its folders
- analysis.py      compare, profile and variant jobs and what they found
- explaining.py    the Why? of a failed validation (explain jobs) and what it found
- model.py         ExportSession: owns the parts; their signals are its own

Qt signals, no widget: the session never imports a view (an import contract checks it).
"""

from onnx_studio.app.session.analysis import AnalysisModel, Comparison, Profile, Variant
from onnx_studio.app.session.explaining import Explainer, Explanation, WhyOffer
from onnx_studio.app.session.model import ExportSession
from onnx_studio.app.session.recipe_edits import PARTS
from onnx_studio.app.session.results import Stale

__all__ = ["PARTS", "AnalysisModel", "Comparison", "Explainer", "Explanation", "ExportSession",
           "Profile", "Stale", "Variant", "WhyOffer"]
