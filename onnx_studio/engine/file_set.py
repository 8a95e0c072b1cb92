"""The one way the studio writes its outputs: staged, checked, committed as one set.

Every command that writes (an export, a Hugging Face export's folder, a variant, explain's repro
folder, batch's report, a saved recipe) writes through `FolderWrite`:

- The new files are written whole into a staging folder inside the target folder and flushed.
- Before anything is renamed, the commit is checked. It never replaces a file it did not write
  itself: what the studio wrote is recorded per output in a manifest in the folder
  (`.onnx-studio-files.json`), never guessed from a file's name. The only exceptions are the
  names the user gave explicitly (`-o model.onnx`). It never replaces or removes an input of the
  same command: paths are compared as files (`os.path.samefile`), so `..`, symlinks and hard
  links are seen through. A folder output (`whole_folder`) refuses a folder that holds anything
  the studio did not write there for that output. Every refusal is a `write` error with exit
  status 2 that names the file and says what to change.
- A journal in the target folder names every rename; then the renames follow (the previous set's
  files into a `previous` folder, the new files into place) and the manifest is updated. A crash
  or a kill anywhere in between leaves the journal, and `recover` (run when the CLI or the window
  starts, and before each write into the folder) completes the commit before anything reads the
  folder. Without a journal, a staging folder is a leftover (engine.files' sweep removes it) and
  the old set was never touched.

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
from typing import Any

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.files import (
    COMMIT,
    FOLDER_MARKER,
    TEMP_NAME,
    durable,
    existing_mode,
    new_temp_folder,
    remove_abandoned,
    sync_folder,
    write_text_atomic,
)

JOURNAL = ".onnx-studio-commit.json"  # a commit under way: the renames it makes
MANIFEST = ".onnx-studio-files.json"  # per output: the files the studio put into the folder
# test hook: stop a commit after this many renames (the tests then kill the process), so a
# crash in the middle of the renames is a moment a test can reach; "end": stop right after
# the commit (a cancel then lands after it)
STOP_AFTER_ENV = "ONNX_STUDIO_TEST_STOP_COMMIT_AFTER"
_WAIT_FOR_OTHER_S = 60.0  # another live process committing into the same folder
LEGACY_OUTPUT = "export"  # a version 1 manifest's files: a Hugging Face export's folder


class CommitBusy(Exception):
    """Another running process is committing into the folder."""


def refused(message: str, hint: str = "") -> StudioError:
    """The `write` error (exit status 2) of a write the primitive will not make."""
    return StudioError("write", message, hint, exit_code=2)


# ---------------------------------------------------------------------------- the manifest


def manifest(folder: Path) -> dict[str, list[str]]:
    """What the studio wrote into `folder`: output name -> its files (names in the folder)."""
    try:
        data = json.loads((Path(folder) / MANIFEST).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    sets = data.get("sets")
    if not isinstance(sets, dict):  # version 1: one folder export's files
        sets = {LEGACY_OUTPUT: data.get("files")}
    return {str(k): [n for n in _names(v) if _plain_name(n)] for k, v in sets.items()}


def previous_set(folder: Path, output: str) -> list[str]:
    """The files the last committed write of `output` put into `folder` (empty when none)."""
    return manifest(folder).get(output, [])


def _plain_name(name: str) -> bool:
    """A file name of the folder itself: no separator, no '..' (a journal is never a path)."""
    return bool(name) and name not in (".", "..") and Path(name).name == name \
        and "/" not in name and "\\" not in name


def _names(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _theirs(entry: Path) -> bool:
    """True for an entry of a folder that is not the studio's bookkeeping (a journal, a
    manifest, a lock: `.onnx-studio-*`) or temporary file."""
    return not entry.name.startswith(".onnx-studio-") and TEMP_NAME.match(entry.name) is None


# ---------------------------------------------------------------------------- the checks


def same_file(a: Path, b: Path) -> bool:
    """True when `a` and `b` are one file or folder on disk (any spelling, symlink or hard
    link); False when either does not exist."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_apart(paths: Iterable[Path], inputs: Iterable[Path], what: str) -> None:
    """Refuse (kind `write`, exit 2) when one of `paths` is one of the command's `inputs`."""
    inputs = [Path(i) for i in inputs]
    for path in paths:
        for source in inputs:
            if same_file(path, source):
                alias = "" if os.path.abspath(path) == os.path.abspath(source) \
                    else f" (the same file as {source})"
                raise refused(
                    f"{what} would overwrite {path}, an input of this command{alias}.",
                    "Choose an output that is not one of the command's inputs.")


