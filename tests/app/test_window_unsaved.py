"""Nothing lost (issue 13, item 3): the dirty marker, Save / Discard / Cancel before the form is
replaced or the window closes, a question before quitting during a job, the recovery file
after a crash, and Save As keeping relative paths pointing at the same files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox

from onnx_studio.app import settings as settings_mod
from onnx_studio.app.window import MainWindow
from onnx_studio.engine import recipe as recipes
from tests.app.conftest import example_index
from tests.conftest import REPO


@pytest.fixture
def window(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MainWindow:
    monkeypatch.setenv("ONNX_STUDIO_DATA_DIR", str(tmp_path / "data"))
    w = MainWindow(settings_mod.Settings(), None, start_worker=False)
    qtbot.addWidget(w)
    w.load_initial(None)
    w.show()
    return w


def type_kwargs(window: MainWindow, text: str) -> None:
    field = window.form.model_form.kwargs
    field.setText(text)
    field.editingFinished.emit()


def answer(window: MainWindow, qtbot, button: QMessageBox.StandardButton) -> None:
    qtbot.waitUntil(lambda: window.unsaved_prompt is not None and
                    window.unsaved_prompt.isVisible())
    box = window.unsaved_prompt
    assert box is not None
    box.button(button).click()
    qtbot.waitUntil(lambda: window.unsaved_prompt is None)


def test_dirty_marker_and_the_prompt_before_the_form_is_replaced(
        window: MainWindow, qtbot, tmp_path: Path) -> None:
    assert not window.isWindowModified() and "[*]" in window.windowTitle()
    type_kwargs(window, "num_classes = 7")
    assert window.isWindowModified(), "the title shows the edit"

    # New: Cancel keeps the edits, Discard lets them go
    new = next(a for a in window.menuBar().actions()[0].menu().actions()
               if a.text() == "&New recipe")
    new.trigger()
    assert "before starting a new recipe" in window.unsaved_prompt.text()
    answer(window, qtbot, QMessageBox.StandardButton.Cancel)
    assert window.session.recipe.model.kwargs == {"num_classes": 7}
    assert window.isWindowModified()

    # an example: Save writes the recipe first (Save as asks where: answered here)
    target = tmp_path / "mine.toml"
    window.save_recipe_as = lambda: window.save_recipe_to(target)  # the file dialog's answer
    combo = window.form.model_form.examples
    combo.activated.emit(example_index(window, qtbot, "lstm"))
    assert "before loading the example" in window.unsaved_prompt.text()
    answer(window, qtbot, QMessageBox.StandardButton.Save)
    assert recipes.load(target).model.kwargs == {"num_classes": 7}, "saved before replaced"
    assert window.session.recipe.model.source == "example:lstm"
    assert not window.isWindowModified()

    # opening a recipe over edits: Discard
    type_kwargs(window, "hidden_size = 3")
    assert window.isWindowModified()
    assert not window.open_path(target), "not opened yet: the user is asked first"
    answer(window, qtbot, QMessageBox.StandardButton.Discard)
    assert window.session.recipe_path == target.resolve()
    assert window.session.recipe.model.kwargs == {"num_classes": 7}
    assert window.windowTitle().startswith("mine.toml[*]") and not window.isWindowModified()


def test_close_asks_and_cancel_keeps_the_window(window: MainWindow, qtbot) -> None:
    type_kwargs(window, "num_classes = 5")
    assert not window.close(), "the close waits for the answer"
    answer(window, qtbot, QMessageBox.StandardButton.Cancel)
    assert window.isVisible()
    window.close()
    answer(window, qtbot, QMessageBox.StandardButton.Discard)
    qtbot.waitUntil(lambda: not window.isVisible())


def test_quit_during_an_export_asks(window: MainWindow, qtbot) -> None:
    window.session.jobs.export_job = 99  # a job in flight, as the session sees it (no worker)
    try:
        assert not window.close()
        qtbot.waitUntil(lambda: window.busy_prompt is not None and window.busy_prompt.isVisible())
        assert "A job is running" in window.busy_prompt.text()
        window.busy_prompt.button(QMessageBox.StandardButton.Cancel).click()
        qtbot.waitUntil(lambda: window.busy_prompt is None)
        assert window.isVisible(), "Cancel: the window and its job stay"
    finally:
        window.session.jobs.export_job = None


def test_save_as_keeps_relative_paths_pointing_at_the_same_files(
        window: MainWindow, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "models" / "net.py").write_text(
        "import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x * 2\n", encoding="utf-8")
    first = project / "recipe.toml"
    first.write_text('version = 1\n[model]\nsource = "models/net.py:Net"\n'
                     '[[inputs]]\nname = "x"\nshape = [2]\n'
                     '[export]\noutput = "out/net.onnx"\n', encoding="utf-8")
    assert window.open_path(first)
    elsewhere = tmp_path / "elsewhere" / "copy.toml"
    elsewhere.parent.mkdir()
    assert window.save_recipe_to(elsewhere)
    saved = recipes.load(elsewhere)
    assert saved.model.source == "../project/models/net.py:Net"
    assert saved.resolve("../project/models/net.py").resolve() == project / "models" / "net.py"
    assert saved.output_path.resolve() == (project / "out" / "net.onnx").resolve()
    assert recipes.load(first).model.source == "models/net.py:Net", "the first file unchanged"
    # a save that fails leaves the form's recipe as it was
    before = window.session.recipe.model.source
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a folder", encoding="utf-8")
    assert not window.save_recipe_to(blocked / "x.toml")
    assert window.session.recipe.model.source == before


CRASHING_WINDOW = textwrap.dedent('''
    import sys, time
    from PySide6.QtWidgets import QApplication
    from onnx_studio.app import settings as settings_mod
    from onnx_studio.app.recovery import recovery_dir
    from onnx_studio.app.window import MainWindow

    app = QApplication(sys.argv)
    w = MainWindow(settings_mod.Settings(), None, start_worker=False)
    w.load_initial(None)
    w.show()
    w.form.model_form.kwargs.setText("num_classes = 42")
    w.form.model_form.kwargs.editingFinished.emit()
    w.form.inputs_table.table.item(0, 0).setText("picture")
    deadline = time.monotonic() + 30
    while not list(recovery_dir().glob("*.toml")) and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.05)
    print("autosaved", flush=True)
    while True:  # killed here, with unsaved edits
        app.processEvents()
        time.sleep(0.05)
''')


def test_unsaved_edits_come_back_after_a_crash(qtbot, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen",
           "ONNX_STUDIO_DATA_DIR": str(tmp_path / "data"),
           "ONNX_STUDIO_CONFIG_DIR": str(tmp_path / "config")}
    child = subprocess.Popen([sys.executable, "-c", CRASHING_WINDOW], cwd=REPO, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert child.stdout is not None
        started = time.monotonic()
        line = child.stdout.readline()
        assert line.strip() == "autosaved", f"no autosave after {time.monotonic() - started:.0f} s"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)

    monkeypatch.setenv("ONNX_STUDIO_DATA_DIR", str(tmp_path / "data"))
    w = MainWindow(settings_mod.Settings(), None, start_worker=False)
    qtbot.addWidget(w)
    w.load_initial(None)
    w.show()
    banner = w.form.banner
    assert banner.isVisible() and "Restore them?" in banner.label.text()
    assert w.form.model_form.kwargs.text() == "num_classes = 10", "not restored unasked"
    restore = next(b for b in banner.buttons if b.text() == "Restore")
    restore.click()
    assert w.form.model_form.kwargs.text() == "num_classes = 42"
    assert w.session.recipe.inputs[0].name == "picture"
    assert w.isWindowModified(), "restored edits are still unsaved"
    assert w.session.recipe.resolve(w.session.recipe.model.source.rpartition(":")[0]).is_file()
    assert not banner.isVisible()
    # offered once: the recovered file is gone (the window keeps its own until saved)
    w2 = MainWindow(settings_mod.Settings(), None, start_worker=False)
    qtbot.addWidget(w2)
    w2.load_initial(None)
    assert not w2.form.banner.isVisible()
