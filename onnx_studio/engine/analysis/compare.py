"""Two ONNX files side by side: what differs in the files, and whether they compute the same.

`compare_files(a, b, recipe=None)` returns the `onnx-studio compare --json` document as a dict:
operator histograms, node counts, sizes, opset imports, inputs and outputs, initializers added,
removed and changed (with the largest difference), the node matching of
onnx_studio.engine.analysis.matching, and, from a run of both files on the same inputs, output
parity between them (and against eager PyTorch when a recipe gives the model), session load time and
latency. Each file is read once; initializers are compared by name, one pair at a time. Load and
latency are measured in ROUNDS alternating turns: medians, each file's range (`spread_ms`), and
`timing_note`, a sentence that says whether a difference is beyond that range or noise.

Parity between A and B uses the recipe's rtol/atol, or 1e-3/1e-5 without a recipe (the
recipe defaults), A taken as the reference. Outputs are paired by position.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from onnx_studio.engine.analysis.feeds import (
    Feeds,
    eager_outputs,
    feeds_from_file,
    feeds_from_recipe,
)
from onnx_studio.engine.analysis.matching import Matching, match_graphs
from onnx_studio.engine.analysis.model_file import ModelFile, initializer_diff
from onnx_studio.engine.analysis.timing import (
    DEFAULT_RUNS,
    open_session,
    percentiles,
    run_session,
    time_calls,
)
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.events import Events
from onnx_studio.engine.recipe import Recipe
from onnx_studio.engine.validation.metrics import compare as compare_arrays

# loads and latency turns per file: a range, not one number. Two files that are the same have
# their ranges apart (one "faster" in every round) by chance 2 * 5!5!/10! = 0.8 % of the time
ROUNDS = 5
DEFAULT_RTOL = 1e-3
DEFAULT_ATOL = 1e-5


def static_diff(a: ModelFile, b: ModelFile) -> tuple[dict[str, Any], Matching]:
    """The part of the comparison that runs nothing: facts of both files and the matching."""
    matching = match_graphs(a.proto.graph, b.proto.graph)
    names_a = [n.name or f"{n.op_type}_{i}" for i, n in enumerate(a.proto.graph.node)]
    names_b = [n.name or f"{n.op_type}_{i}" for i, n in enumerate(b.proto.graph.node)]
    doc: dict[str, Any] = {
        "ops": {"a": a.op_histogram(), "b": b.op_histogram()},
        "nodes": {"a": len(a.proto.graph.node), "b": len(b.proto.graph.node)},
        "size_bytes": {"a": a.size_bytes, "b": b.size_bytes},
        "initializers": initializer_diff(a, b),
        "opset_imports": {"a": a.opset_imports(), "b": b.opset_imports()},
        "inputs": {"a": a.tensors("inputs"), "b": b.tensors("inputs")},
        "outputs": {"a": a.tensors("outputs"), "b": b.tensors("outputs")},
        "matching": {
            "matched": len(matching.pairs), "by_name": matching.by_name,
            "by_structure": matching.by_structure,
            "unmatched_a": [names_a[i] for i in matching.unmatched_a],
            "unmatched_b": [names_b[j] for j in matching.unmatched_b],
            "pairs": [[i, j] for i, j in sorted(matching.pairs.items())],
        },
    }
    return doc, matching


def compare_files(path_a: Path, path_b: Path, recipe: Recipe | None = None,
                  events: Events | None = None, *, dims: dict[str, int] | None = None,
                  runs: int = DEFAULT_RUNS, providers: list[str] | None = None,
                  run: bool = True) -> dict[str, Any]:
    """The compare document (see the module docstring); `run=False` skips the runtime part.

    Raises StudioError: `source` for a missing or unreadable file, `inputs` when the files'
    inputs do not fit each other or the recipe, `validation` when a file does not run.
    """
    events = events or Events()
    events.progress(0.0, "Reading both files")
    a, b = ModelFile.read(Path(path_a), "A"), ModelFile.read(Path(path_b), "B")
    events.progress(0.1, "Comparing the graphs")
    doc, _ = static_diff(a, b)
    doc["notes"] = []
    if not run:
        return {"ok": True, **doc}
    doc.update(_runtime(a, b, recipe, events.part(0.2, 1.0), dims or {}, runs,
                        providers or (recipe.validate.providers if recipe else None)))
    ok = doc["parity"]["ok"] and doc["parity"].get("torch", {}).get("ok", True)
    return {"ok": ok, **doc}


def _runtime(a: ModelFile, b: ModelFile, recipe: Recipe | None, events: Events,
             dims: dict[str, int], runs: int, providers: list[str] | None) -> dict[str, Any]:
    events.progress(0.0, "Starting ONNX Runtime")
    # each file loaded ROUNDS times, in turns whose order alternates, after one untimed load
    # (the first of a process pays onnxruntime's own start): the median is what a load
    # costs, the range how much it varies
    open_session(a.path, providers=providers)
    loads: dict[str, list[float]] = {"a": [], "b": []}
    sessions: dict[str, Any] = {}
    for turn in range(ROUNDS):
        for side, file in ((("a", a), ("b", b)) if turn % 2 == 0 else (("b", b), ("a", a))):
            sessions[side], ms = open_session(file.path, providers=providers)
            loads[side].append(ms)
    session_a, session_b = sessions["a"], sessions["b"]
    names_a = [i.name for i in session_a.get_inputs()]
    names_b = [i.name for i in session_b.get_inputs()]
    loaded = None
    if recipe is not None:
        from onnx_studio.engine.source.load import load_model

        events.progress(0.1, "Loading the PyTorch model")
        loaded = load_model(recipe, device="cpu")
        feeds = feeds_from_recipe(recipe, names_a, loaded.module)
    else:
        feeds = feeds_from_file(a.path, dims)
    feeds_b = _feeds_for(feeds, names_a, names_b, b.path.name)
    events.progress(0.3, "Running both files")
    out_a = run_session(session_a, feeds.arrays)
    out_b = run_session(session_b, feeds_b)
    rtol = recipe.validate.rtol if recipe else DEFAULT_RTOL
    atol = recipe.validate.atol if recipe else DEFAULT_ATOL
    output_names = [o.name for o in session_a.get_outputs()]
    parity = _parity(output_names, out_a, out_b, rtol, atol)
    if loaded is not None and feeds.call is not None:
        events.progress(0.5, "Running the PyTorch model")
        expected = eager_outputs(loaded.module, feeds.call)
        side_a = _parity(output_names, expected, out_a, rtol, atol)
        side_b = _parity(output_names, expected, out_b, rtol, atol)
        parity["torch"] = {"ok": side_a["ok"] and side_b["ok"],
                           "a": {"ok": side_a["ok"], "max_abs_diff": side_a["max_abs_diff"]},
                           "b": {"ok": side_b["ok"], "max_abs_diff": side_b["max_abs_diff"]}}
    events.progress(0.6, "Measuring latency")
    # the runs in ROUNDS turns, A then B, so a busy moment of the machine falls on both
    calls = {"a": lambda: session_a.run(None, feeds.arrays),
             "b": lambda: session_b.run(None, feeds_b)}
    samples: dict[str, list[float]] = {"a": [], "b": []}
    medians: dict[str, list[float]] = {"a": [], "b": []}
    for round_ in range(ROUNDS):
        for side in ("a", "b") if round_ % 2 == 0 else ("b", "a"):
            timed = time_calls(calls[side], max(1, runs // ROUNDS))
            samples[side] += timed
            medians[side].append(float(np.median(timed)))
    latency = {side: percentiles(values) for side, values in samples.items()}
    load_ms = {side: round(float(np.median(values)), 3) for side, values in loads.items()}
    spread = {"load": _ranges(loads), "p50": _ranges(medians)}
    events.progress(1.0, "Compared")
    return {"parity": parity, "latency_ms": latency, "load_ms": load_ms, "spread_ms": spread,
            "timing_note": timing_note(spread), "notes": feeds.notes}


def _ranges(values: dict[str, list[float]]) -> dict[str, list[float]]:
    return {side: [round(min(v), 3), round(max(v), 3)] for side, v in values.items()}


def timing_note(spread: dict[str, dict[str, list[float]]]) -> str:
    """Whether A and B differ in load time and latency beyond what repeating each shows:
    a difference inside both ranges is noise, never a finding."""
    said = []
    for what, one, both in (("load", "session load", "session loads"),
                            ("p50", "latency", "latencies")):
        (a_lo, a_hi), (b_lo, b_hi) = spread[what]["a"], spread[what]["b"]
        if a_hi < b_lo:
            said.append(f"A's {one} is lower than B's in every one of {ROUNDS} rounds")
        elif b_hi < a_lo:
            said.append(f"B's {one} is lower than A's in every one of {ROUNDS} rounds")
        else:
            said.append(f"the {both} differ by less than they vary from round to round "
                        "(noise)")
    return "Timing: " + "; ".join(said) + "."


def _feeds_for(feeds: Feeds, names_a: list[str], names_b: list[str], b_name: str
               ) -> dict[str, np.ndarray]:
    """A's feeds for B: by name, else by position when B takes as many inputs."""
    if set(names_b) <= set(feeds.arrays):
        return {n: feeds.arrays[n] for n in names_b}
    if len(names_a) == len(names_b):
        return {nb: feeds.arrays[na] for na, nb in zip(names_a, names_b, strict=True)}
    raise StudioError("inputs", f"{b_name} takes the inputs {', '.join(names_b)} and A "
                      f"{', '.join(names_a)}; the two files cannot run on the same inputs.",
                      "Compare files of the same model, with the same inputs.", exit_code=2)


def _parity(names: list[str], reference: list[np.ndarray], candidate: list[np.ndarray],
            rtol: float, atol: float) -> dict[str, Any]:
    """{"ok", "max_abs_diff", "rtol", "atol", "outputs": [{"name", "max_abs_diff", "passed",
    "message"}]}, outputs paired by position."""
    outputs = []
    for i, (ref, cand) in enumerate(zip(reference, candidate, strict=False)):
        metrics = compare_arrays(np.asarray(ref), np.asarray(cand), rtol, atol)
        outputs.append({"name": names[i] if i < len(names) else f"output{i}",
                        "max_abs_diff": metrics["max_abs_diff"], "passed": metrics["passed"],
                        "message": metrics["message"]})
    ok = len(reference) == len(candidate) and all(o["passed"] for o in outputs)
    diffs = [o["max_abs_diff"] for o in outputs if o["max_abs_diff"] is not None]
    worst = max(diffs) if diffs else None
    return {"ok": ok, "max_abs_diff": worst, "rtol": rtol, "atol": atol, "outputs": outputs}
