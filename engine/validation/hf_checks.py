"""Validate a Hugging Face export: each file against eager PyTorch at several sizes (an empty
and a non-empty cache for files with past), and greedy generation over the files against
transformers' `generate(do_sample=False)`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from engine.events import Events
from engine.validation.metrics import compare, worst

GENERATION_STEPS = 20
PROMPT_LENGTH = 5

# (kind, batch, sequence, past): past 0 is the empty cache
_TRIALS = (("past-empty", 1, 4, 0), ("past-nonempty", 3, 2, 6))
_PLAIN_TRIALS = (("dynamic-size", 3, 7, 0),)


def _session(path: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _eager(part: Any, inputs: dict[str, Any]) -> list[np.ndarray]:
    import torch

    with torch.no_grad():
        out = part.module(*inputs.values())
    out = out if isinstance(out, tuple) else (out,)
    return [t.detach().cpu().numpy() for t in out]


def check_parts(hf: Any, folder: Path, rtol: float, atol: float,
                events: Events) -> dict[str, Any]:
    """The validation dict (engine.protocol Validation's fields) of every exported part."""
    trials: list[dict[str, Any]] = []
    per_output: dict[str, list[dict[str, Any]]] = {}
    many = len(hf.parts) > 1
    for index, part in enumerate(hf.parts):
        events.progress(index / max(len(hf.parts), 1), f"Validating {part.file}")
        session = _session(folder / part.file)
        has_past = any(name.startswith("past_key_values") for name in part.inputs)
        sizes = [("export-inputs", None)] + [
            (kind, (b, s, p)) for kind, b, s, p in (_TRIALS if has_past else _PLAIN_TRIALS)]
        for kind, size in sizes:
            started = time.perf_counter()
            inputs = part.inputs if size is None else part.make_inputs(11, *size)
            reference = _eager(part, inputs)
            got = session.run(part.output_names, {k: v.cpu().numpy() for k, v in inputs.items()})
            outputs = []
            for name, ref, cand in zip(part.output_names, reference, got, strict=True):
                metrics = {"name": f"{Path(part.file).stem}/{name}" if many else name,
                           **compare(ref, cand, rtol, atol)}
                outputs.append(metrics)
                per_output.setdefault(metrics["name"], []).append(metrics)
            trial: dict[str, Any] = {"kind": kind, "ok": all(m["passed"] for m in outputs),
                                     "outputs": outputs,
                                     "seconds": time.perf_counter() - started}
            if size is not None:
                trial["sizes"] = _sizes(inputs)
            if many:
                trial["message"] = part.file
            trials.append(trial)
    outputs = [{"name": name, "trials": len(found), **worst(found)}
               for name, found in per_output.items()]
    ok = all(t["ok"] for t in trials)
    failed = [o["name"] for o in outputs if not o["passed"]]
    return {"ok": ok, "rtol": rtol, "atol": atol, "outputs": outputs, "trials": trials,
            "message": None if ok else f"ONNX Runtime disagrees with PyTorch on "
                                       f"{', '.join(failed[:3])}."}


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
    from transformers import GenerationConfig

    start = getattr(model.config, "decoder_start_token_id", None)
    return GenerationConfig(max_new_tokens=steps, min_new_tokens=0, do_sample=False,
                            num_beams=1, eos_token_id=None, pad_token_id=0,
                            decoder_start_token_id=start, bos_token_id=None)


def check_generation(hf: Any, folder: Path, steps: int = GENERATION_STEPS) -> dict[str, Any]:
    """`steps` greedy tokens from a loop over the ONNX files beside transformers' generate."""
    import torch
    from transformers import GenerationMixin

    sessions = {part.file: _session(folder / part.file) for part in hf.parts}
    model = hf.model
    if hf.seq2seq:
        encoder = hf.parts[0]
        enc_inputs = encoder.make_inputs(21, 1, PROMPT_LENGTH, 0)
        with torch.no_grad():
            # GenerationMixin's own greedy loop: Whisper's override adds its language and
            # timestamp logic, which the ONNX loop does not model
            ref = GenerationMixin.generate(model, **enc_inputs,
                                           generation_config=_generation_config(model, steps))
        torch_tokens = [int(t) for t in ref[0, 1:]]
        onnx_tokens = _seq2seq_loop(hf, sessions, enc_inputs, steps)
    else:
        prompt = hf.parts[0].make_inputs(21, 1, PROMPT_LENGTH, 0)["input_ids"]
        with torch.no_grad():
            ref = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt),
                                 generation_config=_generation_config(model, steps))
        torch_tokens = [int(t) for t in ref[0, PROMPT_LENGTH:]]
        onnx_tokens = _decoder_loop(hf, sessions["model.onnx"], prompt.numpy(), steps)
    return {"steps": steps, "tokens_equal": onnx_tokens == torch_tokens,
            "onnx_tokens": onnx_tokens, "torch_tokens": torch_tokens}


