"""The node ONNX Runtime refuses, said with its cause: `refused_node(path, message)` reads
the node an onnxruntime load error names ("... node with name 'X'", "... in node (X)") from
the file, and gives the sentence (its operator, the element types of its inputs, and the line
of the model's code that made it, from the stack the dynamo exporter records) and the fix.

A file can be a valid ONNX graph and still not run: ONNX Runtime has no kernel for an
operator on some element types on a provider (Mul on bfloat16 on the CPU: Falcon's ALiBi
computes in bfloat16). Such a verdict names the line, so the fix is where the user can make
it, not "failed unexpectedly".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from engine.graph.source_frame import source_frame

# dtypes ONNX Runtime's CPU provider runs for few operators: computing in float32 runs
_NARROW = ("BFLOAT16", "FLOAT16", "COMPLEX64", "COMPLEX128", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
           "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "INT4", "UINT4")
_NODE = (re.compile(r"node with name '([^']+)'"), re.compile(r"in node \(([^)]+)\)"))

__all__ = ["refused_node"]


def refused_node(path: Path, message: str) -> tuple[str, str] | None:
    """(sentence, hint) for the node that onnxruntime's `message` names in the file at
    `path`; None when it names none, or the file does not hold it."""
    name = next((m.group(1) for m in (p.search(message) for p in _NODE) if m), None)
    if name is None:
        return None
    try:
        import onnx

        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # the load error itself is said; this only adds to it
        return None
    node = next((n for n in _all_nodes(model.graph) if n.name == name), None)
    if node is None:
        return None
    types = _element_types(model.graph)
    given = [types[i] for i in node.input if i in types]
    on = f" on {', '.join(dict.fromkeys(t.lower() for t in given))}" if given else ""
    meta = {p.key: p.value for p in node.metadata_props}
    frame = source_frame(meta.get("pkg.torch.onnx.stack_trace", ""))
    made = f", made at {frame}" if frame is not None else ""
    sentence = f"ONNX Runtime does not run {node.op_type}{on} (node {name}{made})."
    narrow = [t.lower() for t in given if t in _NARROW]
    where = f"the line at {frame}" if frame is not None else f"what makes node {name}"
    if narrow:
        hint = (f"Make {where} compute in float32 instead of {narrow[0]} (the file then runs "
                "on every provider), or validate on a provider that has this kernel "
                "(validate.providers).")
    else:
        hint = ("Export with another opset or exporter (--opset, --exporter), or validate on "
                f"a provider that runs {node.op_type} (validate.providers).")
    return sentence, hint


def _all_nodes(graph: Any) -> Any:
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from _all_nodes(sub)


def _element_types(graph: Any) -> dict[str, str]:
    """name -> element type (BFLOAT16, FLOAT...) of every typed value in the graph."""
    from onnx import TensorProto

    found = {t.name: TensorProto.DataType.Name(t.data_type) for t in graph.initializer}
    for value in (*graph.input, *graph.output, *graph.value_info):
        elem = value.type.tensor_type.elem_type
        if elem:
            found[value.name] = TensorProto.DataType.Name(elem)
    for node in graph.node:  # a Cast's output is its `to`, typed or not
        if node.op_type == "Cast":
            to = next((a.i for a in node.attribute if a.name == "to"), 0)
            if to and node.output:
                found.setdefault(node.output[0], TensorProto.DataType.Name(to))
    return found
