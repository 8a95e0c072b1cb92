"""A stored validation judged again at another tolerance, without running anything.

Each trial's output carries its `tolerance_hull` (engine.validation.metrics): the few
(|ref|, |diff|) pairs that decide the verdict at any rtol and atol. What no tolerance changes
stays as the run found it: another shape or dtype, NaN or infinity mismatches, integer outputs
compared exactly, trials that did not run. `rejudge` gives the validation as the worker would
have reported it at the new tolerance (verdicts, the failing trials, the messages of the
numbers); None when the result holds no hulls (a worker before them, or outputs too large).

How many elements fail at the new tolerance is counted from the plot file's samples
(`samples`, engine.validation.metrics.load_plots: the worst trial of each output, up to 100k
evenly spaced elements): exactly when the sample is the whole output, else estimated from it
(`mismatched_estimated`); other trials' counts are not known without a run.
"""

from __future__ import annotations

import copy
from typing import Any

from engine.validation.metrics import judge_hull

__all__ = ["rejudge"]

# messages of `compare` that a tolerance can change: the numbers differ, nothing else
_NUMBERS = " by more than atol + rtol*|ref|"


def _tolerance_only(output: dict[str, Any]) -> bool:
    """True when the output's verdict depends on the tolerance alone."""
    if output.get("exact") or output.get("shape") != output.get("onnx_shape", output.get("shape")):
        return False
    if output.get("dtype") != output.get("onnx_dtype", output.get("dtype")):
        return False
    return not (output.get("nan_mismatch") or output.get("inf_mismatch"))


def _label(trial: dict[str, Any]) -> str:
    """The trial's name as its messages start (engine.validation.validator's Trial.label)."""
    changed = trial.get("changed")
    if trial.get("kind") == "dynamic-size" and changed:
        return f"at {changed}={(trial.get('sizes') or {}).get(changed)}"
    if trial.get("kind") == "random":
        return f"random draw (seed {trial.get('seed')})"
    return "export inputs"


def _problems(outputs: list[dict[str, Any]]) -> str:
    """The failing outputs as a trial's message lists them (engine.validation.validator)."""
    return "; ".join(f"output {o['name']!r}: {o.get('message') or ''}" for o in outputs
                     if not o.get("passed"))


def _count(output: dict[str, Any], sample: dict[str, Any] | None, label: str, rtol: float,
           atol: float) -> tuple[int, int, bool] | None:
    """(elements outside the tolerance, elements, estimated) from the plot sample of this
    output in this trial, computed in the output's working dtype as `compare` does; None when
    the sample is of another trial."""
    import numpy as np

    shape = output.get("shape")
    if sample is None or sample.get("trial") != label or not isinstance(shape, list) \
            or not all(isinstance(d, int) for d in shape):
        return None
    total = int(np.prod(shape, dtype=np.int64))
    work = np.float64 if output.get("dtype") == "float64" else np.float32
    ref = np.asarray(sample["reference"]).astype(work)
    cand = np.asarray(sample["candidate"]).astype(work)
    if not ref.size or not total:
        return None
    finite = np.isfinite(ref) & np.isfinite(cand)
    diff = np.abs(cand[finite] - ref[finite])
    outside = int(np.count_nonzero(diff > np.abs(ref[finite]) * work(rtol) + work(atol)))
    if ref.size >= total:
        return outside, total, False
    return max(1, round(outside * total / ref.size)), total, True


def rejudge(data: dict[str, Any], rtol: float, atol: float,
            samples: dict[str, dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """The validation `data` (as the worker sent it) judged at (rtol, atol); None when it
    cannot be judged again without running it. `samples`: the plot file's, by output name."""
    samples = samples or {}
    out = copy.deepcopy(data)
    trials = out.get("trials") or []
    for trial in trials:
        outputs = trial.get("outputs") or []
        before = _problems(outputs)
        message = str(trial.get("message") or "")
        if not trial.get("ok") and not (before and message.endswith(": " + before)):
            continue  # failed for another reason than its outputs' numbers: it stays failed
        label = message[:-len(before) - 2] if before else _label(trial)
        for output in outputs:
            if not _tolerance_only(output):
                continue
            hull = output.get("tolerance_hull")
            if hull is None:
                return None
            passed = judge_hull(hull, rtol, atol, str(output.get("dtype") or "float32"))
            output["passed"] = passed  # failing still, its count is another at this tolerance
            output.pop("mismatched_estimated", None)
            if passed:
                output.update(message="", mismatched=0, mismatched_fraction=0.0)
                continue
            counted = _count(output, samples.get(str(output.get("name"))), _label(trial),
                             rtol, atol)
            numbers = f"{_NUMBERS} (max abs diff {output.get('max_abs_diff') or 0:.3g})"
            if counted is None:  # not sampled in this trial: not known without a run
                output.update(mismatched=None, mismatched_fraction=None,
                              message=f"some elements differ{numbers}")
                continue
            count, total, estimated = counted
            output.update(mismatched=count, mismatched_fraction=count / total,
                          message=("about " if estimated else "")
                          + f"{count} of {total} elements differ{numbers}")
            if estimated:
                output["mismatched_estimated"] = True
        after = _problems(outputs)
        trial["ok"] = not after
        trial["message"] = f"{label}: {after}" if after else ""
    for output in out.get("outputs") or []:
        per_trial = [o for t in trials for o in t.get("outputs") or []
                     if o.get("name") == output.get("name")]
        if per_trial:
            output["passed"] = all(o.get("passed") for o in per_trial)
            if output["passed"]:
                output["message"] = ""
                output["mismatched"] = 0
            else:
                output["message"] = next(o["message"] for o in per_trial if not o.get("passed"))
                known = [o for o in per_trial if o.get("mismatched")]
                most = max(known, key=lambda o: o["mismatched"], default=None)
                output["mismatched"] = most["mismatched"] if most else None
                output["mismatched_fraction"] = most.get("mismatched_fraction") if most else None
                output.pop("mismatched_estimated", None)
                if most and most.get("mismatched_estimated"):
                    output["mismatched_estimated"] = True
    failed = [t for t in trials if not t.get("ok")]
    out["ok"] = bool(trials) and not failed and all(o.get("passed") for o in
                                                     out.get("outputs") or [])
    out["rtol"], out["atol"] = rtol, atol
    if out["ok"]:
        out["message"] = ""
    elif failed:
        out["message"] = (f"{len(failed)} of {len(trials)} trials failed; first: "
                          f"{failed[0].get('message') or ''}")
    return out