def _decoder_loop(hf: Any, session: Any, prompt: np.ndarray, steps: int) -> list[int]:
    part = hf.parts[0]
    with_past = any(name.startswith("past_key_values") for name in part.inputs)
    tokens = prompt
    past: dict[str, np.ndarray] = {}
    if with_past:
        empty = part.make_inputs(0, 1, 1, 0)
        past = {k: v.numpy() for k, v in empty.items() if k.startswith("past_key_values")}
    out_tokens: list[int] = []
    feed_ids = tokens
    for _ in range(steps):
        total = tokens.shape[1]
        feed: dict[str, np.ndarray] = {"input_ids": feed_ids,
                                       "attention_mask": np.ones((1, total), np.int64)}
        if with_past:
            seq = feed_ids.shape[1]
            feed["position_ids"] = np.arange(total - seq, total, dtype=np.int64)[None]
            feed.update(past)
        elif "token_type_ids" in part.inputs:
            feed["token_type_ids"] = np.zeros_like(feed_ids)
        names = [o.name for o in session.get_outputs()]
        results = dict(zip(names, session.run(None, feed), strict=True))
        token = int(results["logits"][0, -1].argmax())
        out_tokens.append(token)
        tokens = np.concatenate([tokens, [[token]]], axis=1)
        if with_past:
            past = {n.replace("present", "past_key_values", 1): v
                    for n, v in results.items() if n.startswith("present")}
            feed_ids = np.array([[token]], np.int64)
        else:
            feed_ids = tokens
    return out_tokens


def _seq2seq_loop(hf: Any, sessions: dict[str, Any], enc_inputs: dict[str, Any],
                  steps: int) -> list[int]:
    enc_feed = {k: v.numpy() for k, v in enc_inputs.items()}
    hidden = sessions["encoder_model.onnx"].run(None, enc_feed)[0]
    mask = enc_feed.get("attention_mask")
    start = int(hf.config.decoder_start_token_id)
    tokens = np.array([[start]], np.int64)
    decoder = sessions["decoder_model.onnx"]
    with_past = sessions.get("decoder_with_past_model.onnx")
    out_tokens: list[int] = []
    cross: dict[str, np.ndarray] = {}
    own: dict[str, np.ndarray] = {}
    for step in range(steps):
        if step == 0 or with_past is None:
            feed = {"input_ids": tokens, "encoder_hidden_states": hidden}
            if mask is not None:
                feed["encoder_attention_mask"] = mask
            names = [o.name for o in decoder.get_outputs()]
            results = dict(zip(names, decoder.run(None, feed), strict=True))
            cross = {n.replace("present", "past_key_values", 1): v for n, v in results.items()
                     if ".encoder." in n}
        else:
            feed = {"input_ids": tokens[:, -1:], **own, **cross}
            if mask is not None:
                feed["encoder_attention_mask"] = mask
            names = [o.name for o in with_past.get_outputs()]
            results = dict(zip(names, with_past.run(None, feed), strict=True))
        own = {n.replace("present", "past_key_values", 1): v for n, v in results.items()
               if ".decoder." in n}
        token = int(results["logits"][0, -1].argmax())
        out_tokens.append(token)
        tokens = np.concatenate([tokens, [[token]]], axis=1)
    return out_tokens
