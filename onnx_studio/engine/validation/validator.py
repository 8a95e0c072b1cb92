"""Does the ONNX file compute what the PyTorch model computes? ONNX Runtime against eager torch.

`validate(recipe, onnx_path)` rebuilds the recipe's inputs and its eager model (not the
exported program: that would hide capture bugs), runs both on the export inputs, on fresh
random draws and on other sizes of every dynamic dimension, and returns the contract's
`validation` object. One ONNX Runtime session serves every trial: a session accepts any size
on a dynamic axis, so there is no reason to pay its creation more than once.

Reading the file and opening the session (and their checks) are
onnx_studio.engine.validation.ort_session. torch, onnx and onnxruntime are imported inside the
functions that need them.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnx_studio.engine import torch_private
from onnx_studio.engine.errors import StudioError, one_line
from onnx_studio.engine.events import Events
from onnx_studio.engine.export import blame
from onnx_studio.engine.graph.file_check import check_file, refuse_unusable
from onnx_studio.engine.recipe import Recipe
from onnx_studio.engine.validation.failure_hints import (
    COUNT_DIFFERS,
    ORT_FAILED,
    PYTORCH_FAILED,
)

# what a failed validation should change; here too, where the window and older callers look
from onnx_studio.engine.validation.failure_hints import failure_hint as failure_hint
from onnx_studio.engine.validation.input_fit import refuse_misfits
from onnx_studio.engine.validation.metrics import (
    PlotKeeper,
    cannot_tell,
    compare,
    conclusiveness,
    worst,
)
from onnx_studio.engine.validation.metrics import validation_warning as _warning
from onnx_studio.engine.validation.ort_session import (
    create_session,
    ort_message,
    preflight,
    read_onnx,
    session_settings,
)
from onnx_studio.engine.validation.weights import weight_warnings

RANDOM_FILLS = frozenset({"randn", "rand", "randint"})


def validate(
    recipe: Recipe,
    onnx_path: Path,
    events: Events | None = None,
    loaded: Any = None,
    plot_dir: Path | None = None,
    *,
    optimization: str = "all",
) -> dict[str, Any]:
    """Compare ONNX Runtime with eager PyTorch on every trial; return the `validation` object.

    `loaded` is a `sources.LoadedModel` already in memory (the export passes its own);
    `optimization` is ONNX Runtime's graph optimization level (disable/basic/extended/all).
    Raises StudioError("validation") when nothing can be compared (missing or corrupt file, a
    provider that is absent, inputs that do not fit the file); numbers that disagree are a
    result with `ok` false, not an exception.
    """
    events = events or Events()
    onnx_path = Path(onnx_path)
    opts = recipe.validate
    started = time.perf_counter()
    found: list[dict[str, Any]] = []

    def warn(warning: dict[str, Any]) -> None:
        found.append(warning)
        events.warning(warning)

    events.progress(0.0, "Reading the ONNX file")
    proto = read_onnx(onnx_path)
    if loaded is None:  # a file on its own, not the one the export just wrote and checked:
        # refuse it when unusable (exit 1) or when the recipe's inputs do not fit it (exit 2)
        refuse_unusable(onnx_path, check_file(onnx_path, model=proto))
        refuse_misfits(recipe, proto, onnx_path.name)
    for warning in preflight(proto, recipe):
        warn(warning)
    events.progress(0.05, "Starting ONNX Runtime")
    session = create_session(onnx_path, opts.providers, optimization, found)
    feed_names = _feed_names(session, recipe, warn)
    output_names = [o.name for o in session.get_outputs()]

    device = recipe.export.device
    if loaded is None:
        from onnx_studio.engine.source.load import load_model

        # load_model seeds torch by the recipe, so a model without a checkpoint gets the same
        # random weights as in the export (weight_warnings says when it did not)
        events.progress(0.1, "Loading the PyTorch model")
        loaded = load_model(recipe, device=device)
    for warning in _mode_warnings(loaded) + weight_warnings(proto, onnx_path, loaded.module):
        warn(warning)

    run = _Runner(recipe, session, loaded.module, feed_names, output_names, device,
                  source_file=getattr(loaded, "source_file", None))
    sizes = run.export_sizes()
    fixed = _file_dims(recipe)
    if recipe.validate.dynamic_sizes:
        for name in sorted(fixed & set(sizes)):
            warn(_warning(f"Dimension {name!r} comes from an input read from a file, so it "
                          "was not tried at other sizes."))
    if opts.random_trials and not has_random_fill(recipe):
        warn(_warning("No input has a random fill (randn, rand, randint), so random draws "
                      "would repeat the export inputs; they were skipped."))
    plan = plan_trials(recipe, sizes, skip=fixed)
    not_tried = bounded_out(recipe, sizes, skip=fixed)
    for item in not_tried:
        warn(_warning(item["reason"]))
    result_trials: list[dict[str, Any]] = []
    plots = PlotKeeper()
    for index, trial in enumerate(plan):
        events.progress(0.15 + 0.75 * index / max(len(plan), 1), f"Trial {trial.label}")
        outcome = run.trial(trial, plots)
        result_trials.append(outcome)
        events.log(f"validation {trial.label}: {'ok' if outcome['ok'] else outcome['message']}")

    outputs = _worst_outputs(output_names, result_trials)
    cannot = verdict_warnings(result_trials, opts.rtol, opts.atol)
    for warning in cannot:
        warn(warning)
    failed = [t for t in result_trials if not t["ok"]]
    verdict = conclusiveness(cannot)
    result: dict[str, Any] = {
        "ok": bool(result_trials) and not failed,
        # one sentence for a status line: how many trials failed and the first one's reason,
        # or why a validation that passed proves nothing (inconclusive)
        "message": f"{len(failed)} of {len(result_trials)} trials failed; first: "
                   f"{failed[0]['message']}" if failed else verdict.get("inconclusive", ""),
        "conclusive": verdict["conclusive"],
        "hint": verdict.get("hint"),
        "rtol": opts.rtol,
        "atol": opts.atol,
        "outputs": outputs,
        "trials": result_trials,
        "not_tried": not_tried,
        "warnings": found,
        "providers": list(session.get_providers()),
        "optimization": optimization,
    }
    if opts.intermediates:
        events.progress(0.9, "Comparing intermediate values")
        from onnx_studio.engine.validation.nodes import compare_nodes

        result["intermediates"] = compare_nodes(
            recipe, onnx_path, proto, loaded, run.export_inputs(), feed_names,
            session_options=session_settings(opts.providers, optimization), warn=warn)
    events.progress(0.97, "Saving plot data")
    result["plots"] = plots.save(_plot_path(onnx_path, plot_dir), warn)
    result["seconds"] = round(time.perf_counter() - started, 4)
    events.progress(1.0, "Validation done" if result["ok"] else "Validation failed")
    return result


def _feed_names(session: Any, recipe: Recipe, warn: Callable[[dict[str, Any]], None]
                ) -> list[str | None]:
    """For each recipe input, the ONNX input it feeds (None: the export dropped it as unused)."""
    onnx_names = [i.name for i in session.get_inputs()]
    ours = [s.name for s in recipe.inputs if s.is_tensor]  # constants are in the file already
    if set(onnx_names) <= set(ours):
        return [n if n in onnx_names else None for n in ours]
    if len(onnx_names) == len(ours):  # names differ (e.g. an .onnx made elsewhere): by position
        warn(_warning(f"The ONNX inputs are named {', '.join(onnx_names)} and the recipe's "
                      f"{', '.join(ours)}; they were matched by position."))
        return onnx_names
    raise StudioError(
        "validation",
        f"The ONNX file takes {len(onnx_names)} input(s) ({', '.join(onnx_names) or 'none'}) "
        f"but the recipe describes {len(ours)} ({', '.join(ours) or 'none'}).",
        "Give the recipe one [[inputs]] entry per ONNX input, in the same order and with "
        "the same names.")


# ---------------------------------------------------------------------------- trials


@dataclass
class Trial:
    kind: str  # export-inputs | random | dynamic-size
    seed: int
    sizes: dict[str, int] = field(default_factory=dict)  # every named dynamic dim's size
    changed: str | None = None  # the dim a dynamic-size trial moves off its export size

    @property
    def label(self) -> str:
        if self.kind == "dynamic-size" and self.changed:
            return f"at {self.changed}={self.sizes[self.changed]}"
        if self.kind == "random":
            return f"random draw (seed {self.seed})"
        return "export inputs"


def other_sizes(n: int) -> list[int]:
    """A smaller and a larger size for a dynamic dimension of export size n.

    Sizes 0 and 1 are avoided: torch.export specializes them, and a model exported at 1
    broadcasts differently; when there is no size >= 2 below n, two larger sizes are used.
    """
    sizes = []
    smaller = max(2, n // 2)
    if smaller < n:
        sizes.append(smaller)
    larger = n + max(1, n // 2)
    sizes.append(larger)
    if len(sizes) < 2:
        sizes.append(larger + 1)
    return sizes


def plan_trials(recipe: Recipe, export_sizes: dict[str, int],
                skip: set[str] | frozenset[str] = frozenset()) -> list[Trial]:
    """Export inputs, `random_trials` other seeds, then each dynamic dim at two other sizes.

    Dimensions named in `skip` (those of inputs read from files) keep their size.
    """
    opts = recipe.validate
    seed = recipe.export.seed
    plan = [Trial("export-inputs", seed, dict(export_sizes))]
    if has_random_fill(recipe):  # otherwise every draw would repeat the export inputs
        plan += [Trial("random", seed + 1 + i, dict(export_sizes))
                 for i in range(opts.random_trials)]
    if opts.dynamic_sizes:
        for name, n in export_sizes.items():
            if name in skip:
                continue
            for size in sizes_within(recipe, name, n):
                # a fresh draw as well, so a size trial does not only repeat the export values
                plan.append(Trial("dynamic-size", seed + 1000 + len(plan),
                                  {**export_sizes, name: size}, changed=name))
    return plan


def sizes_within(recipe: Recipe, name: str, n: int) -> list[int]:
    """`other_sizes(n)` kept inside the dimension's [dims] bounds; a size outside them is
    replaced by the bound itself when that is another size (so a bounded axis still moves)."""
    bounds = recipe.dims.get(name)
    low = bounds.min if bounds and bounds.min is not None else None
    high = bounds.max if bounds and bounds.max is not None else None
    sizes = []
    for size in other_sizes(n):
        if low is not None and size < low:
            size = low
        if high is not None and size > high:
            size = high
        if size != n and size not in sizes:
            sizes.append(size)
    return sizes


def bounded_out(recipe: Recipe, export_sizes: dict[str, int],
                skip: set[str] | frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The other sizes validation would try but a dimension's bounds exclude: not run, since
    the export was promised they never occur (`{"dim", "size", "bounds", "reason"}` each)."""
    if not recipe.validate.dynamic_sizes:
        return []
    out = []
    for name, n in export_sizes.items():
        bounds = recipe.dims.get(name)
        if name in skip or bounds is None:
            continue
        for size in other_sizes(n):
            if (bounds.min is not None and size < bounds.min) or (
                    bounds.max is not None and size > bounds.max):
                shown = [bounds.min, bounds.max]
                out.append({"dim": name, "size": size, "bounds": shown,
                            "reason": f"{name}={size} was not tried: it lies outside the "
                                      f"bounds [{'0' if bounds.min is None else bounds.min}, "
                                      f"{'∞' if bounds.max is None else bounds.max}] the "
                                      "export was given, where the file is not promised to "
                                      "work."})
    return out


