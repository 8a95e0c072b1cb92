"""Work that waits for a window's first frame: `FirstFrame(window)` runs each call handed to
`after(call)` once, right after the window is painted for the first time (at once, from the
event loop, when handed one later).

What the first frame does not draw (the worker process, the graph modules, the examples
gallery, the example's recipe file) is done then, so a window opens as fast as it can draw.
A zero-time timer would not do: Qt runs those before it paints a window just shown. The
window tells its `FirstFrame` from its own paintEvent (`painted()`): an event filter would see
every event the window gets, and PySide would make a Python class for each kind of event it
sees (about fifty, ~10 ms of a start).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

__all__ = ["FirstFrame"]


class FirstFrame:
    """The calls waiting for `owner`'s first frame; `owner` calls `painted()` from its
    paintEvent. The calls run from the event loop after that frame, never once `owner` is
    gone."""

    def __init__(self, owner: QObject) -> None:
        self._owner = owner
        self._waiting: list[Callable[[], object]] | None = []  # None: painted

    def after(self, call: Callable[[], object]) -> None:
        if self._waiting is None:
            QTimer.singleShot(0, self._owner, call)
        else:
            self._waiting.append(call)

    def painted(self) -> None:
        if self._waiting is not None:
            waiting, self._waiting = self._waiting, None
            for call in waiting:  # each on its own: one that raises leaves the others to run
                QTimer.singleShot(0, self._owner, call)
