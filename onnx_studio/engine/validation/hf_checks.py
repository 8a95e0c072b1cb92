"""Validate a Hugging Face export: each file against eager PyTorch at several sizes (an empty
and a non-empty cache for files with past), then, for generation tasks, the files' step loop
teacher-forced on a fixed random continuation against one eager forward over the whole
sequence (what decides), and greedy generation over the files against transformers'
`generate(do_sample=False)`, compared teacher-forced step by step (a second view)."""

from __future__ import annotations

import math
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from onnx_studio.engine.errors import one_line
from onnx_studio.engine.events import Events
from onnx_studio.engine.validation.eager_first import (
    EagerRuns,
    GenerationReference,
    release_model,
)
from onnx_studio.engine.validation.metrics import (
    VERDICT,
    cannot_tell,
    compare,
    conclusiveness,
    worst,
)
from onnx_studio.engine.validation.ort_session import create_session, has_external_data

GENERATION_STEPS = 20
PROMPT_LENGTH = 5

# (kind, batch, sequence, past): past 0 is the empty cache
_TRIALS = (("past-empty", 1, 4, 0), ("past-nonempty", 3, 2, 6))
_PLAIN_TRIALS = (("dynamic-size", 3, 7, 0),)
_TRIAL_SEED = 11


def _session(path: Path) -> Any:
    """ONNX Runtime's session of one file, or the StudioError saying why it cannot load (an
    operator or a type it does not run: the file's fault, not an unexpected failure); a file
    with external data gets the session that adds no copy of its weights."""
    return create_session(path, ["CPUExecutionProvider"], "all", [],
                          low_memory=has_external_data(path))


def _eager(part: Any, inputs: dict[str, Any]) -> list[np.ndarray]:
    import torch

    with torch.no_grad():
        out = part.module(*inputs.values())
    out = out if isinstance(out, tuple) else (out,)
    return [t.detach().cpu().numpy() for t in out]


def check_parts(hf: Any, folder: Path, rtol: float, atol: float,
                events: Events, eager: EagerRuns | None = None) -> dict[str, Any]:
    """The validation dict (onnx_studio.engine.protocol Validation's fields) of every exported
    part; `eager`: the eager runs (computed already when the model was freed), one session
    open at a time."""
    eager = eager or EagerRuns(_eager)
    trials: list[dict[str, Any]] = []
    per_output: dict[str, list[dict[str, Any]]] = {}
    dropped: list[dict[str, str]] = []
    many = len(hf.parts) > 1
    for index, part in enumerate(hf.parts):
        events.progress(index / max(len(hf.parts), 1), f"Validating {part.file}")
        session = _session(folder / part.file)
        taken = {i.name for i in session.get_inputs()}
        missing = [name for name in part.inputs if name not in taken]
        if missing:
            dropped.append({
                "category": VERDICT, "source": part.file, "message":
                f"{part.file} does not take {', '.join(missing)}, which the model was given: "
                "the exporter dropped what the traced computation did not use, and the "
                "trials show the outputs do not depend on it at the values tried.",
                "hint": "Fine for an input the model ignores (position_ids of a model with "
                        "ALiBi); a file without an input the model reads (an attention mask) "
                        "computes as if it always had its value at export: try the other "
                        "exporter."})
        for kind, size in trial_sizes(part):
            trial = _trial(part, session, taken, kind, size, rtol, atol, many, eager)
            for metrics in trial["outputs"]:
                per_output.setdefault(metrics["name"], []).append(metrics)
            trials.append(trial)
        del session  # its weights freed before the next file's are read
    # each output's dtype as the file gives it (what the single-file validator reports too)
    outputs = [{"name": name, "trials": len(found), **worst(found),
                "dtype": found[0]["onnx_dtype"]} for name, found in per_output.items()]
    cannot = [w for w in (cannot_tell(name, found, rtol, atol)
                          for name, found in per_output.items()) if w is not None]
    warnings = dropped + cannot
    for warning in warnings:
        events.warning(warning)
    ok = all(t["ok"] for t in trials)
    failed = [o["name"] for o in outputs if not o["passed"]]
    unrun = next((t["message"] for t in trials if not t["ok"] and not t["outputs"]), None)
    random = next((t["message"] for t in trials
                   if (t.get("message") or "").startswith(PYTORCH_RANDOM)), None)
    message = None if ok else unrun or random or (f"ONNX Runtime disagrees with PyTorch on "
                                                  f"{', '.join(failed[:3])}.")
    verdict = conclusiveness(cannot)
    return {"ok": ok, "rtol": rtol, "atol": atol, "outputs": outputs, "trials": trials,
            "warnings": warnings, "conclusive": verdict["conclusive"], "hint": verdict.get("hint"),
            "message": message if not ok else verdict.get("inconclusive")}