def has_random_fill(recipe: Recipe) -> bool:
    """Whether some input is drawn at random ("auto" counts as what it resolves to)."""
    from onnx_studio.engine.source.inputs import resolve_fill

    return any(resolve_fill(spec).fill in RANDOM_FILLS for spec in recipe.inputs
               if spec.is_tensor)


def _file_dims(recipe: Recipe) -> set[str]:
    """Names of dynamic dimensions carried by an input read from a file (not resizable)."""
    return {name for spec in recipe.inputs if spec.fill == "file"
            for name in spec.dynamic.values()}


class _Runner:
    """Runs one trial: inputs, the eager reference, onnxruntime, metrics per output."""

    def __init__(self, recipe: Recipe, session: Any, module: Any, feed_names: list[str | None],
                 output_names: list[str], device: str, source_file: Path | None = None) -> None:
        self.recipe = recipe
        self.source_file = source_file
        self.session = session
        self.module = module
        self.feed_names = feed_names
        self.output_names = output_names
        self.device = device
        self._export_inputs: tuple[Any, ...] | None = None
        self._tensor_names = [s.name for s in recipe.inputs if s.is_tensor]

    def make(self, seed: int, sizes: dict[str, int] | None) -> tuple[Any, ...]:
        from onnx_studio.engine.source.inputs import make_inputs

        # the model too: "auto" fills follow the same rule as the export's (token ids within
        # its embedding), so the export-inputs trial is the export's inputs
        return make_inputs(self.recipe, seed=seed, sizes=sizes or None, device=self.device,
                           model=self.module)

    def export_inputs(self) -> tuple[Any, ...]:
        if self._export_inputs is None:
            self._export_inputs = self.make(self.recipe.export.seed, None)
        return self._export_inputs

    def export_sizes(self) -> dict[str, int]:
        """The size of every named dynamic dimension in the export inputs."""
        tensors = self.export_inputs()
        index = {s.name: i for i, s in enumerate(self.recipe.inputs)}
        sizes: dict[str, int] = {}
        for name, places in self.recipe.dynamic_dims().items():
            input_name, axis = places[0]
            sizes[name] = int(tensors[index[input_name]].shape[axis])
        return sizes

    def trial(self, trial: Trial, plots: PlotKeeper) -> dict[str, Any]:
        started = time.perf_counter()
        out: dict[str, Any] = {"kind": trial.kind, "seed": trial.seed, "sizes": trial.sizes,
                               "ok": False, "outputs": [], "message": ""}
        if trial.changed:
            out["changed"] = trial.changed
        try:
            self._trial(trial, out, plots)
        except StudioError as err:  # inputs that cannot be built at these sizes
            out["message"] = f"{trial.label}: {err.message}"
        except SystemExit as exc:  # user code ending the process: a failed trial, not our end
            out["message"] = f"{trial.label}: {exit_sentence(exc, self.source_file)}"
            out["details"] = traceback.format_exc()
        except Exception as exc:  # outputs of a kind we cannot compare: a failed trial, not a crash
            out["ok"] = False
            out["message"] = f"{trial.label}: the outputs could not be compared ({one_line(exc)})"
            out["details"] = traceback.format_exc()
        out["seconds"] = round(time.perf_counter() - started, 4)
        return out

    def _trial(self, trial: Trial, out: dict[str, Any], plots: PlotKeeper) -> None:
        import torch

        from onnx_studio.engine.source.arguments import call_arguments

        if trial.kind == "export-inputs":
            tensors = self.export_inputs()
        else:
            tensors = self.make(trial.seed, trial.sizes)
        # views of the tensors: onnxruntime only reads them, and torch gets clones below
        by_name = dict(zip(self._tensor_names, (t for spec, t in zip(
            self.recipe.inputs, tensors, strict=True) if spec.is_tensor), strict=True))
        feeds = {name: _to_numpy(by_name[ours]) for ours, name
                 in zip(self._tensor_names, self.feed_names, strict=True) if name}
        try:
            got = self.session.run(None, feeds)
        except Exception as exc:
            out["message"] = f"{ORT_FAILED} {trial.label}: {ort_message(exc)}"
            if trial.kind == "dynamic-size":
                out["message"] += (" (the file seems to hold a size from the export inputs "
                                   "fixed somewhere, so it runs only at that size)")
            out["details"] = str(exc)
            return
        try:
            with torch.no_grad():  # clones: the export inputs are reused by later steps
                args, kwargs = call_arguments(self.recipe, tuple(
                    t.clone() if isinstance(t, torch.Tensor) else t for t in tensors),
                    self.module)
                expected = flatten_outputs(self.module(*args, **kwargs))
        except (Exception, SystemExit) as exc:  # sys.exit() in forward must not end us
            # by its cause: sys.exit with its line, memory with the size asked, the model's
            # own error with its type and line, or inputs that do not fit
            cause = blame.model_error(exc, user_file=self.source_file).message.rstrip(".")
            out["message"] = (f"{PYTORCH_FAILED} {trial.label}: {cause}; these inputs cannot "
                              "be checked.")
            out["details"] = traceback.format_exc()
            return
        names, arrays = _flatten_onnx(self.output_names, got)
        problems = []
        if len(expected) != len(arrays):
            problems.append(f"PyTorch returned {len(expected)} output(s) but {COUNT_DIFFERS} "
                            f"{len(arrays)} ({', '.join(names)})")
        for name, ref, cand in zip(names, expected, arrays, strict=False):
            metrics = compare(ref, cand, self.recipe.validate.rtol, self.recipe.validate.atol)
            out["outputs"].append({"name": name, **metrics})
            if not metrics["passed"]:
                problems.append(f"output {name!r}: {metrics['message']}")
            if ref.shape == cand.shape:
                plots.offer(name, trial.label, metrics, ref, cand)
        out["ok"] = not problems
        out["message"] = f"{trial.label}: " + "; ".join(problems) if problems else ""


