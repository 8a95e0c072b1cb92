"""StatusLine: the status bar's permanent words about the worker — starting (it imports torch),
what it runs now (an export, a validation, a Compare-tab job), or ready and idle.

A view of the session: it follows the worker's readiness and the session's `activity`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtWidgets import QLabel, QWidget

from onnx_studio.app.session import ExportSession

if TYPE_CHECKING:
    from onnx_studio.engine.protocol import Ready

__all__ = ["StatusLine"]


class StatusLine(QLabel):
    """What the worker is doing now, in a few words."""

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__("Worker: starting…", parent)
        self.session = session
        self._ready: Ready | None = None
        self._lost = False
        session.workerReady.connect(self._worker_ready)
        session.workerLost.connect(self._worker_lost)
        session.activityChanged.connect(self.refresh)

    def _worker_ready(self, ready: Ready) -> None:
        self._ready, self._lost = ready, False
        self.refresh()

    def _worker_lost(self) -> None:
        self._lost = True
        self.refresh()

    def refresh(self) -> None:
        activity = self.session.activity()
        ready = self._ready
        if self._lost:
            text = "Worker restarting…" + (f" ({activity} waits)" if activity else "")
        elif activity:
            text = activity if ready is not None else f"{activity} (the worker is starting)"
        elif ready is not None:
            text = f"Worker ready (torch {ready.torch}, pid {ready.pid})"
        else:
            text = "Worker: starting…"
        self.setText(text)
        self.setToolTip(f"torch {ready.torch} in the worker, pid {ready.pid}"
                        if ready is not None else "The worker imports torch once, at start")
