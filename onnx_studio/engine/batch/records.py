"""REPORT_DIR/results.jsonl: one item's record a line, appended as the item finishes, and read
back for --resume.

An append is one `write` of the whole line to a file opened with O_APPEND, then fsync: a
reader (or a batch killed meanwhile) sees whole lines, at worst a torn last line, which reading
skips. A fresh run (no --resume) starts the file anew.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from onnx_studio.engine.files import write_text_atomic
from onnx_studio.engine.protocol import BatchRecord, ProtocolError, encode

RESULTS = "results.jsonl"


def start_fresh(report_dir: Path) -> Path:
    """An empty results file in `report_dir`; its path."""
    path = report_dir / RESULTS
    write_text_atomic(path, "")
    return path


def append_record(path: Path, record: BatchRecord) -> None:
    """Add the record as one line at the end of the file, whole and on disk when this
    returns."""
    data = (encode(record) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        view = memoryview(data)
        while view:  # a regular file takes it in one write; a short write goes on
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def read_records(path: Path) -> dict[str, BatchRecord]:
    """The last record of each item in the file, by item; lines that do not parse (a line
    torn by a kill, a hand edit) are passed over. {} when there is no file."""
    found: dict[str, BatchRecord] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return found
    for line in text.splitlines():
        try:
            record = BatchRecord.from_dict(json.loads(line))
        except (ValueError, ProtocolError):
            continue
        found[record.recipe] = record
    return found
