"""Whole cells: `show_whole_text(view)` makes a table or tree cell whose text is cut (elided
with "…" at a narrow width) show that text whole as its tooltip, above the cell's own tip.

A cell then never hides what the user typed (a shape such as 2x3x32x32x32) or a number of a
verdict without a way to read it; a cell that fits keeps its own tooltip as it was.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QModelIndex, QObject, Qt
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QAbstractItemView, QStyle, QToolTip

from app.first_paint import after_first_paint

__all__ = ["is_cut", "show_whole_text"]


def is_cut(view: QAbstractItemView, index: QModelIndex) -> bool:
    """True when the cell's text needs more width than its cell has (it is shown elided)."""
    text = index.data(Qt.ItemDataRole.DisplayRole)
    if not isinstance(text, str) or not text:
        return False
    rect = view.visualRect(index)
    style = view.style()
    margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, view) + 1
    icon = view.iconSize().width() + 4 if index.data(Qt.ItemDataRole.DecorationRole) else 0
    needed = max(view.fontMetrics().horizontalAdvance(line) for line in text.splitlines())
    return needed + 2 * margin + icon > rect.width()


class _WholeText(QObject):
    """The viewport's tooltip event: the cut cell's whole text, then its own tip."""

    def __init__(self, view: QAbstractItemView) -> None:
        super().__init__(view)
        self.view = view

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Type.ToolTip or not isinstance(event, QHelpEvent):
            return False
        index = self.view.indexAt(event.pos())
        if not index.isValid() or not is_cut(self.view, index):
            return False  # the cell's own tooltip, as before
        text = str(index.data(Qt.ItemDataRole.DisplayRole))
        tip = index.data(Qt.ItemDataRole.ToolTipRole)
        whole = f"{text}\n\n{tip}" if isinstance(tip, str) and tip and tip != text else text
        QToolTip.showText(event.globalPos(), whole, self.view.viewport(),
                          self.view.visualRect(index))
        return True


def show_whole_text(view: QAbstractItemView) -> None:
    """From its first frame on, a cut cell of `view` shows its whole text as its tooltip.

    The filter goes onto the view's viewport after that frame: the window's first paint does
    not look the viewport up, which makes Qt's Python binding load every widget class."""
    after_first_paint(view, lambda: view.viewport().installEventFilter(_WholeText(view)))
