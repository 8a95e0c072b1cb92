"""REPORT_DIR/results.jsonl: the one record log of a batch, held by one batch at a time.

- One batch at a time: a lock file in the report folder, created exclusively, names the
  batch that holds it (pid, host, start). A second batch on the same folder is refused naming
  it (kind `write`, exit 2), or waits for it (`wait`). A lock whose process no longer runs on
  this host is taken over.
- Whole lines only: a record is appended as one `write` of the whole line to a file opened
  with O_APPEND, then fsync. Reading repairs the file first: a line that does not parse (torn
  by a kill, garbage) is moved to results.damaged.jsonl beside it, never appended to and never
  lost, and the log keeps its whole lines.
- Each record stamps the files its item wrote (size and modification time of every file the
  studio's manifest lists for the output, onnx_studio.engine.file_set), so --resume can tell
  an output deleted or changed since.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from onnx_studio.engine import process_tree
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.file_set import claim_folder, previous_set
from onnx_studio.engine.files import sync_folder, write_text_atomic
from onnx_studio.engine.protocol import BatchRecord, OutputStamp, ProtocolError, encode

RESULTS = "results.jsonl"
DAMAGED = "results.damaged.jsonl"
REPORT = "report.html"
LOCK = ".onnx-studio-batch.lock"
EXPORTS = "onnx"  # where the exports of hf: items go
_POLL_S = 0.5


class RecordLog:
    """Context manager: the report folder's record log, held (locked) while inside."""

    def __init__(self, report_dir: Path, *, wait: bool = False) -> None:
        self.folder = Path(os.path.abspath(report_dir))
        self.path = self.folder / RESULTS
        self.wait = wait
        self._held = False

    def __enter__(self) -> RecordLog:
        if self.folder.exists() and not self.folder.is_dir():
            raise StudioError("write", f"{self.folder} is a file; -o names the report folder.",
                              "Name a folder (made when missing).", exit_code=2)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StudioError("write", f"Cannot make the report folder {self.folder}: "
                              f"{exc.strerror or exc}.", "Name a folder you can write to.",
                              exit_code=2) from None
        self._lock()
        try:
            claim_folder(self.folder, "batch-report", [RESULTS, DAMAGED, REPORT, EXPORTS],
                         what="The report folder")
        except BaseException:
            self._unlock()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._unlock()

    # ------------------------------------------------------------------------ the lock

    def _lock(self) -> None:
        lock = self.folder / LOCK
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
        while True:
            try:
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                other = _holder(lock)
                if other is not None and _abandoned(other):
                    _break(lock)
                    continue
                if self.wait:
                    time.sleep(_POLL_S)
                    continue
                raise StudioError(
                    "write", f"Another batch is writing into {self.folder} "
                    f"({_describe(other)}); a report folder takes one batch at a time.",
                    "Wait for it to end, run this one with --wait, or choose another -o "
                    "folder.", exit_code=2) from None
            except OSError as exc:
                raise StudioError("write", f"Cannot write into the report folder "
                                  f"{self.folder}: {exc.strerror or exc}.",
                                  "Name a folder you can write to.", exit_code=2) from None
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(holder, fh)
            self._held = True
            return

    def _unlock(self) -> None:
        if self._held:
            (self.folder / LOCK).unlink(missing_ok=True)
            self._held = False

    # ------------------------------------------------------------------------ the records

    def start_fresh(self) -> None:
        """An empty log (a run without --resume starts anew)."""
        write_text_atomic(self.path, "")

    def read(self) -> dict[str, BatchRecord]:
        """The last record of each item, by item, the log repaired first: lines that do not
        parse are moved to results.damaged.jsonl. {} when there is no log."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return {}
        found: dict[str, BatchRecord] = {}
        good: list[str] = []
        bad: list[str] = []
        for line in text.splitlines(keepends=True):
            try:
                if not line.endswith("\n"):
                    raise ValueError("a torn last line")
                record = BatchRecord.from_dict(json.loads(line))
            except (ValueError, ProtocolError):
                bad.append(line if line.endswith("\n") else line + "\n")
                continue
            good.append(line)
            found[record.recipe] = record
        if bad:
            with open(self.folder / DAMAGED, "a", encoding="utf-8") as aside:
                aside.writelines(bad)
                aside.flush()
                os.fsync(aside.fileno())
            write_text_atomic(self.path, "".join(good))
        return found

    def append(self, record: BatchRecord) -> None:
        """Add the record as one whole line at the end of the log, on disk when this returns."""
        data = (encode(record) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            view = memoryview(data)
            while view:  # a regular file takes it in one write; a short write goes on
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        sync_folder(self.folder)


def _holder(lock: Path) -> dict[str, object] | None:
    """What the lock file says of the batch holding it; None while it is being written."""
    try:
        value = json.loads(lock.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _abandoned(holder: dict[str, object]) -> bool:
    """True when the batch that wrote the lock no longer runs (on this host: another host's
    process cannot be asked)."""
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int):
        return False
    return pid != os.getpid() and not process_tree.alive(pid)


def _break(lock: Path) -> None:
    """Remove an abandoned lock (renamed first, so two batches breaking it at once cannot
    remove the new lock of the one that won)."""
    aside = lock.with_name(f"{lock.name}.{os.getpid()}.{os.urandom(4).hex()}")
    with contextlib.suppress(OSError):
        os.replace(lock, aside)
        aside.unlink()


def _describe(holder: dict[str, object] | None) -> str:
    if holder is None:
        return "it is starting"
    return f"pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('started')}"


# ---------------------------------------------------------------------------- output stamps


def stamps(output: Path) -> list[OutputStamp]:
    """The size and modification time of every file the studio wrote for `output` (an .onnx
    file and its data, or a folder export's files), as its manifest lists them; the output
    alone when no manifest lists it. Files that do not exist are left out."""
    output = Path(os.path.abspath(output))
    if output.is_dir():
        names = previous_set(output, "export")
        paths = [output / n for n in names]
    else:
        names = previous_set(output.parent, f"file:{output.name}") or [output.name]
        paths = [output.parent / n for n in names]
    found = []
    for path in paths:
        with contextlib.suppress(OSError):
            info = path.stat()
            found.append(OutputStamp(path=str(path), size=info.st_size,
                                     mtime_ns=info.st_mtime_ns))
    return found


def outputs_unchanged(record: BatchRecord) -> bool:
    """True when every file the record stamped is on disk as it was when the item ended (and
    a passed item stamped at least one)."""
    if record.report.ok and not record.outputs:
        return False
    for stamp in record.outputs:
        try:
            info = Path(stamp.path).stat()
        except OSError:
            return False
        if (info.st_size, info.st_mtime_ns) != (stamp.size, stamp.mtime_ns):
            return False
    return True
