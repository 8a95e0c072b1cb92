"""The Python tab: the recipe as the script that does the same export (torch.onnx.export, then
onnx_studio.validate when the recipe asks for validation; for a Hugging Face folder, the recipe
handed to onnx_studio.export), or why it cannot be written yet, in words that wrap.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
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

from onnx_studio.app.results.summary import mono
from onnx_studio.app.session import ExportSession
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.file_set import write_file
from onnx_studio.engine.recipe import is_folder_source


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
        # why there is no script (a half-filled form): a sentence that wraps, not a code line
        self.reason = QLabel()
        self.reason.setWordWrap(True)
        self.reason.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.reason.hide()
        row = QHBoxLayout()
        row.addWidget(self.note)
        row.addStretch(1)
        row.addWidget(self.copy_button)
        row.addWidget(self.save_button)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.reason)
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
        from onnx_studio.engine.errors import StudioError
        from onnx_studio.engine.export.codegen import generate

        try:
            code, reason = generate(self.session.recipe), ""
        except StudioError as exc:  # a half-filled form: say so instead of failing
            code, reason = "", f"{exc.message} {exc.hint}".strip()
        except Exception as exc:  # a value the form let through that the writer cannot take
            code, reason = "", str(exc)
        self.set_code(code)
        self.reason.setText(f"The script cannot be written yet: {reason}" if reason else "")
        self.reason.setVisible(bool(reason))
        self.text.setVisible(not reason)
        self.copy_button.setEnabled(not reason)
        self.save_button.setEnabled(not reason)
        recipe = self.session.recipe
        self.note.setText(
            "The same export as a script: onnx_studio exports and validates the recipe (a "
            "Hugging Face model's files)." if is_folder_source(recipe.model.source) else
            "The same export as a script: torch.onnx.export, then onnx_studio validates the "
            "file against the model." if recipe.validate.enabled else
            "The same export as a script: runs with torch alone.")
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
        if not path:
            return
        try:
            write_file(Path(path), self.text.toPlainText().encode("utf-8"),
                       what="The script")
        except (StudioError, OSError) as exc:
            self.note.setText(f"Not saved: {exc}")
        else:
            self.note.setText(f"Saved {Path(path).name}.")
