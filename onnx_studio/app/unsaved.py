"""Nothing lost: the questions the window asks before unsaved edits or a running job would go.

Save / Discard / Cancel before the recipe is replaced (New, Open, an example, quitting), "a job is
running: cancel it and quit?", and the offer to restore the form autosaved by a window that ended
without closing (onnx_studio.app.recovery). Every question is window-modal and never blocks its
caller: the answer runs what was asked for, or nothing after Cancel.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from onnx_studio.app.form.panel import Banner
from onnx_studio.app.recovery import Autosave, find_orphans
from onnx_studio.app.session import ExportSession

if TYPE_CHECKING:
    from PySide6.QtWidgets import QMessageBox


class UnsavedGuard:
    """Asks before the session's edits or job are lost; `save` saves the recipe (True: saved);
    the questions are `parent`'s, titled `title`."""

    def __init__(self, parent: QWidget, session: ExportSession, autosave: Autosave,
                 save: Callable[[], bool], title: str) -> None:
        self.parent = parent
        self.title = title
        self.session = session
        self.autosave = autosave
        self.save = save
        self.unsaved_prompt: QMessageBox | None = None  # asks Save / Discard / Cancel
        self.busy_prompt: QMessageBox | None = None  # asks before quitting during a job

    def keep_edits_then(self, what: str, proceed: Callable[[], object]) -> None:
        """Run `proceed` (which replaces the recipe) now when nothing is unsaved; else once the
        user answered Save (and the save worked) or Discard in `unsaved_prompt`; never after
        Cancel."""
        from PySide6.QtWidgets import QMessageBox  # a dialog: loaded when first opened

        if not self.session.dirty:
            proceed()
            return
        path = self.session.recipe_path
        box = QMessageBox(QMessageBox.Icon.Warning, self.title,
                          f"Save the changes to {path.name if path else 'the recipe'} before "
                          f"{what}?", QMessageBox.StandardButton.Save
                          | QMessageBox.StandardButton.Discard
                          | QMessageBox.StandardButton.Cancel, self.parent)
        box.setInformativeText("The changes are lost if you do not save them.")
        box.setDefaultButton(QMessageBox.StandardButton.Save)
        box.setWindowModality(Qt.WindowModality.WindowModal)
        box.finished.connect(lambda _code: self._answered(box, proceed))
        self.unsaved_prompt = box
        box.open()

    def _answered(self, box: QMessageBox, proceed: Callable[[], object]) -> None:
        from PySide6.QtWidgets import QMessageBox

        self.unsaved_prompt = None
        button = box.standardButton(box.clickedButton())
        box.deleteLater()
        if button == QMessageBox.StandardButton.Save and self.save():
            proceed()
        elif button == QMessageBox.StandardButton.Discard:
            self.autosave.remove()
            proceed()

    def ask_before_quitting(self, close_now: Callable[[], object]) -> None:
        """Unsaved edits ask Save / Discard / Cancel; a running job asks first whether to
        cancel it; `close_now` closes the window once the answers allow it."""
        from PySide6.QtWidgets import QMessageBox

        if not self.session.busy:
            self.keep_edits_then("quitting", close_now)
            return
        box = QMessageBox(QMessageBox.Icon.Question, self.title,
                          "A job is running. Cancel it and quit?",
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
                          self.parent)
        box.button(QMessageBox.StandardButton.Yes).setText("Cancel the job and quit")
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.setWindowModality(Qt.WindowModality.WindowModal)

        def answered(_code: int) -> None:
            self.busy_prompt = None
            if box.standardButton(box.clickedButton()) == QMessageBox.StandardButton.Yes:
                self.session.cancel()
                self.keep_edits_then("quitting", close_now)

        box.finished.connect(answered)
        self.busy_prompt = box
        box.open()

    def offer_recovery(self, banner: Banner) -> None:
        """Offer back, in `banner`, the form a window that ended without closing autosaved."""
        notices: list[str] = []  # recovery files that could not be read, set aside
        orphans = find_orphans(notices=notices)
        if not orphans:
            if notices:
                banner.show_message(" ".join(notices))
            return
        orphan = orphans[0]
        name = orphan.recipe_path.name if orphan.recipe_path else "an unsaved recipe"
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(orphan.saved_at))

        def restore() -> None:
            self.session.restore(orphan.recipe, orphan.recipe_path)
            orphan.discard()
            self.autosave.write_now()  # ours now, until saved

        banner.show_message(" ".join([
            *notices, f"Unsaved edits to {name} from {when} were kept when the window last "
            "ended without closing. Restore them?"]),
            [("Restore", restore), ("Discard", orphan.discard)])
