"""A clean slate per job in the warm worker: user modules are forgotten after each job, and a
worker that ran extension files ends after that job (onnx_studio.engine.worker's docstring).

Driven over real pipes, as the GUI drives the worker; every read has a deadline
(tests.conftest.read_json_line kills a silent worker and fails the test).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import REPO, read_json_line

LINE_TIMEOUT_S = 90  # the longest a job here may stay silent, on a loaded machine
CUSTOM_OP_RECIPE = REPO / "onnx_studio" / "resources" / "recipes" / "custom_op.toml"
CUSTOM_OP_SYMBOLICS = REPO / "onnx_studio" / "resources" / "models" / "custom_op_symbolics.py"


class Worker:
    """One `python -m onnx_studio.engine.worker` process; `launch` several, then `wait_ready` each,
    so their torch imports overlap."""

    def __init__(self, cache: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO), "ONNX_STUDIO_CACHE_DIR": str(cache)}
        env.pop("ONNX_STUDIO_WORKER_WARM_FIRST", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as for most users: .pyc files get written
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "onnx_studio.engine.worker"], cwd=REPO, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.ids = iter(range(1, 10_000))
        self.ready: dict[str, Any] | None = None

    def read(self) -> dict[str, Any]:
        message = read_json_line(self.proc, LINE_TIMEOUT_S)
        if self.ready is None and message.get("type") == "ready":
            self.ready = message
            return self.read()
        return message

    def send(self, request: dict[str, Any]) -> int:
        job_id = next(self.ids)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({**request, "id": job_id}) + "\n")
        self.proc.stdin.flush()
        return job_id

    def answer(self, job_id: int) -> dict[str, Any]:
        """The final `result` or `error` of job `job_id` (its other events skipped)."""
        while True:
            event = self.read()
            assert event.get("id") == job_id, event
            if event["type"] in ("result", "error"):
                return event

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        return self.answer(self.send(request))

    def export(self, recipe: str, base_dir: Path) -> dict[str, Any]:
        """Export; the report of a result (a failed export is a result with its error)."""
        answer = self.run({"job": "export", "recipe": recipe, "base_dir": str(base_dir),
                           "validate": False})
        assert answer["type"] == "result", answer
        return answer["report"]

    def exit_status(self, timeout: float = 30) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.close()
            raise AssertionError(f"the worker did not exit within {timeout:g} s") from None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Any]:
    """Start workers; every one is ended when the test ends."""
    started: list[Worker] = []

    def start() -> Worker:
        worker = Worker(tmp_path / "cache")
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.close()


@pytest.fixture(scope="module")
def warm_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    """One warm worker for the tests that run several jobs in a row in the same process."""
    worker = Worker(tmp_path_factory.mktemp("cache"))
    yield worker
    if worker.proc.poll() is None:
        worker.send({"job": "quit"})
        assert worker.exit_status() == 0
    worker.close()


def model_recipe(source: str) -> str:
    return textwrap.dedent(f"""\
        version = 1

        [model]
        source = "{source}"

        [[inputs]]
        name = "x"
        shape = [2, 4]
        fill = "randn"

        [export]
        output = "out/model.onnx"
        exporter = "torchscript"

        [validate]
        enabled = false
        """)


def module_file(forward: str, imports: str = "") -> str:
    """A model file whose Net.forward returns `forward` (an expression in x)."""
    return (f"import torch\n{imports}\n\nclass Net(torch.nn.Module):\n"
            f"    def forward(self, x):\n        return {forward}\n")


def onnx_of(x: np.ndarray, report: dict[str, Any]) -> np.ndarray:
    """Run the exported file of `report` on `x`."""
    import onnxruntime as ort

    assert report["ok"], report["error"]
    session = ort.InferenceSession(report["output"], providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


X = np.arange(8, dtype=np.float32).reshape(2, 4)


# ---------------------------------------------------------------------------- user modules


def test_two_model_files_called_model_py_each_load_their_own_class(
        warm_worker: Worker, tmp_path: Path) -> None:
    plus, times = tmp_path / "plus", tmp_path / "times"
    for folder, forward in ((plus, "x + 1"), (times, "x * 3")):
        folder.mkdir()
        (folder / "model.py").write_text(module_file(forward), encoding="utf-8")
    first = warm_worker.export(model_recipe("model.py:Net"), plus)
    second = warm_worker.export(model_recipe("model.py:Net"), times)
    np.testing.assert_allclose(onnx_of(X, first), X + 1)
    np.testing.assert_allclose(onnx_of(X, second), X * 3)


def test_a_model_file_edited_between_two_exports_is_imported_again(
        warm_worker: Worker, tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(module_file("x + 1"), encoding="utf-8")
    first = warm_worker.export(model_recipe("model.py:Net"), tmp_path)
    np.testing.assert_allclose(onnx_of(X, first), X + 1)
    # Same size, and very likely the same second: a cached .pyc would pass for the new source.
    model.write_text(module_file("x - 5"), encoding="utf-8")
    second = warm_worker.export(model_recipe("model.py:Net"), tmp_path)
    np.testing.assert_allclose(onnx_of(X, second), X - 5)
    assert not (tmp_path / "__pycache__").exists()  # no bytecode left in the user's folder


def test_no_module_from_the_users_folder_outlives_its_job(
        warm_worker: Worker, tmp_path: Path) -> None:
    """A sibling module and a module of a sibling package: the next job reads them afresh
    and finds the new files in their place."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "model.py").write_text(
        module_file("ops.f(helper.f(x))", imports="import helper\nfrom lib import ops\n"),
        encoding="utf-8")

    def write_siblings(helper: str, ops: str) -> None:
        for path, body in (("helper.py", helper), ("lib/ops.py", ops)):
            (tmp_path / path).write_text(f"def f(x):\n    return {body}\n", encoding="utf-8")

    write_siblings("x + 1", "x * 2")
    first = warm_worker.export(model_recipe("model.py:Net"), tmp_path)
    np.testing.assert_allclose(onnx_of(X, first), (X + 1) * 2)
    write_siblings("x - 7", "x / 4")  # the same sizes as before
    second = warm_worker.export(model_recipe("model.py:Net"), tmp_path)
    np.testing.assert_allclose(onnx_of(X, second), (X - 7) / 4)


