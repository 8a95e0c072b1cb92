"""What the window remembers between runs (onnx_studio.app.settings): the recent files, the last
folder a dialog opened, its geometry and its splitter; saved as soon as they change, a failure to
save said on the status line, never raised."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QByteArray
from PySide6.QtWidgets import QApplication, QMainWindow, QSplitter

from onnx_studio.app import settings as settings_mod


class Remembered:
    """The settings a window reads and writes, saved at once (`say`: where a failure goes)."""

    def __init__(self, settings: settings_mod.Settings, say: Callable[[str], None]) -> None:
        self.settings = settings
        self.say = say

    def save(self) -> None:
        try:
            settings_mod.save(self.settings)
        except OSError as exc:
            self.say(f"Settings not saved: {exc}")

    def add_recent(self, kind: str, path: Path) -> None:
        self.settings.add_recent(kind, str(path.resolve()))
        self.save()

    def recent(self) -> list[str]:
        return [*self.settings.recent_recipes, *self.settings.recent_models]

    def start_folder(self, fallback: Path) -> str:
        """Where a file dialog opens: the last folder one opened from, else `fallback`."""
        return self.settings.last_folder or str(fallback)

    def set_last_folder(self, folder: Path) -> None:
        self.settings.last_folder = str(folder)
        self.save()

    def set_theme(self, name: str) -> None:
        self.settings.theme = name
        self.save()

    def restore(self, window: QMainWindow, splitter: QSplitter, form_min_width: int) -> None:
        """The window's last geometry and splitter; the first time, a size that fits the
        screen and the form as narrow as it fits, up to 640 px."""
        restored = False
        if self.settings.geometry:
            restored = window.restoreGeometry(
                QByteArray.fromBase64(self.settings.geometry.encode()))
        if self.settings.splitter:
            splitter.restoreState(QByteArray.fromBase64(self.settings.splitter.encode()))
        if not restored:
            screen = QApplication.primaryScreen()
            avail = screen.availableGeometry() if screen else None
            width = min(1340, avail.width()) if avail else 1340
            height = min(740, avail.height()) if avail else 740
            window.resize(width, height)
            if not self.settings.splitter:
                form = max(form_min_width, min(640, int(width * 0.45)))
                splitter.setSizes([form, max(width - form, 1)])

    def store(self, window: QMainWindow, splitter: QSplitter) -> None:
        """Keep the window's geometry and splitter for the next run (the file is written only
        when they moved: closing an unchanged window writes nothing)."""
        geometry = bytes(window.saveGeometry().toBase64().data()).decode()
        sizes = bytes(splitter.saveState().toBase64().data()).decode()
        if (geometry, sizes) == (self.settings.geometry, self.settings.splitter):
            return
        self.settings.geometry, self.settings.splitter = geometry, sizes
        self.save()
