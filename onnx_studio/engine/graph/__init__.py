"""The graph of an ONNX file for browsing and for the JSON contract, never importing torch:
`GraphModel` (nodes, tensors, module groups; weights read lazily), its layered `GraphLayout`,
the browser's state `BrowserModel` (file, expansion, selection, search, overlays), `Overlay`
and `Scale` (values per node tied to the file they were computed on), and `summarize` (the
contract's `graph` object).

Names are looked up on first use: a light module of the package (overlay, which the window
imports at start) does not pull in the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onnx_studio.engine.graph.browser_model import BrowserModel
    from onnx_studio.engine.graph.layout import GraphLayout
    from onnx_studio.engine.graph.model import GraphModel, dtype_name, format_shape
    from onnx_studio.engine.graph.overlay import Overlay, Scale
    from onnx_studio.engine.graph.summary import summarize

__all__ = ["BrowserModel", "GraphLayout", "GraphModel", "Overlay", "Scale", "dtype_name",
           "format_shape", "summarize"]
_WHERE = {"BrowserModel": "browser_model", "GraphLayout": "layout", "GraphModel": "model",
          "dtype_name": "model", "format_shape": "model", "Overlay": "overlay",
          "Scale": "overlay", "summarize": "summary"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"onnx_studio.engine.graph.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'onnx_studio.engine.graph' has no attribute {name!r}")
