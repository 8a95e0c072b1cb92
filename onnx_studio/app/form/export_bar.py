"""The bar under the form: output file, why Export is disabled, progress, Export / Validate /
Cancel (the progress bar and Cancel serve a validation job as well as an export).

A view of the session: its buttons call the session's jobs, its progress follows them.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from onnx_studio.app import theme
from onnx_studio.app.form import marks
from onnx_studio.app.recipes import relative_source
from onnx_studio.app.session import ExportSession
from onnx_studio.app.session.belonging import Standing

if TYPE_CHECKING:
    from onnx_studio.app.outcomes import ExportOutcome, JobStart, ValidationOutcome
    from onnx_studio.engine.protocol import Validation

EXPORT_TIP = "Export the model (Ctrl+E)"
OUTPUT_TIP = ("Where the .onnx file is written (relative to the recipe's folder); it only "
              "appears once complete")


class ExportBar(QWidget):
    """States: idle (Export enabled unless there are problems), running, done, failed."""

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.dark = False
        self._started_at = 0.0
        self._run: Validation | None = None  # the validation run the bar's words are about
        self._said: Validation | None = None  # and the verdict they give (it may be re-judged)
        self._about: Standing | None = None  # what the session said of its file after a job
        self.output = QLineEdit()
        self.output.setToolTip(OUTPUT_TIP)
        self.output_browse = QPushButton("Browse…")
        self.problem_label = QLabel()
        self.problem_label.setWordWrap(True)
        self.problem_label.setTextFormat(Qt.TextFormat.RichText)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.progress.setFormat("Ready")
        self.progress.setValue(0)
        self.stage = QLabel()
        self.stage.setWordWrap(True)  # a long verdict wraps in a narrow form, never cut
        self.elapsed = QLabel()
        self.export_button = QPushButton("Export")
        self.export_button.setDefault(True)
        self.export_button.setToolTip(EXPORT_TIP)
        self.validate_button = QPushButton("Validate")
        self.validate_button.setEnabled(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.setToolTip("Stop the export or validation now (Esc); the form is kept")
        self.timer = QTimer(self)
        self.timer.setInterval(100)
        self.timer.timeout.connect(self._tick)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 4, 0)
        layout.setSpacing(4)
        row = QHBoxLayout()
        label = QLabel("O&utput")
        label.setBuddy(self.output)
        row.addWidget(label)
        row.addWidget(self.output, 1)
        row.addWidget(self.output_browse)
        layout.addLayout(row)
        layout.addWidget(self.problem_label)
        row = QHBoxLayout()
        row.addWidget(self.progress, 1)
        row.addWidget(self.elapsed)
        row.addWidget(self.export_button)
        row.addWidget(self.validate_button)
        row.addWidget(self.cancel_button)
        layout.addLayout(row)
        layout.addWidget(self.stage)

        self.output.editingFinished.connect(self._output_edited)
        self.output_browse.clicked.connect(self._browse_output)
        self.export_button.clicked.connect(session.start_export)
        self.validate_button.clicked.connect(session.start_validation)
        self.cancel_button.clicked.connect(session.cancel)
        session.recipeChanged.connect(self._show_output)
        session.recipeEdited.connect(self._recipe_edited)
        session.readinessChanged.connect(self._readiness_changed)
        session.aboutToRun.connect(self._output_edited)  # Ctrl+E while typing the path
        for started in (session.exportStarted, session.validationStarted):
            started.connect(self._job_started)
        for progress in (session.exportProgress, session.validationProgress):
            progress.connect(self.set_progress)
        session.exportFinished.connect(self._export_finished)
        session.validationFinished.connect(self._validation_finished)
        # an edit or another recipe can put the shown result out of date: the bar says so
        for changed in (session.resultsChanged, session.recipeEdited, session.recipeChanged):
            changed.connect(self._results_changed)

    # ----------------------------------------------------------------- the output file

    def _show_output(self) -> None:
        self.set_output(self.session.recipe.export.output)

    def _recipe_edited(self, part: str, origin: object) -> None:
        if part == "output" and origin is not self:
            self._show_output()

    def _output_edited(self) -> None:
        self.session.set_output(self.output.text().strip(), self)

    def _browse_output(self) -> None:
        from PySide6.QtWidgets import QFileDialog  # a dialog: loaded when first opened

        recipe = self.session.recipe
        path, _ = QFileDialog.getSaveFileName(self, "ONNX file", str(recipe.output_path),
                                              "ONNX (*.onnx)")
        if path:
            self.output.setText(relative_source(Path(path), recipe.base_dir))
            self._output_edited()

    def set_output(self, text: str) -> None:
        if self.output.text() != text:
            self.output.setText(text)

    def show_problems(self, problems: dict[str, str]) -> None:
        """Mark the output field, say why Export is disabled (first problem), enable it."""
        marks.mark(self.output, marks.problems_under(problems, "export.output"), self.dark,
                   OUTPUT_TIP)
        if problems:
            field, sentence = next(iter(problems.items()))
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            reason = f"{field}: {sentence}{more}"
            self.problem_label.setText(
                f"<span style='color:{theme.warning_text(self.dark)}'>Export is disabled — "
                f"{html.escape(reason)}</span>")
            self.export_button.setToolTip(f"Export is disabled: {reason}")
        else:
            self.problem_label.setText("")
            self.export_button.setToolTip(EXPORT_TIP)
        self.problem_label.setVisible(bool(problems))
        self.export_button.setEnabled(not problems and not self.session.busy)

    def _readiness_changed(self) -> None:
        self.show_problems(self.session.problems)
        self.validate_button.setEnabled(not self.session.validate_reason)
        self.validate_button.setToolTip(self.session.validate_tip())

    # ----------------------------------------------------------------- a job

    def _job_started(self, start: JobStart) -> None:
        self.start(start.worker_ready, start.ahead)

    def _export_finished(self, outcome: ExportOutcome) -> None:
        self._remember()
        seconds = self.seconds()
        error = outcome.error
        report = outcome.report
        if outcome.ok:
            self.finish(True, f"Done in {seconds:.1f} s.")
        elif error is not None and error.kind == "validation" and report is not None \
                and report.validation is not None:
            # the file was written; it computes something else than the model
            self.finish(False, "Exported, but the validation failed; the Validation tab "
                        "shows where.", "Validation failed")
        else:
            title = {"cancelled": "Cancelled", "worker_crashed": "The worker crashed"}.get(
                error.kind if error else "export", "Export failed")
            self.finish(False, f"{title}; the Summary tab says why.")

    def _remember(self) -> None:
        """Note the validation the bar's words are about (the session's, after a job), and
        what the session said of its file then."""
        outcome = self.session.validation_result
        self._run = outcome.run if outcome is not None else None
        self._said = outcome.validation if outcome is not None else None
        self._about = self.session.standing()

    def _results_changed(self, *_edit: object) -> None:
        """The session's results or recipe changed: the bar's words follow what the session
        says of its file now (it changed on disk, another file, a validation judged again, an
        edit that makes it the previous recipe's); the words of the last job stay while they
        are about the same file and verdict."""
        if self.session.busy:
            return
        outcome = self.session.validation_result
        if outcome is None or outcome.validation is None or outcome.run is not self._run \
                or outcome.validation is self._said:
            self._follow_standing()
            return
        judged = self._said = outcome.validation
        tolerance = f"rtol {judged.rtol:g}, atol {judged.atol:g}"
        if judged.ok:
            self.progress.setFormat("Validated")
            self.progress.setValue(1000)
            self.stage.setText(f"Judged again at {tolerance}: the validation passes (nothing "
                               "re-run).")
        else:
            self.progress.setFormat("Validation failed")
            self.progress.setValue(0)
            self.stage.setText(f"Judged again at {tolerance}: the validation fails; the "
                               "Validation tab shows where (nothing re-run).")

    def _follow_standing(self) -> None:
        """Say what the session says of its file, when the last job's words are not about
        it any more."""
        now, then = self.session.standing(), self._about
        if then is not None and now.shown is then.shown and now.verdict is then.verdict \
                and now.stale == then.stale:
            return
        self._about = now
        verdict = now.verdict
        passed = verdict is not None and verdict.ok and now.stale is None
        self.progress.setFormat(now.word or "Ready")
        self.progress.setValue(1000 if passed else 0)
        self.stage.setText(now.sentence)

    def _validation_finished(self, outcome: ValidationOutcome) -> None:
        self._remember()
        seconds = self.seconds()
        if outcome.validation is not None:
            ok = outcome.ok
            inconclusive = outcome.validation.verdict == "inconclusive"
            self.finish(ok, f"Validation inconclusive in {seconds:.1f} s: the outputs cannot tell "
                        "a right file from a wrong one; the Validation tab says what would."
                        if inconclusive else f"Validation passed in {seconds:.1f} s." if ok else
                        "Validation failed; the Validation tab shows which trials and outputs.",
                        "Validation failed")
            if ok:
                self.progress.setFormat("Inconclusive" if inconclusive else "Validated")
            return
        title = {"cancelled": "Validation cancelled", "worker_crashed": "The worker crashed"}.get(
            outcome.error.kind if outcome.error else "", "Validation could not run")
        self.finish(False, f"{title}; the Validation tab says why.", title)

    def start(self, worker_ready: bool, ahead: Sequence[str] = ()) -> None:
        """A job started: the clock runs, Cancel is on; the stage says what it waits for
        (the worker's imports, or `ahead`: the jobs the worker runs first)."""
        self.progress.setValue(0)
        self.progress.setFormat("%p%")
        self.stage.setText(f"Waiting for {' and '.join(ahead)} to finish…" if ahead else
                           "Starting…" if worker_ready else "Waiting for the worker…")
        self._started_at = time.perf_counter()
        self.timer.start()
        self._tick()
        self.export_button.setEnabled(False)
        self.validate_button.setEnabled(False)
        self.cancel_button.setEnabled(True)

    def set_progress(self, fraction: float, stage: str) -> None:
        self.progress.setValue(int(1000 * fraction))
        self.stage.setText(stage)

    def seconds(self) -> float:
        return time.perf_counter() - self._started_at

    def finish(self, ok: bool, text: str, failed_format: str = "Not exported") -> None:
        """Stop the clock; `text` goes under the bar ("Done in 3.1 s." or why it failed) and
        `failed_format` in the bar when it failed."""
        self.timer.stop()
        self._tick()
        self.cancel_button.setEnabled(False)
        if ok:
            self.progress.setValue(1000)
        else:
            self.progress.setFormat(failed_format)
            self.progress.setValue(0)
        self.stage.setText(text)

    def _tick(self) -> None:
        self.elapsed.setText(f"{self.seconds():.1f} s")
