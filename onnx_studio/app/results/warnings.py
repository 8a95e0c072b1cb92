"""The Warnings tab (category, message and the hint under it, the file and line it came
from, the details of the selected one) and the read-only source viewer a warning opens at its
line."""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QTextCursor
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from onnx_studio.app.recipes import source_file
from onnx_studio.app.results.summary import mono
from onnx_studio.app.session import ExportSession
from onnx_studio.engine.protocol import WarningItem


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


class WrapDelegate(QStyledItemDelegate):
    """Sizes a column's cells by their text wrapped at the column's width."""

    def __init__(self, tree: QTreeWidget) -> None:
        super().__init__(tree)
        self.tree = tree

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
                 ) -> QSize:
        size = super().sizeHint(option, index)
        width = self.tree.columnWidth(index.column()) - 10
        if width <= 0:
            return size
        flags = int(Qt.TextFlag.TextWordWrap) | int(Qt.AlignmentFlag.AlignLeft)
        text = str(index.data() or "")
        rect = option.fontMetrics.boundingRect(QRect(0, 0, width, 1 << 20), flags, text)
        return QSize(size.width(), max(size.height(), rect.height() + 6))


SOURCE_WIDTH = 190  # the Source column's width to start with (the user may drag it)


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
        # a long source path is cut at its start (file:line stays in view), never the message
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Interactive)
        header.resizeSection(2, SOURCE_WIDTH)
        self.tree.setTextElideMode(Qt.TextElideMode.ElideLeft)
        header.setStretchLastSection(False)
        # rows as tall as their wrapped message and hint, measured again whenever the column's
        # width changes (a tree's own measure counts only the explicit lines)
        self.tree.setItemDelegateForColumn(1, WrapDelegate(self.tree))
        header.sectionResized.connect(lambda *_: self.tree.doItemsLayout())
        self.empty = QLabel("No warnings.")
        self.empty.setWordWrap(True)  # its sentence never widens the window
        self.open_button = QPushButton("Open source")
        self.open_button.setEnabled(False)
        self.details_button = QPushButton("Hide details")
        self.details_button.setCheckable(True)
        self.details_button.setChecked(True)  # the selected warning is shown whole below
        self.details_button.setEnabled(False)
        self.details_button.setToolTip("The selected warning in full: its text, hint, source "
                                       "line and where it was raised")
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        self.details.setVisible(False)
        mono(self.details)
        row = QHBoxLayout()
        row.addWidget(self.empty)
        row.addStretch(1)
        row.addWidget(self.details_button)
        row.addWidget(self.open_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tree, 3)
        layout.addWidget(self.details, 2)
        layout.addLayout(row)
        self.details_button.toggled.connect(self._show_details)
        self.tree.itemActivated.connect(lambda *_: self._open_current())
        self.tree.currentItemChanged.connect(self._current_changed)
        self.open_button.clicked.connect(self._open_current)
        session.warningsChanged.connect(self._warnings_changed)
        self._warnings_changed()  # built late (on first show): the session's list as it is now

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
        self.details.setPlainText("")
        self.details_button.setEnabled(False)
        self._show_details(self.details_button.isChecked())

    def _add(self, warning: WarningItem) -> None:
        text = warning.message.strip()
        if warning.hint:  # what to change, under the message it answers
            text += f"\n→ {warning.hint.strip()}"
        item = QTreeWidgetItem([warning.category, text, warning.source or ""])
        item.setToolTip(1, text + ("\n\n(Show details: where it was raised)"
                                   if warning.details else ""))
        item.setData(0, Qt.ItemDataRole.UserRole, self.count())  # its index in the list
        self.tree.addTopLevelItem(item)
        self.empty.setText(f"{self.tree.topLevelItemCount()} warning(s). Double-click one "
                           "with a source to open the file at that line.")

    def count(self) -> int:
        return self.tree.topLevelItemCount()

    def _current_changed(self, item: QTreeWidgetItem | None, _previous: object) -> None:
        self.open_button.setEnabled(bool(item and item.text(2)))
        warning = self.current_warning()
        self.details.setPlainText(self.detail_text(warning) if warning is not None else "")
        self.details_button.setEnabled(warning is not None)
        self._show_details(self.details_button.isChecked())

    def detail_text(self, warning: WarningItem) -> str:
        """The warning whole: category, full message, hint, its source line as the file has
        it now, and the `details` chain (where it was raised, the errors behind it)."""
        parts = [f"{warning.category}", warning.message.strip()]
        if warning.hint:
            parts.append(f"→ {warning.hint.strip()}")
        if warning.source:
            parts.append(f"Source: {warning.source}")
            path, line = resolve_source(warning.source, *self._source_folders())
            text = _line_of(path, line) if path is not None and line else None
            if text is not None:
                parts.append(f"    {line} | {text}")
        if warning.details:
            parts.append("Details:\n" + warning.details.strip())
        return "\n\n".join(parts)

    def _source_folders(self) -> list[Path]:
        recipe = self.session.recipe
        model = source_file(recipe)
        return [recipe.base_dir, *([model.parent] if model is not None else [])]

    def current_warning(self) -> WarningItem | None:
        """The session's warning the selected row shows."""
        item = self.tree.currentItem()
        index = item.data(0, Qt.ItemDataRole.UserRole) if item is not None else None
        return self._shown[index] if isinstance(index, int) and index < len(self._shown) \
            else None

    def _show_details(self, on: bool) -> None:
        self.details.setVisible(on and self.details_button.isEnabled())
        self.details_button.setText("Hide details" if on else "Show details")

    def _open_current(self) -> None:
        item = self.tree.currentItem()
        if item is not None and item.text(2):
            self.open_source(item.text(2))

    def open_source(self, source: str) -> SourceViewer | None:
        """Show the file of a warning's 'file:line' at that line (found beside the recipe or
        the model file)."""
        path, line = resolve_source(source, *self._source_folders())
        if path is None:
            self.statusMessage.emit(f"Cannot find the file of {source}")
            return None
        viewer = SourceViewer(path, line, self.window())
        viewer.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        viewer.show()
        return viewer




def _line_of(path: Path, line: int) -> str | None:
    """Line `line` (1-based) of a text file, stripped; None when it cannot be read."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for number, text in enumerate(handle, 1):
                if number == line:
                    return text.strip()
    except OSError:
        return None
    return None


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
