"""The Python API, `import onnx_studio`: each call runs its job in a worker process and answers
with the typed document; a model that kills its process never takes the caller down."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import onnx_studio
from tests.conftest import REPO
from tests.zoo.zoo_models import write_recipe

TIMEOUT_S = 150
TINY_BERT = {"architectures": ["BertForSequenceClassification"], "model_type": "bert",
             "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2,
             "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[onnx_studio.ExportReport, Path]:
    """The pass item exported and validated through the API: its report and its recipe."""
    folder = tmp_path_factory.mktemp("api")
    recipe = write_recipe(folder, "net")
    stages: list[str] = []
    report = onnx_studio.export(recipe, validate=True,
                                progress=lambda fraction, stage: stages.append(stage))
    assert stages, "no progress was reported"
    return report, recipe


@pytest.mark.timeout(TIMEOUT_S)
def test_export_answers_with_the_typed_report(exported: tuple[onnx_studio.ExportReport, Path]
                                              ) -> None:
    report, recipe = exported
    assert isinstance(report, onnx_studio.ExportReport)
    assert report.ok and report.error is None, report.error
    assert report.output == str(recipe.parent / "out" / "net.onnx")
    assert report.validation is not None and report.validation.ok
    assert report.validation.outputs[0].max_abs_diff is not None
    assert report.graph is not None and report.to_dict()["graph"]["nodes"] == report.graph.nodes


@pytest.mark.timeout(TIMEOUT_S)
def test_validate_compare_profile_and_variant(exported: tuple[onnx_studio.ExportReport, Path],
                                              tmp_path: Path) -> None:
    report, recipe_path = exported
    assert report.output is not None
    recipe = onnx_studio.load_recipe(recipe_path)  # an object this time
    checked = onnx_studio.validate(report.output, recipe)
    assert checked.ok and checked.validation is not None and checked.validation.ok
    compared = onnx_studio.compare(report.output, report.output, runs=2)
    assert isinstance(compared, onnx_studio.CompareDocument)
    assert compared.ok and compared.parity is not None and compared.parity.max_abs_diff == 0
    timed = onnx_studio.profile(report.output, runs=2, warmup=1)
    assert isinstance(timed, onnx_studio.ProfileDocument)
    assert timed.ok and timed.latency_ms is not None and timed.ops
    half = onnx_studio.variant(report.output, recipe, "fp16", tmp_path / "half.onnx")
    assert isinstance(half, onnx_studio.VariantReport)
    assert half.variant is not None and half.variant.kind == "fp16"
    assert (tmp_path / "half.onnx").is_file()


@pytest.mark.timeout(TIMEOUT_S)
@pytest.mark.parametrize(("model", "how"), [("Exits", "exit status 3"),
                                            ("Segfaults", "SIGSEGV")])
def test_a_model_that_kills_its_process_never_takes_the_caller_down(
        tmp_path: Path, model: str, how: str) -> None:
    report = onnx_studio.export(write_recipe(tmp_path, "dies", model))
    assert not report.ok and report.error is not None
    assert report.error.kind == "worker_crashed" and how in report.error.message
    assert report.error.exit_status() == 1 and report.error.details


def test_a_wrong_request_is_a_document_too(tmp_path: Path) -> None:
    report = onnx_studio.export(tmp_path / "missing.toml")
    assert report.error is not None and report.error.kind == "recipe"
    assert report.error.exit_status() == 2
    assert onnx_studio.variant("a.onnx", tmp_path / "missing.toml", "fp8", "b.onnx").error
    summary = onnx_studio.batch([tmp_path / "missing.toml"], tmp_path / "report")
    assert summary.error is not None and summary.exit_status() == 2


@pytest.mark.slow  # a BERT exported with dynamo and validated: a minute or two here
@pytest.mark.timeout(TIMEOUT_S + 150)
def test_batch_takes_recipe_objects_paths_and_hugging_face_folders(tmp_path: Path) -> None:
    path = write_recipe(tmp_path, "a")
    recipe = onnx_studio.load_recipe(write_recipe(tmp_path, "b"))
    recipe.export.output = str(tmp_path / "out" / "b-from-code.onnx")
    bert = tmp_path / "tiny-bert"  # a config alone: random weights (hf-config:)
    bert.mkdir()
    (bert / "config.json").write_text(json.dumps(TINY_BERT))
    stream = io.StringIO()
    summary = onnx_studio.batch([path, recipe, f"hf-config:{bert}"], tmp_path / "report",
                                workers=2, stream=stream)
    assert isinstance(summary, onnx_studio.BatchSummary)
    assert summary.ok and summary.exit_status() == 0, stream.getvalue()
    assert [r.recipe for r in summary.results] == [
        str(path), f"recipe:{tmp_path}/out/b-from-code.onnx", f"hf-config:{bert}"]
    assert all(isinstance(r, onnx_studio.BatchRecord) and r.report.ok for r in summary.records)
    assert (tmp_path / "out" / "b-from-code.onnx").is_file()
    folder = summary.records[2].report  # a folder item: exported into the report folder
    assert folder.output == str(tmp_path / "report" / "onnx" / "tiny-bert")
    assert folder.validation is not None and folder.validation.ok
    assert folder.files and Path(folder.files[0].path).is_file()
    assert "[3/3]" in stream.getvalue()


def test_importing_the_api_loads_no_heavy_library() -> None:
    code = ("import sys, onnx_studio\n"
            "heavy = {'torch', 'numpy', 'onnx', 'onnxruntime', 'ray', 'PySide6'}\n"
            "print(sorted(heavy & set(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


@pytest.mark.timeout(300)
def test_explain_names_the_patched_layer_and_variant_keeps_fp32(tmp_path: Path) -> None:
    """explain through the API: a weight patched in a middle layer is named with its module and
    its repro folder written; a correct file diverges nowhere. variant's keep_fp32="auto"
    passes where plain fp16 overflows."""
    from tests.engine.explain_models import exported, patched

    source, recipe = exported(tmp_path, "Stack")
    clean = onnx_studio.explain(source, recipe, write_repro=False)
    assert isinstance(clean, onnx_studio.ExplainDocument)
    assert clean.ok and clean.diverges is False, clean.error
    bad = tmp_path / "patched.onnx"
    patched(source, bad, "layers.2.lin")
    found = onnx_studio.explain(bad, recipe, repro_dir=tmp_path / "repro")
    assert found.ok and found.diverges is True, found.error
    assert found.first_divergence is not None
    assert found.first_divergence.module == "layers.2.lin"
    assert found.repro is not None and (tmp_path / "repro" / "repro.py").is_file()

    hot, hot_recipe = exported(tmp_path, "Scaled")
    plain = onnx_studio.variant(hot, hot_recipe, "fp16", tmp_path / "plain16.onnx")
    kept = onnx_studio.variant(hot, hot_recipe, "fp16", tmp_path / "kept16.onnx",
                               keep_fp32="auto")
    assert not plain.ok and kept.ok, (plain.error, kept.error)
    assert kept.variant is not None and kept.variant.kept_fp32
