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

from onnx_studio.engine.graph.nodes import dtype_name
from onnx_studio.engine.graph.source_frame import source_frame
from onnx_studio.engine.graph.summary import all_nodes

# dtypes ONNX Runtime's CPU provider runs for few operators: computing in float32 runs
_NARROW = ("bfloat16", "float16", "complex64", "complex128", "float8_e4m3fn",
           "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "int4", "uint4", "float4_e2m1")
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
    node = next((n for n in all_nodes(model.graph) if n.name == name), None)
    if node is None:
        return None
    types = _element_types(model.graph)
    given = [types[i] for i in node.input if i in types]
    on = f" on {', '.join(dict.fromkeys(given))}" if given else ""
    meta = {p.key: p.value for p in node.metadata_props}
    frame = source_frame(meta.get("pkg.torch.onnx.stack_trace", ""))
    made = f", made at {frame}" if frame is not None else ""
    sentence = f"ONNX Runtime does not run {node.op_type}{on} (node {name}{made})."
    narrow = [t for t in given if t in _NARROW]
    where = f"the line at {frame}" if frame is not None else f"what makes node {name}"
    if narrow:
        hint = (f"Make {where} compute in float32 instead of {narrow[0]} (the file then runs "
                "on every provider), or validate on a provider that has this kernel "
                "(validate.providers).")
    else:
        hint = ("Export with another opset or exporter (--opset, --exporter), or validate on "
                f"a provider that runs {node.op_type} (validate.providers).")
    return sentence, hint


def _element_types(graph: Any) -> dict[str, str]:
    """name -> element type ("bfloat16", "float32"...) of every typed value in the graph."""
    found = {t.name: dtype_name(t.data_type) for t in graph.initializer}
    for value in (*graph.input, *graph.output, *graph.value_info):
        elem = value.type.tensor_type.elem_type
        if elem:
            found[value.name] = dtype_name(elem)
    for node in graph.node:  # a Cast's output is its `to`, typed or not
        if node.op_type == "Cast":
            to = next((a.i for a in node.attribute if a.name == "to"), 0)
            if to and node.output:
                found.setdefault(node.output[0], dtype_name(to))
    return found
