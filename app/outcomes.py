"""What a job produced, stamped with what produced it: the recipe and the ONNX file.

`ExportOutcome` and `ValidationOutcome` hold a job's end twice: typed (engine.protocol classes,
what the session decides on) and as the worker sent it (the dicts the Summary and Validation
tabs render key for key). A `Stamp` names the recipe (its `fingerprint`) and the ONNX file
(path, size, mtime) a result belongs to, so the session can tell whether it is still current.
Qt-free.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine import recipe as recipes
from engine.protocol import (
    EVENTS,
    RESULTS,
    Error,
    ErrorEvent,
    Event,
    ExportReport,
    ExportResult,
    ProtocolError,
    Validation,
)
from engine.recipe import Recipe

__all__ = ["ExportOutcome", "FileStamp", "JobStart", "OpenedFile", "Stamp", "ValidationOutcome",
           "decode_event", "fingerprint", "protocol_error"]


def fingerprint(recipe: Recipe) -> str:
    """A stable hash of the recipe's data and its folder: equal recipes, equal fingerprints.

    Cheap (no TOML writing): the dirty flag and every result's stamp use it on each edit.
    """
    data = json.dumps(recipes.to_dict(recipe), sort_keys=True, default=str)
    return hashlib.sha256(f"{data}\0{recipe.base_dir}".encode()).hexdigest()


@dataclass(frozen=True)
class FileStamp:
    """A file as it was: its path, size and modification time (nanoseconds)."""

    path: Path
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileStamp | None:
        """The file at `path` now; None when there is none."""
        try:
            stat = path.stat()
        except OSError:
            return None
        return cls(path, stat.st_size, stat.st_mtime_ns)


@dataclass(frozen=True)
class Stamp:
    """What a result belongs to: the recipe's fingerprint when its job was sent, and the ONNX
    file the job wrote or read (None: no file was written)."""

    recipe: str
    onnx: FileStamp | None
    label: str = ""  # the recipe as the user knows it: its file name (or "unsaved") and model


@dataclass(frozen=True)
class OpenedFile:
    """An .onnx the user opened: the file as it was, and its `graph` summary (engine.graph.
    summary) or why it could not be read."""

    path: Path
    stamp: FileStamp | None
    summary: dict[str, Any] | None
    error: str | None


@dataclass(frozen=True)
class JobStart:
    """An export or validation just sent to the worker: the file it writes or checks."""

    job: int
    onnx: Path
    worker_ready: bool  # False: the worker is still importing torch
    validates: bool  # the job validates (an export with [validate] enabled, or a validation)
    ahead: tuple[str, ...] = ()  # the jobs it waits behind (JobRunner.ahead_of)


@dataclass(frozen=True)
class ExportOutcome:
    """The end of an export job: `final` typed, `message` as the worker sent it."""

    job: int
    final: ExportResult | ErrorEvent
    message: dict[str, Any]
    stamp: Stamp
    seconds: float
    validates: bool  # the recipe sent asked for a validation

    @property
    def report(self) -> ExportReport | None:
        """The export's report; None when the job itself failed (cancelled, crashed)."""
        return self.final.report if isinstance(self.final, ExportResult) else None

    @property
    def ok(self) -> bool:
        return self.report is not None and self.report.ok

    @property
    def error(self) -> Error | None:
        """Why it failed: the report's error, or the job's own (cancelled, crashed)."""
        if isinstance(self.final, ErrorEvent):
            return self.final.error
        return self.final.report.error

    @property
    def output(self) -> Path | None:
        report = self.report
        return Path(report.output) if report is not None and report.output else None

    @property
    def written(self) -> bool:
        """True when the export wrote its file (one whose validation failed included)."""
        report = self.report
        if report is None or not report.output:
            return False
        failed_validation = (report.validation is not None and report.error is not None
                             and report.error.kind == "validation")
        return report.ok or failed_validation


@dataclass(frozen=True)
class ValidationOutcome:
    """A validation of an ONNX file: from a validate job, or the part of an export that
    validated what it wrote (`job` is then the export's)."""

    job: int
    onnx: Path | None
    validation: Validation | None  # None: it could not run; `error` says why
    message: dict[str, Any]  # the job's final message as the worker sent it
    data: dict[str, Any] | None  # the validation object in it
    error: Error | None
    details: str
    job_dir: str | None
    stamp: Stamp
    seconds: float
    from_export: bool

    @property
    def ok(self) -> bool:
        return self.validation is not None and self.validation.ok


def decode_event(job: str, message: dict[str, Any]) -> Event:
    """The typed form of one event of a `job` (by its `type`; a result by the job's name).

    Raises ProtocolError when the message does not fit its class. Unknown keys are ignored,
    so a newer worker's extra fields pass.
    """
    kind = message.get("type")
    if kind == "result":
        result = RESULTS.get(job)
        if result is None:
            raise ProtocolError("result", "", f"answers the job {job!r}, which has no result "
                                "class")
        return result.from_dict(message)
    event = EVENTS.get(kind) if isinstance(kind, str) else None
    if event is None:
        raise ProtocolError("message", "type", f"is {kind!r}, which this version does not "
                            "know")
    return event.from_dict(message)


def protocol_error(job_id: int, exc: ProtocolError) -> ErrorEvent:
    """The error a job ends with when its final message does not fit the protocol."""
    return ErrorEvent(id=job_id, error=Error.from_exception(exc, with_details=False),
                      details=str(exc))