def trial_sizes(part: Any) -> list[tuple[str, tuple[int, int, int] | None]]:
    """The trials a file of the export is validated at: (kind, (batch, sequence, past)), None
    for the export's own inputs first."""
    has_past = any(name.startswith("past_key_values") for name in part.inputs)
    return [("export-inputs", None)] + [
        (kind, (b, s, p)) for kind, b, s, p in (_TRIALS if has_past else _PLAIN_TRIALS)]


def trial_inputs(part: Any) -> list[dict[str, Any]]:
    """The inputs (torch tensors by ONNX input name) of each trial of `trial_sizes`."""
    return [part.inputs if size is None else part.make_inputs(_TRIAL_SEED, *size)
            for _, size in trial_sizes(part)]


def _trial(part: Any, session: Any, taken: set[str], kind: str,
           size: tuple[int, int, int] | None, rtol: float, atol: float,
           many: bool, eager: EagerRuns) -> dict[str, Any]:
    """One trial of one file: its outputs against eager PyTorch's, or, when either side
    cannot run these inputs, a failed trial saying which and why."""
    from onnx_studio.engine.validation.ort_session import ort_message

    started = time.perf_counter()
    inputs = eager.inputs(part, kind, size, _TRIAL_SEED)
    trial: dict[str, Any] = {"kind": kind, "ok": False, "outputs": []}
    if size is not None:
        trial["sizes"] = _sizes(inputs)
    where = f"{part.file} {kind}" + ("" if size is None else " at " + ", ".join(
        f"{k}={v}" for k, v in trial["sizes"].items()))
    # fed the file's own inputs (`taken`): an exporter may drop one the model ignores
    # (TorchScript drops unused inputs), which the outputs then show not to matter
    try:
        got = session.run(part.output_names,
                          {k: v.cpu().numpy() for k, v in inputs.items() if k in taken})
    except Exception as exc:
        trial["message"] = f"{ONNX_RUNTIME_FAILED} on {where}: {ort_message(exc)}"
        trial["details"] = str(exc)
    else:
        try:
            reference = eager.outputs(part, kind)
        except Exception as exc:
            trial["message"] = f"{PYTORCH_FAILED} on {where}: {one_line(exc)}"
            trial["details"] = traceback.format_exc()
        else:
            for name, ref, cand in zip(part.output_names, reference, got, strict=True):
                trial["outputs"].append({"name": f"{Path(part.file).stem}/{name}" if many
                                         else name, **compare(ref, cand, rtol, atol)})
            trial["ok"] = all(m["passed"] for m in trial["outputs"])
            if many:
                trial["message"] = part.file
            if not trial["ok"]:  # is PyTorch itself the same twice on these inputs?
                moving = _not_repeatable(part, eager.outputs(part, kind, 1), reference,
                                         rtol, atol)
                if moving:
                    trial["message"] = (f"{PYTORCH_RANDOM} on {where}: two runs on the same "
                                        f"inputs differ on {', '.join(moving[:3])}")
    trial["seconds"] = time.perf_counter() - started
    return trial


# how an unrun trial's message begins, read back by `failure_hint`
ONNX_RUNTIME_FAILED = "ONNX Runtime cannot run"
PYTORCH_FAILED = "The PyTorch model itself fails"
PYTORCH_RANDOM = "The PyTorch model gives other outputs each run"


def _not_repeatable(part: Any, again: list[np.ndarray], reference: list[np.ndarray],
                    rtol: float, atol: float) -> list[str]:
    """The outputs a second eager run on the same inputs (`again`) gives otherwise (a model
    that draws random numbers in forward(), as ViT-MAE's masking noise): no file can match
    those."""
    return [name for name, first, second in zip(part.output_names, reference, again,
                                                strict=True)
            if not compare(first, second, rtol, atol)["passed"]]