def check_folder_output(folder: Path, output: str, inputs: Iterable[Path] = (),
                        what: str = "The output folder") -> Path:
    """The folder an output fills with files it names itself, absolute; a `write` error (exit
    2) when it is a file, is an input of the command, or is not empty and was never written as
    `output` by the studio (its manifest says what it wrote)."""
    folder = Path(os.path.abspath(folder))
    if folder.exists() and not folder.is_dir():
        raise refused(f"{what} {folder} is a file.", "Choose a new or empty folder.")
    check_apart([folder], inputs, what)
    if folder.is_dir():
        recover(folder)
        # a folder this output was written into before is ours: the files others put there
        # since stay as they are (a commit refuses only to replace one of them)
        foreign = [] if output in manifest(folder) else sorted(
            e.name for e in folder.iterdir() if _theirs(e))
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more"
                                              if len(foreign) > 3 else "")
            raise refused(f"{what} {folder} holds files onnx-studio did not write there "
                          f"({shown}); nothing in it is replaced or removed.",
                          "Choose a new or empty folder, or move those files away.")
    return folder


def claim_folder(folder: Path, output: str, names: Iterable[str], inputs: Iterable[Path] = (),
                 what: str = "The output folder") -> Path:
    """Make `folder` (made when missing) the output `output`, whose files are `names` (a
    folder written in place, file by file, as a batch's report is): refused as
    `check_folder_output` refuses; the manifest records the names."""
    folder = check_folder_output(folder, output, inputs, what)
    folder.mkdir(parents=True, exist_ok=True)
    sets = manifest(folder)
    wanted = sorted({*sets.get(output, []), *names})
    if sets.get(output) != wanted:
        sets[output] = wanted
        write_text_atomic(folder / MANIFEST,
                          json.dumps({"version": 2, "sets": sets}, indent=1) + "\n")
    return folder


# ---------------------------------------------------------------------------- the write


class FolderWrite:
    """Context manager: write the new files into `staging`, then `commit()` them as one set.

    `output`: the name of this output in the folder's manifest: what wrote it (`export`,
    `variant`, `repro`, `batch-report`), or `file:NAME` for a file. `whole_folder`: the
    folder is the output (refused when it holds anything else). `replaceable`: names the user
    gave explicitly, which may replace a file the studio did not write. `inputs`: the
    command's inputs, never replaced.

    On entry a commit a dead process left in `folder` is completed and its leftovers removed;
    on exit (after a failure too) the staging folder is gone, and a target folder this write
    created is removed again when nothing was committed into it.
    """

    def __init__(self, folder: Path, *, output: str, whole_folder: bool = True,
                 replaceable: Iterable[str] = (), inputs: Iterable[Path] = (),
                 what: str = "The output folder") -> None:
        self.folder = Path(os.path.abspath(folder))
        self.output = output
        self.whole_folder = whole_folder
        self.replaceable = set(replaceable)
        self.inputs = [Path(i) for i in inputs]
        self.what = what
        self.staging = Path()
        self.committed: list[str] = []
        self._made_folder = False
        self._journaled = False  # a commit began: its folders are the journal's from then on

    def __enter__(self) -> FolderWrite:
        if self.whole_folder:
            check_folder_output(self.folder, self.output, self.inputs, self.what)
        self._made_folder = not self.folder.exists()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            recover(self.folder)
            remove_abandoned(self.folder, _alive)
            self.staging = new_temp_folder(self.folder, "staging")
        except OSError as exc:
            self._remove_made_folder()
            raise StudioError("write", f"Cannot create files in {self.folder}: "
                              f"{exc.strerror or exc}; choose another output folder.") from None
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._journaled and (self.folder / JOURNAL).exists():
            return  # a commit that failed half-way (a disk error): `recover` finishes it
        shutil.rmtree(self.staging, ignore_errors=True)
        if not self.committed:
            self._remove_made_folder()

    def _remove_made_folder(self) -> None:
        if self._made_folder:
            with contextlib.suppress(OSError):
                self.folder.rmdir()  # only when empty

    def staged(self) -> list[str]:
        """The entries written into staging so far (names): .onnx files last, so that a reader
        never finds a new .onnx file before the data it reads."""
        names = sorted(p.name for p in self.staging.iterdir() if p.name != FOLDER_MARKER)
        return sorted(names, key=lambda n: n.endswith(".onnx"))

    def check(self) -> tuple[list[str], list[str]]:
        """(new names, old names to move away), or a `write` error when the commit would
        replace a file the studio did not write for this output, or an input."""
        new = self.staged()
        ours = set(previous_set(self.folder, self.output))
        for name in new:
            path = self.folder / name
            if (path.exists() or path.is_symlink()) and name not in ours \
                    and name not in self.replaceable:
                raise refused(f"{path} exists and onnx-studio did not write it; it is not "
                              "replaced.", "Move it away, or choose another output.")
        old = [n for n in dict.fromkeys([*ours, *(n for n in new if n in self.replaceable)])
               if _plain_name(n) and ((self.folder / n).exists()
                                      or (self.folder / n).is_symlink())]
        check_apart([self.folder / n for n in old], self.inputs, self.what)
        return new, old

    def commit(self) -> list[str]:
        """Put the staged files into the folder as one commit; the names committed.

        The previous set of this output (its manifest's files, and a replaceable name) is moved
        away and removed; every other file of the folder stays as it is. A new file takes the
        mode of the file it replaces.
        """
        new, old = self.check()
        for name in new:
            if (self.staging / name).is_file():
                durable(self.staging / name, existing_mode(self.folder / name))
        sync_folder(self.staging)
        previous = new_temp_folder(self.folder, "previous")
        journal = {"pid": os.getpid(), "staging": self.staging.name, "output": self.output,
                   "previous": previous.name, "old": old, "new": new}
        single = len(new) == 1 or not self.whole_folder
        target = self.folder / new[-1] if single and new else self.folder
        with COMMIT.committing(target, () if single else tuple(new)):
            _claim_journal(self.folder, journal)
            self._journaled = True
            hook = os.environ.get(STOP_AFTER_ENV, "")
            _roll_forward(self.folder, journal, int(hook) if hook.isdigit() else -1)
        self.committed = new
        if os.environ.get(STOP_AFTER_ENV) == "end":  # test hook: a moment after the commit
            _maybe_stop(0, 0)
        return new


