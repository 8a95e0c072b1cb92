"""The Summary tab: what the session's file is — the last export (file, size, nodes, shapes,
timings, the verdict of its validation as the session judges it now) or an .onnx the user
opened — or why the export failed: a sentence, a hint, and the details one click away.

A view of the session: it draws the session's results whenever they change and keeps none."""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from onnx_studio.app.results.provenance import when
from onnx_studio.app.results.why import WhyBar
from onnx_studio.app.session import ExportSession
from onnx_studio.engine.errors import plain

if TYPE_CHECKING:  # the protocol loads with the first result, after the first paint
    from PySide6.QtCore import QUrl

    from onnx_studio.app.outcomes import ExportOutcome, JobStart, OpenedFile, ValidationOutcome
    from onnx_studio.engine.protocol import Error, ExportFacts, ExportReport

DEFAULT_DOMAIN = ""  # the ONNX operator set's domain name in `opset_imports`


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"


def mono(widget: QWidget) -> None:
    """Show `widget`'s text in the system's fixed-width font."""
    from PySide6.QtGui import QFontDatabase  # made when a fixed-width text first shows

    widget.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))


def _shape(shape: list[int | str] | None) -> str:
    if shape is None:
        return "?"
    return "[" + ", ".join(str(d) for d in shape) + "]"


