"""The result tabs: Summary (with the error panel), Warnings, Python and Log."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QFontDatabase, QGuiApplication, QTextCursor
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTextBrowser,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"


def _mono(widget: QWidget) -> None:
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

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.status = text_label()
        self.hint = text_label(plain=True)
        self.details_button = QPushButton("Show details")
        self.details_button.setCheckable(True)
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        _mono(self.details)
        self.facts = QTextBrowser()
        self.facts.setOpenExternalLinks(False)
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

    def _toggle_details(self, on: bool) -> None:
        self.details.setVisible(on)
        self.details_button.setText("Hide details" if on else "Show details")

    def _set_error_parts(self, hint: str, details: str) -> None:
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
        self.facts.setHtml("")
        self.facts.setVisible(False)

    def show_running(self, output: str, worker_ready: bool = True) -> None:
        self._stages = []
        self._output = output
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
        self.status.setText(f"<h3>Exporting…</h3>to {html.escape(self._output)}"
                            f"<p style='line-height:130%'>{done}{now}</p>")

    def show_error(self, error: dict[str, Any], details: str, report: dict[str, Any] | None
                   ) -> None:
        kind = error.get("kind", "export")
        title = {"cancelled": "Export cancelled", "worker_crashed": "The worker crashed",
                 "validation": "Validation failed"}.get(kind, "Export failed")
        message = html.escape(error.get("message", ""))
        ops = [o for o in error.get("unsupported_ops") or []
               if o not in error.get("message", "")]
        if ops:
            message += "<br>Unsupported operators: " + ", ".join(
                f"<code>{html.escape(o)}</code>" for o in ops)
        self.status.setText(f"<h3 style='color:#d0463b'>✘ {title}</h3>{message}")
        self._set_error_parts(error.get("hint", ""), details)
        if report and report.get("graph"):
            self.facts.setHtml(self._facts_html(report, {}))
            self.facts.setVisible(True)
        else:
            self.facts.setVisible(False)

    def show_report(self, report: dict[str, Any], extra: dict[str, Any]) -> None:
        ok = report.get("ok")
        self.status.setText("<h3 style='color:#2f9e44'>✔ Exported</h3>" if ok
                            else "<h3>Finished</h3>")
        self._set_error_parts("", "")
        self.facts.setHtml(self._facts_html(report, extra))
        self.facts.setVisible(True)

    def _facts_html(self, report: dict[str, Any], extra: dict[str, Any]) -> str:
        rows: list[tuple[str, str]] = []
        output = report.get("output")
        if output:
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
        rows.append(("Exporter", html.escape(str(report.get("exporter")))))
        rows.append(("Opset", html.escape(str(report.get("opset")))))
        if "nodes" in graph:
            rows.append(("Nodes", str(graph["nodes"])))
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
        warnings = report.get("warnings") or []
        rows.append(("Warnings", f"{len(warnings)} (see the Warnings tab)" if warnings
                     else "none"))
        body = "".join(f"<tr><td style='padding:2px 12px 2px 0'><b>{k}</b></td><td>{v}</td></tr>"
                       for k, v in rows)
        return f"<table>{body}</table>"

    def _open_link(self, url: QUrl) -> None:
        QDesktopServices.openUrl(url)


def split_source(source: str) -> tuple[str, int | None]:
    """'net.py:41' -> ('net.py', 41); 'net.py' -> ('net.py', None)."""
    match = re.match(r"^(.*?):(\d+)$", source.strip())
    if match:
        return match.group(1), int(match.group(2))
    return source.strip(), None


class SourceViewer(QDialog):
    """A read-only view of a source file with the warning's line selected."""

    def __init__(self, path: Path, line: int | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"{path.name}" + (f" — line {line}" if line else ""))
        self.resize(820, 560)
        self.path = path
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        _mono(self.text)
        self.text.setPlainText(path.read_text(encoding="utf-8", errors="replace"))
        if line:
            block = self.text.document().findBlockByNumber(line - 1)
            cursor = QTextCursor(block)
            cursor.select(QTextCursor.SelectionType.LineUnderCursor)
            self.text.setTextCursor(cursor)
            self.text.centerCursor()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        editor = buttons.addButton("Open in editor", QDialogButtonBox.ButtonRole.ActionRole)
        editor.clicked.connect(
            lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.path))))
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(str(path)))
        layout.addWidget(self.text)
        layout.addWidget(buttons)


