"""The Python tab: the recipe as the torch.onnx.export script that does the same export."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QGuiApplication, QShowEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.results.summary import mono
from app.session import ExportSession


class PythonView(QWidget):
    """The recipe as a runnable torch.onnx.export script, with Copy and Save buttons.

    The script is written again after an edit only while the tab is on screen (or when it
    next appears): generating it on every keystroke would slow the form down.
    """

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._stale = True
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        mono(self.text)
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
        session.recipeChanged.connect(self._recipe_changed)
        session.recipeEdited.connect(self._recipe_changed)

    def _recipe_changed(self, *_: object) -> None:
        self._stale = True
        if self.isVisible():
            self.update_code()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.update_code()

    def update_code(self) -> None:
        """Write the script of the session's recipe, if it changed since the last one."""
        if not self._stale:
            return
        from engine.export.codegen import generate

        try:
            code = generate(self.session.recipe)
        except Exception as exc:  # a half-filled form: say so instead of failing
            code = f"# The script cannot be written yet: {exc}\n"
        self.set_code(code)
        self._stale = False

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
