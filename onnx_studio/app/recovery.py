"""Recovery files: the form autosaved while it has unsaved edits, offered back after a crash.

Each window writes its recipe (paths made absolute, so they point where they did) to
`<data dir>/recovery/<pid>.toml`, a second after the last edit, beside a `.json` that says which
recipe file it was an edit of, and holds a lock file while it runs. A clean close, a save or a
discard removes them. At the next start, a recovery file whose lock nobody holds any more is
what a window that ended without closing (a crash, a kill) left behind: `find_orphans` lists it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, QTimer

from onnx_studio.app.session import ExportSession
from onnx_studio.app.settings import backup_path
from onnx_studio.engine import dirs
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.files import write_text_atomic
from onnx_studio.engine.paths import rebase_recipe_paths
from onnx_studio.engine.recipe import Recipe

__all__ = ["AUTOSAVE_MS", "Autosave", "Orphan", "find_orphans", "recovery_dir"]

AUTOSAVE_MS = 1000  # after the last edit: an edit burst writes once


def recovery_dir() -> Path:
    """Where the recovery files live (under the user data folder)."""
    return dirs.data_dir() / "recovery"


@dataclass(frozen=True)
class Orphan:
    """A recovery file a window left behind: the recipe as the form held it."""

    recipe: Recipe
    recipe_path: Path | None  # the file it was an edit of; None: never saved
    saved_at: float  # time.time() of the autosave
    files: tuple[Path, ...]  # what to remove once it is restored or discarded

    def discard(self) -> None:
        for file in self.files:
            file.unlink(missing_ok=True)


class Autosave(QObject):
    """Writes the session's recipe to this process's recovery file while it is dirty."""

    def __init__(self, session: ExportSession, folder: Path | None = None) -> None:
        super().__init__(session)
        self.session = session
        self.folder = folder or recovery_dir()
        stem = self.folder / str(os.getpid())
        self.toml, self.meta = stem.with_suffix(".toml"), stem.with_suffix(".json")
        self._lock: QLockFile | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(AUTOSAVE_MS)
        self._timer.timeout.connect(self.write_now)
        session.recipeEdited.connect(self._schedule)
        session.recipeChanged.connect(self._schedule)
        session.dirtyChanged.connect(self._schedule)

    def _schedule(self, *_args: object) -> None:
        self._timer.start()

    def write_now(self) -> None:
        """Write the recovery file now if the recipe has unsaved edits, else remove it."""
        self._timer.stop()
        if not self.session.dirty:
            self.remove()
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if self._lock is None:
                lock = QLockFile(str(self.toml) + ".lock")
                lock.setStaleLockTime(0)
                if lock.tryLock(0):
                    self._lock = lock
            recipe = rebase_recipe_paths(self.session.recipe, self.folder, absolute=True)
            path = self.session.recipe_path
            write_text_atomic(self.meta, json.dumps({
                "recipe_path": str(path) if path is not None else None,
                "base_dir": str(self.session.recipe.base_dir), "saved_at": time.time()}))
            recipes.save(recipe, self.toml)
        except (OSError, StudioError):
            pass  # a recovery file is a courtesy: the form itself is not affected

    def remove(self) -> None:
        """No unsaved edits any more (saved, discarded, closed): nothing to recover."""
        self._timer.stop()
        for file in (self.toml, self.meta):
            file.unlink(missing_ok=True)
        if self._lock is not None:
            self._lock.unlock()
            self._lock = None


def find_orphans(folder: Path | None = None, notices: list[str] | None = None) -> list[Orphan]:
    """Recovery files of windows that ended without closing, newest first.

    One that cannot be read (damaged, nested too deeply, its note missing) is moved aside as a
    timestamped `.bak` beside itself, offered no more, and a sentence saying so goes to
    `notices`, as for a damaged settings file.
    """
    folder = folder or recovery_dir()
    found: list[Orphan] = []
    for toml in folder.glob("*.toml") if folder.is_dir() else []:
        if toml.stem == str(os.getpid()):
            continue
        lock = QLockFile(str(toml) + ".lock")
        if not lock.tryLock(0):
            continue  # its window still runs
        lock.unlock()
        meta_file = toml.with_suffix(".json")
        try:
            meta = json.loads(meta_file.read_text(encoding="utf-8"))  # as Autosave writes it
            recipe = recipes.load(toml)
            recipe = rebase_recipe_paths(recipe, Path(meta["base_dir"]))
            path, saved_at = meta["recipe_path"], float(meta["saved_at"])
            orphan = Orphan(recipe, Path(path) if path else None, saved_at,
                            (toml, meta_file, Path(str(toml) + ".lock")))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError,
                StudioError) as exc:
            note = _set_aside(toml, meta_file, exc)
            if note and notices is not None:
                notices.append(note)
            continue
        found.append(orphan)
    return sorted(found, key=lambda o: o.saved_at, reverse=True)


def _set_aside(toml: Path, meta: Path, exc: Exception) -> str:
    """Move an unreadable recovery file (and its note) to backup names; the sentence for the
    user, "" when it could not be moved (it is tried again at the next start)."""
    why = exc.message if isinstance(exc, StudioError) else (
        "its note is missing" if isinstance(exc, FileNotFoundError) else
        f"its note lacks {exc}" if isinstance(exc, KeyError) else
        "it nests too deeply to read" if isinstance(exc, RecursionError) else str(exc))
    backup = backup_path(toml)
    try:
        os.rename(toml, backup)
        if meta.is_file():
            os.rename(meta, backup_path(meta))
    except OSError:
        return ""
    return (f"Unsaved edits a window kept when it last ended could not be read ({why}); the "
            f"file was kept as {backup}.")
