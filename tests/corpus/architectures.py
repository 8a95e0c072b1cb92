"""The corpus: tiny, random-weight builds of popular Hugging Face transformers architectures.

Each architecture is written as a model file the way a user would write one for the studio: a
factory `build(**overrides)` that makes the model from its config class (no hub access, no
download), seeded, in eval mode; `overrides` are the recipe's `model.kwargs`, which is how a
hint such as `use_cache=False` is applied. `recipe_text` is the recipe a user would write for
it: the defaults (no exporter named, so "auto"), the inputs forward() takes, token ids drawn
within the vocabulary and attention masks all ones.

Used by tests/corpus/test_hf_corpus.py (expected outcomes) and
tests/benchmarks/bench_corpus.py (the README's "Real architectures" table).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VOCAB = 99  # every text model's vocabulary: token ids are randint(0, 99)
TEXT = {"vocab_size": VOCAB}
# hidden 32, 2 layers, 2 heads, in each config's own spelling
BERT_LIKE = {**TEXT, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 64, "max_position_embeddings": 64}
DECODER_LIKE = {**TEXT, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                "num_key_value_heads": 2, "intermediate_size": 64,
                "max_position_embeddings": 64}


@dataclass(frozen=True)
class Failure:
    """An expected failure: what the error must say, and the fix its hint names."""

    kind: str                 # error.kind
    names: tuple[str, ...]    # words the message must contain (the cause, e.g. DynamicCache)
    hint: tuple[str, ...]     # words the hint must contain (the fix, e.g. use_cache=False)
    fix: dict[str, Any]       # model.kwargs that apply the hint; then it exports and validates


# forward() returns the key/value cache object (transformers' default use_cache=True)
CACHE = Failure("export", ("DynamicCache",), ("use_cache=False",), {"use_cache": False})
CACHE_ENC_DEC = Failure("export", ("EncoderDecoderCache",), ("use_cache=False",),
                        {"use_cache": False})
# torch.onnx's decomposition of scaled_dot_product_attention lays its result out differently
# from the captured one, and the reshape after it was captured as a view (torch 2.13)
EAGER = Failure("export", ("step 2 of 3", "Cannot view a tensor"),
                ('attn_implementation="eager"',), {"attn_implementation": "eager"})


@dataclass(frozen=True)
class Architecture:
    name: str
    family: str               # text | vision (BatchNorm) | vision | audio | encoder-decoder
    config_class: str
    model_class: str
    config: dict[str, Any]
    inputs: list[dict[str, Any]]  # [[inputs]] tables, in forward() order
    # the failures with the defaults, in the order they appear: each hint applied (its fix
    # added to model.kwargs) leads to the next, and the last one applied exports and validates
    fails: tuple[Failure, ...] = ()
    # what the validation may warn about on a correct export (none today)
    allowed_warnings: tuple[str, ...] = field(default=())

    @property
    def slug(self) -> str:
        return self.name.lower().replace("-", "").replace(" ", "_")

    def source_text(self) -> str:
        return f'''"""{self.name}: a tiny random-weight {self.model_class} from its config."""

import torch
import transformers

CONFIG = {dict(sorted(self.config.items()))!r}


def build(**overrides):
    torch.manual_seed(0)
    config = transformers.{self.config_class}(**{{**CONFIG, **overrides}})
    return transformers.{self.model_class}(config).eval()
'''

    def recipe_text(self, kwargs: dict[str, Any] | None = None, output: str = "") -> str:
        lines = ["version = 1", "", "[model]", f'source = "{self.slug}.py:build"']
        if kwargs:
            items = ", ".join(f"{k} = {_toml(v)}" for k, v in kwargs.items())
            lines.append(f"kwargs = {{ {items} }}")
        for spec in self.inputs:
            lines += ["", "[[inputs]]"] + [f"{k} = {_toml(v)}" for k, v in spec.items()]
        lines += ["", "[export]", f'output = "{output or self.slug + ".onnx"}"', ""]
        return "\n".join(lines)

    def attempts(self) -> list[dict[str, Any]]:
        """model.kwargs of each export a user makes: the defaults, then each hint applied."""
        kwargs: dict[str, Any] = {}
        out = [dict(kwargs)]
        for failure in self.fails:
            kwargs.update(failure.fix)
            out.append(dict(kwargs))
        return out

    def write(self, folder: Path, attempt: int = 0) -> Path:
        """The model file and the recipe of attempt `attempt` (0: the defaults) in `folder`;
        returns the recipe's path. Each attempt writes its own .onnx file."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{self.slug}.py").write_text(self.source_text(), encoding="utf-8")
        stem = f"{self.slug}_{attempt}"
        path = folder / f"{stem}.toml"
        path.write_text(self.recipe_text(self.attempts()[attempt], f"{stem}.onnx"),
                        encoding="utf-8")
        return path


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


def ids(name: str, shape: list[int]) -> dict[str, Any]:
    return {"name": name, "shape": shape, "dtype": "int64", "fill": "randint", "low": 0,
            "high": VOCAB}


def mask(name: str, shape: list[int]) -> dict[str, Any]:
    return {"name": name, "shape": shape, "dtype": "int64", "fill": "ones"}


def floats(name: str, shape: list[int]) -> dict[str, Any]:
    return {"name": name, "shape": shape, "dtype": "float32", "fill": "randn"}


TOKENS = [2, 8]
IMAGE = [1, 3, 32, 32]

