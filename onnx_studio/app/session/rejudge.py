"""A validation judged again at another tolerance, without running anything: a new Validation.

Each trial's output carries its `tolerance_hull` (onnx_studio.engine.validation.metrics): the few
(|ref|, |diff|) pairs that decide the verdict at any rtol and atol. What no tolerance changes
stays as the run found it: another shape or dtype, NaN or infinity mismatches, integer outputs
compared exactly, trials that did not run. `rejudge` gives the validation as the worker would
have reported it at the new tolerance (verdicts, the failing trials, the messages of the
numbers); None when the result holds no hulls (a worker before them, or outputs too large).
The validation it is given is left as it is.

How many elements fail at the new tolerance is counted from the plot file's samples (`samples`,
onnx_studio.engine.validation.metrics.load_plots: the worst trial of each output, up to 100k evenly
spaced elements): exactly when the sample is the whole output, else estimated from it
(`mismatched_estimated`); other trials' counts are not known without a run (None). Qt-free; numpy is
imported when a count is made.

A Hugging Face export's generation check keeps no hulls: its verdict carries over where it holds
(passed at a looser tolerance, failed at a tighter one), else `rejudge` is None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onnx_studio.engine.protocol import OutputMetrics, Trial, TrialOutput, Validation

__all__ = ["rejudge"]

# messages of `compare` that a tolerance can change: the numbers differ, nothing else
_NUMBERS = " by more than atol + rtol*|ref|"


def _tolerance_only(output: TrialOutput) -> bool:
    """True when the output's verdict depends on the tolerance alone."""
    if output.exact or output.shape != output.onnx_shape or output.dtype != output.onnx_dtype:
        return False
    return not (output.nan_mismatch or output.inf_mismatch)


def _label(trial: Trial) -> str:
    """The trial's name as its messages start (onnx_studio.engine.validation.validator's
    Trial.label)."""
    if trial.kind == "dynamic-size" and trial.changed:
        return f"at {trial.changed}={(trial.sizes or {}).get(trial.changed)}"
    if trial.kind == "random":
        return f"random draw (seed {trial.seed})"
    return "export inputs"


def _problems(outputs: list[TrialOutput]) -> str:
    """The failing outputs as a trial's message lists them
    (onnx_studio.engine.validation.validator)."""
    return "; ".join(f"output {o.name!r}: {o.message or ''}" for o in outputs if not o.passed)


def _count(output: TrialOutput, sample: Mapping[str, Any] | None, label: str, rtol: float,
           atol: float) -> tuple[int, int, bool] | None:
    """(elements outside the tolerance, elements, estimated) from the plot sample of this
    output in this trial, computed in the output's working dtype as `compare` does; None when
    the sample is of another trial."""
    import numpy as np

    if sample is None or str(sample["trial"]) != label:
        return None
    total = int(np.prod(output.shape, dtype=np.int64))
    work = np.float64 if output.dtype == "float64" else np.float32
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


def _judge_output(output: TrialOutput, trial: Trial, rtol: float, atol: float,
                  samples: Mapping[str, Mapping[str, Any]]) -> TrialOutput | None:
    """One output of one trial at (rtol, atol); None when it holds no hull to judge by."""
    from onnx_studio.engine.validation.metrics import judge_hull

    if not _tolerance_only(output):
        return output
    if output.tolerance_hull is None:
        return None
    if judge_hull(output.tolerance_hull, rtol, atol, output.dtype or "float32"):
        return replace(output, passed=True, message="", mismatched=0, mismatched_fraction=0.0,
                       mismatched_estimated=None)
    numbers = f"{_NUMBERS} (max abs diff {output.max_abs_diff or 0:.3g})"
    counted = _count(output, samples.get(output.name), _label(trial), rtol, atol)
    if counted is None:  # not sampled in this trial: not known without a run
        return replace(output, passed=False, mismatched=None, mismatched_fraction=None,
                       mismatched_estimated=None, message=f"some elements differ{numbers}")
    count, total, estimated = counted
    return replace(output, passed=False, mismatched=count, mismatched_fraction=count / total,
                   mismatched_estimated=True if estimated else None,
                   message=("about " if estimated else "")
                   + f"{count} of {total} elements differ{numbers}")


