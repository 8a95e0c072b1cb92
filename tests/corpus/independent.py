"""A check of an exported Hugging Face folder that does not trust the studio: every file in ONNX
Runtime against eager PyTorch, at a batch and lengths the export and its validation never used.

Written apart from the engine on purpose (no engine import): the eager model is loaded with
transformers' own Auto class for the task, the inputs are made here from the files' input
names, and the cache path is checked against one forward over the whole sequence without a
cache (a decoder's prompt, then its continuation fed the prompt's `present`; a seq2seq
decoder's first tokens, then one more through `decoder_with_past_model.onnx`). The decoder's
prompt is longer than the corpus's sliding windows, so those are crossed here too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

BATCH = 3            # the export uses 2
SEQUENCE = 7         # the export uses 5 (an encoder's, a seq2seq encoder's)
PROMPT, MORE = 9, 3  # a decoder's prompt and continuation: 12 positions, past windows of 8
DECODER = 4          # a seq2seq decoder's tokens: 3 through decoder_model, 1 with past
AUDIO_SAMPLES = 1200
RTOL, ATOL = 1e-3, 1e-4
# a compared output must vary by more than this, or the comparison proves nothing
SPREAD = 1e-3

# Optimum's task names -> the transformers Auto class that loads the model for it
TASK_AUTO = {
    "feature-extraction": "AutoModel",
    "image-feature-extraction": "AutoModel",
    "text-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
    "fill-mask": "AutoModelForMaskedLM",
    "question-answering": "AutoModelForQuestionAnswering",
    "multiple-choice": "AutoModelForMultipleChoice",
    "text-generation": "AutoModelForCausalLM",
    "text-generation-with-past": "AutoModelForCausalLM",
    "text2text-generation": "AutoModelForSeq2SeqLM",
    "text2text-generation-with-past": "AutoModelForSeq2SeqLM",
    "image-classification": "AutoModelForImageClassification",
    "semantic-segmentation": "AutoModelForSemanticSegmentation",
    "object-detection": "AutoModelForObjectDetection",
    "depth-estimation": "AutoModelForDepthEstimation",
    "zero-shot-image-classification": "AutoModelForZeroShotImageClassification",
    "audio-classification": "AutoModelForAudioClassification",
    "automatic-speech-recognition": "AutoModelForCTC",
    "automatic-speech-recognition-with-past": "AutoModelForSpeechSeq2Seq",
}


def static_dims(args: list[str]) -> dict[str, int]:
    """The sizes a command line asked the export to fix (--static-dim DIM=SIZE)."""
    pairs = [args[i + 1].partition("=") for i, a in enumerate(args[:-1]) if a == "--static-dim"]
    return {name: int(size) for name, _, size in pairs}


def check_folder(source: Path, folder: Path, task: str, files: list[str],
                 static: dict[str, int] | None = None) -> list[str]:
    """What disagrees (one sentence each; empty: every file agrees with eager PyTorch).
    `static`: the sizes the export was asked to fix (--static-dim: batch_size,
    sequence_length), used instead of this check's own for a single-file model; no other
    axis is taken from the file, so a size the export fixed unasked still fails here."""
    import torch
    import transformers

    auto = TASK_AUTO.get(task)
    if auto is None:
        return [f"the independent check does not know the task {task!r}: add it to TASK_AUTO"]
    if task == "automatic-speech-recognition" and "encoder_model.onnx" in files:
        auto = "AutoModelForSpeechSeq2Seq"
    torch.manual_seed(0)
    model = getattr(transformers, auto).from_pretrained(str(source)).eval()
    sessions = {name: _session(folder / name) for name in files}
    try:
        with torch.no_grad():
            if "encoder_model.onnx" in sessions:
                return _seq2seq(model, sessions)
            session = sessions["model.onnx"]
            if any(i.name.startswith("past_key_values") for i in session.get_inputs()):
                if static:
                    return [f"the independent check fixes no decoder size ({static})"]
                return _decoder(model, session)
            static = static or {}
            return _plain(model, session, static.get("batch_size", BATCH),
                          static.get("sequence_length", SEQUENCE))
    except Exception as exc:  # ONNX Runtime refusing these sizes is a finding, not a crash
        return [f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"]


def _session(path: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _vocab(config: Any) -> int:
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    return int(text.vocab_size)


def _ids(config: Any, batch: int, length: int, seed: int) -> np.ndarray:
    vocab = _vocab(config)
    return np.random.default_rng(seed).integers(3 if vocab > 8 else 0, vocab, (batch, length))


def _fixed(session_input: Any, axis: int, default: int) -> int:
    dim = session_input.shape[axis]
    return dim if isinstance(dim, int) and dim > 0 else default


def _inputs(model: Any, session: Any, batch: int, length: int) -> dict[str, np.ndarray]:
    """Inputs for every input of a plain file, by name: texts and audio at other lengths than
    the export's (a file that fixed one fails here); images and spectrograms at the size the
    model is built for."""
    config = model.config
    rng = np.random.default_rng(5)
    out: dict[str, np.ndarray] = {}
    for item in session.get_inputs():
        name = item.name
        if name in ("input_ids", "decoder_input_ids"):
            out[name] = _ids(config, batch, length, 7)
        elif name == "attention_mask":
            out[name] = np.ones((batch, length), np.int64)
        elif name == "token_type_ids":
            out[name] = np.zeros((batch, length), np.int64)
        elif name == "position_ids":
            out[name] = np.tile(np.arange(length), (batch, 1))
        elif name == "pixel_values":
            vision = getattr(config, "vision_config", None) or config
            size = getattr(vision, "image_size", 32)
            size = size if isinstance(size, int) else size[0]
            shape = [batch] + [_fixed(item, axis, d) for axis, d in
                               ((1, getattr(vision, "num_channels", 3)), (2, size), (3, size))]
            out[name] = rng.standard_normal(shape).astype(np.float32)
        elif name == "input_values" and len(item.shape) == 3:  # a spectrogram (AST)
            shape = [batch] + [_fixed(item, axis, 0) for axis in (1, 2)]
            if 0 in shape:
                raise ValueError(f"input_values has no fixed size: {item.shape}")
            out[name] = rng.standard_normal(shape).astype(np.float32)
        elif name == "input_values":
            out[name] = rng.standard_normal((batch, AUDIO_SAMPLES)).astype(np.float32)
        elif name == "input_features":
            shape = [batch] + [_fixed(item, axis, 0) for axis in (1, 2)]
            if 0 in shape:
                raise ValueError(f"input_features has no fixed size: {item.shape}")
            out[name] = rng.standard_normal(shape).astype(np.float32)
        else:
            raise ValueError(f"the independent check cannot make the input {name!r}")
    return out


def _torch(arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    import torch

    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}


def _compare(label: str, expected: Any, got: np.ndarray) -> list[str]:
    ref = expected.detach().float().numpy() if hasattr(expected, "detach") else expected
    if ref.shape != got.shape:
        return [f"{label}: shape {list(got.shape)} from ONNX Runtime, {list(ref.shape)} from "
                "PyTorch"]
    worst = float(np.max(np.abs(got - ref) - RTOL * np.abs(ref))) if ref.size else 0.0
    if worst > ATOL:
        return [f"{label}: differs by up to {float(np.max(np.abs(got - ref))):.3g}"]
    return []


def _teeth(label: str, *arrays: Any) -> list[str]:
    """A comparison proves something only when the reference varies."""
    values = np.concatenate([np.ravel(a.detach().float().numpy() if hasattr(a, "detach")
                                      else a) for a in arrays])
    spread = float(values.max() - values.min()) if values.size else 0.0
    return [] if spread > SPREAD else [
        f"{label} barely varies (spread {spread:.3g}): this check cannot tell a right file "
        "from a wrong one"]


def _plain(model: Any, session: Any, batch: int, length: int) -> list[str]:
    inputs = _inputs(model, session, batch, length)
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs),
                   strict=True))
    eager = model(**_torch(inputs))
    problems = []
    for name, value in got.items():
        if name not in eager or eager[name] is None:
            problems.append(f"{name}: PyTorch returns no such output")
            continue
        problems += _compare(f"model.onnx {name} at batch {batch}", eager[name], value)
    first = next(iter(got))
    if first in eager:
        problems += _teeth(f"model.onnx {first}", eager[first])
    return problems


def _empty_past(session: Any, batch: int) -> dict[str, np.ndarray]:
    out = {}
    for item in session.get_inputs():
        if item.name.startswith("past_key_values"):
            shape = [batch, _fixed(item, 1, -1), 0, _fixed(item, 3, -1)]
            if -1 in shape:
                raise ValueError(f"{item.name} has no fixed heads or head size: {item.shape}")
            out[item.name] = np.zeros(shape, np.float32)
    return out


def _presents(results: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {n.replace("present", "past_key_values", 1): v for n, v in results.items()
            if n.startswith("present")}


def _run(session: Any, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    feed = {i.name: values[i.name] for i in session.get_inputs()}
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feed), strict=True))


def _decoder(model: Any, session: Any) -> list[str]:
    """The prompt with an empty cache, then the continuation fed its present, against one
    forward over the whole sequence."""
    total = PROMPT + MORE
    ids = _ids(model.config, BATCH, total, 11)
    eager = model(**_torch({"input_ids": ids, "attention_mask": np.ones_like(ids)})).logits
    positions = np.tile(np.arange(total), (BATCH, 1))
    first = _run(session, {"input_ids": ids[:, :PROMPT],
                           "attention_mask": np.ones((BATCH, PROMPT), np.int64),
                           "position_ids": positions[:, :PROMPT],
                           "token_type_ids": np.zeros((BATCH, PROMPT), np.int64),
                           **_empty_past(session, BATCH)})
    then = _run(session, {"input_ids": ids[:, PROMPT:],
                          "attention_mask": np.ones((BATCH, total), np.int64),
                          "position_ids": positions[:, PROMPT:],
                          "token_type_ids": np.zeros((BATCH, MORE), np.int64),
                          **_presents(first)})
    return (_compare(f"logits of a {PROMPT}-token prompt at batch {BATCH}",
                     eager[:, :PROMPT], first["logits"])
            + _compare(f"logits of {MORE} more tokens with the cache", eager[:, PROMPT:],
                       then["logits"])
            + _teeth("logits", eager))


def _seq2seq(model: Any, sessions: dict[str, Any]) -> list[str]:
    """Encoder, the first decoder tokens, one more with the cache, against one forward of
    the whole model."""
    encoder = sessions["encoder_model.onnx"]
    enc = _inputs(model, encoder, BATCH, SEQUENCE)
    dec = _ids(model.config, BATCH, DECODER, 13)
    eager = model(**_torch(enc), decoder_input_ids=_torch({"d": dec})["d"])
    hidden = next(iter(_run(encoder, enc).values()))
    problems = _compare("encoder_model.onnx last_hidden_state", eager.encoder_last_hidden_state,
                        hidden)
    common = {"encoder_hidden_states": hidden}
    if "attention_mask" in enc:
        common["encoder_attention_mask"] = enc["attention_mask"]
    first = _run(sessions["decoder_model.onnx"], {"input_ids": dec[:, :-1], **common})
    problems += _compare("decoder_model.onnx logits", eager.logits[:, :-1], first["logits"])
    with_past = sessions.get("decoder_with_past_model.onnx")
    if with_past is not None:
        then = _run(with_past, {"input_ids": dec[:, -1:], **common, **_presents(first)})
        problems += _compare("decoder_with_past_model.onnx logits", eager.logits[:, -1:],
                             then["logits"])
    return problems + _teeth("logits", eager.logits)
