"""The window driving a real worker: export, cancel, a killed worker, and the next export.

Each test gets a fresh window; the warm worker is shared by the module to keep the suite fast
(tests/app/conftest.py leaves it idle after every test). Each test loads the recipe it needs,
as a user would.
"""

from __future__ import annotations

import html
import os
import signal
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from onnx_studio.app.window import MainWindow
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.protocol import ErrorEvent, Event, ExportRequest, ExportResult, Progress
from onnx_studio.engine.recipe import to_toml
from tests.app.conftest import (
    EXPORT_TIMEOUT_MS,
    STOP_TIMEOUT_MS,
    export_and_wait,
    write_mlp,
    write_slow_model,
)


@pytest.fixture
def window(live_window: MainWindow) -> MainWindow:
    return live_window


def pid_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, waiting for a reaper, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def load_slow(window: MainWindow, folder: Path) -> Path:
    model = write_slow_model(folder)
    recipe = recipes.loads(
        f'version = 1\n[model]\nsource = "{model.name}:Slow"\n'
        '[[inputs]]\nname = "x"\nshape = [1, 4]\n[export]\noutput = "slow.onnx"\n',
        base_dir=folder)
    window.session.set_recipe(recipe)
    return folder / "slow.onnx"


def start_slow_export(window: MainWindow, qtbot) -> int:
    """Click Export on the slow model and return once the worker is inside the job."""
    qtbot.waitUntil(lambda: window.session.runner.ready_info is not None, timeout=60_000)
    qtbot.mouseClick(window.form.export_bar.export_button, Qt.MouseButton.LeftButton)
    bar = window.form.export_bar
    assert window.session.export_job is not None and bar.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: bar.progress.value() > 0 or bar.stage.text() not in
                    ("Starting…", "Waiting for the worker…"), timeout=30_000)
    child_file = Path(window.session.recipe.base_dir) / "slow_net.child"
    qtbot.waitUntil(child_file.exists, timeout=30_000)  # inside the model's constructor
    return int(child_file.read_text())


@pytest.mark.slow
def test_export_the_example(window: MainWindow, qtbot) -> None:
    window.load_default_recipe()
    output = window.session.recipe.output_path
    assert not output.exists()
    message = export_and_wait(window, qtbot)
    assert message["type"] == "result", message
    report = message["report"]
    assert report["ok"], report
    assert output.is_file() and Path(report["output"]) == output
    status = window.tabs.summary.status.text()
    facts = window.tabs.summary.facts.toHtml()
    assert "Exported" in status
    assert str(output) in facts and "Nodes" in facts
    for tensor in report["graph"]["inputs"] + report["graph"]["outputs"]:
        assert tensor["name"] in facts
    assert "batch" in facts, "dynamic names are shown"
    bar = window.form.export_bar
    assert bar.progress.value() == 1000 and "Done" in bar.stage.text()
    assert "Export finished" in window.tabs.log.toPlainText()
    assert bar.export_button.isEnabled() and not bar.cancel_button.isEnabled()
    # a second export on the warm worker reuses the process
    pid = window.session.runner.worker_pid
    assert export_and_wait(window, qtbot)["report"]["ok"]
    assert window.session.runner.worker_pid == pid


