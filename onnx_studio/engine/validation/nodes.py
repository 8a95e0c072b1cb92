"""Per-node comparison of a dynamo export: where inside the graph does ONNX Runtime diverge?

The dynamo exporter names each ONNX value after the FX node it came from and records that node
in the ONNX node's `pkg.torch.onnx.fx_node` metadata. So the values of the exported program's
FX graph (captured again here, decomposed with the exporter's own table) can be compared with
the ONNX values of the same name. ONNX Runtime computes them with the matched values as the
graph's outputs, in one run, or in a few when they would not fit the memory budget: the values
are compared as they come and dropped. (torch.onnx.verification's interpreter does the same
but builds a fresh session per node, and needs the in-memory ONNXProgram that a file lacks.)
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnx_studio.engine import torch_private
from onnx_studio.engine.errors import one_line
from onnx_studio.engine.export.onnx_file import uses_external_data
from onnx_studio.engine.recipe import Recipe
from onnx_studio.engine.validation.metrics import REL_EPS
from onnx_studio.engine.validation.metrics import validation_warning as _warning

# bytes of intermediate values held at once on each side (PyTorch's, ONNX Runtime's)
BUDGET = 256 << 20
_FX_NODE = re.compile(r"^%(\S+) : .*?call_function\[target=([^\]]+)\]")


def compare_nodes(
    recipe: Recipe,
    onnx_path: Path,
    proto: Any,
    loaded: Any,
    inputs: tuple[Any, ...],
    feed_names: list[str | None],
    *,
    session_options: tuple[Any, list[str]],
    warn: Callable[[dict[str, Any]], None],
    budget: int | None = None,
) -> dict[str, Any]:
    """{"nodes": {onnx node name: {max_abs_diff, max_rel_diff, ...}}, "first_divergent": name}.

    Nodes are listed in graph order; `first_divergent` is the first whose values are outside
    atol + rtol * |reference| while the values it reads are within (`first_divergent`; None
    when all agree or nothing could be compared). The values
    are streamed (`_Streamed`): about `budget` bytes of them are held at a time.
    """
    empty: dict[str, Any] = {"nodes": {}, "first_divergent": None, "compared": 0}
    from onnx_studio.engine.source.arguments import is_structured

    if is_structured(recipe):  # the capture below takes positional tensors only
        warn(_warning("Intermediate values are compared for models that take positional "
                      "tensors only; this recipe has keyword, dict/tuple or constant inputs."))
        return {**empty, "message": "keyword, dict/tuple or constant inputs"}
    if not fx_producers(proto):
        warn(_warning("Intermediate values can only be compared for dynamo exports (their "
                      "nodes name the FX node they come from); this file has no such names."))
        return {**empty, "message": "no FX node names in the ONNX file"}
    feeds = {name: t.detach().cpu().numpy().copy()
             for name, t in zip(feed_names, inputs, strict=True) if name}
    try:
        program = recipe_program(recipe, loaded, inputs)
        found = compare_values(program, inputs, onnx_path, proto, feeds,
                               rtol=recipe.validate.rtol, atol=recipe.validate.atol,
                               session_options=session_options, budget=budget)
    except OnnxRuntimeFailed as exc:
        warn(_warning(f"Intermediate values were not compared: ONNX Runtime could not compute "
                      f"them ({one_line(exc.cause)})."))
        return {**empty, "message": f"onnxruntime failed: {one_line(exc.cause)}"}
    except Exception as exc:
        warn(_warning(f"Intermediate values were not compared: capturing the model again "
                      f"failed ({one_line(exc)})."))
        return {**empty, "message": f"capture failed: {one_line(exc)}"}
    if not found.metrics:
        warn(_warning("No intermediate value of the ONNX file matches the model captured "
                      "again here; per-node numbers are not available."))
        return {**empty, "message": "no values matched"}
    nodes: dict[str, dict[str, Any]] = {}
    for value_name, entry in found.metrics.items():  # in graph order
        nodes[found.producers[value_name]] = {**entry, "value": value_name}
    index = first_divergent(proto.graph, found.metrics)
    first = None if index is None else proto.graph.node[index].name
    return {"nodes": nodes, "first_divergent": first, "compared": len(nodes),
            "onnxruntime_runs": found.runs}


@dataclass
class ValueComparison:
    """Each ONNX value compared with PyTorch's, in graph order: its metrics (`_node_metrics`)
    and the ONNX node that produces it; `runs` ONNX Runtime runs it took."""

    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    producers: dict[str, str] = field(default_factory=dict)
    runs: int = 0


def compare_values(program: Any, args: tuple[Any, ...], onnx_path: Path, proto: Any,
                   feeds: dict[str, np.ndarray], *, rtol: float, atol: float,
                   session_options: tuple[Any, list[str]], budget: int | None = None
                   ) -> ValueComparison:
    """Every value of the ONNX file that the decomposed exported `program` (run on `args`)
    computes too, compared: the values named after an FX node, and the graph's outputs
    against the program's flattened outputs. Streamed: about `budget` bytes held at a time.

    Raises OnnxRuntimeFailed when ONNX Runtime cannot compute the values; anything the capture
    raises (the model's own errors) passes through.
    """
    candidates = _candidates(proto)
    outputs = [o.name for o in proto.graph.output]
    streamed = _Streamed(onnx_path, feeds, session_options, rtol, atol, budget or BUDGET)
    _capture(program, args, candidates, outputs, streamed.add)
    streamed.flush()
    order = [*candidates, *(o for o in outputs if o not in candidates)]
    found = ValueComparison(runs=streamed.runs)
    producer = {value: node for value, (node, _, _) in fx_producers(proto).items()}
    producer.update({out: n.name for n in proto.graph.node for out in n.output if out})
    for value in order:
        entry = streamed.metrics.get(value)
        if entry is not None and value in producer:
            found.metrics[value] = entry
            found.producers[value] = producer[value]
    return found


def capture_values(program: Any, args: tuple[Any, ...], proto: Any, wanted: set[str]
                   ) -> dict[str, np.ndarray]:
    """PyTorch's values of the ONNX values `wanted` (those `compare_values` compares), from one
    run of the decomposed exported `program` on `args`; only those are kept."""
    candidates = {v: c for v, c in _candidates(proto).items() if v in wanted}
    outputs = [o.name if o.name in wanted else "" for o in proto.graph.output]
    kept: dict[str, np.ndarray] = {}
    _capture(program, args, candidates, outputs, kept.__setitem__)
    return kept


def recipe_program(recipe: Recipe, loaded: Any, inputs: tuple[Any, ...]) -> Any:
    """The recipe's exported program (the loaded .pt2's, else the module on `inputs` captured
    as the dynamo exporter captures it), decomposed as the exporter decomposes it."""
    from onnx_studio.engine.source.inputs import dynamic_shapes

    program = loaded.exported_program
    if program is None:
        program = torch_private.capture_like_the_exporter(loaded.module, tuple(inputs),
                                                          dynamic_shapes(recipe))
    return decompose_like_the_exporter(program)


def fx_producers(proto: Any) -> dict[str, tuple[str, str, str]]:
    """Value name -> (ONNX node name, FX node name, FX target) from the node metadata."""
    out: dict[str, tuple[str, str, str]] = {}
    for node in proto.graph.node:
        meta = {p.key: p.value for p in node.metadata_props}
        match = _FX_NODE.match(meta.get("pkg.torch.onnx.fx_node", ""))
        if not match:
            continue
        for value in node.output:
            if value:
                out[value] = (node.name, match.group(1), match.group(2).removeprefix("torch.ops."))
    return out


def _candidates(proto: Any) -> dict[str, tuple[str, str]]:
    """The values both sides name alike: value name -> (ONNX node name, FX target), in graph
    order (the graph's outputs, renamed by the export, are matched by position instead)."""
    graph_outputs = {o.name for o in proto.graph.output}
    return {value: (node, target) for value, (node, fx_name, target)
            in fx_producers(proto).items() if value == fx_name and value not in graph_outputs}


def _capture(program: Any, args: tuple[Any, ...], candidates: dict[str, tuple[str, str]],
             outputs: list[str], sink: Callable[[str, np.ndarray], None]) -> None:
    """Run the decomposed exported program node by node and hand each value that the ONNX
    file names alike (same name, same op) to `sink` as it is computed: none is kept here.
    The program's flattened outputs go to `sink` under the names in `outputs` ("" skips one)
    when their counts agree."""
    import torch

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            result = super().run_node(n)
            wanted = candidates.get(n.name)
            if (n.op == "call_function" and isinstance(result, torch.Tensor)
                    and wanted is not None and wanted[1] in ("", str(n.target))):
                sink(n.name, _array(result))
            return result

    with torch.no_grad():
        result = Recorder(program.module()).run(*[t.clone() for t in args])
    leaves = [leaf for _, leaf in torch_private.named_leaves(result)]
    if len(leaves) == len(outputs):
        for name, leaf in zip(outputs, leaves, strict=True):
            if name and isinstance(leaf, torch.Tensor):
                sink(name, _array(leaf))


def _array(tensor: Any) -> np.ndarray:
    import torch

    tensor = tensor.detach().cpu()
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return np.asarray(tensor.numpy()).copy()


def decompose_like_the_exporter(program: Any) -> Any:
    """Decompose as torch.onnx does, so node names match the ONNX values'.

    That step is private to torch.onnx; should it move, torch's default decompositions give
    mostly the same names, and the target check in compare_nodes drops the ones that differ.
    """
    try:
        return torch_private.prepare_for_onnx(program, torch_private.onnx_registry())
    except (ImportError, AttributeError):  # moved in this torch: the default decompositions
        return program.run_decompositions()


class OnnxRuntimeFailed(Exception):
    """ONNX Runtime could not compute the values asked for."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(one_line(cause))
        self.cause = cause


class _Streamed:
    """The capture's values, compared with ONNX Runtime's a chunk at a time: once the values
    waiting reach `budget` bytes, one ONNX Runtime run computes exactly those (the graph,
    without its weights, gets them as its outputs), each pair is reduced to its metrics and
    both are dropped. A model whose intermediates fit the budget takes one run, as before;
    a larger one takes more runs and never holds more than about a budget on each side."""

    def __init__(self, onnx_path: Path, feeds: dict[str, np.ndarray],
                 session_options: tuple[Any, list[str]], rtol: float, atol: float,
                 budget: int) -> None:
        import onnx

        self.onnx_path, self.session_options = onnx_path, session_options
        self.rtol, self.atol, self.budget = rtol, atol, budget
        self.graph_only = onnx.load(str(onnx_path), load_external_data=False)
        graph = self.graph_only.graph
        self.value_info = {v.name: _copy(v) for v in [*graph.value_info, *graph.output]}
        self.feeds = feeds
        self.pending: dict[str, np.ndarray] = {}
        self.held = 0
        self.metrics: dict[str, dict[str, Any]] = {}
        self.runs = 0

    def add(self, name: str, value: np.ndarray) -> None:
        self.pending[name] = value
        self.held += value.nbytes
        if self.held >= self.budget:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        names = list(self.pending)
        try:
            got = self._ort_values(names)
        except Exception as exc:
            raise OnnxRuntimeFailed(exc) from exc
        self.runs += 1
        for name, cand in zip(names, got, strict=True):
            self.metrics[name] = _node_metrics(self.pending.pop(name), np.asarray(cand),
                                               self.rtol, self.atol)
        self.held = 0

    def _ort_values(self, names: list[str]) -> list[Any]:
        """ONNX Runtime's values of `names`. A graph with external data is written beside the
        original, so its weights are read from the same files and never copied in here."""
        import onnx
        import onnxruntime as ort

        graph = self.graph_only.graph
        del graph.output[:]
        for name in names:
            graph.output.append(self.value_info.get(name) or onnx.ValueInfoProto(name=name))
        options, providers = self.session_options
        if not uses_external_data(self.graph_only):  # the weights are in the proto
            session = ort.InferenceSession(self.graph_only.SerializeToString(), options,
                                           providers=providers)
        else:
            fd, temp = tempfile.mkstemp(prefix=f".{self.onnx_path.name}.nodes.",
                                        suffix=".onnx", dir=self.onnx_path.parent)
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(self.graph_only.SerializeToString())
                session = ort.InferenceSession(temp, options, providers=providers)
            finally:
                os.unlink(temp)
        return list(session.run(names, self.feeds))


def _copy(value: Any) -> Any:
    import onnx

    copy = onnx.ValueInfoProto()
    copy.CopyFrom(value)
    return copy


def _node_metrics(ref: np.ndarray, cand: np.ndarray, rtol: float, atol: float
                  ) -> dict[str, Any]:
    if ref.shape != cand.shape:
        return {"max_abs_diff": None, "max_rel_diff": None, "passed": False,
                "tolerance_ratio": None, "shape_mismatch": True,
                "message": f"shape {list(cand.shape)} in ONNX, {list(ref.shape)} in PyTorch"}
    r = ref.astype(np.float64, copy=False)
    c = cand.astype(np.float64, copy=False)
    finite = np.isfinite(r) & np.isfinite(c)
    diff = np.abs(c - r)[finite]
    scale = np.abs(r)[finite]
    nonfinite_mismatch = int(np.count_nonzero(~finite & ~((r == c) | (np.isnan(r) & np.isnan(c)))))
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / (scale + REL_EPS)).max()) if diff.size else 0.0
    allowed = atol + rtol * scale
    outside = int(np.count_nonzero(diff > allowed)) + nonfinite_mismatch
    # the error against its tolerance, element by element: <= 1 passes (an absolute scale for
    # the graph's colours); None (off the scale: not passed) for a NaN or inf where the other
    # side has none
    ratio: float | None
    if nonfinite_mismatch:
        ratio = None
    elif not diff.size:
        ratio = 0.0
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(diff > 0, diff / allowed, 0.0)
        ratio = float(ratios.max())
    return {"max_abs_diff": max_abs, "max_rel_diff": max_rel, "passed": outside == 0,
            "mismatched": outside, "tolerance_ratio": ratio}


def node_reads(node: Any) -> list[str]:
    """The values a node reads: its inputs, and the outer values its subgraphs use."""
    reads = [name for name in node.input if name]
    for attr in node.attribute:
        for graph in [attr.g] if attr.HasField("g") else list(attr.graphs):
            reads += [n for n in _outer_names(graph) if n not in reads]
    return reads


def _outer_names(graph: Any) -> Iterator[str]:
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    for node in graph.node:
        for name in node_reads(node):
            if name not in defined:
                yield name
        defined.update(node.output)


def first_divergent(graph: Any, metrics: dict[str, dict[str, Any]]) -> int | None:
    """The index of the first node of `graph` (topologically sorted, as ONNX requires) whose
    compared outputs exceed the tolerance while every value it reads is within it; None when
    none does. A value with `metrics` is judged by its numbers, one without by the values it
    is computed from; graph inputs and weights are within."""
    diverged: dict[str, bool] = {}  # graph inputs and weights: absent, i.e. within
    for index, node in enumerate(graph.node):
        upstream = any(diverged.get(v, False) for v in node_reads(node))
        beyond = [v for v in node.output if v in metrics and not metrics[v]["passed"]]
        if beyond and not upstream:
            return index
        for value in node.output:
            diverged[value] = (not metrics[value]["passed"]) if value in metrics else upstream
    return None


def downstream(graph: Any, index: int, metrics: dict[str, dict[str, Any]]) -> int:
    """The nodes fed (directly or not) by node `index` whose values exceed the tolerance."""
    reached = set(graph.node[index].output)
    count = 0
    for node in list(graph.node)[index + 1:]:
        if any(v in reached for v in node_reads(node)):
            reached.update(node.output)
            if any(v in metrics and not metrics[v]["passed"] for v in node.output):
                count += 1
    return count
