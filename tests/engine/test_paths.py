"""onnx_studio.engine.paths and describe.split_source: one rule for moving a recipe, CLI and window
alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.paths import portable_path, rebase_recipe_paths
from onnx_studio.engine.recipe import split_source


@pytest.mark.parametrize(("source", "expected"), [
    ("net.py:Net", ("net.py", "Net")),
    ("  sub/net.py  ", ("sub/net.py", "")),
    ("model.pt", ("model.pt", "")),
    ("C:\\models\\net.pt", ("C:\\models\\net.pt", "")),  # a drive colon is not a name's
    ("C:\\models\\net.py:Net", ("C:\\models\\net.py", "Net")),
    ("example:alexnet", (None, "alexnet")),
    ("torchvision:resnet18", (None, "resnet18")),
    ("", (None, "")),
])
def test_split_source(source: str, expected: tuple[str | None, str]) -> None:
    assert split_source(source) == expected


def _recipe(base: Path) -> recipes.Recipe:
    recipe = recipes.Recipe(base_dir=base)
    recipe.model.source = "net.py:Net"
    recipe.model.checkpoint = "/opt/weights.pt"  # absolute, only the root shared
    recipe.inputs = [recipes.InputSpec(name="x", shape=[1], fill="file", file="data/x.npy")]
    recipe.export.output = "out/net.onnx"
    recipe.export.extensions = [str(base / "sym.py")]  # absolute, a folder shared
    return recipe


def test_rebase_makes_paths_relative_below_a_shared_folder(tmp_path: Path) -> None:
    base = tmp_path / "project"
    recipe = _recipe(base)
    moved = rebase_recipe_paths(recipe, tmp_path / "elsewhere" / "deep")
    assert moved.base_dir == tmp_path / "elsewhere" / "deep"
    assert moved.model.source == "../../project/net.py:Net"
    assert moved.model.checkpoint == "/opt/weights.pt"
    assert moved.inputs[0].file == "../../project/data/x.npy"
    assert moved.export.output == "../../project/out/net.onnx"
    assert moved.export.extensions == ["../../project/sym.py"]
    assert moved.resolve(moved.export.output).resolve() == recipe.output_path.resolve()
    assert recipe.model.source == "net.py:Net", "the original is left alone"


def test_rebase_absolute_and_builtin_sources(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path)
    recipe.model.source = "example:alexnet"
    moved = rebase_recipe_paths(recipe, tmp_path / "out", absolute=True)
    assert moved.model.source == "example:alexnet"
    assert moved.inputs[0].file == str(tmp_path / "data" / "x.npy")
    assert moved.export.output == str(tmp_path / "out" / "net.onnx")


def test_portable_path_keeps_root_only_paths_absolute() -> None:
    assert portable_path("/usr/lib/x.py", "/home/me/project") == "/usr/lib/x.py"
    assert portable_path("/home/me/a/x.py", "/home/me/b") == "../a/x.py"
