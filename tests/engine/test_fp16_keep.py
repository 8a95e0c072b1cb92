"""fp16 that passes, found on a CPU: `variant --kind fp16 --keep-fp32 auto|NODE,...`.

A model with a constant above 65504 (real dynamo export): plain float16 fails (its values
overflow), `auto` keeps a handful of nodes in float32 and passes at about half the size; the
nodes it names, given by hand, pass too; a run of kept nodes passes its values in float32.
A tiny BERT (transformers' config class) passes with auto as well.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.analysis.fp16 import convert
from onnx_studio.engine.analysis.ranges import fp16_holders
from onnx_studio.engine.analysis.variants import make_variant
from onnx_studio.engine.cli import main
from tests.engine.explain_models import exported


@pytest.fixture(scope="module")
def scaled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return exported(tmp_path_factory.mktemp("fp16"), "Scaled")


def _cli(*args: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*args, "--json"])
    return code, json.loads(out.getvalue().strip().splitlines()[-1])


@pytest.mark.timeout(300)
def test_plain_fp16_fails_and_auto_passes_keeping_a_handful_at_half_the_size(
        scaled: tuple[Path, Path], tmp_path: Path) -> None:
    source, recipe_path = scaled
    recipe = recipes.load(recipe_path)
    plain = make_variant(source, recipe, "fp16", tmp_path / "plain.onnx", runs=2)
    assert plain.ok is False and plain.variant is not None
    assert plain.variant.fp16_overflows  # the scaled activation, beyond 65504
    assert plain.variant.kept_fp32 is None

    code, doc = _cli("variant", str(source), "--recipe", str(recipe_path), "--kind", "fp16",
                     "-o", str(tmp_path / "auto.onnx"), "--keep-fp32", "auto")
    assert code == 0 and doc["ok"] is True, doc
    facts = doc["variant"]
    kept = facts["kept_fp32"]
    assert 1 <= len(kept) <= 6
    overflowing = {o["node"] for o in plain.variant.to_dict()["fp16_overflows"]}
    assert overflowing <= set(kept)
    assert facts["fp16_overflows"] == []
    assert facts["size_ratio"] < 0.65  # the weights are float16: about half
    assert facts["size_bytes"] == (tmp_path / "auto.onnx").stat().st_size
    assert doc["validation"]["ok"] is True

    # the nodes auto named, given by hand: the same file passes
    again = make_variant(source, recipe, "fp16", tmp_path / "byhand.onnx", runs=2,
                         keep_fp32=",".join(kept))
    assert again.ok, again.error
    assert again.variant is not None and again.variant.kept_fp32 == kept


def test_kept_nodes_pass_their_values_in_float32(scaled: tuple[Path, Path]) -> None:
    """Between two kept nodes the converter casts to float16 and back; folded, the value the
    first computes reaches the second in float32, and is held in float16 nowhere."""
    source, _ = scaled
    model = onnx.load(str(source))
    products = [n for n in model.graph.node if n.op_type == "Mul"
                and any(_big(model, i) for i in n.input)]
    assert products, "the scale's Mul"
    first = products[0]
    after = [n for n in model.graph.node if first.output[0] in n.input]
    keep = {first.name, *(n.name for n in after)}
    half = convert(model, keep)
    onnx.checker.check_model(half)
    assert first.output[0] not in fp16_holders(half)
    plain = convert(model)
    assert first.output[0] in fp16_holders(plain)


def _big(model: Any, name: str) -> bool:
    from onnx import numpy_helper

    for tensor in model.graph.initializer:
        if tensor.name == name:
            return bool(np.abs(numpy_helper.to_array(tensor)).max() > 65504)
    return False


@pytest.mark.timeout(300)
def test_wrong_keep_fp32_requests_exit_2(scaled: tuple[Path, Path], tmp_path: Path) -> None:
    source, recipe_path = scaled
    out = tmp_path / "x.onnx"
    for extra, says in ((["--kind", "fp16", "--keep-fp32", "no_such_node"], "no_such_node"),
                        (["--kind", "int8", "--keep-fp32", "auto"], "fp16"),
                        (["--kind", "fp16", "--keep-fp32", ","], "auto")):
        code, doc = _cli("variant", str(source), "--recipe", str(recipe_path), "-o", str(out),
                         *extra)
        assert code == 2 and doc["error"]["kind"] == "recipe", doc
        assert says in doc["error"]["message"]
    assert not out.exists()


@pytest.mark.timeout(300)
def test_a_transformers_architecture_passes_with_auto(tmp_path: Path) -> None:
    from tests.engine.analysis_models import BERT, export_recipe, write_recipe

    recipe_path = write_recipe(tmp_path, "bert.toml", BERT.format(output="bert.onnx"))
    source = export_recipe(recipe_path)
    recipe = recipes.load(recipe_path)
    report = make_variant(source, recipe, "fp16", tmp_path / "b16.onnx", runs=2,
                          keep_fp32="auto")
    assert report.ok, report.error
    assert report.variant is not None and report.variant.kept_fp32 is not None
    plain = make_variant(source, recipe, "fp16", tmp_path / "plain.onnx", runs=2)
    assert plain.variant is not None
    # what it keeps costs little: the size stays that of plain float16
    assert report.variant.size_bytes <= plain.variant.size_bytes * 1.02 < source.stat().st_size
