"""The files a task exports (Optimum's names), each with example inputs and dynamic axes.

The inputs come from the model (onnx_studio.engine.source.hf.inputs); the model is run once on them
before anything is exported, which picks a spectrogram's layout, names a plain file's outputs (the
tensors its ModelOutput holds) and turns an argument the model misses into a sentence.
"""

from __future__ import annotations

from typing import Any

import torch

from onnx_studio.engine.errors import StudioError, chain_text, one_line
from onnx_studio.engine.source.forward_errors import argument_error
from onnx_studio.engine.source.hf import dummies
from onnx_studio.engine.source.hf.inputs import Plan, main_input, plan
from onnx_studio.engine.source.hf.static import with_static
from onnx_studio.engine.source.hf.wrappers import (
    DecoderWithPast,
    Encoder,
    ExportPart,
    Field,
    Inputs,
    Plain,
    Seq2SeqDecoder,
    Seq2SeqDecoderWithPast,
    past_names,
    returned_cache,
)

BATCH, SEQ, PAST = "batch_size", "sequence_length", "past_sequence_length"
ENC_SEQ = "encoder_sequence_length"


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def export_parts(hf: Any, static: dict[str, int] | None = None) -> list[ExportPart]:
    """The ExportParts of a loaded HfModel for its task; `static` dimensions (name -> size)
    are exported at that size, not dynamic (onnx_studio.engine.source.hf.static)."""
    static = static or {}
    sizes = {**dummies.EXPORT_SIZES, **{k: v for k, v in static.items()
                                         if k in dummies.EXPORT_SIZES}}
    if hf.seq2seq:
        parts = _seq2seq_parts(hf, sizes)
    elif hf.files == "decoder" and hf.with_past:
        parts = [_decoder_with_past(hf, sizes)]
    else:
        parts = [_plain(hf, sizes)]
    return with_static(parts, static) if static else parts


# ---------------------------------------------------------------------------- one run first


def _described(inputs: Inputs) -> str:
    return ", ".join(f"{name}{list(t.shape)}" for name, t in inputs.items())


# a model's own refusal that a config attribute answers, and the option that sets it
_OPTION_HINTS = (
    ("no padding token is defined",
     "Give the config the id its tokenizer pads with: --model-kwarg pad_token_id=N (a recipe's "
     "model.kwargs = { pad_token_id = N }); a classifier reads the last token that is not "
     "padding."),
)


def forward_failure(exc: BaseException, owner: str, inputs: Inputs) -> StudioError:
    """The error of a model that fails on the inputs the studio derived for it: an argument
    error names the argument (kind `inputs`), anything else is the model's own (`model`)."""
    given = _described(inputs)
    found = argument_error(exc)
    if found is not None and found.missing:
        return StudioError(
            "inputs", f"{owner} needs the input {found.name!r}, which the studio did not derive "
            f"from its config and forward() (it gave {given}): {found.message}.",
            f"Choose a task that feeds {found.name} (--task), or export the model through a "
            f"Python file whose factory returns it, giving {found.name} with --input "
            f"{found.name}=SHAPE:DTYPE.", details=chain_text(exc), exit_code=2)
    if found is not None:
        return StudioError(
            "inputs", f"{owner} does not take the input {found.name!r} the studio derived from "
            f"its forward() (it gave {given}): {found.message}.",
            "Choose another task (--task), or export the model through a Python file whose "
            "factory returns it, with the inputs forward() takes (--input).",
            details=chain_text(exc), exit_code=2)
    option = next((hint for words, hint in _OPTION_HINTS if words in str(exc)), "")
    return StudioError(
        "model", f"{owner} fails on the inputs the studio derived from its config ({given}): "
        f"{type(exc).__name__}: {one_line(exc)}.",
        option or "The details hold the model's traceback; a model option (--model-kwarg "
        "NAME=VALUE, a config attribute) or another task (--task) may avoid it.",
        details=chain_text(exc))


def run_once(call: Any, base: Plan, owner: str, batch: int, seq: int) -> tuple[Plan, Any]:
    """(the first variant of `base` the model runs on, what it returned): `call(**inputs)`
    runs it. The first variant's failure is the one reported."""
    first: tuple[BaseException, Inputs] | None = None
    for variant in base.variants():
        inputs = variant.make(0, batch, seq)
        try:
            with torch.no_grad():
                return variant, call(**inputs, **variant.options)
        except Exception as exc:  # the model's own error: reported below if nothing runs
            first = first or (exc, inputs)
    assert first is not None
    raise forward_failure(first[0], owner, first[1]) from None


def output_fields(out: Any) -> tuple[list[Field], list[str]]:
    """(fields, names) of the tensors a forward returned: a ModelOutput's keys in order, a
    tuple's positions (output_N), or the tensor itself (output)."""
    if isinstance(out, torch.Tensor):
        return [None], ["output"]
    if isinstance(out, dict):  # a ModelOutput: the tensors it holds (None fields are absent)
        keys = [k for k, v in out.items() if isinstance(v, torch.Tensor)]
        return list(keys), list(keys)
    if isinstance(out, (tuple, list)):
        positions = [i for i, v in enumerate(out) if isinstance(v, torch.Tensor)]
        return list(positions), [f"output_{i}" for i in positions]
    return [], []