@pytest.mark.slow
def test_cancel_a_long_export_then_export_again(window: MainWindow, qtbot,
                                                tmp_path: Path) -> None:
    output = load_slow(window, tmp_path)
    before = to_toml(window.session.recipe)
    old_pid = window.session.runner.worker_pid
    assert old_pid is not None
    child = start_slow_export(window, qtbot)
    assert pid_alive(child)

    with qtbot.waitSignal(window.session.exportFinished, timeout=STOP_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(window.form.export_bar.cancel_button, Qt.MouseButton.LeftButton)
    assert blocker.args[0].error.kind == "cancelled"
    qtbot.waitUntil(lambda: not pid_alive(old_pid) and not pid_alive(child),
                    timeout=STOP_TIMEOUT_MS)  # (the model sleeps 60 s: ended by the cancel)
    assert "cancelled" in window.tabs.summary.status.text()
    assert to_toml(window.session.recipe) == before, "the form is unchanged"
    assert not output.exists(), "no half-written file"
    assert window.form.export_bar.export_button.isEnabled()

    window.load_default_recipe()
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message
    assert window.session.runner.worker_pid not in (None, old_pid), "a fresh worker did the export"


@pytest.mark.slow
def test_a_compare_waits_behind_the_export_and_is_cancelled_alone(window: MainWindow, qtbot,
                                                                   tmp_path: Path) -> None:
    """The Compare tab's job waits behind a running export, says so, and its Cancel ends it
    alone: the export goes on in the same worker, then the export bar's Cancel ends it."""
    load_slow(window, tmp_path)
    worker = window.session.runner.worker_pid
    child = start_slow_export(window, qtbot)
    tab = window.tabs.compare
    tab.set_files(write_mlp(tmp_path / "a.onnx", 1.0), write_mlp(tmp_path / "b.onnx", 1.5))
    with qtbot.waitSignal(tab.analysis.started):
        qtbot.mouseClick(tab.compare_button, Qt.MouseButton.LeftButton)
    assert tab.status.text() == "The compare starts once the export is done…"
    with qtbot.waitSignal(tab.analysis.failed, timeout=STOP_TIMEOUT_MS) as failed:
        qtbot.mouseClick(tab.cancel_button, Qt.MouseButton.LeftButton)
    assert failed.args[1].kind == "cancelled"
    qtbot.wait(300)
    assert window.session.export_job is not None and pid_alive(child), "the export goes on"
    assert window.session.runner.worker_pid == worker
    assert window.form.export_bar.cancel_button.isEnabled()

    with qtbot.waitSignal(window.session.exportFinished, timeout=STOP_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(window.form.export_bar.cancel_button, Qt.MouseButton.LeftButton)
    assert blocker.args[0].error.kind == "cancelled"
    qtbot.waitUntil(lambda: not pid_alive(child), timeout=STOP_TIMEOUT_MS)


@pytest.mark.slow
def test_killed_worker_is_reported_and_replaced(window: MainWindow, qtbot,
                                                tmp_path: Path) -> None:
    output = load_slow(window, tmp_path)
    before = to_toml(window.session.recipe)
    child = start_slow_export(window, qtbot)
    pid = window.session.runner.worker_pid
    assert pid is not None
    qtbot.waitUntil(lambda: window.session.runner.spare_ready, timeout=60_000)
    spare = window.session.runner.spare_pid
    with qtbot.waitSignal(window.session.exportFinished, timeout=10_000) as blocker:
        os.kill(pid, signal.SIGKILL)
    error = blocker.args[0].final.to_dict()["error"]
    assert error["kind"] == "worker_crashed"
    assert "SIGKILL" in error["message"] and "signal 9" in error["message"]
    assert "crashed" in window.tabs.summary.status.text()
    assert "SIGKILL" in window.tabs.summary.status.text()
    assert to_toml(window.session.recipe) == before
    assert not output.exists()
    runner = window.session.runner
    assert runner.worker_pid == spare and runner.ready_info is not None, \
        "the warm spare took over at once"
    # the killed worker could not end its children; the runner ended the ones it had seen
    qtbot.waitUntil(lambda: not pid_alive(child), timeout=STOP_TIMEOUT_MS)
    child_file = tmp_path / "slow_net.child"
    child_file.unlink()

    window.load_default_recipe()
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message
    assert window.session.runner.worker_pid not in (None, pid)
    assert not child_file.exists(), "the crashed job was not run again by the new worker"


def test_spare_worker_takes_over_after_cancel(window: MainWindow, qtbot,
                                              tmp_path: Path) -> None:
    """The spare, torch imported before the Cancel, takes over in the Cancel itself and runs
    the next export: no worker imports torch for it (how long that saves: bench_stop.py)."""
    load_slow(window, tmp_path)
    start_slow_export(window, qtbot)
    runner = window.session.runner
    qtbot.waitUntil(lambda: runner.spare_ready, timeout=60_000)
    busy, spare = runner.worker_pid, runner.spare_pid
    readies: list[object] = []  # a worker that takes over says it is ready (imported torch)
    runner.workerReady.connect(readies.append)
    with qtbot.waitSignal(window.session.exportFinished, timeout=STOP_TIMEOUT_MS):
        qtbot.mouseClick(window.form.export_bar.cancel_button, Qt.MouseButton.LeftButton)
    assert runner.worker_pid == spare != busy
    assert readies == [runner.ready_info] and readies[0] is not None, \
        "the spare was ready when it took over: it said so within the Cancel"
    took_over = runner.ready_info

    window.load_default_recipe()
    events: list[Event] = []
    recipe = window.session.recipe
    runner.submit(ExportRequest(recipe=to_toml(recipe), base_dir=str(recipe.base_dir)),
                  events.append)
    qtbot.waitUntil(lambda: bool(events) and isinstance(events[-1], ExportResult | ErrorEvent),
                    timeout=EXPORT_TIMEOUT_MS)
    final = events[-1]
    assert isinstance(final, ExportResult) and final.report.ok, final
    assert any(isinstance(e, Progress) for e in events[:-1])
    assert runner.worker_pid == spare and runner.ready_info is took_over, \
        "the export ran in the spare"
    assert len(readies) == 1, "no other worker imported torch for the export"


def test_failed_export_shows_sentence_hint_and_details(window: MainWindow, qtbot,
                                                       tmp_path: Path) -> None:
    model = tmp_path / "bad_net.py"
    model.write_text("import torch\n\nclass Net(torch.nn.Module):\n"
                     "    def forward(self, x):\n        return x @ torch.ones(7, 2)\n",
                     encoding="utf-8")
    recipe = recipes.loads('version = 1\n[model]\nsource = "bad_net.py:Net"\n'
                           '[[inputs]]\nname = "x"\nshape = [2, 3]\n'
                           '[export]\noutput = "bad.onnx"\n', base_dir=tmp_path)
    window.session.set_recipe(recipe)
    message = export_and_wait(window, qtbot)
    assert message["type"] == "result" and not message["report"]["ok"]
    error = message["report"]["error"]
    assert "failed" in window.tabs.summary.status.text().lower()
    assert html.escape(error["message"][:40]) in window.tabs.summary.status.text()
    if error.get("hint"):
        assert window.tabs.summary.hint.isVisible()
    assert not (tmp_path / "bad.onnx").exists()
    assert window.form.export_bar.export_button.isEnabled(), "the next attempt is one click away"
    if message.get("details"):
        assert window.tabs.summary.details_button.isVisible()
        assert not window.tabs.summary.details.isVisible()
        window.tabs.summary.details_button.click()
        assert window.tabs.summary.details.isVisible()
        assert window.tabs.summary.details.toPlainText().strip()


def test_describe_lists_candidates_and_names_inputs(window: MainWindow, qtbot,
                                                    tmp_path: Path) -> None:
    model = tmp_path / "two.py"
    model.write_text("import torch\n\n\nclass Pair(torch.nn.Module):\n"
                     "    def forward(self, left, right):\n        return left + right\n",
                     encoding="utf-8")
    window.load_default_recipe()
    assert window.open_path(model)
    qtbot.waitUntil(lambda: window.form.model_form.candidates.count() == 1, timeout=60_000)
    qtbot.waitUntil(lambda: [s.name for s in window.session.recipe.inputs][:2] == ["left", "right"],
                    timeout=5000)
    assert window.session.recipe.model.source.endswith("two.py:Pair")
    assert "forward(left, right)" in window.form.model_form.forward_label.text()


def test_warnings_are_listed_with_their_source_line(window: MainWindow, qtbot,
                                                    tmp_path: Path) -> None:
    model = tmp_path / "warn_net.py"
    model.write_text("import torch\n\n\nclass Net(torch.nn.Module):\n"
                     "    def forward(self, x):\n        n = x.sum().item()\n"
                     "        return x * n\n", encoding="utf-8")
    window.session.set_recipe(recipes.loads(
        'version = 1\n[model]\nsource = "warn_net.py:Net"\n[[inputs]]\nname = "x"\n'
        'shape = [2, 3]\n[export]\noutput = "w.onnx"\nexporter = "torchscript"\n',
        base_dir=tmp_path))
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message
    count = window.tabs.warnings.count()
    assert count == len(message["report"]["warnings"]) >= 1
    assert window.tabs.tabText(1) == f"Warnings ({count})"
    tree = window.tabs.warnings.tree
    rows = [tree.topLevelItem(i) for i in range(count)]
    with_source = [r for r in rows if r.text(2).startswith(str(model))]
    assert with_source, [r.text(2) for r in rows]
    tree.setCurrentItem(with_source[0])
    viewer = window.tabs.warnings.open_source(with_source[0].text(2))
    assert viewer is not None and viewer.path == model
    assert viewer.text.textCursor().blockNumber() + 1 == 6, "the line of .item()"
    viewer.close()


def test_segfault_in_the_worker_is_reported(window: MainWindow, qtbot, tmp_path: Path) -> None:
    model = tmp_path / "crash_net.py"
    model.write_text("import ctypes\nimport torch\n\n\nclass Net(torch.nn.Module):\n"
                     "    def __init__(self):\n        super().__init__()\n"
                     "        ctypes.string_at(0)  # reads address 0: SIGSEGV\n",
                     encoding="utf-8")
    window.session.set_recipe(recipes.loads(
        'version = 1\n[model]\nsource = "crash_net.py:Net"\n[[inputs]]\nname = "x"\n'
        'shape = [1]\n[export]\noutput = "crash.onnx"\n', base_dir=tmp_path))
    qtbot.waitUntil(lambda: window.session.runner.ready_info is not None, timeout=60_000)
    pid = window.session.runner.worker_pid
    message = export_and_wait(window, qtbot)
    assert message["type"] == "error"
    assert message["error"]["kind"] == "worker_crashed"
    assert "SIGSEGV" in message["error"]["message"]
    assert "segmentation fault" in message["error"]["message"]
    qtbot.waitUntil(lambda: window.session.runner.ready_info is not None, timeout=60_000)
    assert window.session.runner.worker_pid not in (None, pid), "a fresh worker is up"