PROBE = """
import importlib, json, sys

from onnx_studio.engine.source import load  # the baseline: what was loaded before any user code

sys.path.insert(0, sys.argv[1])
for name in ("hygiene_probe_pkg.sub", "hygiene_probe_ns.mod", "torch.onnx",
             "onnx_studio.engine.export.diagnose"):
    importlib.import_module(name)
sys.path.remove(sys.argv[1])
forgotten = load.forget_user_modules()
print(json.dumps({"forgotten": forgotten, "left": sorted(sys.modules)}))
"""


def test_forget_user_modules_keeps_installed_and_engine_modules(tmp_path: Path) -> None:
    """The rule itself, in a process of its own (the test process's modules stay put): a
    package from a folder outside the installation, imported after the engine, is forgotten;
    torch, the standard library and the engine are kept."""
    (tmp_path / "hygiene_probe_pkg").mkdir()
    (tmp_path / "hygiene_probe_pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "hygiene_probe_pkg" / "sub.py").write_text("VALUE = 1\n", encoding="utf-8")
    (tmp_path / "hygiene_probe_ns").mkdir()  # a namespace package: no __init__.py
    (tmp_path / "hygiene_probe_ns" / "mod.py").write_text("VALUE = 2\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(found["forgotten"]) == {"hygiene_probe_pkg", "hygiene_probe_pkg.sub",
                                       "hygiene_probe_ns", "hygiene_probe_ns.mod"}
    for kept in ("torch", "torch.onnx", "json", "onnx_studio.engine.export.diagnose",
                 "onnx_studio.engine.source.load"):
        assert kept in found["left"]


# ---------------------------------------------------------------------------- extensions


def custom_op_recipe(extensions: bool) -> str:
    """The shipped custom-op recipe, its extension named by absolute path, output in base_dir."""
    text = CUSTOM_OP_RECIPE.read_text(encoding="utf-8")
    named = '["../models/custom_op_symbolics.py"]'
    assert named in text
    return text.replace(named, json.dumps([str(CUSTOM_OP_SYMBOLICS)]) if extensions else "[]")


def test_a_worker_that_ran_extensions_ends_and_the_next_job_fails_as_in_a_fresh_one(
        launch: Any, tmp_path: Path) -> None:
    fresh, tainted, spare = launch(), launch(), launch()  # torch imports overlap
    for folder in ("fresh", "tainted", "spare"):
        (tmp_path / folder).mkdir()

    reference = fresh.export(custom_op_recipe(extensions=False), tmp_path / "fresh")
    assert not reference["ok"]
    assert reference["error"]["kind"] == "unsupported_operator", reference["error"]

    with_symbolics = tainted.send({"job": "export", "recipe": custom_op_recipe(extensions=True),
                                   "base_dir": str(tmp_path / "tainted"), "validate": False})
    queued = tainted.send({"job": "ping"})  # sent before the worker ends: never answered
    answer = tainted.answer(with_symbolics)
    assert answer["type"] == "result" and answer["report"]["ok"], answer
    assert tainted.exit_status() == 0  # ends right after the extension job's final line
    with pytest.raises(AssertionError, match="closed its stdout"):
        tainted.answer(queued)

    # The next job runs in the spare, as the GUI does, and fails exactly as in a fresh process.
    again = spare.export(custom_op_recipe(extensions=False), tmp_path / "spare")
    assert not again["ok"]
    assert (again["error"]["kind"], again["error"]["message"]) == (
        reference["error"]["kind"], reference["error"]["message"])


def test_a_worker_whose_extension_failed_ends_too(launch: Any, tmp_path: Path) -> None:
    """An extension that registered half its work and then raised leaves the process changed
    just the same."""
    broken = tmp_path / "broken_symbolics.py"
    broken.write_text(CUSTOM_OP_SYMBOLICS.read_text(encoding="utf-8")
                      + "\nraise RuntimeError('after registering')\n", encoding="utf-8")
    worker = launch()
    text = custom_op_recipe(extensions=True).replace(
        json.dumps([str(CUSTOM_OP_SYMBOLICS)]), json.dumps([str(broken)]))
    report = worker.export(text, tmp_path)
    assert not report["ok"]
    assert "after registering" in report["error"]["message"]
    assert worker.exit_status() == 0


def test_a_job_without_extensions_leaves_the_worker_running(launch: Any, tmp_path: Path) -> None:
    worker = launch()
    (tmp_path / "model.py").write_text(module_file("x + 1"), encoding="utf-8")
    assert worker.export(model_recipe("model.py:Net"), tmp_path)["ok"]
    assert worker.run({"job": "ping"})["pong"] is True
    assert worker.proc.poll() is None