# ---------------------------------------------------------------------------- one file


def _plain(hf: Any, sizes: dict[str, int]) -> ExportPart:
    model, config = hf.model, hf.config
    owner = type(model).__name__
    base = plan(model.forward, main_input(model), config, model=model, owner=owner)
    chosen, out = run_once(model, base, owner, sizes["batch_size"], sizes["sequence_length"])
    fields, names = output_fields(out)
    if {"logits_per_image", "logits_per_text"} <= set(names):  # every text against every image
        chosen = chosen.apart()
    if not fields:
        raise StudioError("model", f"{owner} returns no tensor for the task {hf.task}, so its "
                          "ONNX file would compute nothing.", "Choose another task (--task).")

    def make(seed: int, batch: int, seq: int, past: int) -> Inputs:
        return chosen.make(seed, batch, seq)

    inputs = make(0, sizes["batch_size"], sizes["sequence_length"], 0)
    return ExportPart("model.onnx", Plain(model, chosen.names, fields, chosen.options), inputs,
                      names, chosen.dynamic(), make)


# ---------------------------------------------------------------------------- decoder with past


def _token_ids(model: Any, config: Any, batch: int, seq: int, seed: int) -> torch.Tensor:
    vocab = dummies.vocab_size(config, model)
    if vocab is None:
        raise StudioError("inputs", f"The studio cannot build input_ids for "
                          f"{type(model).__name__}: neither its config nor its embeddings name "
                          "a vocabulary size.", "Set vocab_size with --model-kwarg "
                          "vocab_size=N.", exit_code=2)
    return dummies.TokenIds(vocab).make(batch, seq, _gen(seed))


def eager_past(model: Any, config: Any, seed: int, batch: int, past: int) -> list[torch.Tensor]:
    """A real cache of `past` positions: the flat present of the model run on random tokens
    (an empty cache, sliced from a one-token run, when `past` is 0)."""
    ids = _token_ids(model, config, batch, max(past, 1), seed + 1000)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True)
    try:
        layers = returned_cache(out).layers
    except AttributeError:  # it keeps its state inside (RecurrentGemma) and returns none
        raise _no_key_value_cache(model, f"returns no cache (its output, "
                                  f"{type(out).__name__}, holds none)") from None
    other = sorted({type(layer).__name__ for layer in layers
                    if not (hasattr(layer, "keys") and hasattr(layer, "values"))})
    if other:  # a recurrent state (Mamba's convolution and SSM states), not keys and values
        raise _no_key_value_cache(model, f"keeps a cache of {', '.join(other)} layers, not "
                                  "of keys and values")
    flat = [t for layer in layers for t in (layer.keys, layer.values)]
    return [t[:, :, :past].contiguous() for t in flat]


def _no_key_value_cache(model: Any, what: str) -> StudioError:
    return StudioError(
        "inputs", f"{type(model).__name__} {what}: the studio exports a decoder's cache as "
        "past_key_values inputs and present outputs, which this model does not keep.",
        "Export it without its cache: --task text-generation (in a recipe, the task in "
        "model.kwargs); each step then runs on the whole sequence.", exit_code=2)


