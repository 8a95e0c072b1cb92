"""The window's menu bar: File, Export, View and Help with their shortcuts, the Recent menu,
and the shortcut list F1 shows. Built for a window (`MenuHost`: the slots the menus call);
the session's jobs are started, validated and cancelled through the session itself.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu

from onnx_studio.app import settings as settings_mod
from onnx_studio.app.fold import FormFold
from onnx_studio.app.session import ExportSession
from onnx_studio.app.tabs import TABS, ResultTabs

__all__ = ["SHORTCUTS", "MenuHost", "Menus"]

SHORTCUTS = "\n".join([
    "Ctrl+O  open a recipe, model or .onnx file",
    "Ctrl+S / Ctrl+Shift+S  save the recipe (as)",
    "Ctrl+E or Ctrl+Enter  export",
    "Ctrl+Shift+V  validate the exported file with ONNX Runtime",
    "Esc  cancel the export or validation",
    "Ctrl+1 … Ctrl+7  Summary, Warnings, Validation, Graph, Python, Log, Compare",
    "Ctrl+B  fold the form away (the results take the whole width) or show it",
    "Ctrl+Shift+C  copy the Python script",
    "Ctrl+Q  quit",
])


class MenuHost(Protocol):
    """What the menus call on the window."""

    session: ExportSession
    tabs: ResultTabs
    fold: FormFold

    def open_dialog(self) -> None: ...
    def open_hf_dialog(self) -> None: ...
    def open_path(self, path: Path) -> bool: ...
    def save_recipe(self) -> bool: ...
    def save_recipe_as(self) -> bool: ...
    def keep_edits_then(self, what: str, proceed: Callable[[], object]) -> None: ...
    def set_theme(self, name: str) -> None: ...
    def show_about(self) -> None: ...
    def open_log_folder(self) -> None: ...
    def recent(self) -> list[str]: ...


class Menus:
    """The menu bar of `window`; the actions the window enables, checks or fills later."""

    def __init__(self, window: QMainWindow, host: MenuHost) -> None:
        self.window, self.host = window, host
        bar, session = window.menuBar(), host.session
        file = bar.addMenu("&File")
        self._action(file, "&Open…", host.open_dialog, QKeySequence.StandardKey.Open)
        self._action(file, "Open &Hugging Face folder…", host.open_hf_dialog)
        self._action(file, "&New recipe",
                     lambda: host.keep_edits_then("starting a new recipe", session.new_recipe),
                     QKeySequence.StandardKey.New)
        self._action(file, "&Save recipe", host.save_recipe, QKeySequence.StandardKey.Save)
        self._action(file, "Save recipe &as…", host.save_recipe_as, "Ctrl+Shift+S")
        self.recent_menu = file.addMenu("Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        file.addSeparator()
        self._action(file, "&Quit", window.close, QKeySequence.StandardKey.Quit)
        run = bar.addMenu("&Export")
        self.export = self._action(run, "&Export", session.start_export,
                                   ["Ctrl+E", "Ctrl+Return"])
        self.validate = self._action(run, "&Validate with ONNX Runtime",
                                     session.start_validation, "Ctrl+Shift+V")
        self.cancel = self._action(run, "&Cancel", session.cancel, "Esc")
        self._action(run, "Copy Python script", lambda: host.tabs.python.copy(), "Ctrl+Shift+C")
        view = bar.addMenu("&View")
        for i, name in enumerate(TABS):
            self._action(view, name, lambda _=False, i=i: host.tabs.setCurrentIndex(i),
                         f"Ctrl+{i + 1}")
        view.addSeparator()
        view.addAction(host.fold.action)
        themes = view.addMenu("Theme")
        group = QActionGroup(window)
        self.themes: dict[str, QAction] = {}
        for name in settings_mod.THEMES:
            label = "Follow the system" if name == "system" else name.capitalize()
            action = self._action(themes, label, lambda _=False, n=name: host.set_theme(n))
            action.setCheckable(True)
            group.addAction(action)
            self.themes[name] = action
        help_menu = bar.addMenu("&Help")
        self._action(help_menu, "Keyboard shortcuts", lambda: _shortcuts(window), "F1")
        self._action(help_menu, "Open log folder", host.open_log_folder)
        self._action(help_menu, "&About ONNX Export Studio", host.show_about)
        session.readinessChanged.connect(self._update_actions)

    def _action(self, menu: QMenu, text: str, slot: Callable[..., Any],
                shortcut: Any = None) -> QAction:
        # its text set after: QAction(text, parent) is also QAction(icon, text), and PySide
        # makes the QIcon class (its ~60 theme icons an enum) to tell the two apart
        action = QAction(self.window)
        action.setText(text)
        if shortcut is not None:
            keys = shortcut if isinstance(shortcut, list) else [shortcut]
            action.setShortcuts([QKeySequence(k) for k in keys])
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _update_actions(self) -> None:
        session = self.host.session
        self.export.setEnabled(not session.problems and not session.busy)
        self.validate.setEnabled(not session.validate_reason)
        self.validate.setToolTip(session.validate_tip())

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        items = self.host.recent()
        for item in items:
            action = self.recent_menu.addAction(item)
            action.triggered.connect(lambda _=False, p=item: self.host.open_path(Path(p)))
        if not items:
            self.recent_menu.addAction("(none)").setEnabled(False)


def _shortcuts(window: QMainWindow) -> None:
    from PySide6.QtWidgets import QMessageBox  # a dialog: loaded when first opened

    QMessageBox.information(window, "Keyboard shortcuts", SHORTCUTS)
