"""The graph of an ONNX file for browsing and for the JSON contract, never importing torch:
`GraphModel` (nodes, tensors, module groups; weights read lazily), its layered `GraphLayout`,
and `summarize` (the contract's `graph` object)."""

from engine.graph.layout import GraphLayout
from engine.graph.model import GraphModel, dtype_name, format_shape
from engine.graph.summary import summarize

__all__ = ["GraphLayout", "GraphModel", "dtype_name", "format_shape", "summarize"]
