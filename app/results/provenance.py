"""ProvenanceBar: above the result tabs, what the shown tab's content came from, and whether it
is still current (a stale banner with "Export again" / "Validate again" when it is not).

The bar is a view of the session: `ResultTabs.provenance()` says which result the current tab
shows; the session's `is_current` says whether the recipe or the file changed since.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app import theme
from app.outcomes import ExportOutcome, FileStamp, OpenedFile, ValidationOutcome
from app.session import ExportSession

# what a tab shows: a job's result, an opened file, a graph's file, a note (str), or nothing
Shown = ExportOutcome | ValidationOutcome | OpenedFile | Path | str | None
STALE_RECIPE = ("The form has changed since this {job}: what is shown here is of the previous "
                "recipe.")
STALE_FILE = "{name} has changed on disk since this {job}."


def _when(stamp: FileStamp | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(stamp.mtime_ns / 1e9)) if stamp else ""


class ProvenanceBar(QWidget):
    """One line naming the recipe and file the current tab shows, and a stale banner."""

    againRequested = Signal(str)  # "export" | "validate": the user pressed the banner's button

    def __init__(self, session: ExportSession, shown: Callable[[], Shown],
                 parent: QWidget | None = None) -> None:
        """`shown`: what the current tab shows now (`ResultTabs.provenance`)."""
        super().__init__(parent)
        self.session = session
        self._provider = shown
        self.origin = QLabel()
        self.origin.setWordWrap(True)
        self.origin.setTextFormat(Qt.TextFormat.RichText)
        # a long name wraps or is cut; it never widens the window (the tooltip has it whole)
        self.origin.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.banner = QFrame()
        self.banner.setObjectName("staleBanner")
        self.banner.setFrameShape(QFrame.Shape.StyledPanel)
        self.stale_text = QLabel()
        self.stale_text.setWordWrap(True)
        self.again = QPushButton("Export again")
        self.again.clicked.connect(self._again)
        row = QHBoxLayout(self.banner)
        row.setContentsMargins(8, 4, 4, 4)
        row.addWidget(self.stale_text, 1)
        row.addWidget(self.again)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 2)
        column.setSpacing(2)
        column.addWidget(self.origin)
        column.addWidget(self.banner)
        self.banner.hide()
        self.set_dark(False)
        # the file may change on disk with nothing said: look again now and then
        self._poll = QTimer(self)
        self._poll.setInterval(1500)
        self._poll.timeout.connect(self.refresh)
        self._poll.start()
        for signal in (session.recipeEdited, session.recipeChanged, session.exportFinished,
                       session.validationFinished, session.fileOpened, session.exportStarted,
                       session.validationStarted):
            signal.connect(self.refresh)

    def set_dark(self, dark: bool) -> None:
        self.banner.setStyleSheet(
            f"#staleBanner {{ background: {theme.warning_background(dark)}; }}")

    @property
    def stale(self) -> bool:
        """True when the banner says the shown result is out of date."""
        return not self.banner.isHidden()

    def refresh(self, *_args: object) -> None:
        shown, session = self._provider(), self.session
        stale = ""
        if session.busy:
            self.origin.setText("<i>A job is running…</i>")
        elif isinstance(shown, ExportOutcome | ValidationOutcome):
            job = "export" if isinstance(shown, ExportOutcome) else "validation"
            onnx = shown.stamp.onnx
            file = html.escape(onnx.path.name) if onnx else "no file written"
            self.origin.setToolTip(str(onnx.path) if onnx else "")
            made = "exported" if job == "export" else "validated"
            self.origin.setText(f"<b>{file}</b> — {made} {_when(onnx)} from "
                                f"{html.escape(shown.stamp.label or 'the recipe')}")
            if not session.is_current(shown):
                stale = STALE_RECIPE.format(job=job)
                if onnx is not None and shown.stamp.recipe == session.fingerprint:
                    stale = STALE_FILE.format(name=onnx.path.name, job=job)  # the file changed
                self.again.setText("Export again" if job == "export" else "Validate again")
                self.again.setProperty("job", job)
        elif isinstance(shown, OpenedFile):
            self.origin.setToolTip(str(shown.path))
            self.origin.setText(f"<b>{html.escape(shown.path.name)}</b> — opened "
                                f"{_when(shown.stamp)}; Validate uses the inputs of "
                                f"{html.escape(session.recipe_label())}")
            if shown.stamp is not None and FileStamp.of(shown.path) != shown.stamp:
                stale = STALE_FILE.format(name=shown.path.name, job="opening")
                self.again.setText("Validate it")
                self.again.setProperty("job", "validate")
        elif isinstance(shown, Path):
            self.origin.setToolTip(str(shown))
            self.origin.setText(f"<b>{html.escape(shown.name)}</b>")
        elif isinstance(shown, str):
            self.origin.setText(f"<i>{html.escape(shown)}</i>")
        else:
            self.origin.setText("<i>Nothing yet: export, or open an .onnx file.</i>")
        if stale:
            self.stale_text.setText("⚠ " + stale)
        self.banner.setVisible(bool(stale))

    def _again(self) -> None:
        self.againRequested.emit(str(self.again.property("job") or "export"))
