"""`onnx-studio` exit codes and JSON documents, bad requests as carefully as good ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.cli import main
from tests.conftest import REPO
from tests.engine.models import write_models


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli")
    write_models(folder)
    return folder


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out.strip().splitlines()
    assert out, "no JSON line printed"
    return code, json.loads(out[-1])


def assert_request_error(code: int, doc: dict, kind: str, *words: str) -> None:
    assert code == 2, doc
    assert doc["ok"] is False and doc["error"]["kind"] == kind, doc
    message = doc["error"]["message"]
    assert "Traceback" not in message and message.count("\n") == 0
    for word in words:
        assert word in message, message


def write_recipe(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


RECIPE = """
version = 1
[model]
source = "tiny.py:TinyNet"
[[inputs]]
name = "x"
shape = [2, 4]
dynamic = {{ 0 = "batch" }}
[[outputs]]
name = "y"
dynamic = {{ 0 = "batch" }}
[export]
output = "{output}"
exporter = "{exporter}"
"""


def test_export_from_flags_prints_the_contract_document(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = folder / "flags.onnx"
    saved = folder / "sub" / "saved.toml"
    saved.parent.mkdir()
    code, doc = run_json(
        capsys, "export", str(folder / "tiny.py") + ":TinyNet", "-o", str(out),
        "--input", "x=2x4:float32", "--dynamic", "x:0=batch", "--output-name", "logits",
        "--dynamic", "logits:0=batch", "--exporter", "torchscript", "--opset", "17",
        "--save-recipe", str(saved),
    )
    assert code == 0, doc
    assert doc["ok"] is True and doc["error"] is None and doc["validation"] is None
    assert doc["output"] == str(out) and doc["exporter"] == "torchscript" and doc["opset"] == 17
    assert doc["graph"]["inputs"] == [{"name": "x", "dtype": "float32", "shape": ["batch", 4]}]
    assert doc["graph"]["outputs"] == [
        {"name": "logits", "dtype": "float32", "shape": ["batch", 3]}]
    assert doc["graph"]["nodes"] > 0
    onnx.checker.check_model(str(out))
    # the saved recipe repeats the export, with paths relative to its own folder
    recipe = recipes.load(saved)
    assert recipe.model.source == "../tiny.py:TinyNet"
    assert recipe.export.output == "../flags.onnx"
    assert recipe.inputs[0].dynamic == {0: "batch"}


def test_export_from_recipe_with_output_override(
    folder: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write_recipe(folder, "r.toml", RECIPE.format(output="out/r.onnx",
                                                        exporter="torchscript"))
    code, doc = run_json(capsys, "export", "--recipe", str(path), "-o", str(tmp_path / "o.onnx"))
    assert code == 0 and doc["ok"], doc
    assert (tmp_path / "o.onnx").is_file() and not (folder / "out" / "r.onnx").exists()


def test_inspect_prints_graph_and_opsets(folder: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    path = write_recipe(folder, "i.toml", RECIPE.format(output="i.onnx", exporter="torchscript"))
    assert main(["export", "--recipe", str(path)]) == 0
    capsys.readouterr()
    code, doc = run_json(capsys, "inspect", str(folder / "i.onnx"))
    assert code == 0 and doc["ok"]
    assert doc["opset_imports"][""] >= 7
    assert doc["inputs"][0]["shape"] == ["batch", 4] and doc["graph"]["nodes"] == doc["nodes"]
    assert main(["inspect", str(folder / "i.onnx")]) == 0
    assert "input  x: float32[batchx4]" in capsys.readouterr().out


# ---------------------------------------------------------------------------- bad requests


def test_missing_model_file(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, "export", str(folder / "nope.py") + ":Net", "-o",
                         str(folder / "x.onnx"), "--input", "x=1x4")
    assert_request_error(code, doc, "source", "nope.py")


def test_syntax_error_in_model_file(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (folder / "broken.py").write_text("import torch\nclass Net(torch.nn.Module:\n    pass\n")
    code, doc = run_json(capsys, "export", str(folder / "broken.py") + ":Net", "-o",
                         str(folder / "x.onnx"), "--input", "x=1x4")
    assert_request_error(code, doc, "source", "broken.py", "2")


def test_missing_class(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, "export", str(folder / "tiny.py") + ":Nope", "-o",
                         str(folder / "x.onnx"), "--input", "x=1x4")
    assert_request_error(code, doc, "source", "Nope")
    assert "TinyNet" in doc["error"]["message"] + doc["error"]["hint"]


def test_wrong_input_rank(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, "export", str(folder / "tiny.py") + ":TinyNet", "-o",
                         str(folder / "x.onnx"), "--input", "x=1x3x4x5")
    assert_request_error(code, doc, "inputs", "x[1, 3, 4, 5]")
    assert not (folder / "x.onnx").exists()


def test_unknown_dtype(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, "export", str(folder / "tiny.py") + ":TinyNet", "-o",
                         str(folder / "x.onnx"), "--input", "x=1x4:float33")
    assert_request_error(code, doc, "recipe", "float33", "float32")


def test_unknown_exporter_in_recipe(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_recipe(folder, "bad_exporter.toml", RECIPE.format(output="b.onnx",
                                                                   exporter="magic"))
    code, doc = run_json(capsys, "export", "--recipe", str(path))
    assert_request_error(code, doc, "recipe", "export.exporter", "magic", "dynamo")


def test_unknown_exporter_flag(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, "export", "x.py:N", "-o", "x.onnx", "--exporter", "magic")
    assert_request_error(code, doc, "recipe", "magic")


def test_broken_toml(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_recipe(folder, "broken.toml", "version = 1\n[model\nsource = 'x'\n")
    code, doc = run_json(capsys, "export", "--recipe", str(path))
    assert_request_error(code, doc, "recipe", "broken.toml", "line 2")


def test_unknown_recipe_version(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_recipe(folder, "v9.toml", "version = 9\n[model]\nsource = 'tiny.py:TinyNet'\n")
    code, doc = run_json(capsys, "export", "--recipe", str(path))
    assert_request_error(code, doc, "recipe", "version", "9")


def test_output_path_under_a_regular_file(folder: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    (folder / "plainfile").write_text("x")
    code, doc = run_json(capsys, "export", str(folder / "tiny.py") + ":TinyNet", "-o",
                         str(folder / "plainfile" / "m.onnx"), "--input", "x=1x4")
    assert_request_error(code, doc, "write", "plainfile")


def test_corrupt_onnx_given_to_inspect(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = folder / "corrupt.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 50)
    code, doc = run_json(capsys, "inspect", str(bad))
    assert_request_error(code, doc, "source", "corrupt.onnx")
    code, doc = run_json(capsys, "inspect", str(folder / "absent.onnx"))
    assert_request_error(code, doc, "source", "absent.onnx")


def test_pickled_module_without_trust(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    sys.path.insert(0, str(folder))
    try:
        import tiny  # type: ignore[import-not-found]

        torch.save(tiny.TinyNet(), folder / "whole.pt")
    finally:
        sys.path.remove(str(folder))
    code, doc = run_json(capsys, "export", str(folder / "whole.pt"), "-o",
                         str(folder / "w.onnx"), "--input", "x=1x4")
    assert_request_error(code, doc, "source", "whole.pt")
    assert "trust_pickle = true" in doc["error"]["message"] + doc["error"]["hint"]


def test_unknown_option_still_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, "export", "--frobnicate")
    assert_request_error(code, doc, "recipe", "frobnicate")


def test_failed_export_exits_1_and_keeps_the_old_file(folder: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    target = folder / "kept.onnx"
    assert main(["export", str(folder / "tiny.py") + ":TinyNet", "-o", str(target), "--input",
                 "x=1x4", "--exporter", "torchscript"]) == 0
    before = target.read_bytes()
    capsys.readouterr()
    code, doc = run_json(capsys, "export", str(folder / "tiny.py") + ":Unconvertible", "-o",
                         str(target), "--input", "x=4x4", "--exporter", "torchscript")
    assert code == 1 and doc["ok"] is False
    assert doc["error"]["kind"] == "unsupported_operator"
    assert "aten::linalg_qr" in doc["error"]["unsupported_ops"]
    assert target.read_bytes() == before


def test_console_script_runs_as_a_process(folder: Path) -> None:
    """The real entry point: exit status and the JSON as the last stdout line."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "onnx_studio.engine.cli", "export", "--recipe",
         str(folder / "missing.toml"),
         "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert doc["error"]["kind"] == "recipe" and "missing.toml" in doc["error"]["message"]
    assert "error:" in result.stderr


