"""A set of files written into a folder as one commit: the folder holds the old set or the new.

A multi-file export (a Hugging Face encoder and its decoders, each with its data file) is
written whole into a staging folder inside the target folder and flushed to disk; then a
journal in the target folder names every rename the commit makes, and the renames follow:
the previous set's files into a `previous` folder, the new files into place. A crash or a kill
anywhere in between leaves the journal, and `recover` (run when the CLI or the window starts,
and before each export into the folder) completes the commit before anything reads the folder:
the new set is whole in staging before the journal exists, so finishing is always possible. Without
a journal, a staging folder is a leftover (the sweep of onnx_studio.engine.files removes it) and the
old set was never touched. Files of the folder the export does not own are never touched.

Portable (os.replace and plain files), no torch, no onnx.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from onnx_studio.engine import process_tree
from onnx_studio.engine.files import (
    COMMIT,
    FOLDER_MARKER,
    durable,
    existing_mode,
    new_temp_folder,
    remove_abandoned,
    sync_folder,
    write_text_atomic,
)

JOURNAL = ".onnx-studio-commit.json"  # a commit under way: the renames it makes
MANIFEST = ".onnx-studio-files.json"  # the files the last export put into the folder
# test hook: stop a commit after this many renames (the tests then kill the process), so a
# crash in the middle of the renames is a moment a test can reach; "end": stop right after
# the commit (a cancel then lands after it)
STOP_AFTER_ENV = "ONNX_STUDIO_TEST_STOP_COMMIT_AFTER"
_WAIT_FOR_OTHER_S = 60.0  # another live export committing into the same folder


class CommitBusy(Exception):
    """Another running process is committing into the folder."""


def previous_set(folder: Path) -> list[str]:
    """The files the last committed export put into `folder` (empty when none is recorded)."""
    try:
        names = json.loads((Path(folder) / MANIFEST).read_text("utf-8")).get("files", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [n for n in names if isinstance(n, str) and _plain_name(n)]


def _plain_name(name: str) -> bool:
    """A file name of the folder itself: no separator, no '..' (a journal is never a path)."""
    return bool(name) and name not in (".", "..") and Path(name).name == name \
        and "/" not in name and "\\" not in name


class FolderWrite:
    """Context manager: write the new files into `staging`, then `commit()` them as one.

    On entry a commit a dead process left in `folder` is completed and its leftovers removed;
    on exit (after a failure too) the staging folder is gone, and a target folder this write
    created is removed again when nothing was committed into it.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.staging = Path()
        self.committed: list[str] = []
        self._made_folder = False
        self._journaled = False  # a commit began: its folders are the journal's from then on

    def __enter__(self) -> FolderWrite:
        self._made_folder = not self.folder.exists()
        self.folder.mkdir(parents=True, exist_ok=True)
        recover(self.folder)
        remove_abandoned(self.folder, process_tree.alive)
        self.staging = new_temp_folder(self.folder, "staging")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._journaled and (self.folder / JOURNAL).exists():
            return  # a commit that failed half-way (a disk error): `recover` finishes it
        shutil.rmtree(self.staging, ignore_errors=True)
        if self._made_folder and not self.committed:
            with contextlib.suppress(OSError):
                self.folder.rmdir()  # only when empty

    def staged(self) -> list[str]:
        """The files written into staging so far (names)."""
        return sorted(p.name for p in self.staging.iterdir() if p.name != FOLDER_MARKER)

    def commit(self, replaces: Iterable[str] = ()) -> list[str]:
        """Put the staged files into the folder as one commit; the names committed.

        The previous set (the manifest's files, the staged names, and `replaces`: what else
        the caller knows the previous export owned, e.g. the data its files read) is moved
        away; every other file of the folder stays as it is. A new file takes the mode of the
        file it replaces.
        """
        new = self.staged()
        for name in new:
            durable(self.staging / name, existing_mode(self.folder / name))
        sync_folder(self.staging)
        owned = dict.fromkeys([*previous_set(self.folder), *new, *replaces])
        old = [n for n in owned if _plain_name(n) and (self.folder / n).is_file()]
        previous = new_temp_folder(self.folder, "previous")
        journal = {"pid": os.getpid(), "staging": self.staging.name,
                   "previous": previous.name, "old": old, "new": new}
        with COMMIT.committing(self.folder, tuple(new)):
            _claim_journal(self.folder, journal)
            self._journaled = True
            hook = os.environ.get(STOP_AFTER_ENV, "")
            _roll_forward(self.folder, journal, int(hook) if hook.isdigit() else -1)
        self.committed = new
        if os.environ.get(STOP_AFTER_ENV) == "end":  # test hook: a moment after the commit
            _maybe_stop(0, 0)
        return new


