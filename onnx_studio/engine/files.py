"""Files written so a crash never leaves half of one: temp file, fsync, rename; modes kept.

The ground floor of the engine (no torch, no onnx): recipes, settings, plot data and the
ONNX writer all go through these.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path


def write_text_atomic(path: Path, text: str) -> None:
    """Write a text file so a crash mid-write leaves the old file (temp file, then rename).

    The file reaches the disk before it replaces the old one (fsync), keeps the old file's
    mode, and a new file gets the mode the user's umask gives any new file.
    """
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """`write_text_atomic` for bytes."""
    path = Path(path)
    keep = existing_mode(path)
    tmp = _new_temp_file(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if keep is not None:
            os.chmod(tmp, keep)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    sync_folder(path.parent)


def _new_temp_file(path: Path) -> Path:
    """Create an empty hidden file beside `path` (`temp_name`), with the mode the umask gives
    new files.

    `tempfile.mkstemp` would make it 0600, and a rename keeps that: a recipe or an .onnx file
    would end up private to its owner when every other file in the folder is not.
    """
    for _ in range(100):
        tmp = path.with_name(temp_name(path.name))
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"no free temporary name beside {path}")


# What the studio's temporary files and folders are called: `.NAME.onnx-studio.PID.TOKEN.tmp`.
# The marker says the studio wrote it (no other program uses it); the pid is the owner's, so a
# later process can tell a leftover from a write still under way. Names without the marker
# (`.report.csv.4000000.a1b2.tmp`) belong to other programs and are never touched.
MARKER = "onnx-studio"
TEMP_NAME = re.compile(
    rf"^\.(?P<name>.+)\.{MARKER}\.(?P<pid>\d+)\.(?P<token>[0-9A-Za-z_]+)\.tmp$")
# A temporary folder holds this file from its first moment: a folder is removed by the sweep
# only when it carries it (a folder merely named like ours may hold someone's photos).
FOLDER_MARKER = ".onnx-studio-temp"


def temp_name(name: str) -> str:
    """A fresh temporary name for a file or folder `name`, owned by this process."""
    return f".{name}.{MARKER}.{os.getpid()}.{os.urandom(4).hex()}.tmp"


def new_temp_folder(parent: Path, name: str) -> Path:
    """Create a hidden temporary folder for `name` in `parent`, marked as the studio's (its
    FOLDER_MARKER file), so the sweep may remove it once this process no longer runs."""
    for _ in range(100):
        folder = Path(parent) / temp_name(name)
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        (folder / FOLDER_MARKER).write_text(f"onnx-studio temporary folder of {os.getpid()}\n",
                                            encoding="utf-8")
        return folder
    raise FileExistsError(f"no free temporary name in {parent}")


def temp_owner(path: Path) -> int | None:
    """The pid of the process that made the temporary file or folder `path`; None when the
    name is not one of ours."""
    match = TEMP_NAME.match(path.name)
    return int(match["pid"]) if match else None


def remove_abandoned(folder: Path, alive: Callable[[int], bool],
                     name: str | None = None) -> list[Path]:
    """Delete the studio's temporary files and folders in `folder` whose owner no longer runs
    (`alive` says so by pid); only those of target `name` when given. The paths removed.

    Only names with the studio's marker; a folder only when it carries FOLDER_MARKER inside
    (never through a symlink); nothing else, whatever its name.
    """
    removed: list[Path] = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = TEMP_NAME.match(entry.name)
        if match is None or (name is not None and match["name"] != name):
            continue
        pid = int(match["pid"])
        if pid == os.getpid() or alive(pid):
            continue
        if entry.is_symlink():  # we never make links: someone else's
            continue
        if entry.is_file():
            with contextlib.suppress(OSError):
                entry.unlink()
        elif entry.is_dir() and (entry / FOLDER_MARKER).is_file():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            continue
        removed.append(entry)
    return removed


def remove_abandoned_in(folders: Iterable[Path], alive: Callable[[int], bool]) -> list[Path]:
    """`remove_abandoned` for each distinct folder."""
    removed: list[Path] = []
    for folder in dict.fromkeys(Path(f) for f in folders):
        removed += remove_abandoned(folder, alive)
    return removed


class _CommitGate:
    """The one moment a write becomes visible: renaming the new file into place.

    A write holds the gate from just before its first rename to just after its last one, and
    says so first (`announce`: the worker tells its client). Ending the process on a cancel
    takes the gate before it ends anything, so a cancel lands either before the rename (the
    previous file stays) or after it (the client has heard that the file was committed):
    never half-way, never "cancelled" with the new file in place. A set of files (a folder's
    export, onnx_studio.engine.file_set) is one commit: `names` are the files it puts into `target`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        self.announce: Callable[[Path, tuple[str, ...]], None] | None = None

    @contextlib.contextmanager
    def committing(self, target: Path, names: tuple[str, ...] = ()) -> Iterator[None]:
        with self._lock:
            self._owner = threading.get_ident()
            try:
                if self.announce is not None:
                    self.announce(target, names)
                yield
            finally:
                self._owner = None

    def held_here(self) -> bool:
        """True when this thread is inside a commit."""
        return self._owner == threading.get_ident()

    def close(self, timeout: float) -> bool:
        """Let a commit under way finish and start no other (the process is about to end);
        False when the commit did not finish within `timeout` seconds, or runs on this thread."""
        if self.held_here():
            return False
        return self._lock.acquire(timeout=timeout)


COMMIT = _CommitGate()


def existing_mode(path: Path) -> int | None:
    """The permission bits of the file at `path`, or None when there is none."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


def sync_folder(folder: Path) -> None:
    """Make the renames in `folder` durable (POSIX; Windows has no folder handles to sync)."""
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

def durable(path: Path, mode: int | None) -> None:
    """Flush `path` to disk and give it `mode` (when not None) before it is renamed into place."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    if mode is not None:
        os.chmod(path, mode)
