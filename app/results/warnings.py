"""The Warnings tab (category, message, the file and line it came from) and the read-only
source viewer a warning opens at its line."""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QTextCursor
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.recipes import source_file
from app.results.summary import mono
from app.session import ExportSession
from engine.protocol import WarningItem


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
        mono(self.text)
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

    statusMessage = Signal(str)  # a passing note: a source file that cannot be found

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._shown: list[WarningItem] = []  # the session's list these rows show
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
        session.warningsChanged.connect(self._warnings_changed)

    def _warnings_changed(self) -> None:
        """Add the session's new warnings; start over when it holds another list."""
        warnings = self.session.warnings
        if warnings is not self._shown:
            self._shown = warnings
            self.clear()
        for warning in warnings[self.count():]:
            self._add(warning)

    def clear(self) -> None:
        self.tree.clear()
        self.empty.setText("No warnings.")

    def _add(self, warning: WarningItem) -> None:
        item = QTreeWidgetItem([warning.category, warning.message.strip(), warning.source or ""])
        item.setToolTip(1, warning.message)
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
            self.open_source(item.text(2))

    def open_source(self, source: str) -> SourceViewer | None:
        """Show the file of a warning's 'file:line' at that line (found beside the recipe or
        the model file)."""
        recipe = self.session.recipe
        model = source_file(recipe)
        folders = [recipe.base_dir, *([model.parent] if model is not None else [])]
        path, line = resolve_source(source, *folders)
        if path is None:
            self.statusMessage.emit(f"Cannot find the file of {source}")
            return None
        viewer = SourceViewer(path, line, self.window())
        viewer.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        viewer.show()
        return viewer




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
