"""The files a task exports (Optimum's names), each with example inputs and dynamic axes."""

from __future__ import annotations

import inspect
from typing import Any

import torch

from engine.source.hf import dummies
from engine.source.hf.wrappers import (
    DecoderWithPast,
    Encoder,
    ExportPart,
    Inputs,
    Plain,
    Seq2SeqDecoder,
    Seq2SeqDecoderWithPast,
    past_names,
)

_OUTPUTS = {"feature-extraction": ["last_hidden_state"], "text-classification": ["logits"],
            "image-classification": ["logits"], "text-generation": ["logits"]}
BATCH, SEQ, PAST = "batch_size", "sequence_length", "past_sequence_length"


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _forward_params(model: Any) -> set[str]:
    return set(inspect.signature(model.forward).parameters)


def export_parts(hf: Any) -> list[ExportPart]:
    """The ExportParts of a loaded HfModel for its task."""
    if hf.seq2seq:
        return _seq2seq_parts(hf)
    if hf.with_past:
        return [_decoder_with_past(hf)]
    return [_plain(hf)]


def _text_inputs(model: Any, config: Any, seed: int, batch: int, seq: int) -> Inputs:
    g = _gen(seed)
    inputs = {"input_ids": dummies.token_ids(config, batch, seq, g),
              "attention_mask": torch.ones((batch, seq), dtype=torch.int64)}
    if "token_type_ids" in _forward_params(model) and bool(getattr(config, "type_vocab_size", 0)):
        inputs["token_type_ids"] = torch.zeros((batch, seq), dtype=torch.int64)
    return inputs


def _plain(hf: Any) -> ExportPart:
    model, config = hf.model, hf.config

    def make(seed: int, batch: int, seq: int, past: int) -> Inputs:
        if hf.task == "image-classification":
            return {"pixel_values": dummies.pixel_values(config, batch, _gen(seed))}
        return _text_inputs(model, config, seed, batch, seq)

    sizes = dummies.EXPORT_SIZES
    inputs = make(0, sizes["batch_size"], sizes["sequence_length"], 0)
    dynamic = {name: ({0: BATCH} if name == "pixel_values" else {0: BATCH, 1: SEQ})
               for name in inputs}
    fields = _OUTPUTS[hf.task]
    return ExportPart("model.onnx", Plain(model, list(inputs), fields), inputs, fields, dynamic,
                      make)


def eager_past(model: Any, config: Any, seed: int, batch: int, past: int) -> list[torch.Tensor]:
    """A real cache of `past` positions: the flat present of the model run on random tokens
    (an empty cache, sliced from a one-token run, when `past` is 0)."""
    ids = dummies.token_ids(config, batch, max(past, 1), _gen(seed + 1000))
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True)
    flat = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
    return [t[:, :, :past].contiguous() for t in flat]


def _decoder_with_past(hf: Any) -> ExportPart:
    model, config = hf.model, hf.config
    layers = len(eager_past(model, config, 0, 1, 1)) // 2  # what the cache really holds

    def make(seed: int, batch: int, seq: int, past: int) -> Inputs:
        inputs = {"input_ids": dummies.token_ids(config, batch, seq, _gen(seed)),
                  "attention_mask": torch.ones((batch, past + seq), dtype=torch.int64),
                  "position_ids": torch.arange(past, past + seq).expand(batch, seq).clone()}
        names = past_names("past_key_values", layers, False)
        inputs.update(zip(names, eager_past(model, config, seed, batch, past), strict=True))
        return inputs

    sizes = dummies.EXPORT_SIZES
    inputs = make(0, sizes["batch_size"], sizes["sequence_length"], sizes["past_sequence_length"])
    dynamic: dict[str, dict[int, str]] = {
        "input_ids": {0: BATCH, 1: SEQ}, "attention_mask": {0: BATCH, 1: "total_sequence_length"},
        "position_ids": {0: BATCH, 1: SEQ}}
    for name in past_names("past_key_values", layers, False):
        dynamic[name] = {0: BATCH, 2: PAST}
    outputs = ["logits", *past_names("present", layers, False)]
    return ExportPart("model.onnx", DecoderWithPast(model), inputs, outputs, dynamic, make)


