"""Tiny models whose divergence or float16 trouble is known, for the explain and fp16 tests and
bench_fp16: written into a folder with a recipe each, exported for real (dynamo)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.pipeline import export

MODELS = '''
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, x):
        y = self.lin(x)  # LINEAR LINE
        return torch.relu(y) * 2


class Stack(nn.Module):
    """Four blocks: a weight patched in the file in blocks 1 or 2 is a known divergence."""

    def __init__(self, width=16):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList([Block(width) for _ in range(4)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Hot(nn.Module):
    """A Linear whose outputs exceed float16's range (~1e5) and one that brings them back:
    ONNX Runtime's CPU provider computes both Gemms in float32, float16 hardware overflows."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.inp = nn.Linear(16, 64)
        self.up = nn.Linear(64, 64)
        self.down = nn.Linear(64, 8)
        with torch.no_grad():
            self.up.weight.mul_(1.0e5)
            self.down.weight.mul_(1.0e-3)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        return self.down(self.up(h))


class Scaled(nn.Module):
    """Eight Linear layers and a constant above 65504 that scales a middle activation up and
    down again: plain float16 overflows, a handful of nodes in float32 do not."""

    def __init__(self, width=64, depth=8):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.register_buffer("scale", torch.tensor(1.0e6))

    def forward(self, x):
        h = x
        for i, layer in enumerate(self.layers):
            h = torch.tanh(layer(h))
            if i == len(self.layers) // 2:
                h = (h * self.scale + 3.0) / self.scale
        return h
'''

RECIPE = """version = 1
[model]
source = "explain_models.py:{cls}"
[[inputs]]
name = "x"
shape = [4, {width}]
fill = "randn"
dynamic = {{ 0 = "batch" }}
[[outputs]]
name = "y"
dynamic = {{ 0 = "batch" }}
[export]
output = "{name}.onnx"
exporter = "dynamo"
"""

WIDTHS = {"Stack": 16, "Hot": 16, "Scaled": 64}


def exported(folder: Path, cls: str, name: str | None = None) -> tuple[Path, Path]:
    """Write the models file and the recipe of `cls` into `folder`, export it (no validation):
    (the .onnx file, the recipe)."""
    name = name or cls.lower()
    (folder / "explain_models.py").write_text(MODELS, encoding="utf-8")
    recipe_path = folder / f"{name}.toml"
    recipe_path.write_text(RECIPE.format(cls=cls, width=WIDTHS[cls], name=name),
                           encoding="utf-8")
    recipe = recipes.load(recipe_path)
    if not recipe.output_path.exists():
        report = export(recipe, validate=False)
        assert report.ok, report.error
    return recipe.output_path, recipe_path


def linear_line() -> int:
    """The line of Block.forward's call of its Linear in the models file."""
    return next(i for i, line in enumerate(MODELS.splitlines(), start=1)
                if "# LINEAR LINE" in line)


def patched(source: Path, target: Path, module: str, scale: float = 1.5) -> str:
    """Copy `source` to `target` with the weight of the first MatMul/Gemm node in `module`
    (read from the file's own metadata) scaled; the name of the weight changed."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source))
    weights = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        scopes = ast.literal_eval(_meta(node, "pkg.torch.onnx.name_scopes") or "[]")
        if node.op_type in ("Gemm", "MatMul") and module in scopes:
            name = next(n for n in node.input if n in weights)
            tensor = weights[name]
            tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor) * scale,
                                                    name))
            onnx.save(model, str(target))
            return name
    raise AssertionError(f"no MatMul or Gemm of {module} in {source}")


def scope_ending(path: Path, suffix: str) -> str:
    """The module path of the file's nodes that ends with `suffix` (a wrapper may prefix it)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    for node in model.graph.node:
        for scope in ast.literal_eval(_meta(node, "pkg.torch.onnx.name_scopes") or "[]"):
            if scope == suffix or scope.endswith("." + suffix):
                return str(scope)
    raise AssertionError(f"no module ending with {suffix} in {path}")


def _meta(node: Any, key: str) -> str:
    return next((p.value for p in node.metadata_props if p.key == key), "")
