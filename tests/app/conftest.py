"""Fixtures for the window tests: an output folder per test, models that export slowly, small
ONNX files to compare, and a fresh window per test on a warm worker shared by the test
module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from PySide6.QtCore import Qt
from pytestqt.exceptions import TimeoutError as QtWaitTimeout

from onnx_studio.app import settings as settings_mod
from onnx_studio.app.jobs import JobRunner
from onnx_studio.app.outcomes import ExportOutcome
from onnx_studio.app.session import ExportSession
from onnx_studio.app.window import MainWindow
from onnx_studio.engine.protocol import Event, PingRequest

SLOW_MODEL = '''
import subprocess
import time
from pathlib import Path

import torch


class Slow(torch.nn.Module):
    """Construction starts a child process and sleeps: a long job to cancel or kill."""

    def __init__(self, seconds: float = 60.0) -> None:
        super().__init__()
        child = subprocess.Popen(["sleep", str(seconds)])
        Path(__file__).with_suffix(".child").write_text(str(child.pid))
        time.sleep(seconds)
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
'''


@pytest.fixture(autouse=True)
def _output_dir(tmp_path_factory: pytest.TempPathFactory,
                monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Example recipes export into a temp folder, never into the user's home."""
    out = tmp_path_factory.mktemp("exports")
    monkeypatch.setenv("ONNX_STUDIO_OUTPUT_DIR", str(out))
    yield out


def write_slow_model(folder: Path) -> Path:
    path = folder / "slow_net.py"
    path.write_text(SLOW_MODEL, encoding="utf-8")
    return path


def write_mlp(path: Path, scale: float, extra: bool = False) -> Path:
    """x @ w -> (Identity) -> Sigmoid; B gets another weight and one more node."""
    w = numpy_helper.from_array(np.full((4, 4), scale, np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm")]
    if extra:
        nodes.append(helper.make_node("Identity", ["h"], ["h2"], name="copy"))
    nodes.append(helper.make_node("Sigmoid", ["h2" if extra else "h"], ["y"], name="sigmoid"))
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w])
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                    str(path))
    return path


EXPORT_TIMEOUT_MS = 90_000  # an export here takes seconds; under the 120 s per test
# A hang guard for what a Cancel or a kill ends, never a time limit: the slow models sleep
# longer than this, so an end within it is the cancel's doing. How fast things stop is
# measured by tests/benchmarks/bench_stop.py.
STOP_TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def shared_runner(qapp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobRunner]:
    """One warm worker (and its spare) for a whole test module: torch imports once."""
    root = tmp_path_factory.mktemp("worker")
    patch = pytest.MonkeyPatch()
    # The workers inherit these at start, so their job folders stay in the temp tree.
    patch.setenv("ONNX_STUDIO_CACHE_DIR", str(root / "cache"))
    patch.setenv("ONNX_STUDIO_CONFIG_DIR", str(root / "config"))
    patch.setenv("ONNX_STUDIO_DATA_DIR", str(root / "data"))
    patch.setenv("ONNX_STUDIO_OUTPUT_DIR", str(root / "out"))
    runner = JobRunner()
    runner.start()
    yield runner
    runner.shutdown()
    runner.deleteLater()
    patch.undo()


@pytest.fixture
def live_window(shared_runner: JobRunner, qtbot) -> Iterator[MainWindow]:
    """A fresh shown window per test, running its jobs on the module's warm worker.

    The window's session is handed the shared runner (a session never shuts down a runner it
    was handed). After the test the worker is left idle, whatever the test did or where it
    failed: the session stops listening first (a worker that becomes ready would send it a
    job), a job still running is cancelled, then every job sent so far must have answered.
    """
    session = ExportSession(runner=shared_runner)
    w = MainWindow(settings_mod.Settings(), None, start_worker=False, session=session)
    session.start_worker()  # warm already: it says so, and the options learn the devices
    w.load_initial(None)
    w.show()
    yield w
    session.shutdown()
    try:
        leave_idle(shared_runner, qtbot)
    finally:
        w.close()
        w.deleteLater()


def leave_idle(runner: JobRunner, qtbot) -> None:
    if runner.busy():
        runner.cancel()  # the spare takes over
    answered: list[Event] = []
    runner.submit(PingRequest(), answered.append)  # jobs run in order: it answers last
    try:
        qtbot.waitUntil(lambda: bool(answered), timeout=60_000)
    except QtWaitTimeout:
        runner.shutdown()  # stuck: the next job starts a fresh worker
        raise AssertionError("the shared worker did not answer a ping within 60 s after the "
                             "test; it was shut down") from None


def example_index(window: MainWindow, qtbot, name: str) -> int:
    """The gallery's row of the example `name`, once the gallery is filled (right after the
    window's first frame)."""
    combo = window.form.model_form.examples
    qtbot.waitUntil(lambda: combo.count() > 1, timeout=10_000)
    return next(i for i in range(1, combo.count()) if combo.itemData(i).name == name)


def export_and_wait(window: MainWindow, qtbot) -> dict[str, Any]:
    """Click Export, wait for the job's end and return its final message as the worker wrote
    it (the typed result encoded again: the protocol writes back what it read, key for key)."""
    button = window.form.export_bar.export_button
    assert button.isEnabled(), button.toolTip()
    with qtbot.waitSignal(window.session.exportFinished, timeout=EXPORT_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    outcome: ExportOutcome = blocker.args[0]
    assert outcome.stamp.recipe == window.session.fingerprint, "stamped with the recipe sent"
    return outcome.final.to_dict()
