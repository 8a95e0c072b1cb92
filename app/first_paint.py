"""Work that waits for a widget's first frame: `after_first_paint(widget, call)` runs `call`
once, right after the widget has been painted for the first time.

What the first frame does not draw (the worker process, the graph modules, a table's
tooltip filter) is done then, so a window opens as fast as it can draw. A zero-time timer
would not do: Qt runs those before it paints a window just shown.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget

__all__ = ["after_first_paint"]


class _FirstPaint(QObject):
    """Watches `widget` until its first paint event, then calls `call` from the event loop
    (after the frame) and goes."""

    def __init__(self, widget: QWidget, call: Callable[[], object]) -> None:
        super().__init__(widget)
        self._widget = widget
        self._call = call
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            self._widget.removeEventFilter(self)
            QTimer.singleShot(0, self, self._run)  # (gone with the widget, never called)
        return False

    def _run(self) -> None:
        self.deleteLater()
        self._call()


def after_first_paint(widget: QWidget, call: Callable[[], object]) -> None:
    """Call `call` once, right after `widget` is painted for the first time (never when it
    is destroyed before)."""
    _FirstPaint(widget, call)
