"""What float16 does to the values a model computes: the float32 model's value ranges on the
validation inputs, the values a float16 variant holds in float16, and the overflows that follow.

ONNX Runtime's CPU provider has float16 kernels for few operators: for the others (Gemm,
MatMul, most activations) it casts to float32, computes, and casts back, and it drops the
casts between two such nodes. A value beyond float16's range (|x| > 65504) then never meets
float16 on a CPU, and the CPU verdict passes a file that gives inf on float16 hardware. So the
fp16 verdict also reads the values themselves: the float32 model's intermediates, computed in
ONNX Runtime on the validation's inputs (export inputs, random draws, other sizes), each
reduced to its largest magnitude and to the error float16 would add (`ValueRange`), a chunk
of values at a time (`BUDGET` bytes). A value the variant holds in float16 beyond 65504 fails
the verdict and names its node (`fp16_overflows`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import Recipe

FP16_MAX = 65504.0
BUDGET = 256 << 20  # bytes of values held at once
_FLOAT = 1
_FLOAT16 = 10


@dataclass
class ValueRange:
    """One float32 value over every feed: its largest finite magnitude, and the largest error
    float16 gives it against the tolerance, |fp16(x) - x| / (atol + rtol * |x|) (inf: beyond
    float16's range; above 1: beyond its precision for this tolerance)."""

    max_abs: float = 0.0
    fp16_error: float = 0.0

    def add(self, values: np.ndarray, rtol: float, atol: float, clamp: bool = False) -> None:
        """Fold in more values; `clamp`: float16 clamps them to its range first (weights, as
        the converter stores them) rather than overflowing (computed values)."""
        x = np.asarray(values, dtype=np.float64).ravel()
        x = x[np.isfinite(x)]
        if not x.size:
            return
        self.max_abs = max(self.max_abs, float(np.abs(x).max()))
        with np.errstate(over="ignore", invalid="ignore"):
            half = (np.clip(x, -FP16_MAX, FP16_MAX) if clamp else x).astype(np.float16)
            error = np.abs(half.astype(np.float64) - x) / (atol + rtol * np.abs(x))
        worst = float(np.nan_to_num(error, nan=math.inf).max())
        self.fp16_error = max(self.fp16_error, worst)

    @property
    def overflows(self) -> bool:
        return self.max_abs > FP16_MAX


def validation_feeds(recipe: Recipe, onnx_names: list[str], model: Any = None
                     ) -> list[dict[str, np.ndarray]]:
    """The feeds of every trial the validation runs (export inputs, random draws, other sizes
    of each dynamic dimension), by ONNX input name; a trial whose inputs cannot be drawn is
    left out."""
    from onnx_studio.engine.analysis.feeds import feeds_from_recipe
    from onnx_studio.engine.source.inputs import make_inputs
    from onnx_studio.engine.validation.validator import plan_trials

    values = make_inputs(recipe, model=model)
    index = {s.name: i for i, s in enumerate(recipe.inputs)}
    sizes = {name: int(values[index[places[0][0]]].shape[places[0][1]])
             for name, places in recipe.dynamic_dims().items()}
    fixed = {d for s in recipe.inputs if s.fill == "file" for d in s.dynamic.values()}
    feeds = [feeds_from_recipe(recipe, onnx_names, model).arrays]
    for trial in plan_trials(recipe, sizes, skip=fixed)[1:]:
        try:
            feeds.append(feeds_from_recipe(recipe, onnx_names, model, seed=trial.seed,
                                           sizes=trial.sizes).arrays)
        except StudioError:
            continue
    return feeds


def value_types(proto: Any) -> dict[str, int]:
    """Every value's ONNX element type, after shape inference (graph inputs, outputs,
    initializers and intermediates)."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False)
    except Exception:  # a graph inference cannot read: the types the file states
        inferred = proto
    graph = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type
             for v in [*graph.input, *graph.value_info, *graph.output]
             if v.type.HasField("tensor_type")}
    types.update({t.name: t.data_type for t in graph.initializer})
    return types


def float_values(proto: Any) -> list[str]:
    """The float32 values the graph's nodes compute, in graph order."""
    types = value_types(proto)
    return [out for node in proto.graph.node for out in node.output
            if out and types.get(out) == _FLOAT]


def run_values(path: Path, names: list[str], feeds: list[dict[str, np.ndarray]],
               sink: Callable[[str, int, np.ndarray], None], *,
               providers: list[str] | None = None, budget: int = BUDGET) -> None:
    """ONNX Runtime's values of `names` (any values of the file) on each feed, handed to
    `sink(name, feed index, array)` and dropped: the graph gets a chunk of them as its outputs
    at a time, each chunk about `budget` bytes (estimated from the shapes)."""
    import onnx

    from onnx_studio.engine.validation.ort_session import session_settings

    graph_only = onnx.load(str(path), load_external_data=False)
    sizes = _estimated_bytes(graph_only, feeds[0] if feeds else {})
    options, chosen = session_settings(list(providers or ["CPUExecutionProvider"]), "all")
    for chunk in _chunks(names, sizes, budget):
        session = _session_with_outputs(path, graph_only, chunk, options, chosen)
        wanted = {i.name for i in session.get_inputs()}
        for index, feed in enumerate(feeds):
            got = session.run(chunk, {k: v for k, v in feed.items() if k in wanted})
            for name, value in zip(chunk, got, strict=True):
                sink(name, index, np.asarray(value))
            del got


def _chunks(names: list[str], sizes: dict[str, int], budget: int) -> Iterable[list[str]]:
    chunk: list[str] = []
    held = 0
    for name in names:
        size = sizes.get(name, 0)
        if chunk and held + size > budget:
            yield chunk
            chunk, held = [], 0
        chunk.append(name)
        held += size
    if chunk:
        yield chunk


def _estimated_bytes(proto: Any, feed: dict[str, np.ndarray]) -> dict[str, int]:
    """Bytes of each value on `feed`, from its inferred shape; a symbolic dimension takes its
    size in the feed, an unknown one the largest input's element count."""
    import onnx

    dims: dict[str, int] = {}
    for value in proto.graph.input:
        if value.name in feed:
            for d, size in zip(value.type.tensor_type.shape.dim, feed[value.name].shape,
                               strict=False):
                if d.dim_param:
                    dims[d.dim_param] = int(size)
    fallback = max((a.size for a in feed.values()), default=1)
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False)
    except Exception:
        inferred = proto
    out = {}
    for value in [*inferred.graph.value_info, *inferred.graph.output]:
        count = 1
        for d in value.type.tensor_type.shape.dim:
            count *= (d.dim_value if d.HasField("dim_value") else
                      dims.get(d.dim_param, fallback))
        out[value.name] = 8 * max(count, 1)
    return out


