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
    from engine.graph.browser_model import BrowserModel
    from engine.graph.layout import GraphLayout
    from engine.graph.model import GraphModel, dtype_name, format_shape
    from engine.graph.overlay import Overlay, Scale
    from engine.graph.summary import summarize

__all__ = ["BrowserModel", "GraphLayout", "GraphModel", "Overlay", "Scale", "dtype_name",
           "format_shape", "summarize"]
_WHERE = {"BrowserModel": "browser_model", "GraphLayout": "layout", "GraphModel": "model",
          "dtype_name": "model", "format_shape": "model", "Overlay": "overlay",
          "Scale": "overlay", "summarize": "summary"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"engine.graph.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'engine.graph' has no attribute {name!r}")
