"""Numbers that say what they mean (issue 36, paths 5, 6, 7 and 11), on the window's default
example (a Conv, a BatchNorm the exporter folds into it, a ReLU, ...) exported once per test:

- 5: per-node profile times add up to a run the user measured, and a fused Conv+Relu colours
  both of its nodes;
- 6: the folded BatchNorm's Conv sits in its Conv's module box, not a BatchNorm box;
- 7: Compare at 1024 shows each graph large and labelled, says that times of a file compared
  with its copy differ within their noise, and has a menu entry with a shortcut;
- 11: at 1024 the Shape cell and the class list show whole; a shared dimension's tint is far
  from the error tint.
"""

from __future__ import annotations

import colorsys
import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QColor

from onnx_studio.app import theme
from onnx_studio.app.menus import SHORTCUTS
from onnx_studio.app.window import MainWindow
from tests.app.conftest import EXPORT_TIMEOUT_MS, export_and_wait

pytestmark = pytest.mark.usefixtures("shared_runner")


def exported(window: MainWindow, qtbot) -> Path:  # type: ignore[no-untyped-def]
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message["report"]["error"]
    return Path(message["report"]["output"])


def at_1024(window: MainWindow, qtbot) -> None:  # type: ignore[no-untyped-def]
    window.resize(1024, 768)
    qtbot.waitUntil(lambda: window.width() == 1024 and window.height() == 768)


def test_a_folded_batchnorm_belongs_to_its_convs_module(live_window: MainWindow,
                                                        qtbot) -> None:
    window = live_window
    output = exported(window, qtbot)
    window.tabs.setCurrentWidget(window.tabs.graph)
    qtbot.waitUntil(lambda: window.tabs.graph.loaded_path == output, timeout=10_000)
    model = window.tabs.graph.browser.model  # type: ignore[union-attr]
    assert model is not None
    convs = [n for n in model.nodes if n.op_type == "Conv"]
    assert convs, "the example has Convs"
    first = model.groups[convs[0].group]
    assert first.qualname == "features.0", (first.qualname, first.class_name)
    holding = [g for g in model.groups.values() if g.nodes and "BatchNorm" in g.class_name]
    assert holding == [], "no node sits in a BatchNorm box"


def test_profile_numbers_add_up_and_a_fused_conv_is_coloured(live_window: MainWindow,
                                                             qtbot) -> None:
    window, tabs = live_window, live_window.tabs
    output = exported(window, qtbot)
    tab = tabs.compare
    tabs.setCurrentWidget(tab)
    tab.set_files(output)
    with qtbot.waitSignal(tab.analysis.finished, timeout=EXPORT_TIMEOUT_MS):
        assert tab.start_profile()
    doc = tab.profile
    assert doc is not None and doc.latency_ms is not None and doc.overhead is not None
    p50 = doc.latency_ms.p50
    parts = [n.p50_ms for n in doc.nodes]
    assert all(p is not None and p <= p50 * 1.001 for p in parts), (parts, p50)
    assert sum(p or 0.0 for p in parts) <= p50 * 1.01, "the nodes add up within a run"
    # the status says how the numbers relate: the profiler's cost, what the kernels cover
    status = tab.status.text()
    assert "profiler's own cost" in status and f"{doc.overhead:.1f}x" in status
    headers = [tab.profile_table.horizontalHeaderItem(c).text()
               for c in range(tab.profile_table.columnCount())]
    assert "ms at p50" in headers and "share" in headers
    fused_row = next(r for r in range(tab.profile_table.rowCount())
                     if tab.profile_table.item(r, 0).text().endswith("(fused)"))
    assert " + " in tab.profile_table.item(fused_row, 0).toolTip()
    fused = [n for n in doc.nodes if n.fused]
    assert fused, [(n.name, n.op_type, n.node) for n in doc.nodes]
    # on the graph, every Conv has a time: none grey as if free
    tab.overlay_check.setChecked(True)
    tabs.setCurrentWidget(tabs.graph)
    qtbot.waitUntil(lambda: tabs.graph.loaded_path == output, timeout=10_000)
    browser = tabs.graph.browser
    assert browser is not None and browser.overlay
    convs = [n.name for n in browser.model.nodes if n.op_type == "Conv"]  # type: ignore[union-attr]
    assert convs and all(name in browser.overlay for name in convs), (convs, browser.overlay)
    assert browser.overlay_label == "ms of the p50 run"


