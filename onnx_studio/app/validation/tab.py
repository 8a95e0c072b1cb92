"""The Validation tab: does the ONNX file compute what the PyTorch model computes?

It shows the session's validation (a typed onnx_studio.engine.protocol.Validation, from an export
with
validation on or from a validate job, judged again by the session when the tolerance changes):
a verdict, the worst numbers per output, every trial (select one for its own numbers), parity
plots, per-node errors and the validation's warnings. A view of the session: it keeps no copy
of the result, follows the session's jobs, and its Validate button asks the session.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTabWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from onnx_studio.app.outcomes import JobStart, ValidationOutcome, failure_hint
from onnx_studio.app.results import text_label
from onnx_studio.app.results.why import WhyBar
from onnx_studio.app.session import ExportSession
from onnx_studio.app.validation.common import (
    add_row,
    cosine,
    is_dark,
    make_table,
    mismatched,
    nan_inf,
    number,
    paint_verdict,
    rows,
    seconds,
    sizes_text,
    sort_key,
    verdict_color,
)
from onnx_studio.app.validation.generation import GenerationPanel
from onnx_studio.app.validation.nodes import NodesPanel
from onnx_studio.app.validation.plots import ParityPlots
from onnx_studio.app.validation.report import write_report
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.protocol import Error, Trial, Validation, known

OUTPUT_HEADERS = ["Output", "dtype", "max abs", "max rel", "mean abs", "cosine", "mismatched",
                  "NaN/Inf", "Result"]
TRIAL_HEADERS = ["Trial", "Seed", "Sizes", "Result", "Seconds", "Message"]
TRIAL_OUTPUT_HEADERS = ["Output", "Shape (torch / ONNX)", "max abs", "max rel", "mean abs",
                        "cosine", "mismatched", "NaN/Inf", "Result"]
EMPTY_TEXT = ("Press <b>Validate</b> (Ctrl+Shift+V) to run the exported file through PyTorch "
              "and ONNX Runtime with the same inputs, fresh random draws and other sizes of "
              "every dynamic axis, or turn on Options ▸ Validation ▸ <b>After each export</b>. "
              "Tolerances and the number of draws are set there too.")
KIND_NAMES = {"export-inputs": "export inputs", "random": "random draw",
              "dynamic-size": "other size"}
REJUDGED = (" — judged again at the form's tolerance from the stored differences, nothing "
            "re-run")


# the engine starts a trial's message with its label; the table shows the label in a column
_LABEL = re.compile(r"^(export inputs|random draw \(seed \d+\)|at [^=\s]+=\d+): ")


def short_message(trial: Trial) -> str:
    return _LABEL.sub("", trial.message or "")


def trial_name(trial: Trial) -> str:
    name = KIND_NAMES.get(trial.kind, trial.kind)
    if trial.changed and trial.sizes:
        name += f" ({trial.changed}={trial.sizes.get(trial.changed)})"
    return name


class TrialsPanel(QWidget):
    """Every trial in run order; the selected one's per-output numbers underneath."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.trials: list[Trial] = []  # the rows shown (the session's validation's trials)
        self.rejudged = False
        self.dark = False
        self.table = make_table(TRIAL_HEADERS, stretch=5)
        self.detail = text_label()
        self.outputs = make_table(TRIAL_OUTPUT_HEADERS)  # names whole; Result takes the rest
        lower = QWidget()
        column = QVBoxLayout(lower)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.detail)
        column.addWidget(self.outputs, 1)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(lower)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(split)
        self.table.currentItemChanged.connect(self._current_changed)

    def set_trials(self, trials: list[Trial], dark: bool, rejudged: bool = False) -> None:
        # emptied first: removing rows moves the current row, whose index must still be valid
        self.trials = []
        self.table.clear()
        self.trials, self.dark, self.rejudged = list(trials), dark, rejudged
        for index, trial in enumerate(self.trials):
            item = add_row(
                self.table,
                [trial_name(trial), "" if trial.seed is None else str(trial.seed),
                 sizes_text(trial.sizes, trial.changed),
                 "✔ pass" if trial.ok else "✘ fail", seconds(trial.seconds),
                 short_message(trial)],
                tooltip=trial.message or "")
            item.setData(0, Qt.ItemDataRole.UserRole, index)
            paint_verdict(item, 3, trial.ok, dark)
        # the first failed trial is the one to look at; else the export inputs
        first = next((i for i, t in enumerate(self.trials) if not t.ok), 0)
        if self.trials:
            self.table.setCurrentItem(rows(self.table)[first])
        else:
            self._current_changed(None, None)

    def _current_changed(self, item: QTreeWidgetItem | None, _previous: object) -> None:
        self.outputs.clear()
        if item is None:
            self.detail.setText("")
            return
        index = int(item.data(0, Qt.ItemDataRole.UserRole))
        if not 0 <= index < len(self.trials):  # a row of the trials being replaced
            self.detail.setText("")
            return
        trial = self.trials[index]
        message = short_message(trial)
        verdict = "passed" if trial.ok else "failed"
        color = verdict_color(trial.ok, self.dark)
        sizes = f", {sizes_text(trial.sizes)}" if trial.sizes else ""
        self.detail.setText(
            f"<b>{html.escape(trial_name(trial).capitalize())}</b>, seed {trial.seed}"
            f"{html.escape(sizes)}: <b style='color:{color}'>{verdict}</b>"
            + (f"<br>{html.escape(message)}" if message else ""))
        for out in trial.outputs or []:
            shape = str(out.shape)
            if out.onnx_shape != out.shape:
                shape += f" / {out.onnx_shape}"
            row = add_row(
                self.outputs,
                [out.name, shape, number(out.max_abs_diff), number(out.max_rel_diff),
                 number(out.mean_abs_diff), cosine(out.cosine_similarity),
                 mismatched(out.mismatched, out.mismatched_fraction, out.mismatched_estimated,
                            out.passed, self.rejudged),
                 nan_inf(out.nan_mismatch, out.inf_mismatch, out.matched_nans),
                 "✔ pass" if out.passed else "✘ fail"],
                tooltip=out.message)
            paint_verdict(row, 8, out.passed, self.dark)

    def select(self, index: int) -> None:
        items = rows(self.table)
        if 0 <= index < len(items):
            self.table.setCurrentItem(items[index])