def failure_hint(validation: dict[str, Any]) -> str:
    """What to change after a failed validation of a Hugging Face export, by its first cause:
    a file that cannot run at another size (a size fixed in it), generation that drifts, or
    outputs that differ."""
    trials = [t for t in validation.get("trials") or [] if not t.get("ok")]
    messages = [t.get("message") or "" for t in trials]
    messages.append((validation.get("generation") or {}).get("message") or "")
    if any(m.startswith(ONNX_RUNTIME_FAILED) for m in messages):
        return ("A file runs at the export's sizes only: a size (the batch or a sequence "
                "length) was fixed in it while exporting; look in Warnings for the axis, or "
                "export at the size you will run: --static-dim DIM=SIZE (a recipe's [dims] "
                "DIM = { size = SIZE }). The trial's message names the file and the sizes.")
    if any(m.startswith(PYTORCH_RANDOM) for m in messages):
        return ("No file can match a model that is not the same twice: make it deterministic "
                "(its randomness as an input, as ViT-MAE's noise, or the option that turns "
                "it off), then export and validate again.")
    if any(m.startswith(PYTORCH_FAILED) for m in messages):
        return ("The PyTorch model itself fails at these sizes, so nothing could be compared "
                "there; the trial's details hold its error.")
    at_export = [t for t in validation.get("trials") or [] if t.get("kind") == "export-inputs"]
    if trials and at_export and all(t.get("ok") for t in at_export):
        return ("The file matches PyTorch at the export's sizes and not at the others: the "
                "export fixed something that depends on a size (a Python loop over the "
                "sequence unrolled by tracing, a shape read as a number). From TorchScript, "
                "export with dynamo (--exporter dynamo); or export at the size you will run: "
                "--static-dim DIM=SIZE (a recipe's [dims] DIM = { size = SIZE }).")
    if trials:
        return ("Compare the outputs per trial (the file and sizes in each trial): loosen "
                "rtol/atol if the differences are rounding, otherwise the file computes "
                "something else than the model.")
    generation = validation.get("generation") or {}
    continuation = generation.get("continuation") or {}
    if continuation and not continuation.get("passed", True):
        return ("Every file agrees with PyTorch at the sizes tried, yet fed a continuation "
                "step by step their logits leave the model's from the step named: the cache "
                "passed from step to step is not what the model computes over the whole "
                "sequence (a cache written at the wrong position, or a model whose own cache "
                "path differs from its forward). Compare the steps in Generation; the first "
                "failing step is the first that reads the wrong cache.")
    if generation and not generation.get("passed", True):
        return ("Every file agrees with PyTorch at the sizes tried, yet greedy generation "
                "over them drifts: compare the tokens step by step (Generation); the step "
                "named is the first whose logits differ.")
    return ""


def validate_hf(hf: Any, folder: Path, rtol: float, atol: float,
                events: Events, release: bool = False) -> dict[str, Any]:
    """The validation dict of a Hugging Face export: every file against eager PyTorch, then
    (generation tasks) the step check and greedy generation over the files
    (`check_generation`); failed when either fails.

    With `release` (the caller owns `hf` and needs its model no more), PyTorch's side is
    computed first and the model freed before ONNX Runtime opens a file: the process never
    holds the model and a session together (onnx_studio.engine.validation.eager_first)."""
    from onnx_studio.engine.validation import half_precision

    dtype = half_precision.weights_dtype(hf.model)
    unrun = half_precision.cpu_cannot_run(dtype, rtol, atol)
    if unrun is not None:  # said on top as the verdict's warning
        return unrun
    rtol, atol, widened = half_precision.tolerances(dtype, rtol, atol)
    if widened:
        events.warning({"category": "Validation", "message": widened})
    eager = EagerRuns(_eager)
    reference = None
    if release:
        events.progress(0.0, "Running the PyTorch model")
        for part in hf.parts:
            eager.compute(part, trial_sizes(part), _TRIAL_SEED)
        if hf.generates:
            reference = generation_reference(hf, GENERATION_STEPS)
        release_model(hf)
    events.progress(0.0, "Validating in ONNX Runtime")
    result = check_parts(hf, folder, rtol, atol, events.part(0.0, 0.7), eager)
    if hf.generates:
        events.progress(0.7, "Checking generation step by step")
        generation = result["generation"] = check_generation(hf, folder, rtol=rtol, atol=atol,
                                                             reference=reference)
        if not generation["passed"] and result["ok"]:
            result["ok"] = False
            result["message"] = generation["message"]
    return result


