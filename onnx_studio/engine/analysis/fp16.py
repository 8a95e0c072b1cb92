"""Float16 variants that keep chosen nodes in float32, and the search for a small set of such
nodes that lets the variant pass (`--keep-fp32 auto`), on a CPU.

`convert(model, keep)`: onnxruntime.transformers' converter with `keep` as its node block
list. The converter casts a kept node's outputs back to float16 and its inputs to float32
again, so between two kept nodes a value still passes through float16 (and overflows there);
the pairs of casts it inserts are folded here, so a run of kept nodes stays in float32.

`auto_keep`: the nodes to keep, found in two steps.
1. Value ranges (onnx_studio.engine.analysis.ranges): from the float32 model's intermediates on the
   validation inputs and its weights, every node with an input or output that float16 cannot
   hold within the tolerance (beyond its range, or its precision) is kept.
2. If the variant still misses the tolerance, bisection on the per-node error: the variant's
   intermediates against the float32 model's, each node scored by the error it adds (its
   outputs' error against the tolerance, less its inputs'); the fewest top-scored nodes that
   make it pass are found by bisection, then each is dropped again if the variant passes
   without it.
A probe converts, runs both files on the validation inputs and compares the outputs with the
variant's tolerance (the float32 file is the reference: it was validated against PyTorch);
the final verdict is the variant's validation against PyTorch, as for any variant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnx_studio.engine.analysis.ranges import (
    ValueRange,
    fp16_overflows,
    run_values,
    value_ranges,
    weight_ranges,
)
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.events import Events

_FLOAT = 1
_FLOAT16 = 10
_PRUNE_MAX = 8  # kept nodes each tried without, after the bisection


def convert(model: Any, keep: set[str] | frozenset[str] = frozenset(), *,
            keep_io_types: bool = True) -> Any:
    """The float16 copy of `model` (a ModelProto, left unchanged) with the nodes named in
    `keep` computing in float32, their float32 values passed between them as they are."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    half = convert_float_to_float16(copy, keep_io_types=keep_io_types,
                                    node_block_list=sorted(keep) or None)
    if keep:
        _fold_cast_pairs(half.graph, {n.name for n in model.graph.node})
    topological_sort(half.graph)  # the converter appends the casts it adds
    return half


def _fold_cast_pairs(graph: Any, original: set[str]) -> None:
    """Cast(float32 -> float16) then Cast(float16 -> float32), both the converter's: the second
    reads the float32 value directly (an identity cast onnxruntime drops); the first goes when
    nothing else reads its output."""
    casts = {n.output[0]: n for n in graph.node
             if n.op_type == "Cast" and n.name not in original and n.output}
    for node in graph.node:
        if node.op_type != "Cast" or node.name in original or _cast_to(node) != _FLOAT:
            continue
        first = casts.get(node.input[0])
        if first is not None and _cast_to(first) == _FLOAT16 and _is_float32(first.input[0],
                                                                               graph, casts):
            node.input[0] = first.input[0]
    read = {name for n in graph.node for name in n.input} | {o.name for o in graph.output}
    dead = [n for n in graph.node if n.op_type == "Cast" and n.name not in original
            and _cast_to(n) == _FLOAT16 and n.output[0] not in read]
    for node in dead:
        graph.node.remove(node)


def _cast_to(node: Any) -> int | None:
    return next((a.i for a in node.attribute if a.name == "to"), None)


def _is_float32(name: str, graph: Any, casts: dict[str, Any]) -> bool:
    """Whether `name` is a float32 value: the converter's renamed output of a kept node
    (declared float32 in value_info), or a graph input kept float32."""
    for value in [*graph.value_info, *graph.input]:
        if value.name == name:
            return bool(value.type.tensor_type.elem_type == _FLOAT)
    producer = casts.get(name)
    return producer is not None and _cast_to(producer) == _FLOAT


def kept_fp32_names(model: Any, names: list[str]) -> set[str]:
    """The nodes a `--keep-fp32 NODE,...` list names; a `recipe` error (exit 2) for a name the
    file has no node of."""
    known = {n.name for n in model.graph.node}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise StudioError("recipe", f"--keep-fp32 names no node of the file: "
                          f"{', '.join(unknown[:5])}.", "Give node names as `inspect` or the "
                          "graph shows them, or --keep-fp32 auto.", exit_code=2)
    return set(names)


