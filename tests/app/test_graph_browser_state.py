"""The Graph tab as a new user met it (issue 25, findings 2, 7, 8 and 9): a real window at
1024×768 and 1366×768, light and dark, on a GPT-2 exported through the `hf:` source (7 inputs,
5 outputs) and a small CNN from a user's .py file, the CNN profiled by the real worker.

A profile overlay stays with the file it was computed on, and ticking its box leaves the tab
and the file shown alone; the inputs and outputs read at Fit; a search hit is brought into
view; a new file clears the old search; a node's source is the model's code; operator docs
are rendered; the toolbar keeps every control in view."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from PySide6.QtCore import QPointF, QRect, Qt
from PySide6.QtWidgets import QAbstractButton, QComboBox, QToolBar, QWidget

from onnx_studio.app.graph import GraphBrowser
from onnx_studio.app.window import MainWindow
from tests.app.conftest import EXPORT_TIMEOUT_MS
from tests.engine.graph_files import graph_files

pytestmark = [pytest.mark.usefixtures("shared_runner"), pytest.mark.timeout(600)]

SIZES = [(1024, 768), (1366, 768)]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """GPT-2 (hf:) and the user's CNN, exported by the studio's CLI once per test run."""
    return graph_files(tmp_path_factory)


def graph_of(window: MainWindow, qtbot, path: Path, size: tuple[int, int] = (1024, 768)
             ) -> GraphBrowser:
    """Open `path` as a user would (File ▸ Open) in a window of `size`, on the Graph tab."""
    window.resize(*size)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == size)
    assert window.open_path(path)
    tab = window.tabs.graph
    window.tabs.setCurrentWidget(tab)
    browser = tab.browser
    assert browser is not None and browser.root is not None and browser.root.path == path
    qtbot.waitUntil(lambda: browser.view.isVisible() and browser.view.viewport().width() > 50)
    qtbot.wait(50)
    return browser


def labelled_keys(browser: GraphBrowser) -> set[str]:
    """The boxes whose label the view's next paint draws."""
    browser.view.viewport().repaint()
    sc = browser.canvas.scene_data
    assert sc is not None
    return {sc.boxes[i].key for i in browser.canvas.labelled}


def panel_text(browser: GraphBrowser) -> str:
    return browser.properties.browser.toPlainText()


def test_a_profile_overlay_leaves_with_its_file_and_its_box_stays_put(
        live_window: MainWindow, qtbot, files: dict[str, Path]) -> None:
    """Finding 2: the CNN's profile overlay stayed on GPT-2's graph, its legend too ("largest
    ms per run 0.0042"). Finding 9: ticking the overlay box jumped tabs and swapped the file."""
    window, tabs = live_window, live_window.tabs
    browser = graph_of(window, qtbot, files["gpt2"])
    compare = tabs.compare
    compare.set_files(files["cnn"])
    with qtbot.waitSignal(compare.analysis.finished, timeout=EXPORT_TIMEOUT_MS):
        assert compare.start_profile()
    assert compare.profile is not None and compare.overlay_check.isEnabled()
    tabs.setCurrentWidget(compare)
    compare.overlay_check.setChecked(True)
    assert tabs.currentWidget() is compare, "ticking the box is no request to go elsewhere"
    assert browser.root is not None and browser.root.path == files["gpt2"], "nor to swap files"
    assert browser.overlay is None and not browser.view.legend.isVisibleTo(browser)
    # the CNN shown: its profile colours it, with the legend
    browser = graph_of(window, qtbot, files["cnn"])
    assert browser.overlay and browser.overlay_label == "ms of the p50 run"
    assert browser.view.legend.isVisibleTo(browser)
    timed = next(n for n in browser.model.nodes  # type: ignore[union-attr]
                 if n.name in browser.overlay)
    browser.select_node(timed.index)
    assert "ms of the p50 run" in panel_text(browser)
    # GPT-2 again: nothing of the CNN's profile on it
    browser = graph_of(window, qtbot, files["gpt2"])
    assert browser.overlay is None and not browser.view.legend.isVisibleTo(browser)
    browser.select_group(next(g for g in browser.model.groups if g))  # type: ignore[union-attr]
    assert "ms of the p50 run" not in panel_text(browser)
    # and back on the CNN while the box is ticked; unticked, gone
    browser = graph_of(window, qtbot, files["cnn"])
    assert browser.overlay
    compare.overlay_check.setChecked(False)
    assert browser.overlay is None and not browser.view.legend.isVisibleTo(browser)


