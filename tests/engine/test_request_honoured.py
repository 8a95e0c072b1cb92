"""A request is honoured or refused, never reported as a success it is not.

File modes kept, finite tolerances, the opset asked for, no empty graph over a good file, and
the JSON line alone on stdout whatever the model prints.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.cli import main
from onnx_studio.engine.export.onnx_file import referenced_data
from onnx_studio.engine.export.request_check import check_request
from onnx_studio.engine.files import write_text_atomic
from onnx_studio.engine.validation.metrics import compare
from tests.conftest import REPO

MODELS = '''
import os
import sys
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


class Nothing(torch.nn.Module):
    def forward(self, x):
        x * 2
        return None


class NoTensor(torch.nn.Module):
    def forward(self, x):
        return {"count": int(x.shape[0])}


class Chatty(torch.nn.Module):
    """Prints without a newline from Python and writes to fd 1 from "C", every call."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        print("progress 50%", end="")
        sys.stdout.flush()
        os.write(1, b"raw fd write ")
        return self.fc(x)


class IgnoresMask(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x, mask):
        return self.fc(x)
'''


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("honoured")
    (folder / "m.py").write_text(MODELS)
    return folder


def cli(folder: Path, *argv: str) -> tuple[int, dict, subprocess.CompletedProcess[str]]:
    """Run `onnx-studio ... --json` as its own process (stdout at the file-descriptor level)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "onnx_studio.engine.cli", *argv, "--json"],
                            cwd=folder,
                            capture_output=True, text=True, env=env, timeout=300)
    lines = result.stdout.splitlines()
    assert lines, result.stderr
    return result.returncode, json.loads(lines[-1]), result


def export_args(source: str, out: Path, *extra: str) -> list[str]:
    return ["export", source, "-o", str(out), "--input", "x=2x4", "--exporter", "torchscript",
            *extra]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    lines = capsys.readouterr().out.strip().splitlines()
    return code, json.loads(lines[-1])


# ---------------------------------------------------------------------------- file modes


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _umask_mode() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def test_an_overwritten_onnx_keeps_its_private_mode(folder: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    target = folder / "private.onnx"
    code, doc = run_json(capsys, *export_args(str(folder / "m.py") + ":Net", target))
    assert code == 0, doc
    assert _mode(target) == _umask_mode()  # a new file: what the umask gives any new file
    target.chmod(0o600)
    code, doc = run_json(capsys, *export_args(str(folder / "m.py") + ":Net", target))
    assert code == 0, doc
    assert _mode(target) == 0o600


def test_an_overwritten_onnx_and_its_data_keep_their_modes(
        folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = folder / "ext.toml"
    recipe.write_text('version = 1\n[model]\nsource = "m.py:Net"\n[[inputs]]\nname = "x"\n'
                      'shape = [2, 4]\n[export]\noutput = "ext.onnx"\nexporter = "torchscript"\n'
                      'external_data = "always"\n')
    assert run_json(capsys, "export", "--recipe", str(recipe))[0] == 0
    data = folder / "ext.onnx.data"
    assert data.is_file()
    (folder / "ext.onnx").chmod(0o600)
    data.chmod(0o640)
    code, doc = run_json(capsys, "export", "--recipe", str(recipe))
    assert code == 0, doc
    # the new data lives under a name the old file did not read (see test_atomic_onnx_write)
    (name,) = referenced_data(folder / "ext.onnx")
    assert _mode(folder / "ext.onnx") == 0o600 and _mode(folder / name) == 0o640


def test_text_files_get_the_umask_mode_and_keep_an_existing_one(tmp_path: Path) -> None:
    path = tmp_path / "r.toml"
    write_text_atomic(path, "a = 1\n")
    assert _mode(path) == _umask_mode()  # not mkstemp's 0600
    path.chmod(0o600)
    write_text_atomic(path, "a = 2\n")
    assert path.read_text() == "a = 2\n" and _mode(path) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["r.toml"]  # no temp file left


# ---------------------------------------------------------------------------- tolerances


@pytest.fixture(scope="module")
def exported(folder: Path) -> tuple[Path, Path]:
    recipe = folder / "tol.toml"
    recipe.write_text('version = 1\n[model]\nsource = "m.py:Net"\n[[inputs]]\nname = "x"\n'
                      'shape = [2, 4]\n[export]\noutput = "tol.onnx"\nexporter = "torchscript"\n')
    assert main(["export", "--recipe", str(recipe)]) == 0
    return recipe, folder / "tol.onnx"


@pytest.mark.parametrize(("flags", "field"), [
    (["--rtol", "nan", "--atol", "nan"], "validate.rtol"),
    (["--atol", "nan"], "validate.atol"),
    (["--rtol", "inf"], "validate.rtol"),
    (["--atol=-1e-3"], "validate.atol"),
])
def test_tolerances_must_be_finite_and_not_negative(
        exported: tuple[Path, Path], capsys: pytest.CaptureFixture[str], flags: list[str],
        field: str) -> None:
    recipe, model = exported
    capsys.readouterr()
    code, doc = run_json(capsys, "validate", str(model), "--recipe", str(recipe), *flags)
    assert code == 2 and doc["ok"] is False, doc
    assert doc["error"]["kind"] == "recipe" and field in doc["error"]["message"], doc
    assert doc["validation"] is None


def test_a_nan_tolerance_in_a_recipe_is_refused(folder: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    recipe = folder / "nan.toml"
    recipe.write_text('version = 1\n[model]\nsource = "m.py:Net"\n[[inputs]]\nname = "x"\n'
                      'shape = [2, 4]\n[export]\noutput = "nan.onnx"\n[validate]\nrtol = nan\n')
    code, doc = run_json(capsys, "export", "--recipe", str(recipe), "--validate")
    assert code == 2 and doc["error"]["kind"] == "recipe", doc
    assert "validate.rtol" in doc["error"]["message"]
    assert not (folder / "nan.onnx").exists()


def test_validation_fails_where_the_tolerance_is_real(
        exported: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """The same file passes with the defaults and fails with a zero tolerance: the
    tolerance is used, not ignored (the NaN case above would otherwise pass everything)."""
    recipe, model = exported
    model_proto = onnx.load(str(model))
    weight = next(i for i in model_proto.graph.initializer if i.name.endswith("weight"))
    values = onnx.numpy_helper.to_array(weight).copy()
    values[0, 0] += 0.25
    weight.CopyFrom(onnx.numpy_helper.from_array(values, weight.name))
    broken = model.with_name("broken.onnx")
    onnx.save(model_proto, str(broken))
    code, doc = run_json(capsys, "validate", str(broken), "--recipe", str(recipe))
    assert code == 1 and doc["error"]["kind"] == "validation", doc


def test_compare_refuses_a_nan_tolerance_and_counts_matched_nans() -> None:
    ref = np.array([1.0, np.nan, 3.0], np.float32)
    with pytest.raises(ValueError, match="finite"):
        compare(ref, ref, float("nan"), 0.0)
    same = compare(ref, ref.copy(), 1e-3, 1e-5)
    assert same["passed"] and same["matched_nans"] == 1 and same["nan_mismatch"] == 0
    moved = compare(ref, np.array([np.nan, 2.0, 3.0], np.float32), 1e-3, 1e-5)
    assert not moved["passed"] and moved["nan_mismatch"] == 2 and moved["matched_nans"] == 0
    one_sided = compare(np.array([1.0, 2.0], np.float32), np.array([1.0, np.nan], np.float32),
                        1.0, 1.0)
    assert not one_sided["passed"] and one_sided["nan_mismatch"] == 1


# ---------------------------------------------------------------------------- opset


@pytest.mark.parametrize("opset", ["7", "17"])
def test_dynamo_below_18_is_refused_before_exporting(
        folder: Path, capsys: pytest.CaptureFixture[str], opset: str) -> None:
    out = folder / f"dyn{opset}.onnx"
    code, doc = run_json(capsys, "export", str(folder / "m.py") + ":Net", "-o", str(out),
                         "--input", "x=2x4", "--opset", opset)
    assert code == 2 and doc["error"]["kind"] == "recipe", doc
    assert "dynamo exporter writes opset 18 or newer" in doc["error"]["message"]
    assert "TorchScript" in doc["error"]["message"]
    assert not out.exists()


def test_an_opset_above_the_torchscript_exporters_is_refused(
        folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from onnx_studio.engine.export.exporter import exporter_opsets

    high = exporter_opsets()["torchscript"][1]
    out = folder / "ts_high.onnx"
    code, doc = run_json(capsys, *export_args(str(folder / "m.py") + ":Net", out, "--opset",
                                              str(high + 1)))
    assert code == 2 and doc["error"]["kind"] == "recipe", doc
    assert f"{high + 1}" in doc["error"]["message"] and not out.exists()


def test_the_opset_asked_for_is_the_opset_written(
        folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = folder / "ts13.onnx"
    code, doc = run_json(capsys, *export_args(str(folder / "m.py") + ":Net", out, "--opset",
                                              "13"))
    assert code == 0 and doc["opset"] == 13, doc
    opsets = {o.domain: o.version for o in onnx.load(str(out)).opset_import}
    assert opsets[""] == 13
    # a file whose opset differs from the request is an error, never a success
    recipe = recipes.Recipe(base_dir=folder)
    recipe.model.source = "m.py:Net"
    recipe.inputs = [recipes.InputSpec(name="x", shape=[2, 4])]
    recipe.export.exporter = "torchscript"
    recipe.export.opset = 18
    found = check_request(out, recipe)
    assert found.error is not None and "opset 13, not the opset 18" in found.error.message


# ---------------------------------------------------------------------------- empty graphs


@pytest.mark.parametrize(("name", "words"), [("Nothing", "returns None"),
                                             ("NoTensor", "no tensor (dict)")])
def test_a_forward_without_tensors_never_replaces_a_good_file(
        folder: Path, capsys: pytest.CaptureFixture[str], name: str, words: str) -> None:
    target = folder / f"good_{name}.onnx"
    assert run_json(capsys, *export_args(str(folder / "m.py") + ":Net", target))[0] == 0
    before = target.read_bytes()
    for exporter in ("torchscript", "dynamo"):
        code, doc = run_json(capsys, "export", str(folder / "m.py") + f":{name}", "-o",
                             str(target), "--input", "x=2x4", "--exporter", exporter)
        assert code == 1 and doc["ok"] is False, doc
        assert doc["error"]["kind"] == "export" and words in doc["error"]["message"], doc
        assert target.read_bytes() == before
    assert sorted(p.name for p in folder.glob(f".good_{name}.onnx*")) == []


def test_a_file_without_outputs_is_an_error(tmp_path: Path) -> None:
    graph = helper.make_graph([], "empty", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 4])], [])
    path = tmp_path / "empty.onnx"
    onnx.save(helper.make_model(graph), str(path))
    recipe = recipes.Recipe(base_dir=tmp_path)
    recipe.inputs = [recipes.InputSpec(name="x", shape=[2, 4])]
    found = check_request(path, recipe)
    assert found.error is not None and "no outputs" in found.error.message


def test_an_input_the_graph_drops_is_named(folder: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = folder / "mask.onnx"
    code, doc = run_json(capsys, "export", str(folder / "m.py") + ":IgnoresMask", "-o", str(out),
                         "--input", "x=2x4", "--input", "mask=2x4", "--exporter", "torchscript")
    assert code == 0, doc
    dropped = [w for w in doc["warnings"] if w["category"] == "DroppedInput"]
    assert len(dropped) == 1 and "'mask'" in dropped[0]["message"], doc["warnings"]


# ---------------------------------------------------------------------------- stdout


def test_the_json_line_is_alone_whatever_the_model_prints(folder: Path) -> None:
    out = folder / "chatty.onnx"
    code, doc, result = cli(folder, *export_args(str(folder / "m.py") + ":Chatty", out),
                            "--validate")
    assert code == 0, result.stderr
    assert doc["ok"] is True and doc["validation"]["ok"] is True
    assert result.stdout.count("\n") == 1 and result.stdout.startswith("{"), result.stdout
    assert "progress 50%" in result.stderr and "raw fd write" in result.stderr


def test_a_failing_chatty_model_still_ends_in_the_json_line(folder: Path) -> None:
    code, doc, result = cli(folder, "export", str(folder / "m.py") + ":Chatty", "-o",
                            str(folder / "c2.onnx"), "--input", "x=2x5")
    assert code == 2 and doc["error"]["kind"] == "inputs", doc
    assert result.stdout.count("\n") == 1 and result.stdout.startswith("{"), result.stdout
