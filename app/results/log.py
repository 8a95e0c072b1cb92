"""The Log tab: the worker's standard error, the jobs' log lines and the session's own."""

from __future__ import annotations

from PySide6.QtWidgets import QPlainTextEdit, QWidget

from app.results.summary import mono
from app.session import ExportSession


class LogView(QPlainTextEdit):
    """Everything the worker said, newest at the bottom (bounded)."""

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setMaximumBlockCount(20000)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        mono(self)
        session.logLine.connect(self.add)

    def add(self, line: str) -> None:
        bar = self.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        self.appendPlainText(line.rstrip("\n"))
        if at_end:
            bar.setValue(bar.maximum())