class WarningsView(QWidget):
    """Warnings of the last export: category, message, source file:line (opens the file)."""

    sourceRequested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Category", "Message", "Source"])
        self.tree.setRootIsDecorated(False)
        self.tree.setWordWrap(True)
        self.tree.setUniformRowHeights(False)
        header = self.tree.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(False)
        self.empty = QLabel("No warnings.")
        self.open_button = QPushButton("Open source")
        self.open_button.setEnabled(False)
        row = QHBoxLayout()
        row.addWidget(self.empty)
        row.addStretch(1)
        row.addWidget(self.open_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tree)
        layout.addLayout(row)
        self.tree.itemActivated.connect(lambda *_: self._open_current())
        self.tree.currentItemChanged.connect(self._current_changed)
        self.open_button.clicked.connect(self._open_current)

    def clear(self) -> None:
        self.tree.clear()
        self.empty.setText("No warnings.")

    def add(self, warning: dict[str, Any]) -> None:
        item = QTreeWidgetItem([str(warning.get("category", "Warning")),
                                str(warning.get("message", "")).strip(),
                                str(warning.get("source") or "")])
        item.setToolTip(1, str(warning.get("message", "")))
        self.tree.addTopLevelItem(item)
        self.empty.setText(f"{self.tree.topLevelItemCount()} warning(s). Double-click one "
                           "with a source to open the file at that line.")

    def count(self) -> int:
        return self.tree.topLevelItemCount()

    def _current_changed(self, item: QTreeWidgetItem | None, _previous: object) -> None:
        self.open_button.setEnabled(bool(item and item.text(2)))

    def _open_current(self) -> None:
        item = self.tree.currentItem()
        if item is not None and item.text(2):
            self.sourceRequested.emit(item.text(2))


class PythonView(QWidget):
    """The recipe as a runnable torch.onnx.export script, with Copy and Save buttons."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        _mono(self.text)
        self.copy_button = QPushButton("Copy")
        self.save_button = QPushButton("Save as…")
        self.note = QLabel("The same export as a script: runs with torch alone.")
        row = QHBoxLayout()
        row.addWidget(self.note)
        row.addStretch(1)
        row.addWidget(self.copy_button)
        row.addWidget(self.save_button)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.text)
        self.copy_button.clicked.connect(self.copy)
        self.save_button.clicked.connect(self._save)

    def set_code(self, code: str) -> None:
        if code != self.text.toPlainText():
            self.text.setPlainText(code)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text.toPlainText())
        self.note.setText("Copied to the clipboard.")

    def _save(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save script", "export_model.py",
                                              "Python (*.py)")
        if path:
            Path(path).write_text(self.text.toPlainText(), encoding="utf-8")


class LogView(QPlainTextEdit):
    """Everything the worker said, newest at the bottom (bounded)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setMaximumBlockCount(20000)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        _mono(self)

    def add(self, line: str) -> None:
        bar = self.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        self.appendPlainText(line.rstrip("\n"))
        if at_end:
            bar.setValue(bar.maximum())


def resolve_source(source: str, *folders: Path) -> tuple[Path | None, int | None]:
    """Find the file of a 'file:line' warning source among the candidate folders."""
    file, line = split_source(source)
    if not file:
        return None, line
    path = Path(file)
    candidates = [path] if path.is_absolute() else [f / path for f in folders]
    for candidate in candidates:
        if candidate.is_file():
            return candidate, line
    return None, line

