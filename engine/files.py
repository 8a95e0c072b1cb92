"""Files written so a crash never leaves half of one: temp file, fsync, rename; modes kept.

The ground floor of the engine (no torch, no onnx): recipes, settings, plot data and the
ONNX writer all go through these.
"""

from __future__ import annotations

import os
import secrets
import stat
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
    """Create an empty hidden file beside `path`, with the mode the umask gives new files.

    `tempfile.mkstemp` would make it 0600, and a rename keeps that: a recipe or an .onnx file
    would end up private to its owner when every other file in the folder is not.
    """
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"no free temporary name beside {path}")


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
