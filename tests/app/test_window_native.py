"""A window that fits and behaves natively (issue 13, item 7): 1024×768 without horizontal
scrolling, a splitter that cannot hide the form, the theme following the OS scheme live with
an override, Help → About with the versions, rotating log files, geometry and splitter kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QCoreApplication, QEvent, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QAbstractScrollArea, QApplication

from onnx_studio.app import logs
from onnx_studio.app import settings as settings_mod
from onnx_studio.app.window import MainWindow


@pytest.fixture(autouse=True)
def _log_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "logs"
    monkeypatch.setenv("ONNX_STUDIO_LOG_DIR", str(folder))
    return folder


@pytest.fixture
def window(qtbot) -> MainWindow:
    w = MainWindow(settings_mod.Settings(), None, start_worker=False)
    qtbot.addWidget(w)
    w.load_initial(None)
    w.show()
    return w


def horizontal_scroll(area: QAbstractScrollArea) -> int:
    return area.horizontalScrollBar().maximum()


@pytest.mark.parametrize("width", [1024, 1366])
def test_the_form_fits_without_horizontal_scrolling(window: MainWindow, qtbot,
                                                    width: int) -> None:
    window.resize(width, 768)
    qtbot.waitUntil(lambda: window.width() == width)
    QApplication.processEvents()
    form = window.form
    scroll = form.form_scroll
    content = scroll.widget()
    assert content.minimumSizeHint().width() <= scroll.viewport().width(), \
        "nothing of the form is cut off on the right"
    table = form.inputs_table.table
    assert horizontal_scroll(table) == 0, "every column of the inputs table is in view"
    assert horizontal_scroll(form.outputs_table.table) == 0
    assert window.tabs.width() >= 380, "the results keep a usable width"


def test_the_splitter_cannot_hide_the_form(window: MainWindow) -> None:
    window.resize(1024, 768)
    window.splitter.setSizes([0, 1024])
    assert window.splitter.sizes()[0] >= window.form.minimumWidth() > 0
    window.splitter.setSizes([1024, 0])
    assert window.splitter.sizes()[1] > 0


def test_theme_follows_the_system_live_and_an_override_stays(window: MainWindow) -> None:
    # windows of earlier tests waiting for deletion would be restyled at every switch
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete.value)
    hints = QGuiApplication.styleHints()
    try:
        window.set_theme("system")
        assert window.menus.themes["system"].isChecked()
        # what the OS announces (the offscreen platform has no scheme of its own to change)
        hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)
        assert window.dark, "the OS went dark: so does the window"
        hints.colorSchemeChanged.emit(Qt.ColorScheme.Light)
        assert not window.dark
        window.set_theme("dark")
        assert window.menus.themes["dark"].isChecked() and window.dark
        hints.colorSchemeChanged.emit(Qt.ColorScheme.Light)
        assert window.dark, "the user's choice is not overridden by the OS"
        assert settings_mod.load()[0].theme == "dark", "and it is saved"
    finally:
        window.set_theme("system")


def test_about_lists_the_versions(window: MainWindow) -> None:
    from importlib import metadata

    from PySide6.QtCore import qVersion

    text = window.about_text()
    for name in ("onnx", "onnxruntime"):
        assert f"<b>{name}</b></td><td>&nbsp;{metadata.version(name)}<" in text
    assert qVersion() in text and "0.1.0" in text
    assert "the worker is starting" in text, "torch comes from the worker, not imported here"
    help_menu = window.menuBar().actions()[-1].menu()
    labels = [a.text() for a in help_menu.actions()]
    assert "&About ONNX Export Studio" in labels and "Open log folder" in labels


def test_log_lines_go_to_a_rotating_file(window: MainWindow, _log_dir: Path) -> None:
    assert window.log_file == _log_dir / logs.LOG_FILE
    window.session.logLine.emit("=== a line the user may need later")
    assert "a line the user may need later" in window.log_file.read_text(encoding="utf-8")
    line = "x" * 1000
    for _ in range(logs.MAX_BYTES // 1000 + 50):
        window.session.logLine.emit(line)
    assert (_log_dir / f"{logs.LOG_FILE}.1").is_file(), "rotated past its size"
    assert window.log_file.stat().st_size < logs.MAX_BYTES


def test_geometry_and_splitter_are_restored(qtbot) -> None:
    first = MainWindow(settings_mod.Settings(), None, start_worker=False)
    qtbot.addWidget(first)
    first.load_initial(None)
    first.resize(760, 640)  # within the offscreen screen (800×800)
    first.show()
    first.splitter.setSizes([600, 500])
    sizes, size = first.splitter.sizes(), (first.width(), first.height())
    first.close()
    second = MainWindow(settings_mod.load()[0], None, start_worker=False)
    qtbot.addWidget(second)
    second.show()
    assert (second.width(), second.height()) == size
    assert second.splitter.sizes() == sizes
