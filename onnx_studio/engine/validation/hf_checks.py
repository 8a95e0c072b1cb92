"""Validate a Hugging Face export: each file against eager PyTorch at several sizes (an empty
and a non-empty cache for files with past), and greedy generation over the files against
transformers' `generate(do_sample=False)`, compared teacher-forced step by step."""

from __future__ import annotations

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
    if generation and not generation.get("passed", True):
        return ("Every file agrees with PyTorch at the sizes tried, yet greedy generation "
                "over them drifts: compare the tokens step by step (Generation); the step "
                "named is the first whose logits differ.")
    return ""


def validate_hf(hf: Any, folder: Path, rtol: float, atol: float,
                events: Events, release: bool = False) -> dict[str, Any]:
    """The validation dict of a Hugging Face export: every file against eager PyTorch, then
    (generation tasks) greedy generation over the files; failed when either fails.

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
        events.progress(0.7, "Generating greedy tokens")
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
    """Greedy generation judged teacher-forced: transformers' generate picks `steps` tokens
    on a prompt; the ONNX files are fed the same tokens, step by step, and at every step the
    ONNX logits' argmax must equal the eager model's (generate's raw logits), and the logits
    agree within rtol/atol.

    Both sides see the same tokens, so generate's stopping and forced-token rules (end
    token, forced BOS/EOS, suppressed tokens) choose what is fed, never what is compared: a
    correct file passes whatever its generation config says, and a wrong one differs in its
    logits at some step.
    """
    reference = reference or generation_reference(hf, steps)
    expected, fed, prompt = reference.expected, reference.fed, reference.prompt
    sessions = {part.file: _session(folder / part.file) for part in hf.parts}
    try:
        if hf.seq2seq:
            assert reference.enc_inputs is not None
            got = _seq2seq_steps(sessions, reference.enc_inputs, reference.start, fed)
        else:
            got = _decoder_steps(hf, sessions["model.onnx"], prompt.numpy(), fed,
                                 reference.empty_past)
    except _OnnxRuntimeFailed as failed:  # e.g. a file whose sequence length was fixed
        return {"steps": len(fed), "tokens_equal": False, "onnx_tokens": [],
                "torch_tokens": [int(t) for t in expected.argmax(-1)], "fed_tokens": fed,
                "teacher_forced": True, "passed": False, "message": str(failed)}
    # generate's raw logits may be upcast (float32 of a float16 model): compared in its type
    judged = judge_steps(expected, got.astype(expected.dtype), fed, rtol, atol)
    judged["prompt_tokens"] = None if hf.seq2seq else [int(t) for t in prompt[0]]
    return judged


def generation_reference(hf: Any, steps: int) -> GenerationReference:
    """transformers' greedy generate of `steps` tokens on a prompt (the encoder's inputs of
    an encoder-decoder), with what the ONNX loop needs to replay it without the model."""
    import torch
    from transformers import GenerationMixin

    model = hf.model
    config = _generation_config(model, steps)
    enc_inputs = prompt = None
    start = 0
    with torch.no_grad():
        if hf.seq2seq:
            enc_inputs = hf.parts[0].make_inputs(21, 1, PROMPT_LENGTH, 0)
            # GenerationMixin's own greedy loop: Whisper's override adds its language and
            # timestamp logic, which the ONNX loop does not model
            ref = GenerationMixin.generate(model, **enc_inputs, generation_config=config)
            start = int(ref.sequences[0, 0])
            fed = [int(t) for t in ref.sequences[0, 1:]]
        else:
            prompt = hf.parts[0].make_inputs(21, 1, PROMPT_LENGTH, 0)["input_ids"]
            ref = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt),
                                 generation_config=config)
            fed = [int(t) for t in ref.sequences[0, prompt.shape[1]:]]
    expected = np.stack([logits[0].float().numpy() for logits in ref.logits])
    return GenerationReference(expected, fed[:len(expected)], prompt, enc_inputs, start,
                               None if hf.seq2seq else _empty_past(hf.parts[0]))


def _empty_past(part: Any) -> dict[str, np.ndarray]:
    """The empty cache the decoder loop starts from (none for a file without past)."""
    if not any(name.startswith("past_key_values") for name in part.inputs):
        return {}
    empty = part.make_inputs(0, 1, 1, 0)
    return {k: v.numpy() for k, v in empty.items() if k.startswith("past_key_values")}


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
        raise _OnnxRuntimeFailed(f"{ONNX_RUNTIME_FAILED} during greedy generation on "
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
