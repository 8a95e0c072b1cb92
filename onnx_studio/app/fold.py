"""FormFold: the form side folded away (the results take the whole width) and back, from the
View menu (Ctrl+B) or the button at the left of the result tabs; remembered in the settings.

At 1024×768 the form takes half the window; folded, a graph, a table or Compare's two graphs
get the full width. Export, Validate and Cancel keep their shortcuts and menu items while the
form is folded.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QLayout, QSplitter, QTabWidget, QToolButton, QWidget

from onnx_studio.app.placement import Remembered

__all__ = ["FormFold"]

SHORTCUT = "Ctrl+B"


class FormFold(QObject):
    """Shows or hides `form` in `splitter`; `action` (checkable: the form shown) for the View
    menu and `button` at the left of `tabs`'s tab bar do the same."""

    def __init__(self, splitter: QSplitter, form: QWidget, tabs: QTabWidget,
                 remembered: Remembered, results: QLayout | None = None) -> None:
        """`results`: the layout of the results' side, given a left margin while folded (the
        splitter's handle no longer stands between the window's edge and the results)."""
        super().__init__(splitter)
        self.splitter, self.form, self.remembered = splitter, form, remembered
        self.results = results
        self._sizes: list[int] = []  # the splitter's sizes when the form was last shown
        self._shown = True  # (the form's isHidden() is true until the window is first shown)
        self.action = QAction(splitter)  # no QAction(text, ...): see Menus._action
        self.action.setText("Show the &form")
        self.action.setCheckable(True)
        self.action.setChecked(True)
        self.action.setShortcut(QKeySequence(SHORTCUT))
        self.action.toggled.connect(self.set_shown)
        self.button = QToolButton()
        self.button.setAutoRaise(True)
        self.button.clicked.connect(lambda: self.set_shown(not self.shown))
        tabs.setCornerWidget(self.button, Qt.Corner.TopLeftCorner)
        self._label()

    @property
    def shown(self) -> bool:
        return self._shown

    def restore(self) -> None:
        """Fold the form if it was folded when the window last closed."""
        if not self.remembered.settings.form_shown:
            self.set_shown(False)

    def set_shown(self, shown: bool) -> None:
        """Show (True) or fold away (False) the form; remembered at once."""
        if shown == self.shown:
            self._label()
            return
        self._shown = shown
        if shown:
            self.form.show()
            if self._sizes and self._sizes[0] > 0:
                self.splitter.setSizes(self._sizes)
        else:
            self._sizes = self.splitter.sizes()
            self.form.hide()
        if self.results is not None:
            margins = self.results.contentsMargins()
            margins.setLeft(0 if shown else 6)
            self.results.setContentsMargins(margins)
        self._label()
        if self.remembered.settings.form_shown != shown:
            self.remembered.settings.form_shown = shown
            self.remembered.save()

    def _label(self) -> None:
        shown = self.shown
        blocked = self.action.blockSignals(True)
        self.action.setChecked(shown)
        self.action.blockSignals(blocked)
        self.button.setText("◀" if shown else "▶ Form")
        self.button.setToolTip(
            f"Fold the form away: the results take the whole width ({SHORTCUT})" if shown
            else f"Show the form: the model, inputs and options of the recipe ({SHORTCUT})")
