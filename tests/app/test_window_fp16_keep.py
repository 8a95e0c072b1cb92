"""The Variants panel's fp16 with keep fp32 (issue 26) in the real window on a real worker, on a
real export whose float16 trouble is known: a constant above 65504 scales a middle activation.
Plain fp16 fails and the panel names the values that overflow; keep fp32 auto passes keeping a
handful of nodes, listed under the table and outlined on the variant's graph."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from onnx_studio.app.compare.variants import COLUMNS, KEPT_MARK
from onnx_studio.app.window import MainWindow
from tests.app.conftest import EXPORT_TIMEOUT_MS
from tests.engine.explain_models import exported


@pytest.fixture(scope="module")
def scaled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return exported(tmp_path_factory.mktemp("fp16"), "Scaled")


def make(window: MainWindow, keep: str, qtbot) -> None:
    panel = window.tabs.compare.variants
    panel.kind.setCurrentText("fp16")
    panel.keep.setCurrentText(keep)
    assert panel.make_button.isEnabled()
    with qtbot.waitSignal(window.session.analysis.finished, timeout=EXPORT_TIMEOUT_MS * 2):
        qtbot.mouseClick(panel.make_button, Qt.MouseButton.LeftButton)


@pytest.mark.timeout(400)
def test_fp16_overflows_then_auto_keeps_a_handful_in_fp32_marked_on_the_graph(
        live_window: MainWindow, scaled: tuple[Path, Path], qtbot) -> None:
    window = live_window
    onnx_file, recipe = scaled
    assert window.open_path(recipe)
    compare = window.tabs.compare
    compare.set_files(onnx_file, "")
    panel = compare.variants
    panel.kind.setCurrentText("int8")
    assert not panel.keep.isEnabled()  # float32 kept: an fp16 choice only

    make(window, "none", qtbot)
    plain = panel.variants[-1]
    assert plain.keep_fp32 is None and plain.overflows and not plain.report.ok
    assert panel.verdicts()[-1].startswith(f"FAILED: {len(plain.overflows)} value(s) overflow")
    note = panel.note.text()
    assert "Overflows float16" in note and plain.overflows[0].node in note
    assert "keep fp32 auto" in note

    make(window, "auto", qtbot)
    auto = panel.variants[-1]
    assert auto.keep_fp32 == "auto" and auto.report.ok, auto.report.error
    assert auto.output == onnx_file.with_name("scaled.fp16-keep.onnx") and auto.output.is_file()
    kept = auto.kept_fp32
    assert 1 <= len(kept) <= 6 and not auto.overflows
    assert {o.node for o in plain.overflows} <= set(kept)
    row = panel.table.rowCount() - 1
    assert panel.table.item(row, COLUMNS.index("fp32 kept")).text() == str(len(kept))
    assert panel.verdicts() == [panel.verdicts()[0], "passed"]
    assert f"Kept in float32 ({len(kept)})" in panel.note.text()
    assert all(name in panel.note.text() for name in kept)
    assert "No value overflows float16" in panel.note.text()

    # on the graph: the variant's file, its kept nodes outlined, the first selected
    assert panel.graph_button.isEnabled()
    qtbot.mouseClick(panel.graph_button, Qt.MouseButton.LeftButton)
    graph = window.tabs.graph
    assert window.tabs.currentWidget() is graph
    assert graph.shown[0] is not None and graph.shown[0].resolve() == auto.output.resolve()
    browser = graph.browser
    assert browser is not None and browser.model is not None
    assert {name: browser.marks.get(name) for name in kept} == dict.fromkeys(kept, KEPT_MARK)
    first = browser.model.node_by_name(kept[0])
    assert first is not None and browser.state.selection.node == first
    assert KEPT_MARK in browser.properties.browser.toPlainText()
