"""Hugging Face models as a user's own model file: a factory `build(**overrides)` that makes
the bare model from its config class (tiny, random weights, no download), and a recipe with the
defaults. Here transformers' own defaults reach the exporter (no Hugging Face wrapper in
between), so these rows fail with a cause the user can fix, and their hint, applied as
`model.kwargs` (passed to the config), makes them export and validate.

Used by tests/corpus/test_model_files.py and tests/benchmarks/bench_corpus.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VOCAB = 99


@dataclass(frozen=True)
class FileFailure:
    """An expected failure: what the error must say, and the fix its hint names."""

    kind: str                 # error.kind
    names: tuple[str, ...]    # words the message must contain (the cause, e.g. DynamicCache)
    hint: tuple[str, ...]     # words the hint must contain (the fix, e.g. use_cache=False)
    fix: dict[str, Any]       # model.kwargs that apply the hint


# forward() returns the key/value cache object (transformers' default use_cache=True)
CACHE = FileFailure("export", ("DynamicCache",), ("use_cache=False",), {"use_cache": False})
# torch.onnx's decomposition of scaled_dot_product_attention lays its result out differently
# from the captured one, and the reshape after it was captured as a view (torch 2.13)
EAGER = FileFailure("export", ("step 2 of 3", "Cannot view a tensor"),
                    ('attn_implementation="eager"',), {"attn_implementation": "eager"})


@dataclass(frozen=True)
class ModelFile:
    name: str
    config_class: str
    model_class: str
    config: dict[str, Any]
    inputs: list[dict[str, Any]]  # [[inputs]] tables, in forward() order
    fails: FileFailure

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

    def attempts(self) -> list[dict[str, Any]]:
        """model.kwargs of each export a user makes: the defaults, then the hint applied."""
        return [{}, dict(self.fails.fix)]

    def write(self, folder: Path, attempt: int) -> Path:
        """The model file and the recipe of attempt `attempt` (0: the defaults) in `folder`;
        returns the recipe's path. Each attempt writes its own .onnx file."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{self.slug}.py").write_text(self.source_text(), encoding="utf-8")
        stem = f"{self.slug}_{attempt}"
        lines = ["version = 1", "", "[model]", f'source = "{self.slug}.py:build"']
        kwargs = self.attempts()[attempt]
        if kwargs:
            lines.append("kwargs = { " + ", ".join(f"{k} = {_toml(v)}"
                                                   for k, v in kwargs.items()) + " }")
        for spec in self.inputs:
            lines += ["", "[[inputs]]"] + [f"{k} = {_toml(v)}" for k, v in spec.items()]
        lines += ["", "[export]", f'output = "{stem}.onnx"', ""]
        path = folder / f"{stem}.toml"
        path.write_text("\n".join(lines), encoding="utf-8")
        return path


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


MODEL_FILES = [
    ModelFile("GPT-2 model file", "GPT2Config", "GPT2Model",
              {"vocab_size": VOCAB, "n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 64,
               "bos_token_id": 0, "eos_token_id": 0},
              [{"name": "input_ids", "shape": [2, 8], "dtype": "int64", "fill": "randint",
                "low": 0, "high": VOCAB}], CACHE),
    ModelFile("Swin model file", "SwinConfig", "SwinModel",
              {"image_size": 32, "patch_size": 4, "embed_dim": 16, "depths": [1, 1],
               "num_heads": [2, 2], "window_size": 4},
              [{"name": "pixel_values", "shape": [1, 3, 32, 32], "dtype": "float32",
                "fill": "randn"}], EAGER),
]
