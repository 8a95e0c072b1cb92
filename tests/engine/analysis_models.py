"""Models and exports the analysis tests share: the seed's AlexNet by both exporters, a tiny
GPT-2 and a tiny BERT (transformers config classes, random weights, no download), the
shipped tiny CNN. Each export is a real `onnx_studio.engine.pipeline.export` into a folder."""

from __future__ import annotations

from pathlib import Path

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.pipeline import export

TINY_HF = '''
import torch
import transformers


def gpt2(**overrides):
    torch.manual_seed(0)
    sizes = dict(vocab_size=99, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                 use_cache=False)
    config = transformers.GPT2Config(**{**sizes, **overrides})
    return transformers.GPT2Model(config).eval()


def bert(**overrides):
    torch.manual_seed(0)
    sizes = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=64)
    config = transformers.BertConfig(**{**sizes, **overrides})
    return transformers.BertModel(config).eval()
'''

ALEXNET = """
version = 1
[model]
source = "example:alexnet"
[[inputs]]
name = "x"
shape = [1, 3, 224, 224]
fill = "randn"
[[outputs]]
name = "logits"
[export]
output = "{output}"
exporter = "{exporter}"
[validate]
rtol = 1e-3
atol = 1e-4
"""

# wide enough (hidden 128, 128 tokens) that kernels, not onnxruntime's bookkeeping between
# them, take most of a run: the profile's per-node times then add up to the run time
GPT2 = """
version = 1
[model]
source = "tiny_hf.py:gpt2"
kwargs = { n_embd = 128, n_positions = 256 }
[[inputs]]
name = "input_ids"
shape = [2, 128]
dtype = "int64"
[[outputs]]
name = "last_hidden_state"
[export]
output = "gpt2.onnx"
exporter = "dynamo"
"""

BERT = """
version = 1
[model]
source = "tiny_hf.py:bert"
[[inputs]]
name = "input_ids"
shape = [2, 16]
dtype = "int64"
dynamic = {{ 0 = "batch" }}
[[inputs]]
name = "attention_mask"
shape = [2, 16]
dtype = "int64"
dynamic = {{ 0 = "batch" }}
[[outputs]]
name = "last_hidden_state"
[[outputs]]
name = "pooler_output"
[export]
output = "{output}"
exporter = "dynamo"
"""

CNN = """
version = 1
[model]
source = "{models}/tiny_cnn.py:TinyCNN"
[[inputs]]
name = "x"
shape = [2, 3, 32, 32]
fill = "randn"
dynamic = {{ 0 = "batch" }}
[[outputs]]
name = "logits"
dynamic = {{ 0 = "batch" }}
[export]
output = "{output}"
exporter = "dynamo"
"""


def write_recipe(folder: Path, name: str, text: str) -> Path:
    """Write a recipe (and the tiny transformers model file beside it) into `folder`."""
    (folder / "tiny_hf.py").write_text(TINY_HF)
    path = folder / name
    path.write_text(text)
    return path


def export_recipe(path: Path) -> Path:
    """Export the recipe at `path` (no validation); the .onnx path. Fails the test if the
    export fails."""
    recipe = recipes.load(path)
    report = export(recipe, validate=False)
    assert report.ok, report.error
    return recipe.output_path


def models_folder() -> Path:
    return Path(__file__).resolve().parents[2] / "onnx_studio" / "resources" / "models"
