"""Where ONNX Runtime spends its time: latency after warm-up, and its own profiler's trace
aggregated per node, per operator type and per module group, slowest first.

Two sessions on the same file and inputs: a plain one for the latency (p50/p90 over `runs`
runs after `warmup`), and one with `SessionOptions.enable_profiling`, whose JSON trace gives
each kernel's time. Only the node events inside the last `runs` `model_run` events count (the
warm-up runs are in the trace too, and are dropped). Per-node times are means per run.

Names: onnxruntime runs the graph after its optimizations, which fuse and rename nodes (a Conv fused
with the Relu making the value `relu` runs as "relu_nchwc", a fused Gemm as "fused node_linear"). A
profiled name (without "fused ") maps to the file's node of that name, or making the value of that
name, or else the one whose name is its longest prefix at a "_" boundary; what maps to none is
reported under its own name with the group "(onnxruntime)". A fused node counts in the module of the
node it is named after, and `fused` lists every node of the file it ran (the Conv and the Relu of a
Conv+Relu): the node it is named after and the ones before it that ran no kernel of their own, up to
the one of the kernel's operator. `op_type` is the kernel that ran (FusedConv, FusedMatMul, ...), as
onnxruntime reports it. A node's group is its module's qualified name as onnx_studio.engine.graph's
GraphModel groups nodes by module path ("" at the top level, shown as "(top level)"); every node
counts once, in its innermost module.

With a recipe, eager PyTorch runs the same inputs the same way (warm-up, then p50/p90).
`coverage` is `node_total_ms` (the sum of the per-node means) over `profiled_run_ms` (the
mean `model_run` of the same profiled runs): how much of a run the kernels account for; the
rest is onnxruntime's own work between kernels (allocation, thread hand-offs), which weighs
most in tiny models. `overhead` is `profiled_run_ms` over the plain session's p50: what the
profiler itself costs (tens of times a tiny model's run). So that per-node times add up to a run the
user measured, each node, operator and group also has its `share` of the profiled run and `p50_ms`,
that share of the plain p50: the `p50_ms` of the nodes add up to `coverage` times the p50.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from onnx_studio.engine.analysis.feeds import Feeds, feeds_from_file, feeds_from_recipe
from onnx_studio.engine.analysis.timing import (
    DEFAULT_RUNS,
    DEFAULT_WARMUP,
    open_session,
    percentiles,
    run_session,
    time_calls,
)
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.events import Events
from onnx_studio.engine.recipe import Recipe

TOP_LEVEL = "(top level)"
RUNTIME_GROUP = "(onnxruntime)"


def profile_file(path: Path, recipe: Recipe | None = None, events: Events | None = None, *,
                 runs: int = DEFAULT_RUNS, warmup: int = DEFAULT_WARMUP,
                 provider: str = "CPUExecutionProvider", threads: int | None = None,
                 optimization: str = "all", dims: dict[str, int] | None = None
                 ) -> dict[str, Any]:
    """The `onnx-studio profile --json` document as a dict (see the module docstring)."""
    from onnx_studio.engine.analysis.model_file import ModelFile
    from onnx_studio.engine.graph.model import GraphModel

    events = events or Events()
    if runs < 1 or warmup < 0:
        raise StudioError("recipe", f"--runs must be at least 1 (got {runs}).", exit_code=2)
    path = Path(path)
    ModelFile.read(path)  # a missing or unreadable file is a `source` error first
    events.progress(0.0, "Starting ONNX Runtime")
    session, load_ms = open_session(path, providers=[provider], optimization=optimization,
                                    threads=threads)
    onnx_names = [i.name for i in session.get_inputs()]
    loaded = None
    if recipe is not None:
        from onnx_studio.engine.source.load import load_model

        events.progress(0.05, "Loading the PyTorch model")
        loaded = load_model(recipe, device="cpu")
        feeds: Feeds = feeds_from_recipe(recipe, onnx_names, loaded.module)
    else:
        feeds = feeds_from_file(path, dims)
    run_session(session, feeds.arrays)  # a failure here is a sentence, not a trace
    events.progress(0.15, "Measuring latency")
    samples = time_calls(lambda: session.run(None, feeds.arrays), runs, warmup)
    latency = percentiles(samples)
    doc: dict[str, Any] = {"ok": True, "latency_ms": latency}
    if loaded is not None and feeds.call is not None:
        events.progress(0.35, "Measuring eager PyTorch")
        doc["torch_latency_ms"] = _torch_latency(loaded.module, feeds.call, runs, warmup)
    events.progress(0.55, "Profiling in ONNX Runtime")
    with tempfile.TemporaryDirectory(prefix="onnx-studio-profile-") as folder:
        profiled, _ = open_session(path, providers=[provider], optimization=optimization,
                                   threads=threads, profile_prefix=str(Path(folder) / "ort"))
        for _ in range(warmup + runs):
            profiled.run(None, feeds.arrays)
        trace_path = profiled.end_profiling()
        trace = json.loads(Path(trace_path).read_text(encoding="utf-8"))
    events.progress(0.85, "Reading the trace")
    graph = GraphModel.load(path)
    times, run_ms = node_times(trace, runs)
    nodes = attribute(times, graph)
    doc.update(aggregate(nodes))
    node_total = sum(n["ms"] for n in nodes)
    for item in (*doc["nodes"], *doc["ops"], *doc["groups"]):  # as parts of a plain run
        share = item["ms"] / run_ms if run_ms else 0.0
        item.update(share=round(share, 4), p50_ms=round(share * latency["p50"], 5))
    doc.update({
        "runs": runs, "warmup": warmup, "provider": provider, "threads": threads,
        "optimization": optimization, "load_ms": round(load_ms, 3),
        "node_total_ms": round(node_total, 4),
        "coverage": round(node_total / run_ms, 3) if run_ms else None,
        "profiled_run_ms": round(run_ms, 4),
        "overhead": round(run_ms / latency["p50"], 3) if latency["p50"] else None,
        "notes": feeds.notes,
    })
    events.progress(1.0, "Profiled")
    return doc


def _torch_latency(module: Any, call: tuple[tuple[Any, ...], dict[str, Any]], runs: int,
                   warmup: int) -> dict[str, float]:
    import torch

    args, kwargs = call

    def run() -> None:
        with torch.no_grad():
            module(*args, **kwargs)

    return percentiles(time_calls(run, runs, warmup))


def node_times(trace: list[dict[str, Any]], runs: int
               ) -> tuple[dict[str, tuple[str, float]], float]:
    """Per profiled node name, (kernel op type, mean ms per run) over the last `runs`
    model_run events of an onnxruntime trace; and the mean model_run time in ms."""
    model_runs = sorted((e for e in trace if e.get("name") == "model_run"),
                        key=lambda e: e["ts"])[-runs:]
    if not model_runs:
        raise StudioError("validation", "ONNX Runtime's profile holds no run.",
                          "Run again; if it persists, the onnxruntime build may not profile.")
    windows = [(e["ts"], e["ts"] + e["dur"]) for e in model_runs]
    start = windows[0][0]
    totals: dict[str, list[Any]] = {}
    for e in trace:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        ts = e["ts"]
        if ts < start or not any(lo <= ts <= hi for lo, hi in windows):
            continue
        name = e["name"][: -len("_kernel_time")]
        op = (e.get("args") or {}).get("op_name", "?")
        entry = totals.setdefault(name, [op, 0.0])
        entry[1] += e["dur"] / 1000.0
    n = len(model_runs)
    mean_run = sum(e["dur"] for e in model_runs) / 1000.0 / n
    return {k: (op, ms / n) for k, (op, ms) in totals.items()}, mean_run


def attribute(times: dict[str, tuple[str, float]], graph: Any) -> list[dict[str, Any]]:
    """[{"name", "op_type", "group", "ms", "node"}] slowest first: each profiled node with the
    file's node it comes from (`node`, None when none) and that node's module group."""
    # onnxruntime names a node it rewrites after the original node or the value it makes
    # ("relu_1_nchwc" for the Conv+Relu making `relu_1`), a fusion "fused <node name>"
    by_name = {out: node for node in graph.nodes for out in node.outputs if out}
    by_name.update({node.name: node for node in graph.nodes if node.name})
    ran = {found.index for name in times if (found := _source_node(name, by_name)) is not None}
    nodes: list[dict[str, Any]] = []
    for name, (op, ms) in times.items():
        source = _source_node(name, by_name)
        if source is None:
            group = RUNTIME_GROUP
        else:
            gid = source.group
            group = graph.groups[gid].qualname if gid else TOP_LEVEL
            group = group or TOP_LEVEL
        entry = {"name": name, "op_type": op, "group": group, "ms": round(ms, 4),
                 "node": source.name if source is not None else None}
        fused = _fused(source, op, graph, ran) if source is not None else []
        if len(fused) > 1:
            entry["fused"] = fused
        nodes.append(entry)
    nodes.sort(key=lambda n: (-float(n["ms"]), str(n["name"])))
    return nodes


def _fused(node: Any, kernel: str, graph: Any, ran: set[int]) -> list[str]:
    """The file's nodes a kernel named after `node` ran, in graph order: `node`, and when the
    kernel is another operator than its own (a Conv kernel named after the Relu it fused), the
    nodes before it that ran no kernel of their own, up to the first of the kernel's operator;
    [node] alone when there is no such node."""
    base = kernel.removeprefix("Fused")
    if node.op_type == base:
        return [node.name]
    chain = [node]
    current = node
    while True:
        producers = [graph.nodes[graph.producer[t]] for t in current.inputs
                     if t in graph.producer]
        if not producers:
            return [node.name]
        current = producers[0]  # the data input: a fused op's first input
        if current.index in ran and current.op_type != base:
            return [node.name]
        chain.append(current)
        if current.op_type == base:
            return [n.name for n in reversed(chain)]


def _source_node(name: str, by_name: dict[str, Any]) -> Any:
    probe = name.removeprefix("fused ")
    while probe:
        if probe in by_name:
            return by_name[probe]
        cut = max(probe.rfind("_"), probe.rfind("/"))
        if cut <= 0:
            return None
        probe = probe[:cut]
    return None


def aggregate(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """{"nodes", "ops": [{"op_type", "ms", "count"}], "groups": [{"name", "ms"}]}, each
    slowest first."""
    ops: dict[str, list[Any]] = {}
    groups: dict[str, float] = {}
    for n in nodes:
        entry = ops.setdefault(n["op_type"], [0.0, 0])
        entry[0] += n["ms"]
        entry[1] += 1
        groups[n["group"]] = groups.get(n["group"], 0.0) + n["ms"]
    return {
        "nodes": nodes,
        "ops": sorted(({"op_type": k, "ms": round(v[0], 4), "count": v[1]}
                       for k, v in ops.items()), key=lambda o: (-o["ms"], o["op_type"])),
        "groups": sorted(({"name": k, "ms": round(v, 4)} for k, v in groups.items()),
                         key=lambda g: (-g["ms"], g["name"])),
    }


