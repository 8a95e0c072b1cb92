"""Export: a loaded model converted to ONNX by either exporter, checked against the request
and written atomically (`export_model`); the diagnoses of what could not convert; the
equivalent stand-alone script (`codegen.generate`); which exporter runs (`choice`).

The names below are imported from their module when first looked up here, so importing a
light module of the package (`onnx_studio.engine.export.choice`: the window asks it which exporter
"auto" implies) does not load the exporter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onnx_studio.engine.export.exporter import (
        export_model,
        exporter_opsets,
        torchscript_default_opset,
    )

__all__ = ["export_model", "exporter_opsets", "torchscript_default_opset"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("onnx_studio.engine.export.exporter"), name)
    raise AttributeError(f"module 'onnx_studio.engine.export' has no attribute {name!r}")
