"""Warnings you can read (issue 13, item 5): the detail pane shows a warning whole — its text,
hint, source line and `details` chain — and the Summary counts what the Warnings tab lists."""

from __future__ import annotations

import re

import pytest

from onnx_studio.app.window import MainWindow
from tests.app.conftest import example_index, export_and_wait

pytestmark = pytest.mark.usefixtures("shared_runner")


def test_the_detail_pane_shows_a_warning_whole(live_window: MainWindow, qtbot) -> None:
    window = live_window
    combo = window.form.model_form.examples
    combo.activated.emit(example_index(window, qtbot, "item_reshape"))
    assert window.session.recipe.model.source == "example:item_reshape"
    export_and_wait(window, qtbot)
    view = window.tabs.warnings
    window.tabs.setCurrentWidget(view)
    assert view.count() == len(window.session.warnings) > 0
    summary = window.tabs.summary.facts.toPlainText()
    assert re.search(rf"Warnings\s*{view.count()} \(see the Warnings tab\)", summary), summary
    assert window.tabs.tabText(window.tabs.indexOf(view)) == f"Warnings ({view.count()})"

    with_source = None
    for row in range(view.count()):
        view.tree.setCurrentItem(view.tree.topLevelItem(row))
        warning = window.session.warnings[row]
        shown = view.details.toPlainText()
        assert view.details.isVisible(), "a selected warning is shown whole at once"
        assert warning.message.strip() in shown, "the full text, never cut"
        if warning.hint:
            assert f"→ {warning.hint.strip()}" in shown
        if warning.details:
            assert warning.details.strip() in shown
        if warning.source and re.search(r":\d+$", warning.source):
            with_source = (warning, shown)
    assert with_source is not None, "the example's TracerWarning names its line"
    warning, shown = with_source
    line = int(warning.source.rsplit(":", 1)[1])
    code = re.search(rf"^    {line} \| (.+)$", shown, re.MULTILINE)
    assert code is not None and code.group(1).strip(), "the source line itself is shown"

    view.details_button.click()
    assert not view.details.isVisible()
