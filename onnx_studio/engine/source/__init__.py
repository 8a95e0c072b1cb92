"""Model sources: what a recipe's [model] names, described without running it (`source.describe`),
loaded into a callable module (`load_model`, where user code runs), and the example inputs
it takes (`make_inputs`). The built-in examples live in `onnx_studio.engine.source.examples`.

The names below are imported from their module when first looked up here, so the window's
light uses (`kinds.parse`, `inputs.resolve_fill`) load neither the loader nor the source
parser (`describe`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onnx_studio.engine.source.device import check_device
    from onnx_studio.engine.source.inputs import make_inputs
    from onnx_studio.engine.source.load import LoadedModel, load_model

__all__ = ["LoadedModel", "check_device", "load_model", "make_inputs"]
_MODULES = {"LoadedModel": "load", "check_device": "device", "load_model": "load",
            "make_inputs": "inputs"}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return getattr(importlib.import_module(f"onnx_studio.engine.source.{_MODULES[name]}"), name)
    raise AttributeError(f"module 'onnx_studio.engine.source' has no attribute {name!r}")
