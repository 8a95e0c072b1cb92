"""The `graph` object of the JSON contract, read from an .onnx file without its weights."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import StudioError, missing_file_hint
from onnx_studio.engine.graph.model import dtype_name


def _value_info(value: Any) -> dict[str, Any]:
    tensor = value.type.tensor_type
    shape: list[int | str] | None = None
    if tensor.HasField("shape"):
        shape = [
            d.dim_param if d.HasField("dim_param") else d.dim_value if d.HasField("dim_value")
            else "?"
            for d in tensor.shape.dim
        ]
    dtype = dtype_name(tensor.elem_type) if value.type.HasField("tensor_type") else (
        value.type.WhichOneof("value") or "unknown")
    return {"name": value.name, "dtype": dtype, "shape": shape}


def summarize(path: str | Path) -> dict[str, Any]:
    """{"nodes", "inputs", "outputs", "opset_imports"} for the file; raises a `source` error
    when the file is missing or not ONNX."""
    import onnx

    path = Path(path)
    if not path.is_file():
        raise StudioError("source", f"{path} does not exist; check the path.",
                          missing_file_hint(path, ".onnx"))
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:
        raise StudioError("source", f"{path.name} is not a readable ONNX file "
                          f"({type(exc).__name__}); re-export it or choose another file.",
                          details=str(exc)) from None
    if not model.graph.node and not model.graph.input and not model.graph.output:
        raise StudioError("source", f"{path.name} holds no ONNX graph; re-export it or choose "
                          "another file.")
    initializers = {i.name for i in model.graph.initializer}
    return {
        "nodes": len(model.graph.node),
        "inputs": [_value_info(v) for v in model.graph.input if v.name not in initializers],
        "outputs": [_value_info(v) for v in model.graph.output],
        "opset_imports": {o.domain: o.version for o in model.opset_import},
    }


def all_nodes(graph: Any) -> Iterator[Any]:
    """The nodes of an ONNX graph and of its subgraphs (If/Loop/Scan bodies), depth first."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from all_nodes(attr.g)
            for sub in attr.graphs:
                yield from all_nodes(sub)
