"""Modules that export: a Hugging Face model behind flat tensor inputs and outputs.

The cache travels as flat tensors (`past_key_values.N.key` ... in, `present.N.key` ... out);
each wrapper builds transformers' cache object inside forward, since the exporter does not
take the cache class as an input. Names follow Optimum's convention.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

Inputs = dict[str, torch.Tensor]


@dataclass
class ExportPart:
    """One ONNX file: the module, its inputs by name (in forward order), its output names,
    each input's dynamic axes (axis -> dimension name), a maker of inputs at other sizes, and
    the largest size the model allows a dimension (its positions: max_position_embeddings)."""

    file: str
    module: nn.Module
    inputs: Inputs
    output_names: list[str]
    dynamic: dict[str, dict[int, str]]
    make_inputs: Callable[[int, int, int, int], Inputs]  # (seed, batch, sequence, past)
    bounds: dict[str, int] = field(default_factory=dict)  # dimension name -> its maximum


def _cache_tensors(cache: Any) -> list[torch.Tensor]:
    """key0, value0, key1, value1, ... of a DynamicCache."""
    flat: list[torch.Tensor] = []
    for layer in cache.layers:
        flat += [layer.keys, layer.values]
    return flat


def _cache_of(flat: tuple[torch.Tensor, ...]) -> Any:
    from transformers import DynamicCache

    return DynamicCache([(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)])


Field = str | int | None  # a ModelOutput key, a tuple index, or None: the output itself


class Plain(nn.Module):
    """The model called with keyword inputs (and constant `options`, e.g. use_cache=False),
    returning the given fields of its output (onnx_studio.engine.source.hf.parts.output_fields)."""

    def __init__(self, model: nn.Module, keys: list[str], fields: list[Field],
                 options: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.model, self.keys, self.fields = model, keys, fields
        self.options = dict(options or {})

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model(**dict(zip(self.keys, tensors, strict=True)), **self.options)
        return tuple(out if name is None else out[name] for name in self.fields)


def returned_cache(out: Any) -> Any:
    """The key/value cache a forward returned: `cache` (transformers 5.24 on), else
    `past_key_values`."""
    cache = getattr(out, "cache", None) if "cache" in getattr(out, "__dataclass_fields__", {}) \
        else None
    return cache if cache is not None else out.past_key_values


def cache_argument(model: nn.Module) -> str:
    """The name forward() takes the key/value cache by: `cache` (transformers 5.24 on), else
    `past_key_values`."""
    return "cache" if takes(model, "cache") else "past_key_values"


def takes(model: Any, name: str) -> bool:
    """Whether the forward() of `model` (an instance or a class) names the argument `name`
    (one it would only find in **kwargs does not count: MPT and Bloom place tokens by ALiBi
    and take no `position_ids`)."""
    import inspect

    return name in inspect.signature(model.forward).parameters


class DecoderWithPast(nn.Module):
    """A causal LM step: (input_ids, attention_mask, position_ids, past...) ->
    (logits, present...); without position_ids for a model whose forward() takes none."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.cache_name = cache_argument(model)
        self.positions = takes(model, "position_ids")

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                *rest: torch.Tensor) -> tuple[torch.Tensor, ...]:
        given = {"position_ids": rest[0]} if self.positions else {}
        past = rest[1:] if self.positions else rest
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=True,
                         **given, **{self.cache_name: _cache_of(past)})
        return (out.logits, *_cache_tensors(returned_cache(out)))


class Encoder(nn.Module):
    """The encoder of an encoder-decoder model -> last_hidden_state."""

    def __init__(self, model: nn.Module, keys: list[str]) -> None:
        super().__init__()
        self.encoder: Any = model.get_encoder()  # type: ignore[operator]
        self.keys = keys

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        return self.encoder(**dict(zip(self.keys, tensors, strict=True))).last_hidden_state


class Seq2SeqDecoder(nn.Module):
    """The first decoder step: (input_ids, encoder_attention_mask?, encoder_hidden_states) ->
    (logits, present.N.decoder.key/value, present.N.encoder.key/value)."""

    def __init__(self, model: nn.Module, with_mask: bool) -> None:
        super().__init__()
        self.model, self.with_mask = model, with_mask
        self.cache_name = cache_argument(model)

    def forward(self, input_ids: torch.Tensor, *rest: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache, EncoderDecoderCache

        mask = rest[0] if self.with_mask else None
        hidden = rest[-1]
        cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        out = self.model(decoder_input_ids=input_ids, attention_mask=mask,
                         encoder_outputs=(hidden,), use_cache=True,
                         **{self.cache_name: cache})
        kv = returned_cache(out)
        return (out.logits, *_interleave(_cache_tensors(kv.self_attention_cache),
                                         _cache_tensors(kv.cross_attention_cache)))


class Seq2SeqDecoderWithPast(nn.Module):
    """A later decoder step: (input_ids, encoder_attention_mask?, past...) with past as
    past_key_values.N.decoder.key/value, past_key_values.N.encoder.key/value ->
    (logits, present.N.decoder.key/value)."""

    def __init__(self, model: nn.Module, with_mask: bool) -> None:
        super().__init__()
        self.model, self.with_mask = model, with_mask
        self.cache_name = cache_argument(model)

    def forward(self, input_ids: torch.Tensor, *rest: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import EncoderDecoderCache

        mask = rest[0] if self.with_mask else None
        past = rest[1:] if self.with_mask else rest
        own = [t for i, t in enumerate(past) if i % 4 < 2]
        cross = [t for i, t in enumerate(past) if i % 4 >= 2]
        cache = EncoderDecoderCache(_cache_of(tuple(own)), _cache_of(tuple(cross)))
        # the encoder's states are not needed: the cross-attention cache holds them
        batch = input_ids.shape[0]
        hidden = past[2].new_zeros((batch, 1, 1))
        out = self.model(decoder_input_ids=input_ids, attention_mask=mask,
                         encoder_outputs=(hidden,), use_cache=True,
                         **{self.cache_name: cache})
        return (out.logits, *_cache_tensors(returned_cache(out).self_attention_cache))


def _interleave(own: list[torch.Tensor], cross: list[torch.Tensor]) -> list[torch.Tensor]:
    flat: list[torch.Tensor] = []
    for i in range(0, len(own), 2):
        flat += own[i:i + 2] + cross[i:i + 2]
    return flat


def past_names(prefix: str, layers: int, seq2seq: bool) -> list[str]:
    """past_key_values.0.key, past_key_values.0.value, ... (decoder/encoder for seq2seq)."""
    kinds = ("decoder", "encoder") if seq2seq else ("",)
    return [f"{prefix}.{n}.{kind + '.' if kind else ''}{kv}"
            for n in range(layers) for kind in kinds for kv in ("key", "value")]
