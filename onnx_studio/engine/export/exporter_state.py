"""What the exporter keeps of a model after its export, and letting it go; what it changes of
the model, and putting it back.

onnxscript's optimizer (torch.onnx's `optimize=True`) matches its rewrite rules with pattern
matchers that live as long as the process (module-level rule sets), and each matcher keeps the
last node, graph and match it looked at (onnxscript 0.7: `SimplePatternMatcher._current_node`,
`_graph`, `_match`, `_tracer`). Through them the exported graph, its initializers and so every
weight of the PyTorch model (the initializers alias its parameters) stay alive after the
export is done and the model dropped: measured, the whole model's weights. A process that
validates the export with ONNX Runtime next would hold them twice.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Any

_PER_MATCH = ("_current_node", "_graph", "_tracer", "_match")


def forget_exported_graphs() -> int:
    """Clear what onnxscript's pattern matchers remember of the last graph they matched (each
    match sets it again before reading it); the number of matchers cleared."""
    try:
        from onnxscript.rewriter._matcher import SimplePatternMatcher
    except ImportError:  # another onnxscript layout: nothing known to clear
        return 0
    cleared = 0
    for found in gc.get_objects():
        if isinstance(found, SimplePatternMatcher):
            for name in _PER_MATCH:
                if name in vars(found):
                    setattr(found, name, None)
            cleared += 1
    return cleared


@contextlib.contextmanager
def modes_kept(module: Any) -> Iterator[None]:
    """Every submodule of `module` left in the training mode it had. torch.onnx's TorchScript
    exporter puts the module it exports in eval mode for the trace and then calls `train()`
    with that module's own mode, which sets every submodule's: a wrapper made in training mode
    (an nn.Module's default) around a model in eval mode left the model training, its dropout
    on, and the validation that runs it next found a model that is not the same twice."""
    modes = [(m, m.training) for m in module.modules()]
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training
