"""The ONNX optimizer (onnxscript) of the dynamo exporter, the same passes in less time.

onnxscript's pattern matcher (onnxscript 0.7, `rewriter._matcher.SimplePatternMatcher.match`)
indexes every node of the graph by operator before it tries a pattern with several output
nodes at a node, for every node of the graph: the rewrite pass costs the square of the graph's
size, and it is most of the optimizer's time on a deep decoder. The first output node of such
a pattern has to match the node it is tried at before any other node is looked at; checking
that first, and building the index only then, skips the index for every node that cannot
match. Every match the matcher finds, it still finds: the files are byte for byte the ones the
unchanged matcher writes (tests/engine/test_quick_match.py compares them).

`quick_matching()` applies this while an export runs and puts the matcher back after; on an
onnxscript whose matcher does not have the shape this relies on, it changes nothing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

_LOCK = threading.Lock()


def _matcher_class() -> Any:
    """onnxscript's SimplePatternMatcher, when it has the methods this relies on; else None."""
    try:
        from onnxscript.rewriter import _matcher
    except ImportError:
        return None
    found = getattr(_matcher, "SimplePatternMatcher", None)
    if found is None or not all(hasattr(found, name) for name in
                                ("match", "_init_match", "_match_node")):
        return None
    return found


def _quick(original: Any) -> Any:
    """`original` (SimplePatternMatcher.match) that tries the first output node of a pattern
    with several output nodes before it indexes the graph."""
    import onnx_ir as ir

    def match(self: Any, model: Any, graph_or_function: Any, node: Any, *, verbose: int = 0,
              remove_nodes: bool = True, tracer: Any = None) -> Any:
        pattern = self.pattern
        if not pattern.has_single_output_node:
            # what original() sets up before it matches each combination of nodes
            self._tracer = tracer
            self._graph = graph_or_function if isinstance(graph_or_function, ir.Graph) \
                else graph_or_function.graph
            self._init_match(verbose)
            if not self._match_node(pattern.output_nodes[0], node):
                return self._match  # the failed match every combination would end in
        return original(self, model, graph_or_function, node, verbose=verbose,
                        remove_nodes=remove_nodes, tracer=tracer)

    match.quick = True  # type: ignore[attr-defined]
    return match


@contextlib.contextmanager
def quick_matching(enabled: bool = True) -> Iterator[bool]:
    """While the block runs, onnxscript's matcher checks a multi-output pattern's first node
    before it indexes the graph; yields whether it does (False: disabled, or an onnxscript
    this does not know)."""
    cls = _matcher_class() if enabled else None
    if cls is None or getattr(cls.match, "quick", False):
        yield cls is not None
        return
    with _LOCK:
        original = cls.match
        cls.match = _quick(original)
        try:
            yield True
        finally:
            cls.match = original
