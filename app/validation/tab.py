"""The Validation tab: does the ONNX file compute what the PyTorch model computes?

It shows one `validation` object (engine.validation; from an export with validation on, or from
the worker's validate job): a verdict, the worst numbers per output, every trial (select one
for its own numbers), parity plots, per-node errors and the validation's warnings. A view of
the session: it follows the session's jobs, and its Validate button asks the session.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

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

from app.outcomes import ExportOutcome, JobStart, ValidationOutcome
from app.results import text_label
from app.session import ExportSession
from app.validation.common import (
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
from app.validation.generation import GenerationPanel
from app.validation.nodes import NodesPanel
from app.validation.plots import ParityPlots
from app.validation.rejudge import rejudge
from app.validation.report import write_report
from engine.validation.validator import failure_hint

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


# the engine starts a trial's message with its label; the table shows the label in a column
_LABEL = re.compile(r"^(export inputs|random draw \(seed \d+\)|at [^=\s]+=\d+): ")


def short_message(trial: dict[str, Any]) -> str:
    return _LABEL.sub("", str(trial.get("message") or ""))


def trial_name(trial: dict[str, Any]) -> str:
    name = KIND_NAMES.get(str(trial.get("kind")), str(trial.get("kind")))
    changed = trial.get("changed")
    if changed and trial.get("sizes"):
        name += f" ({changed}={trial['sizes'].get(changed)})"
    return name


class TrialsPanel(QWidget):
    """Every trial in run order; the selected one's per-output numbers underneath."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.trials: list[dict[str, Any]] = []
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

    def set_trials(self, trials: list[dict[str, Any]], dark: bool) -> None:
        # emptied first: removing rows moves the current row, whose index must still be valid
        self.trials = []
        self.table.clear()
        self.trials, self.dark = list(trials), dark
        for index, trial in enumerate(self.trials):
            ok = bool(trial.get("ok"))
            item = add_row(
                self.table,
                [trial_name(trial), str(trial.get("seed", "")),
                 sizes_text(trial.get("sizes"), trial.get("changed")),
                 "✔ pass" if ok else "✘ fail", seconds(trial.get("seconds")),
                 short_message(trial)],
                tooltip=str(trial.get("message") or ""))
            item.setData(0, Qt.ItemDataRole.UserRole, index)
            paint_verdict(item, 3, ok, dark)
        # the first failed trial is the one to look at; else the export inputs
        first = next((i for i, t in enumerate(self.trials) if not t.get("ok")), 0)
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
        verdict = "passed" if trial.get("ok") else "failed"
        color = verdict_color(bool(trial.get("ok")), self.dark)
        sizes = f", {sizes_text(trial.get('sizes'))}" if trial.get("sizes") else ""
        self.detail.setText(
            f"<b>{html.escape(trial_name(trial).capitalize())}</b>, seed {trial.get('seed')}"
            f"{html.escape(sizes)}: <b style='color:{color}'>{verdict}</b>"
            + (f"<br>{html.escape(message)}" if message else ""))
        for out in trial.get("outputs") or []:
            passed = bool(out.get("passed"))
            shape = str(out.get("shape"))
            if out.get("onnx_shape") != out.get("shape"):
                shape += f" / {out.get('onnx_shape')}"
            row = add_row(
                self.outputs,
                [str(out.get("name")), shape, number(out.get("max_abs_diff")),
                 number(out.get("max_rel_diff")), number(out.get("mean_abs_diff")),
                 cosine(out.get("cosine_similarity")),
                 mismatched(out.get("mismatched"), out.get("mismatched_fraction"),
                            out.get("mismatched_estimated")),
                 nan_inf(out), "✔ pass" if passed else "✘ fail"],
                tooltip=str(out.get("message") or ""))
            paint_verdict(row, 8, passed, self.dark)

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
        self._validates = False  # the running export validates what it writes
        self.result: dict[str, Any] | None = None
        self.rejudged_for: str | None = None  # the recipe fingerprint a re-judge was made for
        self.onnx: str | None = None
        self.plot_path: Path | None = None
        self._stages: list[str] = []
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
        layout.addWidget(self.details)
        layout.addWidget(self.body, 1)
        self.spacer = QWidget()  # keeps the empty state's text at the top
        layout.addWidget(self.spacer, 1)
        self.show_empty()
        session.readinessChanged.connect(self._readiness_changed)
        session.exportStarted.connect(self._export_started)
        session.exportProgress.connect(self._export_progress)
        session.exportFinished.connect(self._export_finished)
        session.validationStarted.connect(self._validation_started)
        session.validationProgress.connect(lambda _fraction, stage: self.add_stage(stage))
        session.validationFinished.connect(self.show_outcome)
        session.recipeEdited.connect(self._recipe_edited)

    # ----------------------------------------------------------------- the session's jobs

    def _readiness_changed(self) -> None:
        self.set_validate_enabled(not self.session.validate_reason, self.session.validate_tip())

    def _export_started(self, start: JobStart) -> None:
        self._validates = start.validates
        if start.validates:
            self.show_running(str(start.onnx), start.worker_ready)
            self.add_stage("Exporting first")
        else:
            self.show_empty()  # results of the file about to be replaced

    def _export_progress(self, _fraction: float, stage: str) -> None:
        if self._validates and self.result is None:
            self.add_stage(stage)

    def _export_finished(self, outcome: ExportOutcome) -> None:
        validation = self.session.validation_result
        if validation is not None and validation.from_export and validation.job == outcome.job:
            self.show_outcome(validation)
        elif outcome.validates:
            self.show_empty()

    def _validation_started(self, start: JobStart) -> None:
        self.show_running(str(start.onnx), start.worker_ready)

    def _recipe_edited(self, part: str, _origin: object) -> None:
        if part == "options":
            self.rejudge()

    def rejudge(self) -> bool:
        """Judge the session's last validation again at the form's tolerance from its stored
        differences (app.validation.rejudge), without running it; False when it cannot be."""
        outcome = self.session.validation_result
        tolerance = (self.session.recipe.validate.rtol, self.session.recipe.validate.atol)
        if outcome is None or outcome.data is None or self.result is None:
            return False
        if tolerance == (self.result.get("rtol"), self.result.get("atol")):
            return True
        judged = rejudge(outcome.data, *tolerance, self.plots.data)
        if judged is None:
            self.rejudged_for = None
            self.message.setText("The tolerance changed: Validate again to judge this file "
                                 "at the new one (its differences were not kept).")
            self.message.setVisible(True)
            return False
        self.show_result(judged, str(outcome.onnx) if outcome.onnx else None, outcome.job_dir)
        self.rejudged_for = self.session.fingerprint
        self.facts.setText(self.facts.text() + " — judged again at the form's tolerance from "
                           "the stored differences, nothing re-run")
        return True

    def save_report(self, path: Path) -> tuple[Path, Path] | None:
        """Write the validation shown to `path` (.html) and a .csv beside it; None when there
        is none shown or the files cannot be written (the status says why)."""
        if self.result is None:
            return None
        outcome = self.session.validation_result
        label = outcome.stamp.label if outcome is not None else self.session.recipe_label()
        try:
            return write_report(path, self.result, self.onnx, label, self.plot_path)
        except OSError as exc:
            self.message.setText(f"The report was not saved: {exc}")
            self.message.setVisible(True)
            return None

    def _save_dialog(self) -> None:
        start = Path(self.onnx).with_suffix(".validation.html") if self.onnx else Path()
        path, _ = QFileDialog.getSaveFileName(self, "Save validation report", str(start),
                                              "HTML (*.html)")
        if path:
            self.save_report(Path(path))

    def show_outcome(self, outcome: ValidationOutcome) -> None:
        """Show a validation the session ran (or why it could not run)."""
        self.rejudged_for = None
        if outcome.data is not None:
            self.show_result(outcome.data, str(outcome.onnx) if outcome.onnx else None,
                             outcome.job_dir)
        elif outcome.error is not None:
            self.show_error(outcome.error.to_dict(), outcome.details)

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
        self.save_button.setEnabled(self.result is not None)

    def _show_body(self, on: bool) -> None:
        self.body.setVisible(on)
        self.spacer.setVisible(not on)

    def show_empty(self) -> None:
        self.result = None
        self._set_header("Not validated yet", None, EMPTY_TEXT)
        self._show_body(False)

    def show_running(self, onnx: str, worker_ready: bool = True) -> None:
        self.result = None
        self.onnx = onnx
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
                         f"{html.escape(self.onnx or '')}<p style='line-height:130%'>{done}"
                         f"<b>… {html.escape(recent[-1])}</b></p>")

    def show_error(self, error: dict[str, Any], details: str = "") -> None:
        """The validation could not run (or was cancelled): the sentence, hint and details."""
        self.result = None
        kind = error.get("kind")
        title = {"cancelled": "Validation cancelled",
                 "worker_crashed": "The worker crashed"}.get(str(kind), "Validation could not run")
        hint = str(error.get("hint") or "")
        self._set_header(f"✘ {title}", verdict_color(False, is_dark(self)),
                         html.escape(self.onnx or ""),
                         str(error.get("message") or "") + (f"\n{hint}" if hint else ""),
                         details)
        self._show_body(False)

    def show_result(self, validation: dict[str, Any], onnx: str | None = None,
                    job_dir: str | None = None) -> None:
        """Fill every part from a `validation` object; plots from its .npz."""
        self.result = validation
        self.onnx = onnx or self.onnx
        plots = validation.get("plots") or (Path(job_dir) / "validation.npz" if job_dir
                                            else None)
        self.plot_path = Path(plots) if plots else None
        self._fill()
        self.plots.load(self.plot_path)
        # a failure is explained by its trials; a pass is best seen in the plots
        self.sections.setCurrentWidget(self.trials if not validation.get("ok") else self.plots)
        generation = validation.get("generation")
        self.sections.setTabVisible(self.sections.indexOf(self.generation), bool(generation))
        if generation and not generation.get("tokens_equal"):
            self.sections.setCurrentWidget(self.generation)

    def _fill(self, keep_selection: bool = False) -> None:
        """(Re)build the header and tables from `self.result` with this palette's colours;
        `keep_selection` (a repaint) keeps the trial the user had selected."""
        validation = self.result
        if validation is None:
            return
        dark = is_dark(self)
        self.generation.set_generation(validation.get("generation"))
        ok = bool(validation.get("ok"))
        trials = list(validation.get("trials") or [])
        passed = sum(1 for t in trials if t.get("ok"))
        facts = [f"{passed} of {len(trials)} trials within rtol {validation.get('rtol')}, "
                 f"atol {validation.get('atol')}"]
        if self.onnx:
            facts.append(html.escape(Path(self.onnx).name))
        if validation.get("providers"):
            facts.append(html.escape(", ".join(validation["providers"])))
        if validation.get("seconds") is not None:
            facts.append(seconds(validation["seconds"]))
        title = "✔ Validation passed" if ok else "✘ Validation failed"
        message = str(validation.get("message") or "")
        # what to change, chosen by the cause (a tolerance only when numbers differ); the same
        # hint an export's failed validation carries, for a Validate job too
        hint = "" if ok else failure_hint(validation)
        self._set_header(title, verdict_color(ok, dark), " · ".join(facts), message, hint=hint)
        self._show_body(True)

        current = self.outputs.currentItem()
        chosen = current.text(0) if current is not None else None
        self.outputs.clear()
        for out in validation.get("outputs") or []:
            passed_out = bool(out.get("passed"))
            item = add_row(
                self.outputs,
                [str(out.get("name")), str(out.get("dtype") or "—"),
                 number(out.get("max_abs_diff")), number(out.get("max_rel_diff")),
                 number(out.get("mean_abs_diff")), cosine(out.get("cosine_similarity")),
                 mismatched(out.get("mismatched"), out.get("mismatched_fraction"),
                            out.get("mismatched_estimated")),
                 nan_inf(out), "✔ pass" if passed_out else "✘ fail"],
                {2: sort_key(out.get("max_abs_diff")), 3: sort_key(out.get("max_rel_diff"))},
                tooltip=str(out.get("message") or ""))
            paint_verdict(item, 8, passed_out, dark)
            if item.text(0) == chosen:
                self.outputs.setCurrentItem(item)
        self._fit_outputs()
        trial_index = self.trials.table.currentIndex().row()
        self.trials.set_trials(trials, dark)
        if keep_selection and trial_index >= 0:
            self.trials.select(trial_index)
        self.nodes.set_intermediates(validation.get("intermediates"), dark)
        self.warnings.clear()
        for warning in validation.get("warnings") or []:
            text = str(warning.get("message", "")) + (f"\n→ {warning['hint']}"
                                                       if warning.get("hint") else "")
            add_row(self.warnings, [str(warning.get("category", "Warning")), text],
                    tooltip=text)
        self._title_counts()

    def _outputs_range(self, _low: int, high: int) -> None:
        """The outputs table's scroll bar came or went: fit the table to its rows again."""
        if self.result is not None and (high > 0) != self._bar_shown:
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

    def _title_counts(self) -> None:
        validation = self.result or {}
        trials = validation.get("trials") or []
        failed = sum(1 for t in trials if not t.get("ok"))
        nodes = (validation.get("intermediates") or {}).get("nodes") or {}
        counts = {self.trials: f"Trials ({len(trials)}" + (f", {failed} failed)" if failed
                                                            else ")"),
                  self.nodes: f"Nodes ({len(nodes)})" if nodes else "Nodes",
                  self.warnings: f"Warnings ({self.warnings.topLevelItemCount()})"
                  if self.warnings.topLevelItemCount() else "Warnings"}
        for widget, text in counts.items():
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
        self._fill(keep_selection=True)
