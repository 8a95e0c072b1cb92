"""The session owns file state (issue 36, paths 1-4): the files the window shows are watched,
one decision (onnx_studio.app.session.belonging) says whether each result belongs to the file
as it is now, and every view — Summary, Validation tab, export bar, status bar, header, banner,
graph — says the same after the file changes on disk between a user's actions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from PySide6.QtCore import Qt

from onnx_studio.app import settings as settings_mod
from onnx_studio.app.jobs import JobRunner
from onnx_studio.app.outcomes import ValidationOutcome
from onnx_studio.app.session import ExportSession
from onnx_studio.app.window import MainWindow
from tests.app.conftest import EXPORT_TIMEOUT_MS, export_and_wait
from tests.engine.hf_models import build

pytestmark = pytest.mark.usefixtures("shared_runner")


def change_one_weight(path: Path) -> None:
    """Rewrite the file on disk with its first float weight changed a lot, as another program
    would: the same graph computing something else."""
    model = onnx.load(str(path))
    for init in model.graph.initializer:
        array = numpy_helper.to_array(init)
        if array.dtype == np.float32 and array.size > 1:
            init.CopyFrom(numpy_helper.from_array(array + 10.0, init.name))
            break
    onnx.save_model(model, str(path))


def fact(window: MainWindow, name: str) -> str:
    lines = window.tabs.summary.facts.toPlainText().splitlines()
    return lines[lines.index(name) + 1]


def validate(window: MainWindow, qtbot) -> ValidationOutcome:  # type: ignore[no-untyped-def]
    bar = window.form.export_bar
    assert bar.validate_button.isEnabled(), bar.validate_button.toolTip()
    with qtbot.waitSignal(window.session.validationFinished,
                          timeout=EXPORT_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(bar.validate_button, Qt.MouseButton.LeftButton)
    return blocker.args[0]


def header_and_banner(window: MainWindow, tab: object) -> tuple[str, str, bool]:
    window.tabs.setCurrentWidget(tab)
    bar = window.provenance
    return bar.origin.text(), bar.stale_text.text(), bar.banner.isVisible()


def heard_change(window: MainWindow, qtbot, path: Path) -> None:  # type: ignore[no-untyped-def]
    """Wait until the session has read `path` again (its watcher heard the change)."""
    qtbot.waitUntil(lambda: (opened := window.session.results.opened) is not None
                    and opened.reread and opened.path == path.resolve(), timeout=10_000)


def failed_everywhere(window: MainWindow, outcome: ValidationOutcome) -> None:
    """The Validation tab, the Summary (status and facts), the export bar and the banners
    all say the validation of the file as it is now failed."""
    assert outcome.validation is not None and not outcome.ok
    summary, tab, bar = window.tabs.summary, window.tabs.validation, window.form.export_bar
    trials = outcome.validation.trials
    count = f"{sum(t.ok for t in trials)} of {len(trials)}"
    assert "Validation failed" in tab.verdict.text()
    assert "Validation failed" in summary.status.text(), summary.status.text()
    assert fact(window, "Validation").startswith(f"FAILED: {count}"), fact(window, "Validation")
    assert bar.progress.format() == "Validation failed"
    for shown in (summary, tab):
        _header, said, visible = header_and_banner(window, shown)
        assert not (visible and window.provenance.stale), said


def test_a_failed_validation_of_a_changed_file_is_said_by_every_view(
        live_window: MainWindow, qtbot) -> None:
    window, session = live_window, live_window.session
    with session.edit("options") as recipe:
        recipe.validate.enabled = True
        recipe.validate.random_trials = 1
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message["report"]["error"]
    output = Path(message["report"]["output"])
    assert fact(window, "Validation").startswith("passed")

    change_one_weight(output)
    heard_change(window, qtbot, output)
    # before any Validate: no view calls these bytes validated
    summary = window.tabs.summary
    assert "read again" in summary.status.text() and "✔" not in summary.status.text()
    assert "before it changed on disk" in fact(window, "Validation")
    header, said, visible = header_and_banner(window, summary)
    assert "changed on disk" in header and "read again" in header
    assert visible and "not been validated since" in said
    assert window.provenance.again.text() == "Validate it"
    assert window.form.export_bar.progress.format() == "Out of date"
    _h, said, visible = header_and_banner(window, window.tabs.validation)
    assert visible and "changed on disk since this validation" in said

    outcome = validate(window, qtbot)
    failed_everywhere(window, outcome)
    window.tabs.setCurrentWidget(summary)
    # Why? explains the validation the Summary shows (the failed one), as on the Validation tab
    assert window.session.explainer.offer().shown and summary.why.isVisible()
    assert "passed" not in summary.status.text()


def test_a_file_opened_then_changed_is_validated_as_it_is_now(
        live_window: MainWindow, qtbot, tmp_path: Path) -> None:
    window = live_window
    message = export_and_wait(window, qtbot)
    copy = tmp_path / "copy.onnx"
    copy.write_bytes(Path(message["report"]["output"]).read_bytes())
    assert window.open_path(copy)
    change_one_weight(copy)
    heard_change(window, qtbot, copy)
    failed_everywhere(window, validate(window, qtbot))
    header, said, visible = header_and_banner(window, window.tabs.summary)
    assert "copy.onnx" in header and not visible, said


def test_a_profile_of_a_changed_file_colours_nothing_and_says_why(
        live_window: MainWindow, qtbot) -> None:
    window, session = live_window, live_window.session
    message = export_and_wait(window, qtbot)
    output = Path(message["report"]["output"])
    tab = window.tabs.compare
    window.tabs.setCurrentWidget(window.tabs.graph)  # the graph of the export, read now
    assert window.tabs.graph.loaded_path == output
    window.tabs.setCurrentWidget(tab)
    tab.set_files(output)
    with qtbot.waitSignal(session.analysis.finished, timeout=EXPORT_TIMEOUT_MS):
        assert tab.start_profile()
    change_one_weight(output)
    heard_change(window, qtbot, output)
    said: list[str] = []
    window.statusBar().messageChanged.connect(lambda text: said.append(text))
    tab.overlay_check.setChecked(True)  # disabled for the user; ticked here all the same

    assert not tab.overlay_check.isChecked() and not tab.overlay_check.isEnabled()
    assert "changed on disk since this profile" in tab.status.text()
    assert any("changed on disk since this profile" in s for s in said), said
    assert "changed on disk" in tab.overlay_check.toolTip()
    graph = window.tabs.graph
    browser = graph.browser
    assert browser is not None and not browser.state.changed_on_disk(), "the graph is re-read"
    assert browser.state.overlay is None, "no colour from numbers of other bytes"


@pytest.mark.timeout(300)
def test_opening_a_hugging_face_folder_after_an_onnx_file_keeps_nothing_of_it(
        live_window: MainWindow, qtbot, tmp_path: Path, shared_runner: JobRunner,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    window, session = live_window, live_window.session
    message = export_and_wait(window, qtbot)
    copy = tmp_path / "other.onnx"
    copy.write_bytes(Path(message["report"]["output"]).read_bytes())
    assert window.open_path(copy)
    change_one_weight(copy)
    heard_change(window, qtbot, copy)
    validate(window, qtbot)
    assert window.form.export_bar.progress.format() == "Validation failed"

    folder = build("bert", tmp_path_factory.mktemp("hf_truth"))
    reasons: list[str] = []
    inputs = window.form.inputs_table
    session.recipeEdited.connect(lambda *_: reasons.append(inputs.not_applicable.text()))
    assert window.open_hf_folder(folder)
    # before the folder is read, the inputs' reason points at no group that is not there
    assert reasons and "being read" in reasons[-1] and "above once" in reasons[-1]
    qtbot.waitUntil(lambda: window.form.hf_task.task.count() > 0, timeout=EXPORT_TIMEOUT_MS)
    assert "listed in the Hugging Face group above" in inputs.not_applicable.text()
    assert window.form.hf_task.isVisible()

    assert session.results.opened is None
    header, _said, _visible = header_and_banner(window, window.tabs.summary)
    assert "other.onnx" not in header
    assert window.form.export_bar.progress.format() != "Validation failed"
    assert window.tabs.tabText(window.tabs.indexOf(window.tabs.warnings)) == "Warnings"
    # the Validation tab still shows what it was, marked as of another recipe
    _h, said, visible = header_and_banner(window, window.tabs.validation)
    assert visible and window.provenance.stale and "form has changed" in said

    # the recipe saved and opened in a new window: no group is pointed at before it shows
    saved = tmp_path / "hf.toml"
    assert window.save_recipe_to(saved)
    other = MainWindow(settings_mod.Settings(), None, start_worker=False,
                       session=ExportSession(runner=shared_runner))
    try:
        other.show()
        assert other.open_path(saved)
        table = other.form.inputs_table
        assert "being read" in table.not_applicable.text(), table.not_applicable.text()
        assert not other.form.hf_task.isVisible()
        other.session.start_worker()  # warm: the folder is described now
        qtbot.waitUntil(lambda: other.form.hf_task.isVisible(), timeout=EXPORT_TIMEOUT_MS)
        assert "listed in the Hugging Face group above" in table.not_applicable.text()
        # its worker's answers all heard before it goes (the devices job, sent when ready)
        qtbot.waitUntil(lambda: other.session.capabilities is not None, timeout=30_000)
    finally:
        other.session.shutdown()
        other.close()
        other.deleteLater()
