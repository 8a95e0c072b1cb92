"""variant: fp16, int8 and ORT-optimized copies of a tiny BERT and the shipped tiny CNN, each
written, validated against eager PyTorch with its kind's tolerance and reported (size ratio,
latency ratio, max error); one held to a tolerance it cannot meet is reported failed."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from onnx_studio.engine.analysis.variants import TOLERANCES, make_variant
from onnx_studio.engine.cli import main
from onnx_studio.engine.recipe import load as load_recipe
from tests.engine.analysis_models import BERT, CNN, export_recipe, models_folder, write_recipe


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("variants")
    found = {}
    for name, text in (("bert", BERT.format(output="bert.onnx")),
                       ("cnn", CNN.format(output="cnn.onnx", models=models_folder()))):
        recipe = write_recipe(folder, f"{name}.toml", text)
        found[name] = (export_recipe(recipe), recipe)
    return found


@pytest.mark.parametrize(("model", "kind"), [("bert", "fp16"), ("bert", "int8"),
                                             ("cnn", "fp16"), ("cnn", "int8"),
                                             ("cnn", "optimized")])
def test_variant_is_written_validated_and_reported(exports: dict[str, tuple[Path, Path]],
                                                   model: str, kind: str) -> None:
    source, recipe_path = exports[model]
    before = source.read_bytes()
    output = source.with_name(f"{model}_{kind}.onnx")
    report = make_variant(source, load_recipe(recipe_path), kind, output, runs=5)
    assert report.ok, report.error
    assert source.read_bytes() == before  # the source is untouched
    onnx.checker.check_model(str(output))
    facts = report.variant
    assert facts is not None and facts.kind == kind
    assert (facts.rtol, facts.atol) == TOLERANCES[kind]  # the recipes' own are tighter
    assert report.validation is not None and report.validation.ok
    assert report.validation.rtol == facts.rtol
    assert len(report.validation.trials) >= 4  # export inputs, random draws, other sizes
    assert facts.size_bytes == output.stat().st_size
    assert facts.size_ratio == pytest.approx(facts.size_bytes / facts.source_size_bytes,
                                             abs=1e-4)
    assert facts.latency_ms is not None and facts.source_latency_ms is not None
    assert facts.latency_ratio == pytest.approx(
        facts.latency_ms.p50 / facts.source_latency_ms.p50, rel=1e-2)
    assert facts.max_abs_diff is not None and 0 <= facts.max_abs_diff <= facts.atol * 50
    model_proto = onnx.load(str(output))
    types = {t.data_type for t in model_proto.graph.initializer}
    if kind == "fp16":
        assert onnx.TensorProto.FLOAT16 in types
        # inputs and outputs stay float32 (keep_io_types)
        assert model_proto.graph.input[0].type.tensor_type.elem_type in (
            onnx.TensorProto.FLOAT, onnx.TensorProto.INT64)
        assert model_proto.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    if kind == "int8":
        assert onnx.TensorProto.INT8 in types or onnx.TensorProto.UINT8 in types
        assert facts.max_abs_diff > 0  # quantization does change the numbers
    if kind in ("fp16", "int8") and model == "bert":
        assert facts.size_ratio < 1.0  # smaller weights; the graph itself does not shrink


def test_variant_outside_tolerance_is_written_and_fails(
        exports: dict[str, tuple[Path, Path]], capsys: pytest.CaptureFixture[str]) -> None:
    source, recipe = exports["cnn"]
    output = source.with_name("cnn_int8_strict.onnx")
    code = main(["variant", str(source), "--recipe", str(recipe), "--kind", "int8", "-o",
                 str(output), "--rtol", "1e-7", "--atol", "1e-7", "--json"])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 1, doc
    assert doc["ok"] is False and doc["error"]["kind"] == "validation"
    assert "int8" in doc["error"]["message"] and "tolerance" in doc["error"]["message"]
    assert output.is_file() and doc["output"] == str(output)  # written, and marked failed
    assert doc["validation"]["ok"] is False and doc["validation"]["atol"] == 1e-7
    assert doc["variant"]["kind"] == "int8" and doc["variant"]["max_abs_diff"] > 1e-7
    # the export document's keys first, then the variant's facts
    assert list(doc)[:10] == ["ok", "output", "exporter", "opset", "seconds", "graph",
                              "warnings", "error", "validation", "variant"]


def test_variant_refuses_bad_requests(exports: dict[str, tuple[Path, Path]], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    source, recipe = exports["cnn"]
    cases = [
        (["--kind", "int4", "-o", str(tmp_path / "x.onnx")], "recipe"),
        (["--kind", "fp16", "-o", str(source)], "write"),
        (["--kind", "fp16", "-o", str(tmp_path / "folder.txt")], "write"),
    ]
    for extra, kind in cases:
        code = main(["variant", str(source), "--recipe", str(recipe), *extra, "--json"])
        doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert code == 2 and doc["error"]["kind"] == kind, (extra, doc)
    assert not (tmp_path / "x.onnx").exists()