class ValidationTab(QWidget):
    """States: empty, running, a result (passed or failed), an error (could not run)."""

    showOnGraph = Signal(object, str, str)  # forwarded from the nodes panel
    clearGraph = Signal()

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._running: str | None = None  # the file a running job validates
        self._stages: list[str] = []
        self._run_shown: Validation | None = None  # the run whose plots are loaded
        self._repaint_pending = False
        self._bar_shown = False  # the outputs table's horizontal scroll bar, when last fitted

        self.verdict = QLabel()
        self.verdict.setTextFormat(Qt.TextFormat.RichText)
        self.facts = text_label()
        self.message = text_label(plain=True)
        self.hint = text_label(plain=True)  # what to change, by the failure's cause
        self.save_button = QPushButton("Save report…")
        self.save_button.setToolTip("Save this validation as one HTML file (tables and plots) "
                                    "and as CSV")
        self.save_button.clicked.connect(self._save_dialog)
        self.validate_button = QPushButton("Validate")
        self.validate_button.setToolTip("Validate the exported file now (Ctrl+Shift+V)")
        self.validate_button.clicked.connect(session.start_validation)
        self.details_button = QPushButton("Show details")
        self.details_button.setCheckable(True)
        self.details_button.toggled.connect(self._toggle_details)
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        self.details.setMaximumHeight(200)

        # every column as wide as its text (a long output name too); Result takes the rest
        self.outputs = make_table(OUTPUT_HEADERS)
        self.trials = TrialsPanel()
        self.plots = ParityPlots()
        self.nodes = NodesPanel()
        self.generation = GenerationPanel()
        self.nodes.showOnGraph.connect(self.showOnGraph)
        self.nodes.clearGraph.connect(self.clearGraph)
        self.warnings = make_table(["Category", "Message"], stretch=1)
        self.warnings.setWordWrap(True)
        self.warnings.setUniformRowHeights(False)
        self.sections = QTabWidget()
        self.sections.setDocumentMode(True)
        for widget, name in ((self.plots, "Plots"), (self.trials, "Trials"),
                             (self.nodes, "Nodes"), (self.warnings, "Warnings"),
                             (self.generation, "Generation")):
            self.sections.addTab(widget, name)
        self.sections.setTabVisible(self.sections.indexOf(self.generation), False)
        self.outputs.currentItemChanged.connect(self._output_chosen)
        self.outputs.horizontalScrollBar().rangeChanged.connect(self._outputs_range)

        self.body = QSplitter(Qt.Orientation.Vertical)
        self.body.addWidget(self.outputs)
        self.body.addWidget(self.sections)
        self.body.setStretchFactor(0, 0)  # the outputs table keeps the height of its rows
        self.body.setStretchFactor(1, 1)
        self.body.setChildrenCollapsible(False)

        header = QHBoxLayout()
        header.addWidget(self.verdict, 1)
        header.addWidget(self.details_button)
        header.addWidget(self.save_button)
        header.addWidget(self.validate_button)
        layout = QVBoxLayout(self)
        layout.addLayout(header)
        layout.addWidget(self.facts)
        layout.addWidget(self.message)
        layout.addWidget(self.hint)
        self.why = WhyBar(session)  # Why? of a failed validation (issue 26)
        layout.addWidget(self.why)
        layout.addWidget(self.details)
        layout.addWidget(self.body, 1)
        self.spacer = QWidget()  # keeps the empty state's text at the top
        layout.addWidget(self.spacer, 1)
        self.show_empty()
        session.readinessChanged.connect(self._readiness_changed)
        session.exportStarted.connect(self._export_started)
        session.exportProgress.connect(self._export_progress)
        session.validationStarted.connect(self._validation_started)
        session.validationProgress.connect(lambda _fraction, stage: self.add_stage(stage))
        for finished in (session.exportFinished, session.validationFinished):
            finished.connect(self._job_finished)
        session.resultsChanged.connect(self.refresh)
        self._readiness_changed()  # built late (on first show): the session as it is now
        running = session.jobs.running
        if running is None:
            self.refresh()
        elif running.job == session.jobs.export_job:
            self._export_started(running)
        else:
            self._validation_started(running)

    # ----------------------------------------------------------------- the session's jobs

    @property
    def outcome(self) -> ValidationOutcome | None:
        """The validation this tab shows: the session's (None while a job makes a new one)."""
        return None if self._running is not None else self.session.validation_result

    def _readiness_changed(self) -> None:
        self.set_validate_enabled(not self.session.validate_reason, self.session.validate_tip())

    def _export_started(self, start: JobStart) -> None:
        if start.validates:
            self.show_running(str(start.onnx), start.worker_ready)
            self.add_stage("Exporting first")

    def _export_progress(self, _fraction: float, stage: str) -> None:
        if self._running is not None:
            self.add_stage(stage)

    def _validation_started(self, start: JobStart) -> None:
        self.show_running(str(start.onnx), start.worker_ready)

    def _job_finished(self, _outcome: object) -> None:
        self._running = None
        self.refresh()

    def refresh(self) -> None:
        """Show the session's validation (or why it could not run, or that there is none)."""
        if self._running is not None:
            return
        outcome = self.session.validation_result
        if outcome is None:
            self.show_empty()
        elif outcome.validation is None:
            self.show_error(outcome.error or Error(kind="validation", message=""),
                            outcome.details, outcome.onnx)
        else:
            self.show_result(outcome)

    def save_report(self, path: Path) -> tuple[Path, Path] | None:
        """Write the validation shown to `path` (.html) and a .csv beside it; None when there
        is none shown or the files cannot be written (the status says why)."""
        outcome = self.outcome
        if outcome is None or outcome.validation is None:
            return None
        onnx = str(outcome.onnx) if outcome.onnx else None
        try:
            return write_report(path, outcome.validation, onnx, outcome.stamp.label,
                                outcome.plots)
        except (OSError, StudioError) as exc:
            self.message.setText(f"The report was not saved: {exc}")
            self.message.setVisible(True)
            return None

    def _save_dialog(self) -> None:
        outcome = self.outcome
        onnx = outcome.onnx if outcome is not None else None
        start = onnx.with_suffix(".validation.html") if onnx else Path()
        path, _ = QFileDialog.getSaveFileName(self, "Save validation report", str(start),
                                              "HTML (*.html)")
        if path:
            self.save_report(Path(path))

    # ----------------------------------------------------------------- states

    def _set_header(self, title: str, color: str | None, facts: str, message: str = "",
                    details: str = "", hint: str = "") -> None:
        style = f" style='color:{color}'" if color else ""
        self.verdict.setText(f"<h3{style}>{title}</h3>")
        self.facts.setText(facts)
        self.facts.setVisible(bool(facts))
        self.message.setText(message)
        self.message.setVisible(bool(message))
        self.hint.setText(f"→ {hint}" if hint else "")
        self.hint.setVisible(bool(hint))
        self.details.setPlainText(details)
        self.details_button.setVisible(bool(details))
        self.details_button.setChecked(False)
        self._toggle_details(False)
        outcome = self.outcome
        self.save_button.setEnabled(outcome is not None and outcome.validation is not None)

    def _show_body(self, on: bool) -> None:
        self.body.setVisible(on)
        self.spacer.setVisible(not on)

    def show_empty(self) -> None:
        self._set_header("Not validated yet", None, EMPTY_TEXT)
        self._show_body(False)

    def show_running(self, onnx: str, worker_ready: bool = True) -> None:
        self._running = onnx
        self._stages = []
        self._show_body(False)
        self.add_stage("Sent to the worker" if worker_ready
                       else "Waiting for the worker to start (it loads torch once)")

    def add_stage(self, stage: str) -> None:
        if not stage or (self._stages and self._stages[-1] == stage):
            return
        self._stages.append(stage)
        recent = self._stages[-6:]  # the trials of a big recipe would push the text away
        done = "".join(f"✔ {html.escape(s)}<br>" for s in recent[:-1])
        self._set_header("Validating…", None,
                         f"{html.escape(self._running or '')}<p style='line-height:130%'>"
                         f"{done}<b>… {html.escape(recent[-1])}</b></p>")

    def show_error(self, error: Error, details: str = "", onnx: Path | None = None) -> None:
        """The validation could not run (or was cancelled): the sentence, hint and details."""
        title = {"cancelled": "Validation cancelled",
                 "worker_crashed": "The worker crashed"}.get(error.kind, "Validation could not run")
        self._set_header(f"✘ {title}", verdict_color(False, is_dark(self)),
                         html.escape(str(onnx) if onnx else ""),
                         error.message + (f"\n{error.hint}" if error.hint else ""), details)
        self._show_body(False)

    def show_result(self, outcome: ValidationOutcome, keep_selection: bool = False) -> None:
        """Fill every part from the outcome's validation with this palette's colours; plots
        from its .npz (read again only when it is another file); `keep_selection` (a repaint)
        keeps the trial the user had selected."""
        validation = outcome.validation
        if validation is None:
            return
        dark = is_dark(self)
        self.generation.set_generation(validation.generation)
        passed = sum(1 for t in validation.trials if t.ok)
        # the rule itself: a max rel diff above rtol passes when atol covers the element
        facts = [f"{passed} of {len(validation.trials)} trials within |diff| ≤ atol + "
                 f"rtol·|ref| (rtol {validation.rtol}, atol {validation.atol}), element by "
                 "element"]
        if outcome.onnx:
            facts.append(html.escape(outcome.onnx.name))
        if validation.providers:
            facts.append(html.escape(", ".join(validation.providers)))
        if validation.seconds is not None:
            facts.append(seconds(validation.seconds))
        title = {"passed": "✔ Validation passed", "failed": "✘ Validation failed",
                 "inconclusive": "? Validation inconclusive"}[validation.verdict]
        # what to change, chosen by the cause (a tolerance only when numbers differ); the same
        # hint an export's failed validation carries, for a Validate job too; an inconclusive
        # one says what would make it conclusive
        hint = (validation.hint or "") if validation.verdict == "inconclusive" else \
            "" if validation.ok else failure_hint(validation)
        self._set_header(title, verdict_color(validation.ok, dark),
                         " · ".join(facts) + (REJUDGED if outcome.rejudged else ""),
                         validation.message or "", hint=hint)
        self._show_body(True)
        self._fill_outputs(outcome, dark)
        trial_index = self.trials.table.currentIndex().row()
        self.trials.set_trials(validation.trials, dark, outcome.rejudged)
        if keep_selection and trial_index >= 0:
            self.trials.select(trial_index)
        self.nodes.set_intermediates(validation.intermediates, dark)
        self.warnings.clear()
        for warning in validation.warnings or []:
            text = warning.message + (f"\n→ {warning.hint}" if warning.hint else "")
            add_row(self.warnings, [warning.category or "Warning", text], tooltip=text)
        self._title_counts(validation)
        if outcome.run is not self._run_shown:  # another run (not a re-judge, not a repaint)
            self._run_shown = outcome.run
            self.plots.load(outcome.plots)
            # a failure is explained by its trials; a pass is best seen in the plots
            self.sections.setCurrentWidget(self.trials if not validation.ok else self.plots)
        generation = validation.generation
        self.sections.setTabVisible(self.sections.indexOf(self.generation),
                                    generation is not None)
        if generation is not None and (generation.passed is False
                                       or not generation.tokens_equal):
            self.sections.setCurrentWidget(self.generation)

    def _fill_outputs(self, outcome: ValidationOutcome, dark: bool) -> None:
        current = self.outputs.currentItem()
        chosen = current.text(0) if current is not None else None
        self.outputs.clear()
        assert outcome.validation is not None
        for out in outcome.validation.outputs:
            count = known(out.mismatched)
            item = add_row(
                self.outputs,
                [out.name, out.dtype or "—", number(out.max_abs_diff), number(out.max_rel_diff),
                 number(known(out.mean_abs_diff)), cosine(known(out.cosine_similarity)),
                 mismatched(count, known(out.mismatched_fraction), out.mismatched_estimated,
                            out.passed, outcome.rejudged),
                 nan_inf(known(out.nan_mismatch), known(out.inf_mismatch),
                         known(out.matched_nans)),
                 "✔ pass" if out.passed else "✘ fail"],
                {2: sort_key(out.max_abs_diff), 3: sort_key(out.max_rel_diff)},
                tooltip=out.message or "")
            paint_verdict(item, 8, out.passed, dark)
            if item.text(0) == chosen:
                self.outputs.setCurrentItem(item)
        self._fit_outputs()

    def _outputs_range(self, _low: int, high: int) -> None:
        """The outputs table's scroll bar came or went: fit the table to its rows again."""
        if self.outcome is not None and (high > 0) != self._bar_shown:
            self._fit_outputs()

    def _fit_outputs(self) -> None:
        """Make the outputs table as tall as its rows (up to 8), the sections get the rest."""
        shown = max(1, min(8, self.outputs.topLevelItemCount()))
        row = self.outputs.sizeHintForRow(0) if self.outputs.topLevelItemCount() else 20
        bar = self.outputs.horizontalScrollBar()  # a narrow window: room for the bar too
        self._bar_shown = bar.maximum() > 0
        height = (self.outputs.header().sizeHint().height() + shown * max(row, 16)
                  + 2 * self.outputs.frameWidth() + 4
                  + (bar.sizeHint().height() if bar.maximum() > 0 else 0))
        self.outputs.setMinimumHeight(height)
        total = max(self.body.height(), height + 200)
        self.body.setSizes([height, total - height])

    def _title_counts(self, validation: Validation) -> None:
        failed = sum(1 for t in validation.trials if not t.ok)
        nodes = validation.intermediates.nodes if validation.intermediates else {}
        count = self.warnings.topLevelItemCount()
        texts = {self.trials: f"Trials ({len(validation.trials)}"
                 + (f", {failed} failed)" if failed else ")"),
                 self.nodes: f"Nodes ({len(nodes)})" if nodes else "Nodes",
                 self.warnings: f"Warnings ({count})" if count else "Warnings"}
        for widget, text in texts.items():
            self.sections.setTabText(self.sections.indexOf(widget), text)

    def _output_chosen(self, item: QTreeWidgetItem | None, _previous: object) -> None:
        if item is not None:
            self.plots.select_output(item.text(0))

    def _toggle_details(self, on: bool) -> None:
        self.details.setVisible(on)
        self.details_button.setText("Hide details" if on else "Show details")

    def set_validate_enabled(self, enabled: bool, tooltip: str) -> None:
        self.validate_button.setEnabled(enabled)
        self.validate_button.setToolTip(tooltip)

    # ----------------------------------------------------------------- theme

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and not self._repaint_pending:
            # a theme switch sends this to every widget; refill once, after it settles
            self._repaint_pending = True
            QTimer.singleShot(0, self._repaint)

    def _repaint(self) -> None:
        self._repaint_pending = False
        outcome = self.outcome
        if outcome is not None and outcome.validation is not None:
            self.show_result(outcome, keep_selection=True)
