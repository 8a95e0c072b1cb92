"""The Graph tab: a fast, hierarchical browser of an ONNX graph.

Owns `GraphTab` (the tab, a view of the session, light to import) and `GraphBrowser` (toolbar,
breadcrumb, graph view, properties panel) with its canvas, colours and timing. The browser
imports onnx and pyqtgraph, so it is imported on first use, never at window start; the tab is
built when first shown (onnx_studio.app.tabs). Every name here is looked up lazily: the window's
start imports this package for `findings` alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onnx_studio.app.graph.browser import GraphBrowser
    from onnx_studio.app.graph.tab import GraphTab, preload_graph_modules
    from onnx_studio.app.graph.timing import time_first_paint

__all__ = ["GraphBrowser", "GraphTab", "preload_graph_modules", "time_first_paint"]
_LAZY = {"GraphBrowser": "onnx_studio.app.graph.browser",
         "GraphTab": "onnx_studio.app.graph.tab",
         "preload_graph_modules": "onnx_studio.app.graph.tab",
         "time_first_paint": "onnx_studio.app.graph.timing"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'onnx_studio.app.graph' has no attribute {name!r}")
