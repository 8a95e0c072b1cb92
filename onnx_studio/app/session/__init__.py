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

Qt signals, no widget: the session never imports a view (an import contract checks it). The
analysis's names are looked up when first asked for: the window's first paint does without them.
"""

import importlib
from typing import TYPE_CHECKING, Any

from onnx_studio.app.session.explaining import Explainer, Explanation, WhyOffer
from onnx_studio.app.session.model import ExportSession
from onnx_studio.app.session.recipe_edits import PARTS
from onnx_studio.app.session.results import Stale

if TYPE_CHECKING:
    from onnx_studio.app.session.analysis import AnalysisModel, Comparison, Profile, Variant

__all__ = ["PARTS", "AnalysisModel", "Comparison", "Explainer", "Explanation", "ExportSession",
           "Profile", "Stale", "Variant", "WhyOffer"]
_LAZY = ("AnalysisModel", "Comparison", "Profile", "Variant")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module("onnx_studio.app.session.analysis"), name)
    raise AttributeError(f"module 'onnx_studio.app.session' has no attribute {name!r}")