def _decoder_with_past(hf: Any, sizes: dict[str, int]) -> ExportPart:
    model, config = hf.model, hf.config
    owner = type(model).__name__

    step = DecoderWithPast(model)
    positions = step.positions  # MPT and Bloom (ALiBi) take none

    def make(seed: int, batch: int, seq: int, past: int) -> Inputs:
        inputs = {"input_ids": _token_ids(model, config, batch, seq, seed),
                  "attention_mask": torch.ones((batch, past + seq), dtype=torch.int64)}
        if positions:
            inputs["position_ids"] = torch.arange(past, past + seq).expand(batch, seq).clone()
        cache = eager_past(model, config, seed, batch, past)  # the layers it really holds
        inputs.update(zip(past_names("past_key_values", len(cache) // 2, False), cache,
                          strict=True))
        return inputs

    batch, past = sizes["batch_size"], sizes["past_sequence_length"]
    try:  # the model's first run (the cache): its failure is the model's or an argument's
        inputs = make(0, batch, sizes["sequence_length"], past)
    except StudioError:
        raise
    except Exception as exc:
        given = {"input_ids": _token_ids(model, config, batch, past, 1000)}  # what it ran on
        raise forward_failure(exc, owner, given) from None
    layers = sum(1 for name in inputs if name.startswith("past_key_values")) // 2
    dynamic: dict[str, dict[int, str]] = {
        "input_ids": {0: BATCH, 1: SEQ}, "attention_mask": {0: BATCH, 1: "total_sequence_length"}}
    if positions:
        dynamic["position_ids"] = {0: BATCH, 1: SEQ}
    for name in past_names("past_key_values", layers, False):
        dynamic[name] = {0: BATCH, 2: PAST}
    outputs = ["logits", *past_names("present", layers, False)]
    return ExportPart("model.onnx", step, inputs, outputs, dynamic, make,
                      _position_bounds(config, SEQ, PAST))


def _position_bounds(config: Any, *dims: str) -> dict[str, int]:
    """Each of `dims` bounded by the model's positions (`max_position_embeddings`): a model
    whose causal mask or position table is that long only exports within it (GPT-Neo)."""
    positions = dummies.find(dummies.text_config(config), "max_position_embeddings")
    return {dim: positions for dim in dims} if isinstance(positions, int) and positions > 1 \
        else {}


# ---------------------------------------------------------------------------- encoder-decoder


def _seq2seq_parts(hf: Any, sizes: dict[str, int]) -> list[ExportPart]:
    model, config = hf.model, hf.config
    owner = type(model).__name__
    encoder_module = model.get_encoder()
    enc_len = sizes["encoder_sequence_length"]
    base = plan(encoder_module.forward, main_input(encoder_module, main_input(model)), config,
                model=model, encoder_only=True, owner=f"the encoder of {owner}", length=ENC_SEQ)
    enc_plan, _ = run_once(encoder_module, base, f"the encoder of {owner}", 1, enc_len)
    with_mask = "attention_mask" in enc_plan.kinds
    # the encoder's output length is free when its main input's is (text; audio of any length)
    enc_dynamic = enc_plan.dynamic()
    free_length = any(axis != 0 for axis in enc_dynamic[enc_plan.names[0]])

    def encode(enc: Inputs) -> torch.Tensor:
        with torch.no_grad():
            return encoder_module(**enc).last_hidden_state

    def decoder_inputs(seed: int, batch: int, seq: int) -> Inputs:
        enc = enc_plan.make(seed, batch, enc_len)
        inputs = {"input_ids": _token_ids(model, config, batch, seq, seed + 7)}
        if with_mask:
            inputs["encoder_attention_mask"] = enc["attention_mask"]
        inputs["encoder_hidden_states"] = encode(enc)
        return inputs

    def make_encoder(seed: int, batch: int, seq: int, past: int) -> Inputs:
        return enc_plan.make(seed, batch, seq)

    def make_decoder(seed: int, batch: int, seq: int, past: int) -> Inputs:
        return decoder_inputs(seed, batch, seq)

    def make_with_past(seed: int, batch: int, seq: int, past: int) -> Inputs:
        first = decoder_inputs(seed, batch, max(past, 1))
        step = Seq2SeqDecoder(model, with_mask)
        with torch.no_grad():
            present = step(*first.values())[1:]
        # one new token a step: the file takes exactly one
        inputs = {"input_ids": _token_ids(model, config, batch, 1, seed + 9)}
        if with_mask:
            inputs["encoder_attention_mask"] = first["encoder_attention_mask"]
        names = past_names("past_key_values", layers, True)
        inputs.update(zip(names, present, strict=True))
        return inputs

    batch, seq = sizes["batch_size"], sizes["sequence_length"]
    try:
        with torch.no_grad():  # the layers the cache really holds: 4 tensors each
            layers = (len(Seq2SeqDecoder(model, with_mask)(*decoder_inputs(0, 1, 1).values()))
                      - 1) // 4
    except StudioError:
        raise
    except Exception as exc:
        raise forward_failure(exc, f"the decoder of {owner}", decoder_inputs(0, 1, 1)) from None
    enc = make_encoder(0, batch, enc_len, 0)
    encoder = ExportPart("encoder_model.onnx", Encoder(model, list(enc)), enc,
                         ["last_hidden_state"], enc_dynamic, make_encoder)
    dec = make_decoder(0, batch, seq, 0)
    dec_dynamic: dict[str, dict[int, str]] = {"input_ids": {0: BATCH, 1: "decoder_sequence_length"},
                                              "encoder_hidden_states": {0: BATCH}}
    if with_mask:
        dec_dynamic["encoder_attention_mask"] = {0: BATCH, 1: ENC_SEQ}
    if free_length:
        dec_dynamic["encoder_hidden_states"][1] = ENC_SEQ
    decoder = ExportPart("decoder_model.onnx", Seq2SeqDecoder(model, with_mask), dec,
                         ["logits", *past_names("present", layers, True)], dec_dynamic,
                         make_decoder)
    parts = [encoder, decoder]
    if hf.with_past:
        past = make_with_past(0, batch, 1, sizes["past_sequence_length"])
        past_dynamic: dict[str, dict[int, str]] = {"input_ids": {0: BATCH}}
        if with_mask:
            past_dynamic["encoder_attention_mask"] = {0: BATCH, 1: ENC_SEQ}
        for name in past_names("past_key_values", layers, True):
            if ".decoder." in name:
                past_dynamic[name] = {0: BATCH, 2: "past_decoder_sequence_length"}
            else:  # the encoder's length, free or fixed by the model
                past_dynamic[name] = {0: BATCH, 2: ENC_SEQ} if free_length else {0: BATCH}
        own = [n for n in past_names("present", layers, True) if ".decoder." in n]
        parts.append(ExportPart("decoder_with_past_model.onnx",
                                Seq2SeqDecoderWithPast(model, with_mask), past,
                                ["logits", *own], past_dynamic, make_with_past))
    return parts