def _seq2seq_parts(hf: Any) -> list[ExportPart]:
    model, config = hf.model, hf.config
    speech = "input_features" in _forward_params(model)
    sizes = dummies.EXPORT_SIZES
    enc_len = sizes["encoder_sequence_length"]

    def encoder_inputs(seed: int, batch: int) -> Inputs:
        if speech:
            return {"input_features": dummies.input_features(config, batch, _gen(seed))}
        return _text_inputs(model, config, seed, batch, enc_len)

    def encode(enc: Inputs) -> torch.Tensor:
        with torch.no_grad():
            return model.get_encoder()(**enc).last_hidden_state

    def decoder_inputs(seed: int, batch: int, seq: int) -> Inputs:
        enc = encoder_inputs(seed, batch)
        inputs = {"input_ids": dummies.token_ids(config, batch, seq, _gen(seed + 7))}
        if not speech:
            inputs["encoder_attention_mask"] = enc["attention_mask"]
        inputs["encoder_hidden_states"] = encode(enc)
        return inputs

    def make_encoder(seed: int, batch: int, seq: int, past: int) -> Inputs:
        return encoder_inputs(seed, batch)

    def make_decoder(seed: int, batch: int, seq: int, past: int) -> Inputs:
        return decoder_inputs(seed, batch, seq)

    def make_with_past(seed: int, batch: int, seq: int, past: int) -> Inputs:
        first = decoder_inputs(seed, batch, max(past, 1))
        step = Seq2SeqDecoder(model, not speech)
        with torch.no_grad():
            present = step(*first.values())[1:]
        # one new token a step: the file takes exactly one
        inputs = {"input_ids": dummies.token_ids(config, batch, 1, _gen(seed + 9))}
        if not speech:
            inputs["encoder_attention_mask"] = first["encoder_attention_mask"]
        names = past_names("past_key_values", layers, True)
        inputs.update(zip(names, present, strict=True))
        return inputs

    batch, seq = sizes["batch_size"], sizes["sequence_length"]
    with torch.no_grad():  # the layers the cache really holds: 4 tensors each
        layers = (len(Seq2SeqDecoder(model, not speech)(*decoder_inputs(0, 1, 1).values()))
                  - 1) // 4
    enc = make_encoder(0, batch, seq, 0)
    enc_dynamic = {name: ({0: BATCH} if speech else {0: BATCH, 1: "encoder_sequence_length"})
                   for name in enc}
    encoder = ExportPart("encoder_model.onnx", Encoder(model, list(enc)), enc,
                         ["last_hidden_state"], enc_dynamic, make_encoder)
    dec = make_decoder(0, batch, seq, 0)
    dec_dynamic: dict[str, dict[int, str]] = {"input_ids": {0: BATCH, 1: "decoder_sequence_length"},
                                              "encoder_hidden_states": {0: BATCH}}
    if not speech:
        dec_dynamic["encoder_attention_mask"] = {0: BATCH, 1: "encoder_sequence_length"}
        dec_dynamic["encoder_hidden_states"][1] = "encoder_sequence_length"
    decoder = ExportPart("decoder_model.onnx", Seq2SeqDecoder(model, not speech), dec,
                         ["logits", *past_names("present", layers, True)], dec_dynamic,
                         make_decoder)
    parts = [encoder, decoder]
    if hf.with_past:
        past = make_with_past(0, batch, 1, sizes["past_sequence_length"])
        past_dynamic: dict[str, dict[int, str]] = {"input_ids": {0: BATCH}}
        if not speech:
            past_dynamic["encoder_attention_mask"] = {0: BATCH, 1: "encoder_sequence_length"}
        for name in past_names("past_key_values", layers, True):
            if ".decoder." in name:
                past_dynamic[name] = {0: BATCH, 2: "past_decoder_sequence_length"}
            else:  # a speech encoder's length is fixed by the model
                past_dynamic[name] = {0: BATCH} if speech else {0: BATCH,
                                                                2: "encoder_sequence_length"}
        own = [n for n in past_names("present", layers, True) if ".decoder." in n]
        parts.append(ExportPart("decoder_with_past_model.onnx",
                                Seq2SeqDecoderWithPast(model, not speech), past,
                                ["logits", *own], past_dynamic, make_with_past))
    return parts