def _flatten_onnx(names: list[str], values: list[Any]) -> tuple[list[str], list[np.ndarray]]:
    """ONNX Runtime results as arrays; a sequence output becomes its elements, name[i], as a
    returned list of tensors is flattened on the PyTorch side."""
    out_names, arrays = [], []
    for name, value in zip(names, values, strict=True):
        if isinstance(value, list):
            for i, item in enumerate(value):
                out_names.append(f"{name}[{i}]")
                arrays.append(np.asarray(item))
        else:
            out_names.append(name)
            arrays.append(np.asarray(value))
    return out_names, arrays


def flatten_outputs(value: Any) -> list[np.ndarray]:
    """Model outputs as arrays, flattened in the exporters' order (pytree: tuples, lists, dicts).

    None leaves are dropped, as the exporters drop them; complex tensors become their real view
    (..., 2), which is how ONNX carries them.
    """
    import torch

    arrays = []
    for _, leaf in torch_private.named_leaves(value):  # dataclasses opened field by field
        if isinstance(leaf, torch.Tensor) and leaf.is_complex():
            leaf = torch.view_as_real(leaf)
        arrays.append(_to_numpy(leaf) if isinstance(leaf, torch.Tensor) else np.asarray(leaf))
    return arrays


def _to_numpy(tensor: Any) -> np.ndarray:
    import torch

    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:  # NumPy has no bfloat16
        tensor = tensor.float()
    return np.asarray(tensor.cpu().numpy())