def _judge_trial(trial: Trial, rtol: float, atol: float,
                 samples: Mapping[str, Mapping[str, Any]]) -> Trial | None:
    outputs = list(trial.outputs or [])
    before = _problems(outputs)
    message = trial.message or ""
    if not trial.ok and not (before and message.endswith(": " + before)):
        return trial  # failed for another reason than its outputs' numbers: it stays failed
    label = message[:-len(before) - 2] if before else _label(trial)
    judged: list[TrialOutput] = []
    for output in outputs:
        one = _judge_output(output, trial, rtol, atol, samples)
        if one is None:
            return None
        judged.append(one)
    after = _problems(judged)
    return replace(trial, outputs=judged if trial.outputs is not None else None, ok=not after,
                   message=f"{label}: {after}" if after else "")


def _worst(output: OutputMetrics, trials: list[Trial]) -> OutputMetrics:
    """An output's entry of `validation.outputs` again from its judged trials."""
    per_trial = [o for t in trials for o in t.outputs or [] if o.name == output.name]
    if not per_trial:
        return output
    if all(o.passed for o in per_trial):
        return replace(output, passed=True, message="", mismatched=0)
    known = [o for o in per_trial if o.mismatched]
    most = max(known, key=lambda o: o.mismatched or 0, default=None)
    return replace(output, passed=False,
                   message=next(o.message for o in per_trial if not o.passed),
                   mismatched=most.mismatched if most else None,
                   mismatched_fraction=most.mismatched_fraction if most else None,
                   mismatched_estimated=True if most and most.mismatched_estimated else None)


def rejudge(run: Validation, rtol: float, atol: float,
            samples: Mapping[str, Mapping[str, Any]] | None = None) -> Validation | None:
    """The validation `run` (as its job reported it) judged at (rtol, atol): a new one; None
    when it cannot be judged again without running it (a generation check included).
    `samples`: the plot file's, by output name."""
    samples = samples or {}
    trials: list[Trial] = []
    for trial in run.trials:
        judged = _judge_trial(trial, rtol, atol, samples)
        if judged is None:
            return None
        trials.append(judged)
    generation = _generation_verdict(run, rtol, atol)
    if generation is _UNKNOWN:
        return None
    outputs = [_worst(output, trials) for output in run.outputs]
    failed = [t for t in trials if not t.ok]
    ok = bool(trials) and not failed and all(o.passed for o in outputs)
    message = run.message
    if ok and generation is False:  # the files agree; their generation does not
        ok, message = False, run.generation.message if run.generation else message
    elif ok:
        message = ""
    elif failed:
        message = (f"{len(failed)} of {len(trials)} trials failed; first: "
                   f"{failed[0].message or ''}")
    return replace(run, ok=ok, rtol=rtol, atol=atol, outputs=outputs, trials=trials,
                   message=message)


_UNKNOWN = object()


def _generation_verdict(run: Validation, rtol: float, atol: float) -> object:
    """A Hugging Face generation check's verdict at (rtol, atol) from the one it had at the run's
    tolerance: its logits are not kept, but a verdict only keeps in one direction (what passed
    passes at a looser tolerance, what failed fails at a tighter one); `_UNKNOWN` otherwise, and
    None when there is no check."""
    generation = run.generation
    if generation is None or generation.passed is None:
        return None
    looser = rtol >= run.rtol and atol >= run.atol
    tighter = rtol <= run.rtol and atol <= run.atol
    if generation.passed and looser:
        return True
    if not generation.passed and tighter:
        return False
    return _UNKNOWN
