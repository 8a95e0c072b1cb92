"""The Python API on a model object, as torch.onnx.export takes it: `onnx_studio.export(model,
args=(x,), ...)` and `onnx_studio.validate(model, "m.onnx", args=(x,))`, the module run in a
worker process (a class defined in `__main__` included), wrong arguments answered with a
document."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import onnx_studio
from tests.conftest import REPO

TIMEOUT_S = 200

# A notebook's cell: the class lives in __main__, which the worker process cannot import; a
# keyword tensor and a module-level constant its forward() reads; the batch is dynamic.
NOTEBOOK = textwrap.dedent("""
    import json, sys
    import numpy as np
    import onnxruntime as ort
    import torch
    from torch.export import Dim
    import onnx_studio

    class Gate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(6, 4)

        def forward(self, x, mask):
            return torch.tanh(self.proj(x)) * mask * SCALE

    SCALE = 3.0
    torch.manual_seed(0)
    model = Gate()
    x, mask = torch.randn(2, 6), torch.ones(2, 4)
    out = sys.argv[1]
    report = onnx_studio.export(model, args=(x,), kwargs={"mask": mask}, output=out,
                                dynamic_shapes={"x": {0: Dim("batch")}, "mask": {0: Dim("batch")}},
                                output_names=["gated"], opset=18)
    # the file at another batch size computes what the module computes
    x5, mask5 = torch.randn(5, 6), (torch.rand(5, 4) > 0.5).float()
    session = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    got = session.run(None, {"x": x5.numpy(), "mask": mask5.numpy()})[0]
    want = model(x5, mask=mask5).detach().numpy()
    checked = onnx_studio.validate(model, out, args=(x5,), kwargs={"mask": mask5})
    with torch.no_grad():
        model.proj.weight[0, 0] += 1.0  # another model: the file no longer matches it
    other = onnx_studio.validate(model, out, args=(x5,), kwargs={"mask": mask5})
    print(json.dumps({"type": type(report).__name__, "report": report.to_dict(),
                      "batch5_max_diff": float(np.abs(got - want).max()),
                      "validate": checked.to_dict(), "other": other.to_dict()}))
""")


@pytest.fixture(scope="module")
def notebook(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The notebook's cell run as a script (its classes in __main__); what it printed."""
    folder = tmp_path_factory.mktemp("notebook")
    script = folder / "cell.py"
    script.write_text(NOTEBOOK, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script), str(folder / "out" / "gate.onnx")],
                          cwd=folder, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S - 20)
    assert done.returncode == 0, done.stderr[-4000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]), folder=str(folder))


@pytest.mark.timeout(TIMEOUT_S)
def test_a_notebook_model_exports_with_a_dynamic_batch_and_is_validated(notebook: dict) -> None:
    report = notebook["report"]
    assert notebook["type"] == "ExportReport"
    assert report["ok"] and report["error"] is None, report["error"]
    assert report["output"] == str(Path(notebook["folder"]) / "out" / "gate.onnx")
    assert report["opset"] == 18
    graph = report["graph"]
    assert [(i["name"], i["shape"]) for i in graph["inputs"]] == [("x", ["batch", 6]),
                                                                 ("mask", ["batch", 4])]
    assert [o["name"] for o in graph["outputs"]] == ["gated"]
    validation = report["validation"]
    assert validation["ok"] and [o["name"] for o in validation["outputs"]] == ["gated"]
    assert validation["outputs"][0]["max_abs_diff"] is not None
    assert notebook["batch5_max_diff"] < 1e-5  # the batch is dynamic, forward() followed
    assert not list((Path(notebook["folder"]) / "out").glob("*.pt"))  # no job files left


