"""Why? in the window (issue 26) with a real worker, on a real export whose divergence is known:
the weight of layers.2's Linear patched in the file. A failed validation offers Why? in the
Validation tab and the Summary; the answer opens the Graph tab at that node with its module,
source line and differences; Save repro… writes a folder that reproduces it; Cancel stops it;
opening another file, changing the tolerance or exporting clears it from every view."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QFileDialog

from onnx_studio.app.graph.findings import WHY_HEADING
from onnx_studio.app.outcomes import ValidationOutcome
from onnx_studio.app.session import Explanation
from onnx_studio.app.window import MainWindow
from tests.app.conftest import EXPORT_TIMEOUT_MS, STOP_TIMEOUT_MS
from tests.engine.explain_models import exported, linear_line, patched

JOB_TIMEOUT_MS = EXPORT_TIMEOUT_MS


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The Stack model exported for real; its file as exported is kept as good.onnx."""
    onnx_file, recipe = exported(tmp_path_factory.mktemp("why"), "Stack")
    shutil.copy(onnx_file, onnx_file.with_name("good.onnx"))
    return onnx_file, recipe


@pytest.fixture
def bad(stack: tuple[Path, Path]) -> tuple[Path, Path]:
    """The recipe's output with layers.2.lin's weight scaled by 1.5 (a fresh copy per test)."""
    onnx_file, recipe = stack
    patched(onnx_file.with_name("good.onnx"), onnx_file, "layers.2.lin")
    return onnx_file, recipe