def _session_with_outputs(path: Path, graph_only: Any, names: list[str], options: Any,
                          providers: list[str]) -> Any:
    """A session of the file whose outputs are `names`; with external data, the graph is
    written beside the file for the session (its weights read from the same files), then
    removed."""
    import os
    import tempfile

    import onnx
    import onnxruntime as ort

    from onnx_studio.engine.export.onnx_file import uses_external_data

    model = onnx.ModelProto()
    model.CopyFrom(graph_only)
    del model.graph.output[:]
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    if not uses_external_data(model):
        return ort.InferenceSession(model.SerializeToString(), options, providers=providers)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.values.", suffix=".onnx",
                                dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(model.SerializeToString())
        return ort.InferenceSession(temp, options, providers=providers)
    finally:
        os.unlink(temp)


def value_ranges(path: Path, proto: Any, feeds: list[dict[str, np.ndarray]], rtol: float,
                 atol: float, *, providers: list[str] | None = None,
                 budget: int = BUDGET) -> dict[str, ValueRange]:
    """The range of every float32 value the graph computes, over `feeds`, graph order."""
    ranges = {name: ValueRange() for name in float_values(proto)}
    run_values(path, list(ranges), feeds,
               lambda name, _i, value: ranges[name].add(value, rtol, atol),
               providers=providers, budget=budget)
    return ranges