@pytest.mark.parametrize("size", SIZES, ids=["1024", "1366"])
def test_many_inputs_and_outputs_read_at_fit(live_window: MainWindow, qtbot,
                                             files: dict[str, Path],
                                             size: tuple[int, int]) -> None:
    """Finding 7: GPT-2's 7 inputs and 5 outputs in one row at Fit, unreadable."""
    browser = graph_of(live_window, qtbot, files["gpt2"], size)
    browser.fit()  # the toolbar's Fit
    qtbot.wait(20)
    scale = browser.view.scale_factor()
    assert scale >= 0.5, f"Fit shows the graph at {scale:.2f}: too small to read"
    io = {k for k in browser.canvas.scene_data.index if k[:2] in ("i:", "o:")}  # type: ignore[union-attr]
    assert len(io) == 12
    assert io <= labelled_keys(browser), "every input's and output's name is drawn"
    vp = browser.view.viewport().rect()
    on_screen = browser.view.mapFromScene(browser.canvas.boundingRect()).boundingRect()
    assert vp.adjusted(-2, -2, 2, 2).contains(on_screen), "the whole graph in view"


def test_a_search_hit_is_brought_into_view(live_window: MainWindow, qtbot,
                                           files: dict[str, Path]) -> None:
    """Finding 7: search "1 / 5" did not bring the hit into view (the view stayed fitted)."""
    browser = graph_of(live_window, qtbot, files["gpt2"])
    browser.fit()
    qtbot.wait(20)
    browser.search.setFocus()
    qtbot.keyClicks(browser.search, "Softmax")
    qtbot.keyClick(browser.search, Qt.Key.Key_Return)
    assert browser.hit_label.text() == "1 / 2"
    lay, sc = browser.layout_state, browser.canvas.scene_data
    assert lay is not None and sc is not None
    key = browser.selected_key
    assert key is not None and lay.visible_key(key) == key, "its modules opened"
    qtbot.wait(50)  # scroll bars come with the zoom: the view must not fit again
    assert browser.view.scale_factor() >= 0.8, "at a readable zoom"
    box = sc.boxes[sc.index[key]]
    centre = browser.view.mapFromScene(QPointF(box.x + box.w / 2, box.y + box.h / 2))
    vp = browser.view.viewport().rect()
    assert abs(centre.x() - vp.center().x()) < vp.width() / 4
    assert abs(centre.y() - vp.center().y()) < vp.height() / 4
    assert key in labelled_keys(browser)
    qtbot.keyClick(browser.search, Qt.Key.Key_F3)
    assert browser.hit_label.text() == "2 / 2" and browser.selected_key != key


def test_a_new_file_clears_the_old_search(live_window: MainWindow, qtbot,
                                          files: dict[str, Path]) -> None:
    """Finding 7: the previous file's search text stayed, saying "no match"."""
    browser = graph_of(live_window, qtbot, files["gpt2"])
    assert browser.find_nodes("Softmax") == 2
    browser = graph_of(live_window, qtbot, files["cnn"])
    assert browser.search.text() == "" and browser.hit_label.text() == ""
    assert not browser.canvas.hits and browser.selected_key is None
    qtbot.wait(400)  # past the field's typing pause: nothing searches the old text
    assert browser.hit_label.text() == ""


def source_row(browser: GraphBrowser) -> str:
    """The properties panel's `source` line."""
    text = panel_text(browser)
    found = re.search(r"^source\s*\n?(.+)$", text, re.MULTILINE)
    assert found, text
    return found.group(1).strip()


def test_a_node_source_is_the_model_code(live_window: MainWindow, qtbot,
                                         files: dict[str, Path]) -> None:
    """Finding 7: a node's source was the studio's own engine/source/hf/wrappers.py:71."""
    browser = graph_of(live_window, qtbot, files["gpt2"])
    model = browser.model
    assert model is not None
    softmax = next(n for n in model.nodes if n.op_type == "Softmax")
    browser.select_node(softmax.index)
    source = source_row(browser)
    assert re.fullmatch(r"transformers/models/gpt2/modeling_gpt2\.py:\d+", source), source
    browser = graph_of(live_window, qtbot, files["cnn"])
    model = browser.model
    assert model is not None
    browser.select_node(next(n for n in model.nodes if n.op_type == "Conv").index)
    assert source_row(browser).startswith(f"{files['py']}:")