def failed_validation(window: MainWindow, recipe: Path, qtbot) -> ValidationOutcome:
    assert window.open_path(recipe)
    button = window.tabs.validation.validate_button
    assert button.isEnabled(), button.toolTip()
    with qtbot.waitSignal(window.session.validationFinished, timeout=JOB_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    outcome: ValidationOutcome = blocker.args[0]
    assert outcome.validation is not None and not outcome.validation.ok
    return outcome


def why_bars(window: MainWindow) -> list:
    return [window.tabs.validation.why, window.tabs.summary.why]


def properties_text(window: MainWindow) -> str:
    browser = window.tabs.graph.browser
    assert browser is not None
    return browser.properties.browser.toPlainText()


@pytest.mark.timeout(240)
def test_why_opens_the_graph_at_the_patched_layer_and_saves_a_repro(
        live_window: MainWindow, bad: tuple[Path, Path], tmp_path: Path, qtbot,
        monkeypatch: pytest.MonkeyPatch) -> None:
    window = live_window
    onnx_file, recipe = bad
    failed_validation(window, recipe, qtbot)
    for bar in why_bars(window):  # offered in both views, enabled, nothing found yet
        assert not bar.isHidden() and bar.why_button.isEnabled(), bar.why_button.toolTip()
        assert bar.repro_button.isHidden()

    window.tabs.setCurrentWidget(window.tabs.summary)
    with qtbot.waitSignal(window.session.explainer.explained,
                          timeout=JOB_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(window.tabs.summary.why.why_button, Qt.MouseButton.LeftButton)
        assert not window.tabs.summary.why.cancel_button.isHidden()  # running: cancellable
        assert not window.tabs.validation.why.why_button.isEnabled()
    found: Explanation = blocker.args[0]
    div = found.divergence
    assert div is not None and div.module == "layers.2.lin"
    assert div.source == f"explain_models.py:{linear_line()}"

    # the Graph tab, at that node: selected and in view, its rows in the properties
    graph = window.tabs.graph
    assert window.tabs.currentWidget() is graph
    browser = graph.browser
    assert browser is not None and browser.model is not None
    assert graph.shown[0] is not None and graph.shown[0].resolve() == onnx_file.resolve()
    index = browser.model.node_by_name(div.node)
    assert index is not None and browser.state.selection.node == index
    box = browser.canvas.scene_data.boxes[browser.canvas.selected]  # type: ignore[union-attr]
    visible = browser.view.mapToScene(browser.view.viewport().rect()).boundingRect()
    assert visible.contains(QPointF(box.x + box.w / 2, box.y + box.h / 2))
    assert browser.marks[div.node].startswith("the first divergence (Why?)")
    text = properties_text(window)
    assert WHY_HEADING in text and "layers.2.lin" in text
    assert f"explain_models.py:{linear_line()}" in text and "max abs diff" in text

    # every view says the same thing
    sentences = {bar.text.text() for bar in why_bars(window)}
    assert len(sentences) == 1 and "layers.2.lin" in sentences.pop()

    # Save repro… over a folder of someone's files: refused, the files and the answer stay
    bar = window.tabs.validation.why
    assert not bar.repro_button.isHidden() and bar.repro_button.isEnabled()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine", encoding="utf-8")
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        lambda *args, **kwargs: (str(theirs), ""))
    with qtbot.waitSignal(window.session.explainer.failed, timeout=JOB_TIMEOUT_MS) as refused:
        bar.repro_button.click()
    assert refused.args[0].kind == "write"
    assert [p.name for p in theirs.iterdir()] == ["notes.txt"]
    assert "Save repro… could not write" in bar.text.text() and "layers.2.lin" in bar.text.text()
    assert window.session.explainer.explanation is not None

    # Save repro…: the chosen folder, written whole; it reproduces with onnxruntime alone
    target = tmp_path / "bug" / "repro_here"
    target.parent.mkdir()
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        lambda *args, **kwargs: (str(target), ""))
    with qtbot.waitSignal(window.session.explainer.reproWritten,
                          timeout=JOB_TIMEOUT_MS) as written:
        bar.repro_button.click()
    assert Path(written.args[0].folder).resolve() == target.resolve()
    assert sorted(p.name for p in target.parent.iterdir()) == ["repro_here"]  # no temp left
    assert {"model.onnx", "inputs.npz", "expected.npz", "repro.py"} <= {
        p.name for p in target.iterdir()}
    run = subprocess.run([sys.executable, "-I", str(target / "repro.py")], capture_output=True,
                         text=True, timeout=60, check=False, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr  # it reproduces
    assert str(target) in bar.text.text()
    assert window.tabs.summary.why.text.text() == bar.text.text()

    # the answer's link opens the graph at the node again
    window.tabs.setCurrentWidget(window.tabs.validation)
    browser.select_key("i:x")
    assert "Show it on the graph" in window.tabs.summary.why.text.text()
    window.tabs.summary.why.text.linkActivated.emit("graph")
    assert window.tabs.currentWidget() is graph and browser.state.selection.node == index

    # another file: the explanation goes from every view and from the graph
    assert window.open_path(onnx_file.with_name("good.onnx"))
    assert window.session.explainer.explanation is None
    for why in why_bars(window):
        assert "layers.2.lin" not in why.text.text()
    assert not window.tabs.graph.browser.properties.notes  # type: ignore[union-attr]
    assert div.node not in window.tabs.graph.browser.marks  # type: ignore[union-attr]


@pytest.mark.timeout(240)
def test_why_can_be_cancelled_and_run_again(live_window: MainWindow,
                                            bad: tuple[Path, Path], qtbot) -> None:
    window = live_window
    _onnx_file, recipe = bad
    failed_validation(window, recipe, qtbot)
    bar = window.tabs.validation.why
    explainer = window.session.explainer
    with qtbot.waitSignal(explainer.failed, timeout=STOP_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(bar.why_button, Qt.MouseButton.LeftButton)
        assert not bar.cancel_button.isHidden()
        qtbot.mouseClick(bar.cancel_button, Qt.MouseButton.LeftButton)
    assert blocker.args[0].kind == "cancelled"
    assert explainer.explanation is None and not explainer.busy
    assert bar.why_button.isEnabled() and bar.cancel_button.isHidden()
    assert "cancelled" in bar.text.text()
    assert window.tabs.currentWidget() is not window.tabs.graph  # nothing opened
    with qtbot.waitSignal(explainer.explained, timeout=JOB_TIMEOUT_MS):
        qtbot.mouseClick(bar.why_button, Qt.MouseButton.LeftButton)
    found = explainer.explanation
    assert found is not None and found.divergence is not None
    browser = window.tabs.graph.browser
    assert browser is not None and found.divergence.node in browser.marks

    # another tolerance: the validation is judged again, the explanation no longer holds
    rtol = window.form.options_form.rtol
    rtol.setText("0.01")
    rtol.editingFinished.emit()
    assert explainer.explanation is None
    for why in why_bars(window):
        assert "layers.2.lin" not in why.text.text()
    assert found.divergence.node not in browser.marks and not browser.properties.notes

    # back to the first tolerance, Why? again; an export takes the answer away as it starts
    rtol.setText("0.001")
    rtol.editingFinished.emit()
    assert bar.why_button.isEnabled(), bar.why_button.toolTip()
    with qtbot.waitSignal(explainer.explained, timeout=JOB_TIMEOUT_MS):
        qtbot.mouseClick(bar.why_button, Qt.MouseButton.LeftButton)
    assert "layers.2.lin" in bar.text.text()
    with qtbot.waitSignal(window.session.exportStarted, timeout=JOB_TIMEOUT_MS):
        qtbot.mouseClick(window.form.export_bar.export_button, Qt.MouseButton.LeftButton)
    assert explainer.explanation is None
    for why in why_bars(window):
        assert "layers.2.lin" not in why.text.text()
    with qtbot.waitSignal(window.session.exportFinished, timeout=JOB_TIMEOUT_MS):
        pass