def weight_ranges(path: Path, proto: Any, rtol: float, atol: float) -> dict[str, ValueRange]:
    """The range of every float32 initializer and Constant node's tensor, as float16 stores
    them (clamped to its range), one tensor read at a time."""
    from onnx import numpy_helper

    ranges: dict[str, ValueRange] = {}
    tensors = [(t.name, t) for t in proto.graph.initializer if t.data_type == _FLOAT]
    tensors += [(node.output[0], a.t) for node in proto.graph.node
                if node.op_type == "Constant" for a in node.attribute
                if a.name == "value" and a.t.data_type == _FLOAT]
    for name, tensor in tensors:
        found = ranges[name] = ValueRange()
        found.add(numpy_helper.to_array(tensor, base_dir=str(path.parent)), rtol, atol,
                  clamp=True)
    return ranges


def fp16_holders(variant: Any) -> dict[str, str]:
    """The values a float16 variant holds in float16 and uses (some node reads them, or they
    are its outputs): source value name -> the variant's name for it. The converter renames a
    float32 graph input or output it keeps (its float16 side is the Cast next to it)."""
    types = value_types(variant)
    graph = variant.graph
    used = {name for node in graph.node for name in node.input if name}
    used |= {o.name for o in graph.output}
    inputs = {i.name for i in graph.input}
    outputs = {o.name for o in graph.output}
    held: dict[str, str] = {}
    for node in graph.node:
        if node.op_type != "Cast" or not node.input or not node.output:
            continue
        source, target = node.input[0], node.output[0]
        if target in outputs and types.get(source) == _FLOAT16 and types.get(target) == _FLOAT:
            held[target] = source  # graph output computed in float16, cast back
        elif source in inputs and types.get(target) == _FLOAT16:
            held[source] = target
    for name, elem in types.items():
        if elem == _FLOAT16 and name in used and name not in held.values():
            held.setdefault(name, name)
    return held


@dataclass
class Overflow:
    """A value the variant computes in float16 whose float32 values exceed 65504."""

    node: str
    op_type: str
    value: str
    max_abs: float

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "op_type": self.op_type, "value": self.value,
                "max_abs": self.max_abs}


def fp16_overflows(source: Any, variant: Any, ranges: dict[str, ValueRange]) -> list[Overflow]:
    """The values of `source` (the float32 file) beyond float16's range that `variant` holds
    in float16, with the node computing each, in graph order."""
    held = fp16_holders(variant)
    found = []
    for node in source.graph.node:
        for value in node.output:
            found_range = ranges.get(value)
            if found_range is not None and found_range.overflows and value in held:
                found.append(Overflow(node.name or value, node.op_type, value,
                                      found_range.max_abs))
    return found


def overflow_error(overflows: list[Overflow]) -> StudioError:
    """The verdict's failure for values that overflow in float16: the first nodes named."""
    first = overflows[0]
    more = f" and {len(overflows) - 1} more node(s)" if len(overflows) > 1 else ""
    names = ",".join(o.node for o in overflows[:20])
    return StudioError(
        "validation",
        f"The fp16 variant overflows on float16 hardware: node {first.node!r} "
        f"({first.op_type}){more} computes values up to {first.max_abs:.3g} in float16, "
        f"beyond its largest value {FP16_MAX:g} (ONNX Runtime's CPU provider computes many "
        "float16 operators in float32, so the outputs checked here need not show it).",
        f"Keep those nodes in float32: --keep-fp32 auto, or --keep-fp32 {names}.",
        details="\n".join(f"{o.node} ({o.op_type}): {o.value} reaches {o.max_abs:.6g}"
                          for o in overflows))
