"""ProvenanceBar: above the result tabs, what the shown tab's content came from (the recipe or
file, and when the action ran), and whether it is still current: a stale banner with "Export
again" / "Validate again" when it is not, or a note with "Validate again" when the session
judged a validation again at a new tolerance without running it.

The bar is a view of the session: `ResultTabs.provenance()` says which result the current tab
shows; the session's `stale` says why it is out of date and which job brings it up to date.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from onnx_studio.app import theme
from onnx_studio.app.session import ExportSession, Stale

if TYPE_CHECKING:  # the outcomes load with the first result or file opened
    from onnx_studio.app.outcomes import ExportOutcome, OpenedFile, ValidationOutcome

    # what a tab shows: a job's result, an opened file, a graph's file, a note (str), or nothing
    Shown = ExportOutcome | ValidationOutcome | OpenedFile | Path | str | None
REJUDGED = ("Judged again at the form's tolerance from the stored differences; nothing was "
            "re-run.")


def when(at: float) -> str:
    """The time an action ran, as the header shows it (HH:MM:SS, local time)."""
    return time.strftime("%H:%M:%S", time.localtime(at)) if at else ""


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
        self._stale = False
        self._dark = False
        self.set_dark(False)
        for signal in (session.recipeEdited, session.recipeChanged, session.resultsChanged,
                       session.exportFinished, session.validationFinished,
                       session.exportStarted, session.validationStarted):
            signal.connect(self.refresh)

    def set_dark(self, dark: bool) -> None:
        self._dark = dark
        if not self.banner.isHidden():  # a hidden banner is painted as it is shown
            self._paint_banner()

    def _paint_banner(self) -> None:
        background = (theme.warning_background(self._dark) if self._stale
                      else theme.note_background(self._dark))
        self.banner.setStyleSheet(f"#staleBanner {{ background: {background}; }}")

    @property
    def stale(self) -> bool:
        """True when the banner says the shown result is out of date."""
        return self._stale and not self.banner.isHidden()

    def refresh(self, *_args: object) -> None:
        shown, session = self._provider(), self.session
        stale: Stale | None = None
        note = ""
        opened = False
        if session.busy:
            self.origin.setText("<i>A job is running…</i>")
        elif shown is None:
            self.origin.setText("<i>Nothing yet: export, or open an .onnx file.</i>")
        elif isinstance(shown, Path):
            self.origin.setToolTip(str(shown))
            self.origin.setText(f"<b>{html.escape(shown.name)}</b>")
        elif isinstance(shown, str):
            self.origin.setText(f"<i>{html.escape(shown)}</i>")
        else:
            stale, note, opened = self._show_result(shown)
        self._show_banner(stale, note, opened=opened)

    def _show_result(self, shown: ExportOutcome | ValidationOutcome | OpenedFile
                     ) -> tuple[Stale | None, str, bool]:
        """Name the result or the opened file shown, and when it was made; (why it is out of
        date, a note on it, whether it is an opened file)."""
        from onnx_studio.app.outcomes import ExportOutcome, OpenedFile, ValidationOutcome

        session = self.session
        note = ""
        if isinstance(shown, OpenedFile):
            self.origin.setToolTip(str(shown.path))
            export = session.export_result
            after = (f" after its export at {when(export.stamp.at)}" if export is not None
                     and export.output == shown.path else "")
            how = f"changed on disk{after}, read again" if shown.reread else "opened"
            self.origin.setText(f"<b>{html.escape(shown.path.name)}</b> — {how} "
                                f"{when(shown.at)}; Validate uses the inputs of "
                                f"{html.escape(session.recipe_label())}")
            return session.stale(shown), note, True
        onnx = shown.stamp.onnx
        file = html.escape(onnx.path.name) if onnx else "no file written"
        self.origin.setToolTip(str(onnx.path) if onnx else "")
        made = "exported" if isinstance(shown, ExportOutcome) else "validated"
        text = (f"<b>{file}</b> — {made} {when(shown.stamp.at)} from "
                f"{html.escape(shown.stamp.label or 'the recipe')}")
        if isinstance(shown, ValidationOutcome) and shown.rejudged:
            text += ", judged again at the form's tolerance (nothing re-run)"
            note = REJUDGED
        elif isinstance(shown, ExportOutcome):  # its validation judged again: Validate
            checked = session.results.validation_of(shown.stamp)
            note = REJUDGED if checked is not None and checked.rejudged else ""
        self.origin.setText(text)
        return session.stale(shown), note, False

    def _show_banner(self, stale: Stale | None, note: str, opened: bool) -> None:
        """The stale banner (what is out of date, and the job that brings it up to date), or
        a note with Validate again, or nothing."""
        self._stale = stale is not None
        if stale is not None:
            self.stale_text.setText("⚠ " + stale.sentence)
            again = stale.again
        else:
            self.stale_text.setText(note)
            again = "validate"
        self.again.setText("Export again" if again == "export"
                           else "Validate it" if opened else "Validate again")
        self.again.setProperty("job", again)
        shown = stale is not None or bool(note)
        if shown:  # no style sheet (a style of its own) for a banner that stays hidden
            self._paint_banner()
        self.banner.setVisible(shown)

    def _again(self) -> None:
        self.againRequested.emit(str(self.again.property("job") or "export"))