def _sizes(inputs: dict[str, Any]) -> dict[str, int]:
    """The sizes a trial really ran at, read from its inputs."""
    first = next(iter(inputs.values()))
    sizes = {"batch_size": int(first.shape[0])}
    if "input_ids" in inputs:
        sizes["sequence_length"] = int(inputs["input_ids"].shape[1])
    past = [v for k, v in inputs.items() if k.startswith("past_key_values")]
    if past:
        sizes["past_sequence_length"] = int(past[0].shape[2])
    return sizes


def _generation_config(model: Any, steps: int) -> Any:
    """Greedy decoding of exactly `steps` tokens, the raw logits of every step kept."""
    from transformers import GenerationConfig

    pad = getattr(model.generation_config, "pad_token_id", None)
    # min_new_tokens: generate never stops early at an end token (the steps after it are
    # compared too); the logits processors only choose the token fed next, which both sides
    # are fed alike, and the raw logits (output_logits) are what is compared
    return GenerationConfig(max_new_tokens=steps, min_new_tokens=steps, do_sample=False,
                            num_beams=1, pad_token_id=0 if pad is None else pad,
                            output_logits=True, return_dict_in_generate=True)


def check_generation(hf: Any, folder: Path, steps: int = GENERATION_STEPS,
                     rtol: float = 1e-3, atol: float = 1e-5,
                     reference: GenerationReference | None = None) -> dict[str, Any]:
    """The generation dict: the ONNX files' step loop (with its cache, when they have one)
    judged two ways on the same prompt.

    - `continuation` decides: teacher-forced on a fixed random continuation (`check_steps`),
      every step's logits against one forward of the eager model over the whole sequence,
      without a cache: each step sees a new position and a longer cache, and a cache the files
      pass on wrongly shows at the step that reads it.
    - the greedy view: transformers' generate picks `steps` tokens; the ONNX files are fed the
      same tokens, step by step, and at every step the ONNX logits' argmax must equal the
      eager model's (generate's raw logits), and the logits agree within rtol/atol. Both sides
      see the same tokens, so generate's stopping and forced-token rules (end token, forced
      BOS/EOS, suppressed tokens) choose what is fed, never what is compared. A random-weight
      model often repeats one token (`greedy_constant`): equal tokens then prove little.

    `passed` needs both; `message` names the first failure, the continuation's first.
    `reference`: PyTorch's side (`generation_reference`), computed now when not given.
    """
    reference = reference or generation_reference(hf, steps)
    expected, fed = reference.expected, reference.fed
    prompt, start, empty = reference.prompt, reference.start, reference.empty_past
    sessions = {part.file: _session(folder / part.file) for part in hf.parts}
    try:
        got = _onnx_steps(hf, sessions, prompt, start, fed, empty)
    except _OnnxRuntimeFailed as failed:  # e.g. a file whose sequence length was fixed
        greedy = {"steps": len(fed), "tokens_equal": False, "onnx_tokens": [],
                  "torch_tokens": [int(t) for t in expected.argmax(-1)], "fed_tokens": fed,
                  "teacher_forced": True, "passed": False, "message": str(failed)}
    else:
        # generate's raw logits may be upcast (float32 of a float16 model): compared in its
        # type
        greedy = judge_steps(expected, got.astype(expected.dtype), fed, rtol, atol)
    greedy["prompt_tokens"] = None if hf.seq2seq else [int(t) for t in prompt["input_ids"][0]]
    continuation = check_steps(hf, sessions, prompt, start, steps, rtol, atol,
                               reference.continuation, empty)
    return combine(greedy, continuation)


