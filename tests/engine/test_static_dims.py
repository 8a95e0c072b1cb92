"""Dimensions exported at a fixed size (`--static-dim DIM=SIZE`, a recipe's `[dims] DIM = {
size = SIZE }`): the hint for a model that fixes its own length (Funnel, issue 24) applied.

Loading is enough to see a part's inputs, dynamic axes and the inputs its trials are made of;
the export and validation of a model that needs it run in test_hf_derive.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import recipe_problems
from tests.engine.hf_tiny import build

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("static_dims")


def load(name: str, folder: Path, task: str | None = None, **static: int) -> Any:
    from onnx_studio.engine.source.hf import load_hf

    return load_hf(f"hf:{build(name, folder)}", folder, task, static=static)


def shapes(inputs: dict[str, Any]) -> dict[str, list[int]]:
    return {name: list(t.shape) for name, t in inputs.items()}


def test_a_fixed_batch_leaves_the_axes_and_holds_in_every_trial(folder: Path) -> None:
    (part,) = load("bert", folder, batch_size=1).parts
    assert all("batch_size" not in axes.values() for axes in part.dynamic.values())
    assert part.dynamic["input_ids"] == {1: "sequence_length"}
    assert shapes(part.inputs)["input_ids"] == [1, 5]
    # a trial asking for batch 3 at length 7 gets batch 1 at length 7
    assert shapes(part.make_inputs(11, 3, 7, 0))["input_ids"] == [1, 7]


def test_a_decoder_step_of_one_token_keeps_its_cache_dynamic(folder: Path) -> None:
    """sequence_length fixed at 1 on a decoder with its cache: the file takes one token a
    step; the cache's length and the mask's total length stay dynamic."""
    (part,) = load("llama", folder, "text-generation-with-past", sequence_length=1).parts
    assert part.dynamic["input_ids"] == {0: "batch_size"}
    assert part.dynamic["position_ids"] == {0: "batch_size"}
    assert part.dynamic["attention_mask"] == {0: "batch_size", 1: "total_sequence_length"}
    assert part.dynamic["past_key_values.0.key"] == {0: "batch_size", 2: "past_sequence_length"}
    made = shapes(part.make_inputs(11, 3, 4, 6))
    assert made["input_ids"] == [3, 1] and made["attention_mask"] == [3, 7]
    assert made["past_key_values.0.key"][2] == 6


def test_a_dimension_made_of_others_or_unknown_is_refused_naming_what_to_fix(
        folder: Path) -> None:
    with pytest.raises(StudioError) as caught:
        load("llama", folder, "text-generation-with-past", total_sequence_length=8)
    assert caught.value.kind == "recipe" and caught.value.exit_code == 2
    assert "'total_sequence_length'" in caught.value.message
    assert "past_sequence_length" in caught.value.hint and "sequence_length" in caught.value.hint
    with pytest.raises(StudioError) as caught:
        load("bert", folder, seq_len=8)
    assert caught.value.kind == "recipe" and "'seq_len'" in caught.value.message
    assert "batch_size, sequence_length" in caught.value.message


def test_the_cli_records_it_and_a_recipe_reads_it_back(tmp_path: Path) -> None:
    from onnx_studio.engine.cli import build_parser, save_recipe_as
    from onnx_studio.engine.cli_args import RequestError, recipe_from_args

    args = build_parser().parse_args(["export", f"hf:{tmp_path}", "-o", str(tmp_path / "out"),
                                      "--static-dim", "sequence_length=8"])
    recipe = recipe_from_args(args)
    assert recipe.dims == {"sequence_length": recipes.DimSpec(size=8)}
    save_recipe_as(recipe, tmp_path / "r.toml")
    assert "size = 8" in (tmp_path / "r.toml").read_text()
    assert recipes.load(tmp_path / "r.toml").dims == recipe.dims
    for wrong in ("sequence_length", "sequence_length=0", "=8", "sequence_length=x"):
        args = build_parser().parse_args(["export", f"hf:{tmp_path}", "-o",
                                          str(tmp_path / "out"), "--static-dim", wrong])
        with pytest.raises(RequestError, match="DIM=SIZE"):
            recipe_from_args(args)


def test_on_a_python_source_it_becomes_the_inputs_shape(tmp_path: Path) -> None:
    from onnx_studio.engine.cli import build_parser
    from onnx_studio.engine.cli_args import RequestError, recipe_from_args

    base = ["export", "net.py:Net", "-o", str(tmp_path / "n.onnx"),
            "--input", "x=4x16", "--input", "y=4x8", "--dynamic", "x:0=batch",
            "--dynamic", "y:0=batch", "--dynamic", "x:1=length:1:64"]
    recipe = recipe_from_args(build_parser().parse_args([*base, "--static-dim", "batch=2"]))
    assert [(s.shape, s.dynamic) for s in recipe.inputs] == [([2, 16], {1: "length"}),
                                                              ([2, 8], {})]
    recipe = recipe_from_args(build_parser().parse_args([*base, "--static-dim", "length=32"]))
    assert recipe.inputs[0].shape == [4, 32] and "length" not in recipe.dims
    with pytest.raises(RequestError, match="no input axis is called 'width'"):
        recipe_from_args(build_parser().parse_args([*base, "--static-dim", "width=3"]))


@pytest.mark.parametrize(("source", "dims", "problem"), [
    ("hf:model", {"sequence_length": {"size": 0}}, "below 1"),
    ("hf:model", {"sequence_length": {"size": 8, "max": 9}}, "takes only size"),
    ("net.py:Net", {"batch": {"size": 2}}, "size applies to a Hugging Face source"),
])
def test_a_wrong_size_in_a_recipe_says_what_to_change(source: str, dims: dict[str, Any],
                                                       problem: str) -> None:
    recipe = recipes.from_dict({"version": 1, "model": {"source": source}, "dims": dims},
                               Path("."))
    found = dict(recipe_problems(recipe))
    where = f"dims.{next(iter(dims))}"
    assert problem in found[where], found
