"""The results at 1024×768 (issue 13, item 7): every tab of the results in view with the
warning count in its title, and the Graph tab's properties panel wide enough that a tensor's
type and a key stay on one line."""

from __future__ import annotations

import re

import pytest
from PySide6.QtGui import QTextBlock, QTextDocument
from PySide6.QtWidgets import QToolButton

from onnx_studio.app.graph.properties import MIN_WIDTH as PANEL_MIN_WIDTH
from onnx_studio.app.tabs import MIN_WIDTH as TABS_MIN_WIDTH
from onnx_studio.app.window import MainWindow
from tests.app.conftest import example_index, export_and_wait

pytestmark = pytest.mark.usefixtures("shared_runner")

NBSP = "\N{NO-BREAK SPACE}"
TYPE = re.compile(r"^[a-z0-9]+\[[^\]]*\]$")  # float32[batch×3×32×32], as the panel prints it


def at_1024(window: MainWindow, qtbot) -> None:
    window.resize(1024, 768)
    qtbot.waitUntil(lambda: window.width() == 1024 and window.height() == 768)


def tabs_in_view(window: MainWindow) -> list[str]:
    """The titles of the tabs that lie (partly) outside the tab bar's visible width."""
    tabs, bar = window.tabs, window.tabs.tabBar()
    width = min(bar.width(), tabs.width())
    return [tabs.tabText(i) for i in range(tabs.count())
            if bar.tabRect(i).left() < 0 or bar.tabRect(i).right() >= width]


def test_every_tab_shows_at_1024_with_the_warning_count(live_window: MainWindow,
                                                        qtbot) -> None:
    window, tabs = live_window, live_window.tabs
    at_1024(window, qtbot)
    window.form.model_form.examples.activated.emit(
        example_index(window, qtbot, "item_reshape"))
    export_and_wait(window, qtbot)
    count = tabs.warnings.count()
    assert count > 0, "the example warns"
    assert tabs.tabText(tabs.indexOf(tabs.warnings)) == f"Warnings ({count})"
    bar = tabs.tabBar()
    qtbot.waitUntil(lambda: bar.tabRect(tabs.count() - 1).width() > 0)
    assert tabs_in_view(window) == [], "every tab lies within the tab bar"
    scrolls = [b for b in bar.findChildren(QToolButton) if b.isVisible()]
    assert scrolls == [], "no scroll arrows"
    for i in range(tabs.count()):  # and every title whole, not elided
        assert bar.tabRect(i).width() >= bar.tabSizeHint(i).width(), tabs.tabText(i)
    # the results dragged to their narrowest: the titles shorten, no tab leaves the bar
    window.splitter.setSizes([window.width(), 0])
    qtbot.waitUntil(lambda: tabs.width() <= TABS_MIN_WIDTH + 10)
    assert tabs_in_view(window) == []


def lines(block: QTextBlock) -> list[str]:
    layout, text = block.layout(), block.text()
    return [text[layout.lineAt(i).textStart():][:layout.lineAt(i).textLength()]
            for i in range(layout.lineCount())]


def blocks(doc: QTextDocument) -> list[QTextBlock]:
    found, block = [], doc.begin()
    while block.isValid():
        found.append(block)
        block = block.next()
    return found


def test_the_properties_panel_keeps_types_and_keys_whole_at_1024(live_window: MainWindow,
                                                                qtbot) -> None:
    window, tabs = live_window, live_window.tabs
    at_1024(window, qtbot)
    assert window.session.recipe.inputs[0].dynamic, "the default example: a batch dimension"
    export_and_wait(window, qtbot)
    tabs.setCurrentWidget(tabs.graph)
    qtbot.waitUntil(lambda: tabs.graph.browser is not None
                    and tabs.graph.browser.model is not None, timeout=30_000)
    browser = tabs.graph.browser
    assert browser is not None
    panel = browser.properties
    qtbot.waitUntil(panel.browser.isVisible)
    assert panel.width() >= PANEL_MIN_WIDTH
    assert tabs.graph.minimumSizeHint().width() <= tabs.graph.width(), "the page fits"

    def shown_lines() -> dict[str, list[str]]:
        """Each paragraph (table cell) of the panel: its lines as laid out."""
        doc = panel.browser.document()
        qtbot.waitUntil(lambda: all(b.layout().lineCount() for b in blocks(doc)))
        return {b.text(): lines(b) for b in blocks(doc)}

    def types_whole(shown: dict[str, list[str]]) -> int:
        types = [text for text in shown if TYPE.match(text)]
        for text in types:
            assert shown[text] == [text], f"a type broken: {shown[text]!r}"
        return len(types)

    # the graph's summary: the input's and the output's types whole, every line broken at a
    # space, nothing beyond the panel's width
    assert "float32[batch×3×32×32]" in panel.browser.toPlainText()
    shown = shown_lines()
    assert types_whole(shown) == 2
    for key in ("IR version", "opset import"):  # kept whole: its space a no-break one
        key = key.replace(" ", NBSP)
        assert shown.get(key) == [key], key
    for text, parts in shown.items():
        for line in parts[:-1]:
            assert line[-1:].isspace(), f"{text!r} broken inside a word: {parts!r}"
    assert panel.browser.horizontalScrollBar().maximum() == 0
    # a node: its inputs' and output's types and its keys whole
    model = browser.model
    assert model is not None
    conv = next(n for n in model.nodes if n.op_type == "Conv")
    browser.select_key(f"n{conv.index}")
    shown = shown_lines()
    assert types_whole(shown) == 1 + len(conv.inputs), "the output's type and the inputs'"
    for key in ("name", "module", "source", *conv.attributes):
        assert shown.get(key) == [key], key
