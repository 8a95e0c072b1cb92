"""Whole cells: `show_whole_text(view)` makes a table or tree cell whose text is cut (elided
with "…" at a narrow width) show that text whole as its tooltip, above the cell's own tip.

A cell then never hides what the user typed (a shape such as 2x3x32x32x32) or a number of a
verdict without a way to read it; a cell that fits keeps its own tooltip as it was. The tip
comes from the view's delegate (`helpEvent`), not from a filter on its viewport: looking the
viewport up while the window opens would make PySide load every widget class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtWidgets import QStyledItemDelegate

if TYPE_CHECKING:  # the classes a tooltip needs load when a tooltip is first asked for
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtWidgets import QAbstractItemView, QStyleOptionViewItem

__all__ = ["WholeTextDelegate", "is_cut", "show_whole_text"]


def is_cut(view: QAbstractItemView, index: QModelIndex | QPersistentModelIndex) -> bool:
    """True when the cell's text needs more width than its cell has (it is shown elided)."""
    from PySide6.QtWidgets import QStyle

    text = index.data(Qt.ItemDataRole.DisplayRole)
    if not isinstance(text, str) or not text:
        return False
    rect = view.visualRect(index)
    style = view.style()
    margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, view) + 1
    icon = view.iconSize().width() + 4 if index.data(Qt.ItemDataRole.DecorationRole) else 0
    needed = max(view.fontMetrics().horizontalAdvance(line) for line in text.splitlines())
    return needed + 2 * margin + icon > rect.width()


class WholeTextDelegate(QStyledItemDelegate):
    """Draws cells as the default delegate does; a cut cell's tooltip is its whole text, then
    its own tip (`helpEvent` is where a view asks its delegate for an item's tooltip)."""

    def helpEvent(self, event: QHelpEvent, view: QAbstractItemView,
                  option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
                  ) -> bool:
        from PySide6.QtCore import QEvent
        from PySide6.QtWidgets import QToolTip

        if event.type() != QEvent.Type.ToolTip or not index.isValid() or not is_cut(view, index):
            return super().helpEvent(event, view, option, index)  # the cell's own tip
        text = str(index.data(Qt.ItemDataRole.DisplayRole))
        tip = index.data(Qt.ItemDataRole.ToolTipRole)
        whole = f"{text}\n\n{tip}" if isinstance(tip, str) and tip and tip != text else text
        QToolTip.showText(event.globalPos(), whole, view.viewport(), option.rect)
        return True


def show_whole_text(view: QAbstractItemView) -> None:
    """From now on a cut cell of `view` shows its whole text as its tooltip: the view draws
    its cells with a `WholeTextDelegate` (a view that draws them with a delegate of its own
    gives that one this `helpEvent`)."""
    view.setItemDelegate(WholeTextDelegate(view))