def write_file(path: Path, data: bytes, *, inputs: Iterable[Path] = (),
               what: str = "The output") -> None:
    """Write one file the user named (a saved recipe, a report), through FolderWrite: whole or
    not at all, never over one of `inputs`, with the mode of the file it replaces."""
    path = Path(os.path.abspath(path))
    with FolderWrite(path.parent, output=f"file:{path.name}", whole_folder=False,
                     replaceable=[path.name], inputs=inputs, what=what) as write:
        (write.staging / path.name).write_bytes(data)
        write.commit()


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
                raise CommitBusy(f"another process is committing into {folder}") from None
            time.sleep(0.05 if busy else 0.0)
            continue
        break
    with os.fdopen(fd, "wb") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    sync_folder(folder)


def _roll_forward(folder: Path, journal: dict[str, Any], stop_after: int = -1) -> None:
    """Make every rename the journal names, skipping those already made (so a second run after
    a crash finishes the first), record the new set, and end the commit (journal removed).
    `stop_after`: the test hook's count of renames (-1: none)."""
    staging = folder / str(journal["staging"])
    previous = folder / str(journal["previous"])
    output = str(journal.get("output", LEGACY_OUTPUT))
    old = [n for n in _names(journal.get("old")) if _plain_name(n)]
    new = [n for n in _names(journal.get("new")) if _plain_name(n)]
    previous.mkdir(exist_ok=True)
    renames = 0
    # each new file replaces its old namesake in one rename (a reader finds one or the other,
    # never neither), data files before the .onnx files that read them; a folder cannot be
    # renamed over, so an old folder of that name is moved away first. Then the old files the
    # new set does not have are moved away. Every step is skipped once made: a second run
    # after a crash finishes the first.
    for name in new:
        if (staging / name).exists():
            if (staging / name).is_dir() and (folder / name).is_dir():
                os.replace(folder / name, previous / name)
            os.replace(staging / name, folder / name)
            renames += 1
            _maybe_stop(renames, stop_after)
    for name in old:
        if name not in new and ((folder / name).exists() or (folder / name).is_symlink()):
            os.replace(folder / name, previous / name)
            renames += 1
            _maybe_stop(renames, stop_after)
    sync_folder(folder)
    sets = {k: v for k, v in manifest(folder).items() if k != output}
    if new != [output.removeprefix("file:")]:  # a file alone needs no record: it is named
        sets[output] = new
    if sets:
        write_text_atomic(folder / MANIFEST,
                          json.dumps({"version": 2, "sets": sets}, indent=1) + "\n")
    else:
        (folder / MANIFEST).unlink(missing_ok=True)
    (folder / JOURNAL).unlink(missing_ok=True)
    sync_folder(folder)
    shutil.rmtree(previous, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)


def _maybe_stop(renames: int, stop_after: int) -> None:
    if renames == stop_after:
        sys.stderr.write(f"onnx-studio test hook: commit stopped after {renames} renames\n"
                         if renames else "onnx-studio test hook: stopped after the commit\n")
        sys.stderr.flush()
        while True:  # until the test kills this process
            time.sleep(1)


def _alive(pid: int) -> bool:
    """Does process `pid` run? (psutil loads with the first write, not with the window's first
    paint, which reads recipes through this module's package.)"""
    from onnx_studio.engine import process_tree

    return process_tree.alive(pid)


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
    if pid is not None and pid != os.getpid() and _alive(pid):
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