# ---------------------------------------------------------------------------- validation


def test_export_with_validate_reports_every_trial(folder: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = write_recipe(folder, "v.toml", RECIPE.format(output="v.onnx", exporter="torchscript"))
    code, doc = run_json(capsys, "export", "--recipe", str(path), "--validate")
    assert code == 0, doc
    validation = doc["validation"]
    assert validation["ok"] is True and validation["rtol"] == 1e-3
    assert [o["name"] for o in validation["outputs"]] == ["y"]
    assert validation["outputs"][0]["max_abs_diff"] < 1e-4 and validation["outputs"][0]["passed"]
    kinds = [t["kind"] for t in validation["trials"]]
    assert kinds[0] == "export-inputs" and "random" in kinds
    sizes = [t["sizes"]["batch"] for t in validation["trials"] if t["kind"] == "dynamic-size"]
    assert len(sizes) == 2 and 2 not in sizes
    assert set(doc["seconds"]) >= {"load", "export", "validate"}


def test_validate_command_passes_and_fails_by_tolerance(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_recipe(folder, "vv.toml", RECIPE.format(output="vv.onnx",
                                                         exporter="torchscript"))
    assert main(["export", "--recipe", str(path)]) == 0
    capsys.readouterr()
    code, doc = run_json(capsys, "validate", str(folder / "vv.onnx"), "--recipe", str(path))
    assert code == 0 and doc["ok"] and doc["validation"]["ok"], doc
    code, doc = run_json(capsys, "validate", str(folder / "vv.onnx"), "--recipe", str(path),
                         "--rtol", "0", "--atol", "0")
    if doc["validation"]["outputs"][0]["max_abs_diff"] == 0:  # pragma: no cover - bit-exact
        pytest.skip("ONNX Runtime matched PyTorch bit for bit")
    assert code == 1 and doc["ok"] is False and doc["error"]["kind"] == "validation"
    assert doc["validation"]["outputs"][0]["max_abs_diff"] > 0


def test_validate_a_missing_model_is_a_wrong_request(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_recipe(folder, "vm.toml", RECIPE.format(output="vm.onnx",
                                                         exporter="torchscript"))
    code, doc = run_json(capsys, "validate", str(folder / "absent.onnx"), "--recipe", str(path))
    assert_request_error(code, doc, "source", "absent.onnx")


def test_sys_exit_in_the_model_is_a_source_error_with_json(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "bye.py").write_text(
        "import sys, torch\nclass Bye(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        sys.exit(0)\n")
    code, doc = run_json(capsys, "export", str(folder / "bye.py") + ":Bye", "-o",
                         str(folder / "bye.onnx"), "--input", "x=1x4")
    assert_request_error(code, doc, "source", "SystemExit")
    assert not (folder / "bye.onnx").exists()


def test_save_recipe_into_a_missing_folder(folder: Path, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    code, doc = run_json(capsys, "export", str(folder / "tiny.py") + ":TinyNet", "-o",
                         str(folder / "s.onnx"), "--input", "x=1x4", "--save-recipe",
                         str(folder / "no" / "such" / "r.toml"))
    assert_request_error(code, doc, "write", "r.toml", "--save-recipe")


def test_a_dimension_name_that_is_not_a_name(folder: Path, capsys: pytest.CaptureFixture[str]
                                             ) -> None:
    code, doc = run_json(capsys, "export", str(folder / "tiny.py") + ":TinyNet", "-o",
                         str(folder / "d.onnx"), "--input", "x=1x4", "--dynamic", "x:0=bat-ch")
    assert_request_error(code, doc, "recipe", "bat-ch", "inputs[0].dynamic")


def test_a_file_input_with_an_axis_beyond_its_rank(folder: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np

    np.save(folder / "x.npy", np.ones((2, 4), np.float32))
    path = write_recipe(folder, "file_axis.toml", """
version = 1
[model]
source = "tiny.py:TinyNet"
[[inputs]]
name = "x"
fill = "file"
file = "x.npy"
dynamic = { 5 = "batch" }
[export]
output = "fa.onnx"
exporter = "torchscript"
""")
    code, doc = run_json(capsys, "export", "--recipe", str(path))
    assert_request_error(code, doc, "inputs", "axis 5", "rank 2")