@pytest.mark.timeout(TIMEOUT_S)
def test_validate_takes_the_model_object_and_fails_another(notebook: dict) -> None:
    checked, other = notebook["validate"], notebook["other"]
    assert checked["ok"] and checked["validation"]["ok"], checked["error"]
    assert checked["validation"]["outputs"][0]["name"] == "gated"
    assert not other["ok"] and other["error"]["kind"] == "validation", other["error"]
    assert not other["validation"]["outputs"][0]["passed"]


class Exits(torch.nn.Module):
    """A model whose forward() ends its process, as a crashing extension would."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os._exit(3)


@pytest.mark.timeout(TIMEOUT_S)
def test_a_model_that_exits_in_forward_is_a_document_and_the_caller_goes_on(
        tmp_path: Path) -> None:
    report = onnx_studio.export(Exits(), args=(torch.ones(2, 3),), output=tmp_path / "e.onnx")
    assert isinstance(report, onnx_studio.ExportReport)
    assert not report.ok and report.error is not None
    assert report.error.kind == "worker_crashed", report.error
    assert "exit status 3" in report.error.message and report.error.exit_status() == 1
    assert not (tmp_path / "e.onnx").exists()
    jobs = Path(os.environ["ONNX_STUDIO_CACHE_DIR"]) / "models"
    assert jobs.is_dir() and not list(jobs.iterdir())  # the job folder went with the job
    assert torch.ones(1).item() == 1.0  # still here


class Small(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        return x * 2 if y is None else x + y


@pytest.mark.parametrize(("call", "kind", "says"), [
    ({"args": torch.ones(2)}, "recipe", "args=(x,)"),
    ({"args": (torch.ones(2), object())}, "recipe", "object"),
    ({"args": ([],)}, "recipe", "empty"),
    ({"args": (torch.ones(2),), "kwargs": {"z": torch.ones(2)}}, "recipe", "do not fit"),
    ({"args": (torch.ones(2),), "output": "m.txt"}, "write", "m.onnx"),
    ({"args": (torch.ones(2),), "output": None}, "recipe", "output"),
    ({"args": (torch.ones(2),), "dynamic_shapes": {"z": {0: "b"}}}, "recipe", "'z'"),
    ({"args": (torch.ones(2),), "dynamic_shapes": {"x": {3: "b"}}}, "recipe", "axis 3"),
    ({"args": (torch.ones(2),), "dynamic_shapes": {"x": {0: "a b"}}}, "recipe", "'a b'"),
    ({"args": (torch.ones(2),), "input_names": ["a", "b"]}, "recipe", "2 names for 1"),
    ({"args": (torch.ones(2),), "exporter": "onnx"}, "recipe", "exporter"),
])
def test_wrong_arguments_are_documents_that_say_what_to_change(
        tmp_path: Path, call: dict, kind: str, says: str) -> None:
    call = {"output": tmp_path / "m.onnx", **call}
    if isinstance(call["output"], str):
        call["output"] = tmp_path / call["output"]
    report = onnx_studio.export(Small(), **call)
    assert not report.ok and report.error is not None
    assert report.error.kind == kind and report.error.exit_status() == 2, report.error
    assert says in report.error.message + report.error.hint, report.error
    assert not list(tmp_path.iterdir())  # nothing written


def test_model_arguments_with_a_recipe_and_a_recipe_with_a_model_are_refused(
        tmp_path: Path) -> None:
    wrong = onnx_studio.export(tmp_path / "r.toml", args=(torch.ones(2),))
    assert wrong.error is not None and wrong.error.kind == "recipe"
    assert "model object" in wrong.error.message and wrong.error.exit_status() == 2
    recipe = onnx_studio.Recipe()
    backwards = onnx_studio.validate(Small(), recipe, args=(torch.ones(2),))
    assert backwards.error is not None and backwards.error.kind == "recipe"
    assert "path second" in backwards.error.message
    missing = onnx_studio.validate(Small(), tmp_path / "none.onnx", args=(torch.ones(2),))
    assert missing.error is not None and missing.error.kind == "recipe"
    assert missing.error.exit_status() == 2
