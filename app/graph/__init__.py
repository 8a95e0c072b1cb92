"""The Graph tab: a fast, hierarchical browser of an ONNX graph (GraphBrowser)."""

from app.graph.browser import GraphBrowser
from app.graph.timing import time_first_paint

__all__ = ["GraphBrowser", "time_first_paint"]