@dataclass
class Probe:
    """Runs float16 candidates against the float32 file's outputs on the validation inputs."""

    source: Path
    model: Any  # the float32 ModelProto (with its weights)
    feeds: list[dict[str, np.ndarray]]
    rtol: float
    atol: float
    keep_io_types: bool
    ranges: dict[str, ValueRange]
    reference: list[list[np.ndarray]] = field(default_factory=list)
    probes: int = 0

    def __post_init__(self) -> None:
        session = _session(self.model)
        self.reference = [list(session.run(None, feed)) for feed in self.feeds]

    def passes(self, keep: set[str]) -> bool:
        """Whether the variant keeping `keep` in float32 is within the tolerance on every
        feed and holds no value beyond float16's range."""
        self.probes += 1
        half = convert(self.model, keep, keep_io_types=self.keep_io_types)
        if fp16_overflows(self.model, half, self.ranges):
            return False
        try:
            session = _session(half)
            for feed, expected in zip(self.feeds, self.reference, strict=True):
                for ref, got in zip(expected, session.run(None, _fit(session, feed)),
                                    strict=True):
                    if not _close(np.asarray(ref), np.asarray(got), self.rtol, self.atol):
                        return False
        except Exception:  # a candidate onnxruntime cannot run does not pass
            return False
        return True


@dataclass
class AutoKeep:
    """What `auto_keep` found: the nodes to keep in float32 (graph order), whether the variant
    then passes against the float32 file, and how many candidates it converted and ran."""

    kept: list[str]
    passes: bool
    probes: int


def auto_keep(source: Path, feeds: list[dict[str, np.ndarray]], rtol: float, atol: float,
              *, keep_io_types: bool = True, events: Events | None = None) -> AutoKeep:
    """The nodes of the float32 file `source` to keep in float32 so that its float16 variant
    passes on `feeds` (see the module docstring)."""
    import onnx

    events = events or Events()
    model = onnx.load(str(source))
    graph_only = onnx.load(str(source), load_external_data=False)
    events.progress(0.0, "Reading the float32 values")
    ranges = value_ranges(source, graph_only, feeds, rtol, atol)
    weights = weight_ranges(source, graph_only, rtol, atol)
    keep = _beyond_float16(model, {**weights, **ranges})
    probe = Probe(source, model, feeds, rtol, atol, keep_io_types, ranges)
    events.progress(0.3, f"Trying {len(keep)} node(s) in float32")
    if probe.passes(keep):
        return AutoKeep(_ordered(model, keep), True, probe.probes)
    events.progress(0.4, "Scoring each node's float16 error")
    ranked = [n for n in _node_scores(source, model, keep, feeds, rtol, atol,
                                      keep_io_types) if n not in keep]
    if not ranked or not probe.passes(keep | set(ranked)):
        return AutoKeep(_ordered(model, keep | set(ranked)), False, probe.probes)
    events.progress(0.6, f"Bisecting {len(ranked)} candidate node(s)")
    low, high = 0, len(ranked)  # keep + ranked[:high] passes; keep + ranked[:low] does not
    while high - low > 1:
        middle = (low + high) // 2
        if probe.passes(keep | set(ranked[:middle])):
            high = middle
        else:
            low = middle
    chosen = set(ranked[:high])
    if len(chosen) <= _PRUNE_MAX:
        for name in reversed(ranked[:high]):
            if probe.passes(keep | (chosen - {name})):
                chosen.discard(name)
    return AutoKeep(_ordered(model, keep | chosen), True, probe.probes)


def _beyond_float16(model: Any, ranges: dict[str, ValueRange]) -> set[str]:
    """Nodes with an input or output that float16 cannot hold within the tolerance."""
    keep = set()
    for node in model.graph.node:
        values = [v for v in [*node.input, *node.output] if v in ranges]
        if any(ranges[v].fp16_error > 1.0 for v in values):
            keep.add(node.name)
    return keep