def generation_reference(hf: Any, steps: int) -> GenerationReference:
    """PyTorch's side of `check_generation`, computed with the model so that the files can
    be judged after it is freed: generate's greedy tokens and raw logits on the prompt, the
    eager logits of the prompt and a fixed random continuation (`continuation_reference`),
    and the empty cache the decoder loop starts from."""
    import torch
    from transformers import GenerationMixin

    model = hf.model
    config = _generation_config(model, steps)
    prompt = hf.parts[0].make_inputs(21, 1, PROMPT_LENGTH, 0)
    with torch.no_grad():
        if hf.seq2seq:  # the encoder's inputs are the prompt
            # GenerationMixin's own greedy loop: Whisper's override adds its language and
            # timestamp logic, which the ONNX loop does not model
            ref = GenerationMixin.generate(model, **prompt, generation_config=config)
            start = int(ref.sequences[0, 0])
            fed = [int(t) for t in ref.sequences[0, 1:]]
        else:
            ids = prompt["input_ids"]
            ref = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 generation_config=config)
            start = None
            fed = [int(t) for t in ref.sequences[0, ids.shape[1]:]]
    expected = np.stack([logits[0].float().numpy() for logits in ref.logits])
    return GenerationReference(
        expected, fed[:len(expected)], prompt, start,
        continuation_reference(hf, prompt, start, steps),
        None if hf.seq2seq else _empty_past(hf.parts[0]))


def _empty_past(part: Any) -> dict[str, np.ndarray]:
    """The empty cache the decoder loop starts from (none for a file without past)."""
    if not any(name.startswith("past_key_values") for name in part.inputs):
        return {}
    empty = part.make_inputs(0, 1, 1, 0)
    return {k: v.numpy() for k, v in empty.items() if k.startswith("past_key_values")}


def combine(greedy: dict[str, Any], continuation: dict[str, Any]) -> dict[str, Any]:
    """The generation dict: the greedy view's keys (`judge_steps`) with its own verdict as
    `greedy_passed`, `greedy_constant`, the teacher-forced `continuation`
    (`judge_continuation`), and the verdict of both with a `note` when the greedy tokens prove
    little."""
    tokens = greedy["torch_tokens"]
    constant = len(tokens) > 1 and len(set(tokens)) == 1
    result = {**greedy, "passed": bool(greedy["passed"] and continuation["passed"]),
              "message": continuation["message"] or greedy["message"],
              "greedy_passed": bool(greedy["passed"]), "greedy_constant": constant,
              "continuation": continuation}
    if constant:
        result["note"] = (f"All {len(tokens)} greedy tokens are token {tokens[0]}: a model "
                          "that repeats one token matches any file that does, so equal greedy "
                          "tokens prove little here; the teacher-forced steps on a random "
                          "continuation decide.")
    return result


CONTINUATION_SEED = 37


def continuation_tokens(hf: Any, steps: int, seed: int = CONTINUATION_SEED) -> list[int]:
    """`steps` token ids drawn with `seed` within the model's vocabulary, leaving out the ids
    its config and generation config name (start, end, padding) and, as the prompt does, the
    ids below 3 where the vocabulary is large enough."""
    from onnx_studio.engine.source.hf.dummies import vocab_size

    vocab = vocab_size(hf.config, hf.model) or 2
    special: set[int] = set()
    for source in (hf.config, getattr(hf.model, "generation_config", None)):
        for name in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id",
                     "forced_bos_token_id", "forced_eos_token_id"):
            value = getattr(source, name, None)
            special.update(v for v in (value if isinstance(value, list | tuple) else [value])
                           if isinstance(v, int))
    low = 3 if vocab > 8 else 0
    allowed = [t for t in range(low, vocab) if t not in special] or list(range(vocab))
    rng = np.random.default_rng(seed)
    return [int(allowed[i]) for i in rng.integers(0, len(allowed), steps)]