def test_compare_at_1024_is_readable_and_says_what_is_noise(live_window: MainWindow, qtbot,
                                                            tmp_path: Path) -> None:
    window, tabs = live_window, live_window.tabs
    at_1024(window, qtbot)
    output = exported(window, qtbot)
    copy = tmp_path / "copy.onnx"
    shutil.copyfile(output, copy)
    # the View menu opens Compare (Ctrl+7), as F1 lists it
    action = next(a for a in window.findChildren(QAction) if a.text() == "Compare")
    assert action.shortcut().toString() == "Ctrl+7" and "Compare" in SHORTCUTS
    action.trigger()
    tab = tabs.compare
    assert tabs.currentWidget() is tab
    tab.set_files(output, copy)
    with qtbot.waitSignal(tab.analysis.finished, timeout=EXPORT_TIMEOUT_MS):
        qtbot.mouseClick(tab.compare_button, Qt.MouseButton.LeftButton)
    doc = tab.comparison
    assert doc is not None and doc.timing_note and doc.spread_ms, doc
    assert doc.timing_note in tab.status.text()
    (lo, hi) = doc.spread_ms["load"]["a"]
    assert lo <= doc.load_ms["a"] <= hi
    rows = {tab.facts.item(r, 0).text(): r for r in range(tab.facts.rowCount())}
    load = tab.facts.item(rows["session load (median)"], 1).text()
    assert "–" in load, load  # with its range
    # the two graphs: one at a time by tabs naming the files, each as tall as the tab
    tab.views.setCurrentWidget(tab.graphs)
    graphs = tab.graphs
    qtbot.waitUntil(lambda: graphs.a.isVisible())
    assert not graphs.side_by_side and graphs.switch.isVisible()
    assert [graphs.switch.tabText(i) for i in range(2)] == [f"A: {output.name}",
                                                            f"B: {copy.name}"]
    assert graphs.a.height() > 0.8 * graphs.height() - graphs.switch.height()
    graphs.switch.setCurrentIndex(1)
    assert graphs.b.isVisible() and not graphs.a.isVisible()
    assert copy.name in graphs.b_label.text()


def test_the_shape_cell_and_the_class_list_show_whole_at_1024(live_window: MainWindow,
                                                              qtbot) -> None:
    window = live_window
    at_1024(window, qtbot)
    form = window.form.model_form
    qtbot.waitUntil(lambda: form.candidates.count() > 0, timeout=EXPORT_TIMEOUT_MS)
    table = window.form.inputs_table.table
    shape = table.item(0, 1).text()
    assert shape == "2x3x32x32"
    needed = table.fontMetrics().horizontalAdvance(shape)
    assert table.columnWidth(1) > needed, (table.columnWidth(1), needed)
    assert table.horizontalScrollBar().maximum() == 0
    assert form.candidates.horizontalScrollBar().maximum() == 0, "no sideways scrolling"
    assert form.candidates.wordWrap()


def _hue(color: QColor) -> float:
    return colorsys.rgb_to_hls(color.redF(), color.greenF(), color.blueF())[0] * 360


def test_a_shared_dimension_tint_is_far_from_the_error_tint() -> None:
    for dark, error in ((False, theme.ERROR_LIGHT), (True, theme.ERROR_DARK)):
        red = _hue(QColor(error))
        for name in ["batch", "sequence", "past", "height", "width",
                     *(f"d{i}" for i in range(200))]:
            away = abs(_hue(theme.dimension_tint(name, dark)) - red) % 360
            assert min(away, 360 - away) >= 60, (name, dark)