def _worst_outputs(names: list[str], trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per output, the worst numbers over all trials that produced it (ONNX output order)."""
    order = [o["name"] for t in trials for o in t["outputs"]]
    order = list(dict.fromkeys(order))
    for name in names:  # an output no trial got to (every run failed) still gets its line
        if not any(n == name or n.startswith(name + "[") for n in order):
            order.append(name)
    outputs = []
    for name in order:
        per_trial = [o for t in trials for o in t["outputs"] if o["name"] == name]
        if not per_trial:
            outputs.append({"name": name, "passed": False, "max_abs_diff": None,
                            "max_rel_diff": None, "message": "no trial produced this output"})
            continue
        entry: dict[str, Any] = {"name": name, **worst(per_trial)}
        entry.update(dtype=per_trial[0]["onnx_dtype"], trials=len(per_trial))
        outputs.append(entry)
    return outputs


def verdict_warnings(trials: list[dict[str, Any]], rtol: float, atol: float
                     ) -> list[dict[str, Any]]:
    """A `Verdict` warning for each output whose comparison over these trials cannot tell a
    right file from a wrong one (onnx_studio.engine.validation.metrics.cannot_tell)."""
    per_output: dict[str, list[dict[str, Any]]] = {}
    for trial in trials:
        for out in trial.get("outputs") or []:
            per_output.setdefault(out["name"], []).append(out)
    found = (cannot_tell(name, metrics, rtol, atol) for name, metrics in per_output.items())
    return [warning for warning in found if warning is not None]


def exit_sentence(exc: SystemExit, source_file: Path | str | None = None) -> str:
    """"forward() called sys.exit(3) at net.py:12": where the model's code ended the process.

    The line is the innermost frame in the model's file when known, else the innermost frame
    outside torch and this engine."""
    return blame.exit_sentence(exc, source_file)


def _mode_warnings(loaded: Any) -> list[dict[str, Any]]:
    if getattr(loaded.module, "training", False):
        return [_warning("The PyTorch model is in training mode (dropout, batch statistics), so "
                         "its outputs are random; expect differences unless training = "
                         "\"eval\".")]
    return []


def _plot_path(onnx_path: Path, plot_dir: Path | None) -> Path:
    if plot_dir is not None:
        return Path(plot_dir) / "validation.npz"
    return onnx_path.with_name(onnx_path.stem + ".validation.npz")
