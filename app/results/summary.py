"""The Summary tab: what the last export wrote (file, size, nodes, shapes, timings,
validation), or why it failed — a sentence, a hint, and the details one click away."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, Qt, QUrl
from PySide6.QtGui import QDesktopServices, QFontDatabase, QPalette
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.outcomes import ExportOutcome, JobStart, OpenedFile
from app.session import ExportSession
from engine.errors import plain
from engine.protocol import ErrorEvent


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"


def mono(widget: QWidget) -> None:
    """Show `widget`'s text in the system's fixed-width font."""
    widget.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))


def _shape(shape: Any) -> str:
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
    """What the last export produced, or why it failed (sentence, hint, details toggle)."""

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._shown: tuple[dict[str, Any], dict[str, Any]] | None = None  # (report, extra)
        self.status = text_label()
        self.hint = text_label(plain=True)
        self.details_button = QPushButton("Show details")
        self.details_button.setCheckable(True)
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        mono(self.details)
        self.facts = QTextBrowser()
        self.facts.setOpenExternalLinks(False)
        self.facts.setOpenLinks(False)  # a link opens the folder; the Summary stays as it is
        self.facts.anchorClicked.connect(self._open_link)
        self._stages: list[str] = []
        self._output = ""
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addWidget(self.hint)
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
        session.warningsChanged.connect(self._warnings_changed)
        session.fileOpened.connect(self.show_opened)

    def _warnings_changed(self) -> None:
        """Keep the Warnings row equal to the Warnings tab (a validation may add some)."""
        # (an export starting clears them first: its result is gone by then, nothing to redo)
        if self._shown is not None and not self.facts.isHidden() \
                and self.session.export_result is not None:
            self.facts.setHtml(self._facts_html(*self._shown))

    def _export_started(self, start: JobStart) -> None:
        self.show_running(str(start.onnx), start.worker_ready)

    def _export_finished(self, outcome: ExportOutcome) -> None:
        final = outcome.final
        if isinstance(final, ErrorEvent):  # the job itself failed: cancelled, crashed
            self.show_error(final.error.to_dict(), final.details, None)
            return
        report = outcome.message["report"]  # rendered as the worker sent it
        if outcome.ok:
            self.show_report(report, outcome.message.get("extra") or {})
        else:
            error = report.get("error") or {"kind": "export", "message": "Export failed."}
            self.show_error(error, final.details, report)

    def show_opened(self, opened: OpenedFile) -> None:
        """What an .onnx the user opened holds (inspect), or why it cannot be read."""
        if opened.error is not None or opened.summary is None:
            self.show_error({"kind": "source", "message": opened.error or ""}, "", None)
            return
        summary = opened.summary
        opsets = summary.get("opset_imports") or {}
        report = {"ok": True, "output": str(opened.path), "graph": summary,
                  "exporter": "unknown (an opened file)", "opset": opsets.get("", "?")}
        self.show_report(report, {})
        self.status.setText(f"<h3>Opened {html.escape(opened.path.name)}</h3>Validate checks "
                            "this file against the model in the form, with the form's inputs.")

    def _toggle_details(self, on: bool) -> None:
        self.details.setVisible(on)
        self.details_button.setText("Hide details" if on else "Show details")

    def _set_error_parts(self, hint: str, details: str) -> None:
        details = plain(details)  # the full chain, as the engine sent it, never colour codes
        self.hint.setText(hint)
        self.hint.setVisible(bool(hint))
        self.details.setPlainText(details)
        self.details_button.setVisible(bool(details))
        self.details_button.setChecked(False)
        self._toggle_details(False)

    def show_empty(self) -> None:
        self.status.setText("<h3>No export yet</h3>Check the form on the left, then press "
                            "<b>Export</b> (Ctrl+E). The file's summary appears here; warnings, "
                            "the graph, the equivalent Python script and the log are in the "
                            "other tabs.")
        self._set_error_parts("", "")
        self._shown = None
        self.facts.setHtml("")
        self.facts.setVisible(False)

    def show_running(self, output: str, worker_ready: bool = True) -> None:
        self._stages = []
        self._output = output
        self._set_error_parts("", "")
        self._shown = None
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
        self.status.setText(f"<h3>Exporting…</h3>to {html.escape(self._output)}"
                            f"<p style='line-height:130%'>{done}{now}</p>")

    def show_error(self, error: dict[str, Any], details: str, report: dict[str, Any] | None
                   ) -> None:
        kind = error.get("kind", "export")
        title = {"cancelled": "Export cancelled", "worker_crashed": "The worker crashed",
                 "validation": "Validation failed"}.get(kind, "Export failed")
        if kind == "cancelled" and "had already finished" in error.get("message", ""):
            title = "Cancelled after the file was written"
        message = html.escape(error.get("message", ""))
        ops = [o for o in error.get("unsupported_ops") or []
               if o not in error.get("message", "")]
        if ops:
            message += "<br>Unsupported operators: " + ", ".join(
                f"<code>{html.escape(o)}</code>" for o in ops)
        self.status.setText(f"<h3 style='color:#d0463b'>✘ {title}</h3>{message}")
        self._set_error_parts(error.get("hint", ""), details or error.get("details") or "")
        self._shown = (report, {}) if report and report.get("graph") else None
        if self._shown is not None:
            self.facts.setHtml(self._facts_html(*self._shown))
        self.facts.setVisible(self._shown is not None)

    def show_report(self, report: dict[str, Any], extra: dict[str, Any]) -> None:
        ok = report.get("ok")
        self.status.setText("<h3 style='color:#2f9e44'>✔ Exported</h3>" if ok
                            else "<h3>Finished</h3>")
        self._set_error_parts("", "")
        self._shown = (report, extra)
        self.facts.setHtml(self._facts_html(report, extra))
        self.facts.setVisible(True)

    def _facts_html(self, report: dict[str, Any], extra: dict[str, Any]) -> str:
        rows: list[tuple[str, str]] = []
        output = report.get("output")
        if output and report.get("files"):  # a folder of files, listed below
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
            data += [str(x) for x in extra.get("external_data_files", []) if x not in data]
            rows.append(("External data", ", ".join(data) if data else "none (weights inside)"))
        graph = report.get("graph") or {}
        exporter = html.escape(str(report.get("exporter")))
        if report.get("exporter_reason"):  # why that one (a recipe's "auto" resolved)
            exporter += f" — {html.escape(str(report['exporter_reason']))}"
        rows.append(("Exporter", exporter))
        rows.append(("Opset", html.escape(str(report.get("opset")))))
        if "nodes" in graph:
            rows.append(("Nodes", str(graph["nodes"])))
        if report.get("files"):  # a Hugging Face folder: each file it wrote
            several = len(report["files"]) > 1
            rows.append(("Files", "<br>".join(
                f"<b>{html.escape(str(f.get('name')))}</b> "
                f"{(f.get('graph') or {}).get('nodes', '?')} nodes"
                + (f", data: {html.escape(', '.join(map(str, f['data_files'])))}"
                   if f.get("data_files") else "")
                for f in report["files"]) + ("<br><i>The Graph tab shows each (File), two side "
                                             "by side</i>" if several else "")))
        if report.get("task"):
            rows.append(("Task", html.escape(str(report["task"]))))
        for key, label in (("inputs", "Inputs"), ("outputs", "Outputs")):
            items = graph.get(key) or []
            if items:
                rows.append((label, "<br>".join(
                    f"<b>{html.escape(str(t.get('name')))}</b> {html.escape(str(t.get('dtype')))}"
                    f" {html.escape(_shape(t.get('shape')))}" for t in items)))
        seconds = report.get("seconds") or {}
        if seconds:
            rows.append(("Time", ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items())
                         + f" (total {sum(seconds.values()):.2f} s)"))
        validation = report.get("validation")
        if validation:
            verdict = "passed" if validation.get("ok") else "FAILED"
            trials = validation.get("trials") or []
            rows.append(("Validation", f"{verdict}: {sum(1 for t in trials if t.get('ok'))} of "
                                       f"{len(trials)} trials within rtol "
                                       f"{validation.get('rtol')}, atol {validation.get('atol')}"))
        # the session's warnings: the export's and its validation's, as the Warnings tab lists
        count = len(self.session.warnings)
        rows.append(("Warnings", f"{count} (see the Warnings tab)" if count else "none"))
        body = "".join(f"<tr><td style='padding:2px 12px 2px 0'><b>{k}</b></td><td>{v}</td></tr>"
                       for k, v in rows)
        return f"<table>{body}</table>"

    def changeEvent(self, event: QEvent) -> None:
        """A new palette (the theme changed): the facts again, their links in its colour."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self._shown is not None:
            self.facts.document().setDefaultStyleSheet(
                f"a {{ color: {self.palette().color(QPalette.ColorRole.Link).name()}; }}")
            self.facts.setHtml(self._facts_html(*self._shown))

    def _open_link(self, url: QUrl) -> None:
        QDesktopServices.openUrl(url)