def continuation_reference(hf: Any, prompt: dict[str, Any], start: int | None,
                           steps: int) -> tuple[list[int], np.ndarray | str]:
    """The fixed random continuation of `check_steps` and the eager model's logits of every
    step over the whole sequence without a cache ([steps, vocab]), or the sentence saying
    the model itself fails on it."""
    import torch

    tokens = continuation_tokens(hf, steps)
    try:
        with torch.no_grad():
            if hf.seq2seq:
                decoder_ids = torch.tensor([[start, *tokens[:-1]]], dtype=torch.int64)
                out = hf.model(**prompt, decoder_input_ids=decoder_ids, use_cache=False)
                expected = out.logits[0]
            else:
                ids = prompt["input_ids"]
                whole = torch.cat([ids, torch.tensor([tokens[:-1]], dtype=torch.int64)], dim=1)
                out = hf.model(input_ids=whole, attention_mask=torch.ones_like(whole),
                               use_cache=False)
                expected = out.logits[0, ids.shape[1] - 1:]
    except Exception as exc:  # the model's own failure, said as such (failure_hint reads it)
        return tokens, (f"{PYTORCH_FAILED} on the prompt and a continuation of {steps} "
                        f"tokens: {one_line(exc)}")
    return tokens, expected.float().numpy()


