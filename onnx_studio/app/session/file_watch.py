"""FileWatch: the files the session shows, watched on disk; `touched` names those that changed.

A QFileSystemWatcher hears each file and its folder (a file replaced by a rename is a new file:
the folder hears it), and the stamps (size, mtime_ns, inode: onnx_studio.app.outcomes.FileStamp)
are compared again whenever the application becomes active and before a job reads a file, for
file systems that say nothing. What a change means for each result is decided elsewhere
(onnx_studio.app.session.belonging); this only says which files are no longer as they were.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, QFileSystemWatcher, QObject, Qt, QTimer, Signal

if TYPE_CHECKING:
    from onnx_studio.app.outcomes import FileStamp

__all__ = ["FileWatch"]


def _stamp(path: Path) -> FileStamp | None:
    """`FileStamp.of(path)`: the outcomes' module loads with the first file followed."""
    from onnx_studio.app.outcomes import FileStamp

    return FileStamp.of(path)


class FileWatch(QObject):
    """Stamps of the files followed; `touched` (a list of paths) when some differ now."""

    touched = Signal(object)  # list[Path]: the followed files that changed on disk

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._seen: dict[Path, FileStamp | None] = {}
        self._watcher: QFileSystemWatcher | None = None  # made when a file is first followed
        self._soon = QTimer(self)  # a rename is several events: one look after them
        self._soon.setSingleShot(True)
        self._soon.setInterval(50)
        self._soon.timeout.connect(self.check)
        app = QCoreApplication.instance()
        state_changed = getattr(app, "applicationStateChanged", None)  # a QGuiApplication's
        if state_changed is not None:
            state_changed.connect(self._state_changed)

    @property
    def followed(self) -> list[Path]:
        return list(self._seen)

    def follow(self, paths: Iterable[Path]) -> None:
        """Follow exactly `paths` from now on, each as it is on disk now (a file already
        followed keeps the stamp it was seen with, so a change not looked at yet is kept)."""
        wanted = {p: self._seen[p] if p in self._seen else _stamp(p) for p in paths}
        if list(wanted) == list(self._seen):
            return
        self._seen = wanted
        watched = {str(p) for p in wanted} | {str(p.parent) for p in wanted}
        if self._watcher is None:
            if not watched:
                return
            self._watcher = QFileSystemWatcher(self)
            self._watcher.fileChanged.connect(self._heard)
            self._watcher.directoryChanged.connect(self._heard)
        now = set(self._watcher.files()) | set(self._watcher.directories())
        if now - watched:
            self._watcher.removePaths(sorted(now - watched))
        existing = [p for p in sorted(watched - now) if Path(p).exists()]
        if existing:
            self._watcher.addPaths(existing)

    def forget(self, path: Path) -> None:
        """Take `path` as it is now (a result was made of it as it is)."""
        if path in self._seen:
            self._seen[path] = _stamp(path)

    def check(self) -> list[Path]:
        """Compare each followed file with its stamp; those that changed, `touched` with them."""
        changed = []
        for path, seen in self._seen.items():
            now = _stamp(path)
            if now != seen:
                self._seen[path] = now
                changed.append(path)
        if self._watcher is not None:  # a replaced file is watched again under its name
            missing = [str(p) for p in self._seen if p.exists()
                       and str(p) not in self._watcher.files()]
            if missing:
                self._watcher.addPaths(missing)
        if changed:
            self.touched.emit(changed)
        return changed

    def _heard(self, _path: str) -> None:
        self._soon.start()

    def _state_changed(self, state: Qt.ApplicationState) -> None:
        if state == Qt.ApplicationState.ApplicationActive:
            self.check()
