"""The `validation` object (`Validation`): ONNX Runtime against PyTorch per trial and per
output, node by node (`Intermediates`), and a Hugging Face export's generation check
(`Generation`, its teacher-forced steps `Continuation`); an export report's `validation`, and
what a validate job answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onnx_studio.engine.protocol.convert import OMIT, UNSET, Unset, Wire
from onnx_studio.engine.protocol.parts import WarningItem


@dataclass(kw_only=True)
class TrialOutput(Wire):
    """One output in one trial: ONNX Runtime against PyTorch
    (onnx_studio.engine.validation.metrics.compare).

    Non-finite numbers are None (null), never NaN: the validation keeps its JSON strict.
    """

    name: str
    shape: list[int]
    dtype: str
    onnx_shape: list[int]
    onnx_dtype: str
    passed: bool
    message: str
    max_abs_diff: float | None
    max_rel_diff: float | None
    mean_abs_diff: float | None
    cosine_similarity: float | None
    mismatched: int | None
    mismatched_fraction: float | None
    nan_mismatch: int | None
    inf_mismatch: int | None
    matched_nans: int | None
    elements: int
    exact: bool | None = field(default=None, metadata=OMIT)  # absent when the shapes differ
    # the (|ref|, |diff|) pairs that decide the verdict at any tolerance (metrics.tolerance_hull)
    tolerance_hull: list[list[float]] | None = field(default=None, metadata=OMIT)
    # `mismatched` estimated from the plot sample (a validation judged again at another
    # tolerance in the window, onnx_studio.app.session.rejudge); the worker never sets it
    mismatched_estimated: bool | None = field(default=None, metadata=OMIT)
    # which rule passed it: "element-wise" (every element within atol + rtol*|expected|) or
    # "scale" (the largest difference within rounding of the output's scale,
    # onnx_studio.engine.validation.metrics.scale_tolerance); absent when it failed
    rule: str | None = field(default=None, metadata=OMIT)
    reference_scale: float | None = field(default=None, metadata=OMIT)  # max |expected|
    # when it failed on its numbers: the atol that would pass at the validation's rtol, the rtol
    # at its atol (None: none would), and max |diff| / max |expected|
    needed_atol: float | None = field(default=None, metadata=OMIT)
    needed_rtol: float | None = field(default=None, metadata=OMIT)
    scale_ratio: float | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class OutputMetrics(Wire):
    """One output's worst numbers over all trials: an entry of `validation.outputs`.

    The metrics after `passed` are UNSET in an entry that no trial produced (every run
    failed), and None when no trial could compute them (the shapes differed).
    """

    name: str
    max_abs_diff: float | None
    max_rel_diff: float | None
    passed: bool
    mean_abs_diff: float | Unset | None = UNSET
    mismatched: int | Unset | None = UNSET
    mismatched_fraction: float | Unset | None = UNSET
    nan_mismatch: int | Unset | None = UNSET
    inf_mismatch: int | Unset | None = UNSET
    matched_nans: int | Unset | None = UNSET
    cosine_similarity: float | Unset | None = UNSET
    message: str | None = field(default=None, metadata=OMIT)
    dtype: str | None = field(default=None, metadata=OMIT)  # the ONNX output's dtype
    trials: int | None = field(default=None, metadata=OMIT)  # how many trials produced this output
    # as TrialOutput's: a count estimated from a sample when judged again (never from the worker)
    mismatched_estimated: bool | None = field(default=None, metadata=OMIT)
    # as TrialOutput's, over its trials: "scale" when some trial passed only by its scale
    rule: str | None = field(default=None, metadata=OMIT)
    reference_scale: float | None = field(default=None, metadata=OMIT)
    needed_atol: float | None = field(default=None, metadata=OMIT)
    needed_rtol: float | None = field(default=None, metadata=OMIT)
    scale_ratio: float | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class Trial(Wire):
    """One run of both models: on the export inputs, a random draw, or other dynamic sizes."""

    kind: str  # export-inputs | random | dynamic-size
    seed: int | None = field(default=None, metadata=OMIT)
    # every named dynamic dimension's size
    sizes: dict[str, int] | None = field(default=None, metadata=OMIT)
    ok: bool
    outputs: list[TrialOutput] | None = field(default=None, metadata=OMIT)
    message: str | None = field(default=None, metadata=OMIT)
    # the dimension a dynamic-size trial moves off its export size
    changed: str | None = field(default=None, metadata=OMIT)
    details: str | None = field(default=None, metadata=OMIT)
    seconds: float | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class NodeMetrics(Wire):
    """One ONNX node's values against the FX node it came from
    (onnx_studio.engine.validation.nodes)."""

    max_abs_diff: float | None
    max_rel_diff: float | None
    passed: bool
    mismatched: int | None = field(default=None, metadata=OMIT)
    # why it could not be compared (the shapes differ)
    message: str | None = field(default=None, metadata=OMIT)
    value: str  # the ONNX value compared
    # the largest |diff| / (atol + rtol * |expected|): 1.0 is at the tolerance; absent when not
    # compared or when a NaN/inf stands where the other side has none (then `passed` is false)
    tolerance_ratio: float | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class Intermediates(Wire):
    """Per-node comparison: nodes in graph order and the first one outside the tolerance."""

    nodes: dict[str, NodeMetrics]
    first_divergent: str | None
    compared: int
    message: str | None = field(default=None, metadata=OMIT)  # why nothing was compared
    # ONNX Runtime runs it took: 1, or more when the values were streamed in chunks that fit
    # onnx_studio.engine.validation.nodes.BUDGET
    onnxruntime_runs: int | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class NotTried(Wire):
    """A size of a bounded dynamic dimension validation left out: outside its [dims] bounds."""

    dim: str
    size: int
    bounds: list[int | None]  # [min, max]; None: unbounded on that side
    reason: str


@dataclass(kw_only=True)
class Validation(Wire):
    """The contract's `validation` object, with what onnx_studio.engine.validation adds after its
    keys."""

    ok: bool
    # one sentence: how many trials failed, and the first one's reason
    message: str | None = field(default=None, metadata=OMIT)
    rtol: float
    atol: float
    outputs: list[OutputMetrics] = field(default_factory=list)
    trials: list[Trial] = field(default_factory=list)
    # sizes of bounded dimensions outside their bounds: not run
    # (onnx_studio.engine.validation.validator)
    not_tried: list[NotTried] | None = field(default=None, metadata=OMIT)
    warnings: list[WarningItem] | None = field(default=None, metadata=OMIT)
    providers: list[str] | None = field(default=None, metadata=OMIT)
    optimization: str | None = field(default=None, metadata=OMIT)
    intermediates: Intermediates | None = field(default=None, metadata=OMIT)
    plots: str | Unset | None = UNSET  # the .npz of the plot data; None: it was not saved
    seconds: float | None = field(default=None, metadata=OMIT)
    # Hugging Face generation tasks: the files' step loop teacher-forced on a random
    # continuation, and greedy tokens over the ONNX files against generate()
    generation: Generation | None = field(default=None, metadata=OMIT)
    # False when some output cannot tell a right file from a wrong one (all within the
    # tolerance of zero, or of one constant): the verdict is then "inconclusive", `message`
    # says which output and `hint` what would make it conclusive. None: not judged (older).
    conclusive: bool | None = field(default=None, metadata=OMIT)
    hint: str | None = field(default=None, metadata=OMIT)

    @property
    def verdict(self) -> str:
        """"failed", "inconclusive" (passed, but the outputs cannot tell) or "passed"."""
        if not self.ok:
            return "failed"
        return "inconclusive" if self.conclusive is False else "passed"


@dataclass(kw_only=True)
class Generation(Wire):
    """The greedy-generation check of a Hugging Face export
    (onnx_studio.engine.validation.hf_checks)."""

    steps: int
    tokens_equal: bool
    onnx_tokens: list[int]
    torch_tokens: list[int]
    # teacher-forced: both sides fed generate's tokens (`fed_tokens`); each side's token is the
    # argmax of its own logits at that step, and the logits are compared too
    fed_tokens: list[int] | None = field(default=None, metadata=OMIT)
    teacher_forced: bool | None = field(default=None, metadata=OMIT)
    max_abs_diff: float | None = field(default=None, metadata=OMIT)
    max_rel_diff: float | None = field(default=None, metadata=OMIT)
    # the greedy tokens equal, their logits within, and (when present) `continuation` passed
    passed: bool | None = field(default=None, metadata=OMIT)
    message: str | None = field(default=None, metadata=OMIT)  # why not, one sentence
    # the prompt's token ids (a decoder's; None: an encoder's input, audio or text, is the prompt)
    prompt_tokens: list[int] | None = field(default=None, metadata=OMIT)
    # the greedy view's own verdict (its tokens equal, its logits within)
    greedy_passed: bool | None = field(default=None, metadata=OMIT)
    # every greedy token PyTorch picked is one token (a random-weight model repeating it): equal
    # tokens then prove little, and `note` says so
    greedy_constant: bool | None = field(default=None, metadata=OMIT)
    # the teacher-forced step check on a fixed random continuation, which decides `passed` with
    # the greedy view (None: a validation older than it)
    continuation: Continuation | None = field(default=None, metadata=OMIT)
    note: str | None = field(default=None, metadata=OMIT)  # what the greedy tokens prove

    def summary(self) -> str:
        """The check in one line (the CLI's text report, the reports' pages): the teacher-forced
        steps, which decide, then the greedy view and what constant greedy tokens prove."""
        steps = self.continuation
        parts = []
        if steps is not None and steps.steps:
            worst = steps.steps[steps.worst_step - 1] if steps.worst_step else None
            parts.append(("generation passed" if steps.passed else
                          f"generation FAILED from step {steps.first_failing_step}")
                         + f": {len(steps.steps)} steps teacher-forced on a random continuation"
                         + (f", worst step {worst.step} (max abs diff {_g(worst.max_abs_diff)})"
                            if worst is not None else "")
                         + (", top-1 the same at every step" if steps.top1_agreed_every_step
                            else ", top-1 not the same at every step"))
        elif steps is not None:
            parts.append(f"generation FAILED: {steps.message or 'no step ran'}")
        greedy = "greedy tokens equal" if self.tokens_equal else "greedy tokens differ"
        if self.greedy_constant and self.torch_tokens:
            greedy += f" (all token {self.torch_tokens[0]}: they prove little)"
        parts.append(f"{greedy} over {self.steps} steps")
        return "; ".join(parts)


def _g(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


@dataclass(kw_only=True)
class GenerationStep(Wire):
    """One step of the teacher-forced check: the logits of the next token, ONNX against eager."""

    step: int  # 1-based
    position: int  # the position (0-based) of the last token fed: the one predicted from
    past: int | None = field(default=None, metadata=OMIT)  # the cache length fed (files with one)
    max_abs_diff: float | None
    max_rel_diff: float | None
    torch_top1: int
    onnx_top1: int
    passed: bool  # the logits within |diff| <= atol + rtol*|ref| and the same top-1 token


@dataclass(kw_only=True)
class Continuation(Wire):
    """The teacher-forced step check of a Hugging Face generation export
    (onnx_studio.engine.validation.hf_checks.check_steps): the prompt, then `tokens` (drawn with
    `seed` from the vocabulary, special tokens left out) fed to the ONNX files step by step, the
    cache they return fed back, against one forward of the eager model over the whole sequence
    without a cache."""

    tokens: list[int]
    seed: int
    with_past: bool  # whether the loop carried a cache from step to step
    steps: list[GenerationStep]  # empty when ONNX Runtime could not run a step (`message`)
    worst_step: int | None  # 1-based: the step with the largest |diff|
    max_abs_diff: float | None
    max_rel_diff: float | None
    top1_agreed_every_step: bool
    first_failing_step: int | None  # 1-based; None when every step passed
    passed: bool
    message: str | None  # why not, one sentence