def check_steps(hf: Any, sessions: dict[str, Any], prompt: dict[str, Any], start: int | None,
                steps: int, rtol: float, atol: float,
                reference: tuple[list[int], np.ndarray | str] | None = None,
                empty_past: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """The teacher-forced step check (`continuation`): the prompt (a decoder's token ids; an
    encoder's inputs with the decoder's `start` token) then a fixed random continuation,
    fed to the ONNX files step by step (the cache they return fed back) and to the eager
    model in one forward over the whole sequence without a cache, the trustworthy reference:
    it shares no cache code with the loop. The logits of every step are compared.
    `reference`: the continuation and its eager logits (`continuation_reference`), computed
    now when not given; `empty_past`: the decoder's empty cache (None: made from its part)."""
    tokens, expected_np = reference or continuation_reference(hf, prompt, start, steps)
    unrun = {"tokens": tokens, "seed": CONTINUATION_SEED, "with_past": _with_past(hf),
             "steps": [], "worst_step": None, "max_abs_diff": None, "max_rel_diff": None,
             "top1_agreed_every_step": False, "first_failing_step": None, "passed": False}
    if isinstance(expected_np, str):  # the model's own failure
        return {**unrun, "message": expected_np}
    first = 0 if hf.seq2seq else int(prompt["input_ids"].shape[1]) - 1
    positions = [first + i for i in range(steps)]
    # the cache each step is fed: none at the first (the prompt, or the start token, whole)
    pasts = [0] + [first + i for i in range(1, steps)] if _with_past(hf) else None
    try:
        got = _onnx_steps(hf, sessions, prompt, start, tokens, empty_past)
    except _OnnxRuntimeFailed as failed:
        return {**unrun, "message": str(failed)}
    # the eager logits are float32 (upcast): a float16 file's compared in that type
    judged = judge_continuation(expected_np, got.astype(expected_np.dtype), positions, rtol,
                                atol, pasts)
    return {"tokens": tokens, "seed": CONTINUATION_SEED, **judged}


def _with_past(hf: Any) -> bool:
    """Whether the files' step loop carries a cache (a file that takes past_key_values)."""
    return any(name.startswith("past_key_values") for part in hf.parts for name in part.inputs)


def judge_continuation(expected: np.ndarray, got: np.ndarray, positions: list[int],
                       rtol: float, atol: float, pasts: list[int] | None = None
                       ) -> dict[str, Any]:
    """The teacher-forced step verdict: eager's and the ONNX logits per step ([steps, vocab]
    each; `positions`: the position each step predicts from; `pasts`: the cache length each
    step was fed, None for files without a cache). Every step's logits within the
    tolerance (|diff| <= atol + rtol*|ref|, as `compare`) and the same top-1 token at every
    step (or, where it differs, two tokens whose PyTorch logits are within the tolerance of
    each other: a tie) pass; the worst step is the one with the largest |diff| (1-based, as
    every step number here)."""
    per_step = []
    for index, (ref, cand) in enumerate(zip(expected, got, strict=True)):
        metrics = compare(ref, cand, rtol, atol)
        torch_top1, onnx_top1 = int(ref.argmax()), int(cand.argmax())
        # another top-1 passes only as a tie: PyTorch's own logits of the two tokens within
        # the tolerance of each other (a file within it may pick either)
        tie = abs(float(ref[onnx_top1]) - float(ref[torch_top1])) <= (
            atol + rtol * abs(float(ref[torch_top1])))
        per_step.append({"step": index + 1, "position": positions[index],
                         **({} if pasts is None else {"past": pasts[index]}),
                         "max_abs_diff": metrics["max_abs_diff"],
                         "max_rel_diff": metrics["max_rel_diff"],
                         "torch_top1": torch_top1, "onnx_top1": onnx_top1,
                         "passed": bool(metrics["passed"] and (torch_top1 == onnx_top1
                                                               or tie))})
    diffs = [s["max_abs_diff"] for s in per_step]
    # a step with no number (NaN or inf where the other side has none) is the worst there is
    worst = max(range(len(diffs)), key=lambda i: math.inf if diffs[i] is None else diffs[i],
                default=None)
    top1 = all(s["torch_top1"] == s["onnx_top1"] for s in per_step)
    failing = next((s["step"] for s in per_step if not s["passed"]), None)
    known_diffs = [d for d in diffs if d is not None]
    rels = [s["max_rel_diff"] for s in per_step if s["max_rel_diff"] is not None]
    message = None
    if failing is not None:
        step = per_step[failing - 1]
        cache = (f" (the cache then holds {step['past']} positions)"
                 if step.get("past") else "")
        if step["torch_top1"] != step["onnx_top1"] and _within(step, expected, got, rtol,
                                                                  atol):
            what = (f"pick token {step['onnx_top1']} where the PyTorch model picks "
                    f"{step['torch_top1']}")
        else:
            what = "give other logits than the PyTorch model"
        worst_step = per_step[worst] if worst is not None else step
        message = (f"Teacher-forced on a fixed random continuation, the ONNX files {what} "
                   f"from step {failing} of {len(per_step)}{cache}; the worst is step "
                   f"{worst_step['step']} (max abs diff {_fmt(worst_step['max_abs_diff'])}).")
    return {"with_past": pasts is not None, "steps": per_step,
            "worst_step": None if worst is None else worst + 1,
            "max_abs_diff": max(known_diffs) if known_diffs else None,
            "max_rel_diff": max(rels) if rels else None,
            "top1_agreed_every_step": top1, "first_failing_step": failing,
            "passed": failing is None and bool(per_step), "message": message}


def _within(step: dict[str, Any], expected: np.ndarray, got: np.ndarray, rtol: float,
            atol: float) -> bool:
    """Whether a step's logits are within the tolerance (its top-1 alone differs)."""
    index = step["step"] - 1
    return bool(compare(expected[index], got[index], rtol, atol)["passed"])


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def _onnx_steps(hf: Any, sessions: dict[str, Any], prompt: dict[str, Any], start: int | None,
                fed: list[int], empty_past: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """The ONNX logits of each step: the prompt, then `fed` one token a step (a decoder from
    `empty_past`, None: made from its part)."""
    if hf.seq2seq:
        assert start is not None
        return _seq2seq_steps(sessions, prompt, start, fed)
    return _decoder_steps(hf, sessions["model.onnx"], prompt["input_ids"].numpy(), fed,
                          empty_past)


class _OnnxRuntimeFailed(Exception):
    """ONNX Runtime could not run a step of the generation loop (the message says which)."""


def judge_steps(expected: np.ndarray, got: np.ndarray, fed: list[int], rtol: float,
                atol: float) -> dict[str, Any]:
    """The generation dict of teacher-forced steps: eager's and the ONNX logits per step
    ([steps, vocab] each), and the tokens both were fed."""
    torch_tokens = [int(t) for t in expected.argmax(-1)]
    onnx_tokens = [int(t) for t in got.argmax(-1)]
    metrics = compare(expected, got, rtol, atol)
    equal = onnx_tokens == torch_tokens
    differs = next((i for i, (a, b) in enumerate(zip(onnx_tokens, torch_tokens, strict=True))
                    if a != b), None)
    message = None
    if differs is not None:
        message = (f"Greedy generation over the ONNX files picks token {onnx_tokens[differs]} "
                   f"at step {differs + 1} of {len(fed)} where the PyTorch model picks "
                   f"{torch_tokens[differs]} (both fed the same tokens).")
    elif not metrics["passed"]:
        message = (f"The ONNX logits differ from the PyTorch model's during greedy "
                   f"generation: {metrics['message']}.")
    return {"steps": len(fed), "tokens_equal": equal, "onnx_tokens": onnx_tokens,
            "torch_tokens": torch_tokens, "fed_tokens": fed, "teacher_forced": True,
            "max_abs_diff": metrics["max_abs_diff"], "max_rel_diff": metrics["max_rel_diff"],
            "passed": message is None, "message": message}


def _feed(session: Any, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The session's inputs taken from `values`; an input the loop cannot make is named."""
    names = [i.name for i in session.get_inputs()]
    missing = [name for name in names if name not in values]
    if missing:
        raise ValueError(f"the generation loop has no value for the input(s) "
                         f"{', '.join(missing)}")
    return {name: values[name] for name in names}


def _run(session: Any, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from onnx_studio.engine.validation.ort_session import ort_message

    names = [o.name for o in session.get_outputs()]
    feed = _feed(session, values)
    try:
        results = session.run(None, feed)
    except Exception as exc:
        sizes = ", ".join(f"{k}{list(v.shape)}" for k, v in feed.items()
                          if not k.startswith("past_key_values"))
        raise _OnnxRuntimeFailed(f"{ONNX_RUNTIME_FAILED} during the generation loop on "
                                 f"{sizes}: {ort_message(exc)}") from exc
    return dict(zip(names, results, strict=True))


def _decoder_steps(hf: Any, session: Any, prompt: np.ndarray, fed: list[int],
                   empty_past: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """The ONNX logits of the next token at each step, the prompt then `fed` given, from
    `empty_past` (None: made from the part)."""
    part = hf.parts[0]
    with_past = any(name.startswith("past_key_values") for name in part.inputs)
    past = _empty_past(part) if empty_past is None else empty_past
    tokens = prompt
    feed_ids = prompt
    logits = []
    for step in range(len(fed)):
        total = tokens.shape[1]
        values: dict[str, np.ndarray] = {"input_ids": feed_ids,
                                         "attention_mask": np.ones((1, total), np.int64),
                                         "token_type_ids": np.zeros_like(feed_ids), **past}
        values["position_ids"] = np.arange(total - feed_ids.shape[1], total,
                                           dtype=np.int64)[None]
        results = _run(session, values)
        logits.append(results["logits"][0, -1])
        tokens = np.concatenate([tokens, [[fed[step]]]], axis=1)
        if with_past:
            past = {n.replace("present", "past_key_values", 1): v
                    for n, v in results.items() if n.startswith("present")}
            feed_ids = np.array([[fed[step]]], np.int64)
        else:
            feed_ids = tokens
    return np.stack(logits)


def _seq2seq_steps(sessions: dict[str, Any], enc_inputs: dict[str, Any], start: int,
                   fed: list[int]) -> np.ndarray:
    """The ONNX decoder's logits at each step, from the start token then `fed` given."""
    enc_feed = {k: v.numpy() for k, v in enc_inputs.items()}
    hidden = next(iter(_run(sessions["encoder_model.onnx"], enc_feed).values()))
    mask = enc_feed.get("attention_mask")
    tokens = np.array([[start]], np.int64)
    decoder = sessions["decoder_model.onnx"]
    with_past = sessions.get("decoder_with_past_model.onnx")
    logits = []
    cross: dict[str, np.ndarray] = {}
    own: dict[str, np.ndarray] = {}
    extra = {} if mask is None else {"encoder_attention_mask": mask}
    for step in range(len(fed)):
        if step == 0 or with_past is None:
            results = _run(decoder, {"input_ids": tokens, "encoder_hidden_states": hidden,
                                     **extra})
            cross = {n.replace("present", "past_key_values", 1): v
                     for n, v in results.items() if ".encoder." in n}
        else:
            results = _run(with_past, {"input_ids": tokens[:, -1:], **own, **cross, **extra})
        own = {n.replace("present", "past_key_values", 1): v for n, v in results.items()
               if ".decoder." in n}
        logits.append(results["logits"][0, -1])
        tokens = np.concatenate([tokens, [[fed[step]]]], axis=1)
    return np.stack(logits)