ARCHITECTURES: list[Architecture] = [
    # ------------------------------------------------------------------ text encoders
    Architecture("BERT", "text", "BertConfig", "BertModel", BERT_LIKE,
                 [ids("input_ids", TOKENS), mask("attention_mask", TOKENS)]),
    Architecture("RoBERTa", "text", "RobertaConfig", "RobertaModel",
                 {**BERT_LIKE, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2},
                 [ids("input_ids", TOKENS), mask("attention_mask", TOKENS)]),
    Architecture("DistilBERT", "text", "DistilBertConfig", "DistilBertModel",
                 {**TEXT, "dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64,
                  "max_position_embeddings": 64},
                 [ids("input_ids", TOKENS), mask("attention_mask", TOKENS)]),
    Architecture("ALBERT", "text", "AlbertConfig", "AlbertModel",
                 {**BERT_LIKE, "embedding_size": 16},
                 [ids("input_ids", TOKENS), mask("attention_mask", TOKENS)]),
    # ------------------------------------------------------------------ text decoders
    Architecture("GPT-2", "text", "GPT2Config", "GPT2Model",
                 {**TEXT, "n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 64,
                  "bos_token_id": 0, "eos_token_id": 0},
                 [ids("input_ids", TOKENS)], fails=(CACHE,)),
    Architecture("Llama", "text", "LlamaConfig", "LlamaModel", DECODER_LIKE,
                 [ids("input_ids", TOKENS), mask("attention_mask", TOKENS)], fails=(CACHE,)),
    Architecture("Qwen2", "text", "Qwen2Config", "Qwen2Model", DECODER_LIKE,
                 [ids("input_ids", TOKENS), mask("attention_mask", TOKENS)], fails=(CACHE,)),
    Architecture("Mistral", "text", "MistralConfig", "MistralModel", DECODER_LIKE,
                 [ids("input_ids", TOKENS), mask("attention_mask", TOKENS)], fails=(CACHE,)),
    # ------------------------------------------------------------------ vision with BatchNorm
    Architecture("ResNet", "vision (BatchNorm)", "ResNetConfig", "ResNetModel",
                 {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1],
                  "layer_type": "basic"},
                 [floats("pixel_values", IMAGE)]),
    Architecture("MobileNetV2", "vision (BatchNorm)", "MobileNetV2Config", "MobileNetV2Model",
                 {"image_size": 32, "depth_multiplier": 0.25, "finegrained_output": False},
                 [floats("pixel_values", IMAGE)]),
    Architecture("RegNet", "vision (BatchNorm)", "RegNetConfig", "RegNetModel",
                 {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1],
                  "groups_width": 8},
                 [floats("pixel_values", IMAGE)]),
    Architecture("EfficientNet", "vision (BatchNorm)", "EfficientNetConfig",
                 "EfficientNetModel",
                 {"image_size": 32, "width_coefficient": 0.25, "depth_coefficient": 0.25,
                  "hidden_dim": 320},
                 [floats("pixel_values", IMAGE)]),
    # ------------------------------------------------------------------ vision
    Architecture("ConvNeXt", "vision", "ConvNextConfig", "ConvNextModel",
                 {"hidden_sizes": [8, 16], "depths": [1, 1], "num_stages": 2},
                 [floats("pixel_values", IMAGE)]),
    Architecture("ViT", "vision", "ViTConfig", "ViTModel",
                 {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                  "intermediate_size": 64, "image_size": 32, "patch_size": 8},
                 [floats("pixel_values", IMAGE)]),
    Architecture("DeiT", "vision", "DeiTConfig", "DeiTModel",
                 {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                  "intermediate_size": 64, "image_size": 32, "patch_size": 8},
                 [floats("pixel_values", IMAGE)]),
    Architecture("Swin", "vision", "SwinConfig", "SwinModel",
                 {"image_size": 32, "patch_size": 4, "embed_dim": 16, "depths": [1, 1],
                  "num_heads": [2, 2], "window_size": 4},
                 [floats("pixel_values", IMAGE)], fails=(EAGER,)),
    # ------------------------------------------------------------------ audio
    Architecture("Wav2Vec2", "audio", "Wav2Vec2Config", "Wav2Vec2Model",
                 {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                  "intermediate_size": 64, "conv_dim": [16, 16], "conv_stride": [5, 2],
                  "conv_kernel": [10, 3], "num_conv_pos_embeddings": 16,
                  "num_conv_pos_embedding_groups": 2},
                 [floats("input_values", [1, 400])]),
    # ------------------------------------------------------------------ encoder-decoder
    Architecture("T5", "encoder-decoder", "T5Config", "T5Model",
                 {**TEXT, "d_model": 32, "d_kv": 16, "d_ff": 64, "num_layers": 2,
                  "num_heads": 2, "decoder_start_token_id": 0},
                 [ids("input_ids", TOKENS), mask("attention_mask", TOKENS),
                  ids("decoder_input_ids", [2, 4])], fails=(CACHE_ENC_DEC, EAGER)),
    Architecture("BART", "encoder-decoder", "BartConfig", "BartModel",
                 {**TEXT, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
                  "encoder_attention_heads": 2, "decoder_attention_heads": 2,
                  "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "max_position_embeddings": 64},
                 [ids("input_ids", TOKENS), mask("attention_mask", TOKENS),
                  ids("decoder_input_ids", [2, 4])], fails=(CACHE_ENC_DEC,)),
    Architecture("Whisper", "encoder-decoder (audio)", "WhisperConfig", "WhisperModel",
                 {**TEXT, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
                  "encoder_attention_heads": 2, "decoder_attention_heads": 2,
                  "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "num_mel_bins": 16,
                  "max_source_positions": 16, "max_target_positions": 32,
                  "decoder_start_token_id": 1, "pad_token_id": 0, "bos_token_id": 1,
                  "eos_token_id": 2},
                 [floats("input_features", [1, 16, 32]), mask("attention_mask", [1, 32]),
                  ids("decoder_input_ids", [1, 4])], fails=(CACHE_ENC_DEC,)),
]

BY_NAME = {a.name: a for a in ARCHITECTURES}