def _claim_journal(folder: Path, journal: dict[str, object]) -> None:
    """Write the journal, created exclusively: it is also the folder's lock. Another live
    process's commit is waited for; a dead one's is completed first."""
    path = folder / JOURNAL
    text = json.dumps(journal).encode("utf-8")
    deadline = time.monotonic() + _WAIT_FOR_OTHER_S
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                         0o666)
        except FileExistsError:
            busy = recover(folder)  # a live process's commit: wait for it to end
            if time.monotonic() > deadline:
                raise CommitBusy(f"another export is committing into {folder}") from None
            time.sleep(0.05 if busy else 0.0)
            continue
        break
    with os.fdopen(fd, "wb") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    sync_folder(folder)


def _roll_forward(folder: Path, journal: dict[str, object], stop_after: int = -1) -> None:
    """Make every rename the journal names, skipping those already made (so a second run after
    a crash finishes the first), record the new set, and end the commit (journal removed).
    `stop_after`: the test hook's count of renames (-1: none)."""
    staging = folder / str(journal["staging"])
    previous = folder / str(journal["previous"])
    old = [n for n in _names(journal.get("old")) if _plain_name(n)]
    new = [n for n in _names(journal.get("new")) if _plain_name(n)]
    previous.mkdir(exist_ok=True)
    renames = 0
    # the old set away first: until every old file is in `previous`, no new file has moved,
    # so an old name missing from `previous` is still the old file
    for name in old:
        if not (previous / name).exists() and (folder / name).exists():
            os.replace(folder / name, previous / name)
            renames += 1
            _maybe_stop(renames, stop_after)
    for name in new:
        if (staging / name).exists():
            os.replace(staging / name, folder / name)
            renames += 1
            _maybe_stop(renames, stop_after)
    sync_folder(folder)
    write_text_atomic(folder / MANIFEST, json.dumps({"files": new}, indent=1) + "\n")
    (folder / JOURNAL).unlink(missing_ok=True)
    sync_folder(folder)
    shutil.rmtree(previous, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)


def _names(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _maybe_stop(renames: int, stop_after: int) -> None:
    if renames == stop_after:
        sys.stderr.write(f"onnx-studio test hook: commit stopped after {renames} renames\n"
                         if renames else "onnx-studio test hook: stopped after the commit\n")
        sys.stderr.flush()
        while True:  # until the test kills this process
            time.sleep(1)


def recover(folder: Path) -> bool:
    """Complete a commit that a process which no longer runs left half-done in `folder`.
    True while a live process is committing there (nothing is done then)."""
    path = Path(folder) / JOURNAL
    try:
        text = path.read_text("utf-8")
    except OSError:
        return False
    try:
        journal = json.loads(text)
        pid = int(journal["pid"])
        names = (str(journal["staging"]), str(journal["previous"]))
    except (ValueError, KeyError, TypeError):
        journal, pid, names = None, None, ("", "")
    if pid is not None and pid != os.getpid() and process_tree.alive(pid):
        return True
    if journal is None or not all(_plain_name(n) and n.startswith(".") for n in names):
        # cut short while being written: the journal is flushed before the first rename,
        # so no rename was made and the old set is whole
        path.unlink(missing_ok=True)
        return False
    if not (Path(folder) / names[0]).is_dir() and not (Path(folder) / names[1]).is_dir():
        path.unlink(missing_ok=True)  # both folders gone: the commit had ended
        return False
    _roll_forward(Path(folder), journal)
    return False


def recover_in(folders: Iterable[Path]) -> None:
    """`recover` for each distinct folder that exists."""
    for folder in dict.fromkeys(Path(f) for f in folders):
        with contextlib.suppress(OSError):
            if folder.is_dir():
                recover(folder)


def written_text(output: str, names: list[str]) -> str:
    """What a committed export wrote, as a cancel's message says it: the file, or every file a
    folder export put into its folder (data files included), the previous set replaced."""
    if not names:
        return f"{output} was written"
    return (f"{', '.join(names)} were written into {output} as one set, replacing the "
            "previous export's files there")
