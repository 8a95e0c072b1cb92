"""The parts of an ONNX graph read from its protobuf on demand: a `Node` (attributes
formatted for reading, metadata, the line of the model's code that made it), a tensor's
`TensorInfo` (type, shape, producer, consumers), dtype names and shapes as the view prints
them, and an external weight as a memory map."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_studio.engine.graph.file_check import NodeAttributes, lies_outside
from onnx_studio.engine.graph.source_frame import source_frame

Shape = list[int | str | None]

# onnx.TensorProto.DataType numbers -> numpy-style names (a table beats a protobuf lookup).
_DTYPES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8_e4m3fn",
    18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz", 21: "uint4", 22: "int4",
    23: "float4_e2m1",
}
def dtype_name(elem_type: int) -> str:
    """The torch-style name of an ONNX element type ("float32", "int64", "float8_e5m2"...),
    as recipes write dtypes; used by the graph view and the CLI's JSON alike."""
    return _DTYPES.get(elem_type, f"type{elem_type}")


def format_shape(shape: Shape | None) -> str:
    """A shape as the view prints it: ``batch×seq×768``; ``?`` for unknown."""
    if shape is None:
        return "?"
    if not shape:
        return "scalar"
    return "×".join("?" if d is None else str(d) for d in shape)


@dataclass
class TensorInfo:
    """One value of the graph: its type, where it comes from and where it goes."""

    name: str
    dtype: str
    shape: Shape | None
    kind: str  # "input" | "output" | "initializer" | "value" | "outer"
    producer: int | None
    consumers: list[int]
    is_initializer: bool = False


class Node(NodeAttributes):
    """One ONNX node; the protobuf stays behind it for details read on demand (its
    subgraphs and tensors: NodeAttributes, what onnx_studio.engine.graph.file_check reads too)."""

    __slots__ = ("_attrs", "_meta", "_payload", "domain", "group", "index", "inputs", "name",
                 "op_type", "outputs", "proto")

    def __init__(self, index: int, proto: Any, name: str | None = None, op_type: str = "",
                 domain: str = "", inputs: list[str] | None = None,
                 outputs: list[str] | None = None, group: str = "") -> None:
        """The node at `index` of its graph; its fields read from `proto` unless given (as
        onnx_studio.engine.graph.columns read them)."""
        self.index = index
        self.proto = proto
        if name is None:
            name, op_type, domain = proto.name, proto.op_type, proto.domain
        self.name: str = name
        self.op_type: str = op_type
        self.domain: str = domain
        self.inputs: list[str] = proto.input[:] if inputs is None else inputs
        self.outputs: list[str] = proto.output[:] if outputs is None else outputs
        self.group = group  # its module group's id ("": the graph itself)
        self._attrs: dict[str, str] | None = None
        self._meta: dict[str, str] | None = None
        self._payload: tuple[list[Any], list[Any]] | None = None

    @property
    def label(self) -> str:
        """The name shown for the node: its ONNX name, or op type and index when unnamed."""
        return self.name or f"{self.op_type}_{self.index}"

    @property
    def metadata(self) -> dict[str, str]:
        """The node's metadata_props (exporter annotations) as a dict."""
        if self._meta is None:
            self._meta = {p.key: p.value for p in self.proto.metadata_props}
        return self._meta

    @property
    def attributes(self) -> dict[str, str]:
        """Attributes formatted for reading (tensors summarised, subgraphs named)."""
        if self._attrs is None:
            self._attrs = {a.name: _format_attribute(a) for a in self.proto.attribute}
        return self._attrs

    @property
    def subgraph_attributes(self) -> list[str]:
        """Names of attributes holding subgraphs (``then_branch``, ``body``, ``branches[0]``)."""
        names: list[str] = []
        for a in self.proto.attribute:
            if a.type == 5:
                names.append(a.name)
            elif a.type == 10:
                names.extend(f"{a.name}[{i}]" for i in range(len(a.graphs)))
        return names

    @property
    def stack_trace(self) -> str:
        """The Python stack that made this node (dynamo exports), or ""."""
        return self.metadata.get("pkg.torch.onnx.stack_trace", "")

    @property
    def source(self) -> str | None:
        """``file:line`` of the model's code that made the node
        (onnx_studio.engine.graph.source_frame: the user's code, else a library's model file; never
        torch or the studio's wrappers), or None."""
        frame = source_frame(self.stack_trace)
        return str(frame) if frame is not None else None


def _format_attribute(a: Any) -> str:
    t = a.type
    if t == 1:
        return f"{a.f:g}"
    if t == 2:
        return str(a.i)
    if t == 3:
        return repr(a.s.decode("utf-8", "replace"))
    if t == 4:
        dims = "×".join(str(d) for d in a.t.dims) or "scalar"
        return f"tensor {dtype_name(a.t.data_type)}[{dims}]" + _small_tensor_values(a.t)
    if t == 5:
        return f"graph {a.g.name or a.name} ({len(a.g.node)} nodes)"
    if t == 6:
        return "[" + ", ".join(f"{f:g}" for f in a.floats) + "]"
    if t == 7:
        return "[" + ", ".join(str(i) for i in a.ints) + "]"
    if t == 8:
        return "[" + ", ".join(repr(s.decode("utf-8", "replace")) for s in a.strings) + "]"
    if t == 10:
        return f"{len(a.graphs)} graphs"
    if t == 13:
        return f"type {a.tp}"
    return f"<attribute type {t}>"


def _small_tensor_values(t: Any) -> str:
    """Values of a constant small enough to read in a table (≤ 16 elements)."""
    n = 1
    for d in t.dims:
        n *= d
    if n > 16 or t.data_location == 1:
        return ""
    try:
        from onnx import numpy_helper

        values = numpy_helper.to_array(t).ravel().tolist()
    except Exception:  # an odd dtype must not break the properties panel
        return ""
    return " = " + (str(values[0]) if not t.dims else str(values))


def _memory_map(t: Any, base: Path) -> Any:
    """An external-data initializer as a read-only numpy memmap, or None when its type has no
    plain numpy layout (4-bit, float8, strings) and onnx must decode it."""
    import numpy as np

    dtypes = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
              7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
              13: np.uint64, 14: np.complex64, 15: np.complex128}
    dtype = dtypes.get(t.data_type)
    if dtype is None:
        return None
    info = {e.key: e.value for e in t.external_data}
    if lies_outside(base, info.get("location", "")):  # a file elsewhere on the machine
        raise ValueError(f"its external data file {info.get('location')!r} lies outside the "
                         "model's folder")
    path = base / info.get("location", "")
    shape = tuple(int(d) for d in t.dims)
    count = 1
    for d in shape:
        count *= d
    if count == 0:
        return np.zeros(shape, dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=int(info.get("offset", 0)),
                     shape=shape)


def _shape_of(value_info: Any) -> tuple[str, Shape | None]:
    tt = value_info.type.tensor_type
    if not value_info.type.HasField("tensor_type"):
        which = value_info.type.WhichOneof("value")
        return (which or "?"), None
    dtype = dtype_name(tt.elem_type)
    if not tt.HasField("shape"):
        return dtype, None
    dims: Shape = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return dtype, dims