def _node_scores(source: Path, model: Any, keep: set[str],
                 feeds: list[dict[str, np.ndarray]], rtol: float, atol: float,
                 keep_io_types: bool) -> list[str]:
    """Nodes that compute in float16 under `keep`, by the error each adds, largest first
    (only those that add some)."""
    import os
    import tempfile

    from onnx_studio.engine.analysis.ranges import fp16_holders

    half = convert(model, keep, keep_io_types=keep_io_types)
    held = fp16_holders(half)
    names = [v for v in held if v not in {i.name for i in model.graph.input}]
    reference: dict[tuple[str, int], np.ndarray] = {}
    run_values(source, names, feeds, lambda n, i, v: reference.__setitem__((n, i), v))
    errors: dict[str, float] = {}

    def compare(name: str, index: int, value: np.ndarray) -> None:
        ref = reference.pop((name, index), None)
        if ref is not None:
            errors[name] = max(errors.get(name, 0.0), _ratio(ref, value, rtol, atol))

    fd, temp = tempfile.mkstemp(prefix=f".{source.name}.fp16.", suffix=".onnx",
                                dir=source.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(half.SerializeToString())
        by_variant = {held[n]: n for n in names}
        run_values(Path(temp), list(by_variant), feeds,
                   lambda n, i, v: compare(by_variant[n], i, v))
    finally:
        os.unlink(temp)
    scores = {}
    for node in model.graph.node:
        if node.name in keep:
            continue
        outs = [errors[v] for v in node.output if v in errors]
        ins = [errors.get(v, 0.0) for v in node.input if v]
        if outs:
            added = max(outs) - max(ins, default=0.0)
            if added > 0:
                scores[node.name] = added
    return sorted(scores, key=lambda n: -scores[n])


def _ratio(ref: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> float:
    """The largest |got - ref| / (atol + rtol |ref|); inf where one side is not finite and
    the other is."""
    r = np.asarray(ref, dtype=np.float64)
    g = np.asarray(got, dtype=np.float64)
    if r.shape != g.shape:
        return float("inf")
    both = np.isfinite(r) & np.isfinite(g)
    if np.any(~both & ~((r == g) | (np.isnan(r) & np.isnan(g)))):
        return float("inf")
    if not both.any():
        return 0.0
    return float((np.abs(g - r)[both] / (atol + rtol * np.abs(r[both]))).max())


def _close(ref: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> bool:
    if ref.dtype.kind not in "fc":
        return ref.shape == got.shape and bool(np.array_equal(ref, got))
    return _ratio(ref, got, rtol, atol) <= 1.0


def _ordered(model: Any, names: set[str]) -> list[str]:
    return [n.name for n in model.graph.node if n.name in names]


def _session(model: Any) -> Any:
    """An onnxruntime session of an in-memory model (weights inside)."""
    import onnxruntime as ort

    from onnx_studio.engine.validation.ort_session import session_settings

    options, providers = session_settings(["CPUExecutionProvider"], "all")
    return ort.InferenceSession(model.SerializeToString(), options, providers=providers)


def _fit(session: Any, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    wanted = {i.name for i in session.get_inputs()}
    return {k: v for k, v in feed.items() if k in wanted}


def topological_sort(graph: Any) -> None:
    """Reorder `graph.node` in place so every node comes after the producers of its inputs
    (stable: nodes already in order keep it); values from enclosing graphs count as given."""
    nodes = list(graph.node)
    producer = {out: i for i, n in enumerate(nodes) for out in n.output if out}
    done: list[bool] = [False] * len(nodes)
    order: list[int] = []
    for start in range(len(nodes)):
        stack = [(start, False)]
        while stack:
            i, expanded = stack.pop()
            if done[i]:
                continue
            if expanded:
                done[i] = True
                order.append(i)
                continue
            stack.append((i, True))
            for name in reversed(nodes[i].input):
                j = producer.get(name)
                if j is not None and not done[j] and j != i:
                    stack.append((j, False))
    if order != list(range(len(nodes))):
        del graph.node[:]
        graph.node.extend(nodes[i] for i in order)