def text_label(plain: bool = False) -> QLabel:
    """A wrapped label whose text can be selected and copied (messages, hints, facts)."""
    label = QLabel()
    if plain:  # text from exceptions or the user: never read as HTML
        label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class SummaryView(QWidget):
    """What the session's file is, or why the export failed (sentence, hint, details)."""

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.status = text_label()
        self.hint = text_label(plain=True)
        self.details_button = QPushButton("Show details")
        self.details_button.setCheckable(True)
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        self._details_mono = False  # its fixed-width font: looked up when first shown
        self.facts = QTextBrowser()
        self.facts.setOpenExternalLinks(False)
        self.facts.setOpenLinks(False)  # a link opens the folder; the Summary stays as it is
        self.facts.anchorClicked.connect(self._open_link)
        self._stages: list[str] = []
        self._running: str | None = None  # the file a running export writes
        self._drawn: object = None  # the result drawn last: its details stay open on a redraw
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addWidget(self.hint)
        self.why = WhyBar(session)  # Why? of a failed validation (issue 26)
        layout.addWidget(self.why)
        row = QHBoxLayout()
        row.addWidget(self.details_button)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addWidget(self.details, 2)
        layout.addWidget(self.facts, 3)
        layout.addStretch(1)  # keeps a short status at the top when the boxes are hidden
        self.details_button.toggled.connect(self._toggle_details)
        self.show_empty()
        session.exportStarted.connect(self._export_started)
        session.exportProgress.connect(lambda _fraction, stage: self.add_stage(stage))
        session.exportFinished.connect(self._export_finished)
        session.resultsChanged.connect(self.refresh)
        session.warningsChanged.connect(self.refresh)  # the Warnings row, as the tab lists them

    def _export_started(self, start: JobStart) -> None:
        self.show_running(str(start.onnx), start.worker_ready)

    def _export_finished(self, _outcome: ExportOutcome) -> None:
        self._running = None
        self.refresh()

    def refresh(self) -> None:
        """Draw the session's file (an .onnx opened, or read again, since the last export, else
        the export) and the verdict the session gives the file as it is now."""
        if self._running is not None:
            return
        standing = self.session.standing()
        shown = standing.shown
        if shown is None:
            self.show_empty()
            return
        from onnx_studio.app.outcomes import OpenedFile  # loaded with the first result

        if isinstance(shown, OpenedFile):
            self.show_opened(shown, standing.verdict)
        else:
            self.show_export(shown, standing.verdict)

    def show_opened(self, opened: OpenedFile, checked: ValidationOutcome | None = None) -> None:
        """What an .onnx the user opened holds (inspect), or why it cannot be read; with the
        validation of it as it is now (`checked`), when there is one."""
        from onnx_studio.engine.protocol import Error, ExportFacts, ExportReport

        inspect = opened.inspect
        if opened.error is not None or inspect is None:
            self.show_error(Error(kind="source", message=opened.error or ""), "")
            return
        report = ExportReport(ok=True, output=str(opened.path), graph=inspect.graph,
                              exporter="unknown (an opened file)",
                              opset=inspect.opset_imports.get(DEFAULT_DOMAIN))
        if not self._show_verdict(checked, opened):
            name = html.escape(opened.path.name)
            title = f"{name} read again (it changed on disk)" if opened.reread else \
                f"Opened {name}"
            self.status.setText(f"<h3>{title}</h3>Validate checks this file against the model "
                                "in the form, with the form's inputs.")
            self._set_error_parts("", "", opened)
        self._show_facts(report, ExportFacts(), opened)

    def show_export(self, outcome: ExportOutcome, checked: ValidationOutcome | None = None
                    ) -> None:
        """An export: what it wrote, the verdict of its file as judged now (`checked`), or why
        it failed."""
        from onnx_studio.engine.protocol import Error, ErrorEvent

        final = outcome.final
        report = outcome.report
        if isinstance(final, ErrorEvent) or report is None:  # cancelled, crashed
            error = outcome.error or Error(kind="export", message="Export failed.")
            self.show_error(error, outcome.details, outcome)
            return
        if not outcome.written:
            error = report.error or Error(kind="export", message="Export failed.")
            self.show_error(error, outcome.details, outcome)
        elif not self._show_verdict(checked, outcome):
            self.status.setText("<h3 style='color:#2f9e44'>✔ Exported</h3>" if report.ok
                                or checked is not None else "<h3>Finished</h3>")
            self._set_error_parts("", "", outcome)
        self._show_facts(report, final.extra, outcome)

    def _show_verdict(self, checked: ValidationOutcome | None,
                      shown: ExportOutcome | OpenedFile) -> bool:
        """Say a validation of the shown file that failed or could not run, as the Validation
        tab does; False when there is none such (it passed, or none checked these bytes)."""
        from onnx_studio.engine.protocol import Error

        if checked is None or checked.ok:
            return False
        validation = checked.validation
        details = checked.details
        if validation is None:
            error = checked.error or Error(kind="validation", message="")
            self.show_error(error, details, shown, title="Validation could not run")
            return True
        from onnx_studio.app.outcomes import ExportOutcome, failure_hint

        export = shown if isinstance(shown, ExportOutcome) else None
        report = export.report if export is not None else None
        own = (export is not None and checked.job == export.job and not checked.rejudged
               and report is not None and report.error is not None)
        error = report.error if own and report is not None and report.error else Error(
            kind="validation", message=validation.message or "",
            hint=failure_hint(validation))
        self.show_error(error, details or (export.details if export else ""), shown)
        return True

    def _toggle_details(self, on: bool) -> None:
        if on and not self._details_mono:  # fontconfig asked for it now, not at start
            mono(self.details)
            self._details_mono = True
        self.details.setVisible(on)
        self.details_button.setText("Hide details" if on else "Show details")

    def _set_error_parts(self, hint: str, details: str, drawn: object = None) -> None:
        details = plain(details)  # the full chain, as the engine sent it, never colour codes
        self.hint.setText(hint)
        self.hint.setVisible(bool(hint))
        self.details.setPlainText(details)
        self.details_button.setVisible(bool(details))
        if drawn is None or drawn is not self._drawn:  # another result: its details closed
            self.details_button.setChecked(False)
            self._toggle_details(False)
        self._drawn = drawn

    def show_empty(self) -> None:
        self.status.setText("<h3>No export yet</h3>Check the form on the left, then press "
                            "<b>Export</b> (Ctrl+E). The file's summary appears here; warnings, "
                            "the graph, the equivalent Python script and the log are in the "
                            "other tabs.")
        self._set_error_parts("", "")
        self.facts.setHtml("")
        self.facts.setVisible(False)

    def show_running(self, output: str, worker_ready: bool = True) -> None:
        self._stages = []
        self._running = output
        self._set_error_parts("", "")
        self.facts.setVisible(False)
        self.add_stage("Sent to the worker" if worker_ready
                       else "Waiting for the worker to start (it loads torch once)")

    def add_stage(self, stage: str) -> None:
        """List the stages an export has gone through, the current one last."""
        if not stage or (self._stages and self._stages[-1] == stage):
            return
        self._stages.append(stage)
        done = "".join(f"✔ {html.escape(s)}<br>" for s in self._stages[:-1])
        now = f"<b>… {html.escape(self._stages[-1])}</b>"
        self.status.setText(f"<h3>Exporting…</h3>to {html.escape(self._running or '')}"
                            f"<p style='line-height:130%'>{done}{now}</p>")

    def show_error(self, error: Error, details: str, drawn: object = None,
                   title: str = "") -> None:
        title = title or {"cancelled": "Export cancelled", "worker_crashed": "The worker crashed",
                          "validation": "Validation failed"}.get(error.kind, "Export failed")
        if error.kind == "cancelled" and "had already finished" in error.message:
            title = "Cancelled after the file was written"
        message = html.escape(error.message)
        ops = [o for o in error.unsupported_ops if o not in error.message]
        if ops:
            message += "<br>Unsupported operators: " + ", ".join(
                f"<code>{html.escape(o)}</code>" for o in ops)
        self.status.setText(f"<h3 style='color:#d0463b'>✘ {title}</h3>{message}")
        self._set_error_parts(error.hint, details or error.details or "", drawn)
        self.facts.setVisible(False)

    def _show_facts(self, report: ExportReport, extra: ExportFacts,
                    shown: ExportOutcome | OpenedFile) -> None:
        """The facts table of a report with a graph (none: the table is hidden)."""
        if report.graph is None:
            self.facts.setVisible(False)
            return
        self.facts.setHtml(self._facts_html(report, extra, shown))
        self.facts.setVisible(True)

    def _facts_html(self, report: ExportReport, extra: ExportFacts,
                    shown: ExportOutcome | OpenedFile) -> str:
        from PySide6.QtCore import QUrl

        from onnx_studio.engine.protocol import Graph, known

        rows: list[tuple[str, str]] = []
        output = report.output
        if output and report.files:  # a folder of files, listed below
            link = QUrl.fromLocalFile(str(output)).toString()
            rows.append(("Folder", f"{html.escape(str(output))} "
                                   f"(<a href='{link}'>open folder</a>)"))
        elif output:
            path = Path(output)
            link = QUrl.fromLocalFile(str(path.parent)).toString()
            rows.append(("File", f"{html.escape(str(path))} "
                                 f"(<a href='{link}'>open folder</a>)"))
            if path.is_file():
                rows.append(("Size", human_size(path.stat().st_size)))
            data = sorted(p.name for p in path.parent.glob(path.name + "*.data")) if \
                path.parent.is_dir() else []
            named = known(extra.external_data)
            data += [named] if named and named not in data else []
            rows.append(("External data", ", ".join(data) if data else "none (weights inside)"))
        exporter = html.escape(str(report.exporter))
        if report.exporter_reason:  # why that one (a recipe's "auto" resolved)
            exporter += f" — {html.escape(report.exporter_reason)}"
        rows.append(("Exporter", exporter))
        rows.append(("Opset", html.escape(str(report.opset if report.opset is not None
                                                else "?"))))
        graph = report.graph or Graph(nodes=0, inputs=[], outputs=[])
        rows.append(("Nodes", str(graph.nodes)))
        if report.files:  # a Hugging Face folder: each file it wrote
            several = len(report.files) > 1
            rows.append(("Files", "<br>".join(
                f"<b>{html.escape(f.name)}</b> {f.graph.nodes} nodes"
                + (f", data: {html.escape(', '.join(f.data_files))}" if f.data_files else "")
                for f in report.files)
                + ("<br><i>The Graph tab shows each (File), two side by side</i>"
                   if several else "")))
        if report.task:
            rows.append(("Task", html.escape(report.task)))
        for items, label in ((graph.inputs, "Inputs"), (graph.outputs, "Outputs")):
            if items:
                rows.append((label, "<br>".join(
                    f"<b>{html.escape(t.name)}</b> {html.escape(t.dtype)}"
                    f" {html.escape(_shape(t.shape))}" for t in items)))
        if report.seconds:
            rows.append(("Time", ", ".join(f"{k} {v:.2f} s" for k, v in report.seconds.items())
                         + f" (total {sum(report.seconds.values()):.2f} s)"))
        verdict = self._verdict(report, shown)
        if verdict:
            rows.append(("Validation", verdict))
        # the session's warnings: the export's and its validation's, as the Warnings tab lists
        count = len(self.session.warnings)
        rows.append(("Warnings", f"{count} (see the Warnings tab)" if count else "none"))
        body = "".join(f"<tr><td style='padding:2px 12px 2px 0'><b>{k}</b></td><td>{v}</td></tr>"
                       for k, v in rows)
        return f"<table>{body}</table>"

    def _verdict(self, report: ExportReport, shown: ExportOutcome | OpenedFile) -> str:
        """The validation of the shown file as the session judges it now ("": none)."""
        from onnx_studio.app.outcomes import OpenedFile  # a result is shown: loaded with it

        results = self.session.results
        checked = results.validation_of(shown)
        if checked is None:
            last = results.validation
            onnx = last.stamp.onnx if last is not None else None
            path = shown.path if isinstance(shown, OpenedFile) else shown.output
            if last is not None and last.validation is not None and onnx is not None \
                    and path is not None and onnx.path == path:
                said = "passed" if last.validation.ok else "failed"
                return (f"none of the file as it is now (the last one, which {said}, checked "
                        f"it at {when(last.stamp.at)}, before it changed on disk)")
            return ""
        validation = checked.validation
        if validation is None:
            error = checked.error
            return "could not run" + (f": {html.escape(error.message)}" if error else "")
        trials = validation.trials
        word = {"passed": "passed", "failed": "FAILED", "inconclusive": "inconclusive (the "
                "outputs cannot tell a right file from a wrong one)"}[validation.verdict]
        text = (f"{word}: "
                f"{sum(1 for t in trials if t.ok)} of {len(trials)} trials within "
                f"|diff| ≤ atol + rtol·|ref| (rtol {validation.rtol}, atol {validation.atol})")
        if checked.rejudged:
            text += " (judged again at the form's tolerance, nothing re-run)"
        stale = self.session.stale(checked)
        if stale is not None:
            text += f" — out of date: {html.escape(stale.sentence)}"
        return text

    def follow_palette(self) -> None:
        """A new palette (the window's theme changed): the facts again, their links in its
        colour. (Told by the window, not read from changeEvent: a Python changeEvent on a view
        drawn at start makes PySide build a class for every kind of event, ~7 ms of it.)"""
        self.facts.document().setDefaultStyleSheet(
            f"a {{ color: {self.palette().color(QPalette.ColorRole.Link).name()}; }}")
        if not self.facts.isHidden():
            self.refresh()

    def _open_link(self, url: QUrl) -> None:
        from PySide6.QtGui import QDesktopServices

        QDesktopServices.openUrl(url)
