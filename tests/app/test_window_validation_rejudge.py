"""Validation you can work with (issue 13, item 4): a new tolerance judges the stored
differences again at once, without a run, and the verdict is the one a run gives."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from onnx_studio.app.validation.tab import OUTPUT_HEADERS, ValidationTab
from onnx_studio.app.window import MainWindow
from tests.app.conftest import EXPORT_TIMEOUT_MS, export_and_wait

pytestmark = pytest.mark.usefixtures("shared_runner")


def set_text(edit, text: str) -> None:
    edit.setText(text)
    edit.editingFinished.emit()


def shown_by(tab: ValidationTab) -> dict[str, Any] | None:
    """The validation the tab shows (the session's), as the JSON the worker writes."""
    outcome = tab.outcome
    return outcome.validation.to_dict() if outcome and outcome.validation else None


def verdicts(validation: dict[str, Any]) -> tuple[bool, list[bool], list[tuple[bool, ...]]]:
    return (bool(validation["ok"]), [bool(o["passed"]) for o in validation["outputs"]],
            [tuple(bool(o["passed"]) for o in t["outputs"]) for t in validation["trials"]])


def test_a_new_tolerance_rejudges_without_running(live_window: MainWindow, qtbot) -> None:
    window, session = live_window, live_window.session
    tab, options = window.tabs.validation, window.form.options_form
    message = export_and_wait(window, qtbot)
    validation = message["report"]["validation"]
    assert validation["ok"], validation["message"]
    worst = max(o["max_abs_diff"] for o in validation["outputs"])
    assert worst > 0, "an export with nothing to judge proves nothing"
    started: list[object] = []
    session.validationStarted.connect(started.append)
    session.exportStarted.connect(started.append)

    window.tabs.setCurrentWidget(tab)
    checks = [("0", "0"), ("0", f"{worst * 0.5:.6g}"), ("0", f"{worst * 1.01:.6g}"),
              ("1e-3", "1e-5")]
    for rtol, atol in checks:
        set_text(options.rtol, rtol)
        set_text(options.atol, atol)
        assert not session.busy and started == [], "nothing was run"
        judged = shown_by(tab)
        assert judged is not None and (judged["rtol"], judged["atol"]) == (float(rtol),
                                                                           float(atol))
        title = "Validation passed" if judged["ok"] else "Validation failed"
        assert title in tab.verdict.text()
        column = OUTPUT_HEADERS.index("mismatched")
        rows = [tab.outputs.topLevelItem(i) for i in range(tab.outputs.topLevelItemCount())]
        shown = [row.text(column) for row in rows if row is not None]
        failing = [o for o in judged["outputs"] if not o["passed"]]
        for output, text in zip(judged["outputs"], shown, strict=True):
            # counted from the plot file's sample (the whole of this small output): a number
            assert text != "—" and (text == "0") == output["passed"], (rtol, atol, text)
        assert "nothing re-run" in tab.facts.text()
        assert "judged again" in window.provenance.origin.text()
        assert not window.provenance.stale, "judged at the form's tolerance: current"

        # the same tolerance, run for real: the same verdicts, output by output, trial by trial
        with qtbot.waitSignal(session.validationFinished, timeout=EXPORT_TIMEOUT_MS) as blocker:
            qtbot.mouseClick(window.form.export_bar.validate_button, Qt.MouseButton.LeftButton)
        run = blocker.args[0].validation.to_dict()
        assert verdicts(run) == verdicts(judged), (rtol, atol)
        for output in failing:  # the count a run gives, in the trial the sample is of
            counts = {o["mismatched"] for t in run["trials"] for o in t["outputs"]
                      if o["name"] == output["name"]}
            assert output["mismatched"] in counts, (rtol, atol, output, counts)
        assert run["message"].split(";")[0] == judged["message"].split(";")[0]
        started.clear()

    last = shown_by(tab)
    assert last is not None and verdicts(last)[0] is True


def test_a_validation_report_as_html_and_csv(live_window: MainWindow, qtbot,
                                             tmp_path: Path) -> None:
    window, tab = live_window, live_window.tabs.validation
    assert not tab.save_button.isEnabled(), "nothing to save yet"
    message = export_and_wait(window, qtbot)
    validation = message["report"]["validation"]
    assert tab.save_button.isEnabled()
    written = tab.save_report(tmp_path / "report.html")
    assert written is not None
    page, table = written[0].read_text(encoding="utf-8"), written[1]
    assert "<h1>Validation passed</h1>" in page and "<svg" in page, "plots inline"
    assert "src=" not in page and "href=" not in page, "one file: nothing linked"
    assert window.session.recipe.output_path.name in page
    with table.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == sum(len(t["outputs"]) for t in validation["trials"])
    first = validation["trials"][0]["outputs"][0]
    assert float(rows[0]["max_abs_diff"]) == first["max_abs_diff"]
    assert rows[0]["passed"] == "True" and rows[0]["output"] == first["name"]


def test_the_result_pages_fit_beside_the_form_at_1024(live_window: MainWindow, qtbot) -> None:
    """At 1024x768 every result page fits the width it gets beside the form (Compare's
    buttons in two rows, its graphs and the parity plots stacked), and the outputs table
    shows each output's name whole."""
    window, tabs = live_window, live_window.tabs
    window.resize(1024, 768)
    message = export_and_wait(window, qtbot)
    assert message["report"]["validation"]["ok"]
    qtbot.waitUntil(lambda: window.width() == 1024)
    assert window.centralWidget().minimumSizeHint().width() <= 1024
    for i in range(tabs.count()):
        tabs.setCurrentIndex(i)
        page = tabs.widget(i)
        qtbot.waitUntil(page.isVisible)
        assert page.minimumSizeHint().width() <= page.width(), tabs.tabText(i)
    tab = tabs.validation
    tabs.setCurrentWidget(tab)
    tab.sections.setCurrentWidget(tab.plots)
    qtbot.waitUntil(lambda: tab.plots.scatter is not None)
    assert tab.plots.split.orientation() == Qt.Orientation.Vertical, "stacked, not cramped"
    first = tab.outputs.topLevelItem(0)
    assert first is not None
    name = first.text(0)
    assert tab.outputs.columnWidth(0) >= tab.outputs.fontMetrics().horizontalAdvance(name)
