"""A stored validation judged again at another tolerance, without running anything.

Each trial's output carries its `tolerance_hull` (engine.validation.metrics): the few
(|ref|, |diff|) pairs that decide the verdict at any rtol and atol. What no tolerance changes
stays as the run found it: another shape or dtype, NaN or infinity mismatches, integer outputs
compared exactly, trials that did not run. `rejudge` gives the validation as the worker would
have reported it at the new tolerance (verdicts, the failing trials, the messages of the
numbers); None when the result holds no hulls (a worker before them, or outputs too large).
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


def rejudge(data: dict[str, Any], rtol: float, atol: float) -> dict[str, Any] | None:
    """The validation `data` (as the worker sent it) judged at (rtol, atol); None when it
    cannot be judged again without running it."""
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
            if passed == bool(output.get("passed")):
                continue
            output["passed"] = passed
            if passed:
                output.update(message="", mismatched=0, mismatched_fraction=0.0)
            else:  # how many elements fail at this tolerance is not known without a run
                output.update(mismatched=None, mismatched_fraction=None,
                              message=f"some elements differ{_NUMBERS} (max abs diff "
                                      f"{output.get('max_abs_diff') or 0:.3g})")
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
                output["mismatched"] = max((o.get("mismatched") or 0 for o in per_trial),
                                           default=None) or None
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