def test_operator_docs_are_rendered(live_window: MainWindow, qtbot,
                                    files: dict[str, Path]) -> None:
    """Finding 7: operator docs showed raw markdown (**, [the doc](Broadcasting.md), * )."""
    browser = graph_of(live_window, qtbot, files["cnn"])
    model = browser.model
    assert model is not None
    browser.select_node(next(n for n in model.nodes if n.op_type == "Gemm").index)
    text = panel_text(browser)
    text = text[text.index("Operator Gemm"):text.index("Stack trace")]  # the docs alone
    assert "General Matrix multiplication" in text and "unidirectional broadcasting" in text
    assert "**" not in text and "](" not in text and "\n* " not in text
    doc = browser.properties.browser.document()
    block, items, links = doc.begin(), 0, []
    while block.isValid():
        items += block.textList() is not None
        it = block.begin()
        while not it.atEnd():
            href = it.fragment().charFormat().anchorHref()
            if href:
                links.append(href)
            it += 1
        block = block.next()
    assert items >= 2, "A' and B' are list items"
    assert any(h.startswith("https://github.com/onnx/onnx/") for h in links), links


def controls(browser: GraphBrowser) -> list[QWidget]:
    """The toolbar's buttons and choice boxes."""
    return [w for w in browser.toolbar.findChildren(QWidget)
            if isinstance(w, QAbstractButton | QComboBox) and w.parent() is browser.toolbar]


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("size", SIZES, ids=["1024", "1366"])
def test_the_toolbar_keeps_every_control_in_view(live_window: MainWindow, qtbot,
                                                 files: dict[str, Path], tmp_path: Path,
                                                 size: tuple[int, int], theme: str) -> None:
    """Finding 8: the Graph toolbar overflowed ("››", PNG/SVG hidden, "Modules closec")."""
    live_window.set_theme(theme)
    browser = graph_of(live_window, qtbot, files["gpt2"], size)
    assert not [b for b in browser.findChildren(QToolBar) if b.isVisible()], "no hiding bar"
    shown = controls(browser)
    names = {w.text() for w in shown if isinstance(w, QAbstractButton)}
    assert {"Fit", "Expand all", "Layout", "Export"} <= names
    area = QRect(0, 0, browser.toolbar.width(), browser.toolbar.height())
    for w in shown:
        assert w.isVisible(), w
        assert area.contains(w.geometry()), (w, w.geometry(), area)
        assert w.width() >= w.sizeHint().width(), f"{w} cut: {w.width()} < {w.sizeHint()}"
    combo = browser.depth_combo
    assert combo.currentText() == "Modules closed" and combo.width() >= combo.sizeHint().width()
    export = browser.toolbar.buttons["Export"].menu()
    assert export is not None and {"Save as PNG…", "Save as SVG…"} <= {
        a.text() for a in export.actions()}
    # the Compare tab's graphs (side by side, or one at a time on a narrow tab): whole toolbars
    live_window.tabs.setCurrentWidget(live_window.tabs.compare)
    graphs = live_window.tabs.compare.graphs
    live_window.tabs.compare.views.setCurrentWidget(graphs)
    for side in (graphs.a, graphs.b):
        assert side.load_file(files["cnn"])
    qtbot.wait(50)
    for k, side in enumerate((graphs.a, graphs.b)):
        if not graphs.side_by_side:  # too narrow for both: one at a time, by its tab
            graphs.switch.setCurrentIndex(k)
            qtbot.wait(50)
        area = QRect(0, 0, side.toolbar.width(), side.toolbar.height())
        for w in controls(side):
            assert w.isVisible() and area.contains(w.geometry()), (w, w.geometry(), area)
    live_window.tabs.setCurrentWidget(live_window.tabs.graph)
    qtbot.wait(20)
    live_window.grab().save(str(tmp_path / f"graph_{size[0]}_{theme}.png"))
