"""What a job produced, typed, and stamped with what produced it: the recipe, the ONNX file and
when it ran.

`ExportOutcome` and `ValidationOutcome` hold a job's end as onnx_studio.engine.protocol classes (the
views read their fields, never the worker's dicts). A `Stamp` names the recipe (its fingerprints:
onnx_studio.app.fingerprints), the ONNX file (path, size, mtime) a result belongs to, and the time
the action ran, so the session can tell whether it is still current and the header can say when it
was made. Qt-free. Loaded with the first result or file followed, not at the window's start
(its dataclasses' generated methods are ~26 M instructions): its readers import it where they
meet a result, and name its classes in annotations only under TYPE_CHECKING.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # an outcome holds protocol classes; they load with the first job
    from onnx_studio.engine.protocol import (
        Error,
        ErrorEvent,
        ExportReport,
        ExportResult,
        InspectDocument,
        Validation,
    )

__all__ = ["ExportOutcome", "FileStamp", "JobStart", "OpenedFile", "Stamp", "ValidationOutcome",
           "failure_hint"]


@dataclass(frozen=True)
class FileStamp:
    """A file as it was: its path, size, modification time (nanoseconds) and inode (a file
    replaced by a rename has another, whatever its time). A folder (a Hugging Face export's) as
    its files were: their total size and latest modification, so a file rewritten in place
    inside it shows; subfolders (a repro saved there, an export's staging) do not count."""

    path: Path
    size: int
    mtime_ns: int
    inode: int = 0

    @classmethod
    def of(cls, path: Path) -> FileStamp | None:
        """The file or folder at `path` now; None when there is none."""
        try:
            stat = path.stat()
            if not path.is_dir():
                return cls(path, stat.st_size, stat.st_mtime_ns, stat.st_ino)
            files = [entry.stat() for entry in os.scandir(path)
                     if entry.is_file(follow_symlinks=True)]
        except OSError:
            return None
        return cls(path, sum(f.st_size for f in files),
                   max((f.st_mtime_ns for f in files), default=0),
                   sum(f.st_ino for f in files))

    def same(self, other: FileStamp | None) -> bool:
        """True when `other` names this file as it was at the same moment (paths resolved)."""
        if other is None or (self.size, self.mtime_ns, self.inode) != (
                other.size, other.mtime_ns, other.inode):
            return False
        return self.path == other.path or self.path.resolve() == other.path.resolve()


@dataclass(frozen=True, kw_only=True)
class Stamp:
    """What a result belongs to: the recipe's fingerprints when its job was sent, the ONNX file
    the job wrote or read (None: no file was written), and when it ran."""

    recipe: str  # fingerprint()
    export: str  # export_fingerprint()
    run: str  # run_fingerprint()
    onnx: FileStamp | None
    label: str = ""  # the recipe as the user knows it: its file name (or "unsaved") and model
    at: float = 0.0  # when the action ran (time.time() at its end): what the header shows


@dataclass(frozen=True)
class OpenedFile:
    """An .onnx the user opened: the file as it was, what it holds (`inspect`, the document of
    `onnx-studio inspect --json`) or why it could not be read, and when it was opened."""

    path: Path
    stamp: FileStamp | None
    inspect: InspectDocument | None
    error: str | None
    at: float  # time.time() when it was opened
    reread: bool = False  # read again by the session: the file changed on disk while shown


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
    """The end of an export job, as the worker sent it (typed)."""

    job: int
    final: ExportResult | ErrorEvent
    stamp: Stamp
    seconds: float
    validates: bool  # the recipe sent asked for a validation

    @property
    def report(self) -> ExportReport | None:
        """The export's report; None when the job itself failed (cancelled, crashed)."""
        from onnx_studio.engine.protocol import ExportResult

        return self.final.report if isinstance(self.final, ExportResult) else None

    @property
    def ok(self) -> bool:
        return self.report is not None and self.report.ok

    @property
    def error(self) -> Error | None:
        """Why it failed: the report's error, or the job's own (cancelled, crashed)."""
        from onnx_studio.engine.protocol import ErrorEvent

        if isinstance(self.final, ErrorEvent):
            return self.final.error
        return self.final.report.error

    @property
    def details(self) -> str:
        """The full cause of a failure (the traceback), "" when there is none."""
        return self.final.details

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

    @property
    def written_before_cancel(self) -> Path | None:
        """The file a cancelled export had already renamed into place (then it is there)."""
        from onnx_studio.engine.protocol import ErrorEvent

        written = self.final.written if isinstance(self.final, ErrorEvent) else None
        return Path(written) if written else None


@dataclass(frozen=True)
class ValidationOutcome:
    """A validation of an ONNX file: from a validate job, or the part of an export that
    validated what it wrote (`job` is then the export's).

    `validation` is the verdict at the form's tolerance now: as the job reported it, or judged again
    from its stored differences after a tolerance change (`as_run` then keeps what the job reported;
    onnx_studio.app.session.rejudge). A new tolerance makes a new outcome, never an edit.
    """

    job: int
    onnx: Path | None
    validation: Validation | None  # None: it could not run; `error` says why
    error: Error | None
    details: str
    job_dir: str | None
    stamp: Stamp
    seconds: float
    from_export: bool
    as_run: Validation | None = None  # the job's own verdict, when `validation` was re-judged

    @property
    def ok(self) -> bool:
        return self.validation is not None and self.validation.ok

    @property
    def rejudged(self) -> bool:
        """True when `validation` was judged again at another tolerance, nothing re-run."""
        return self.as_run is not None

    @property
    def run(self) -> Validation | None:
        """The validation as the job reported it (the differences every re-judge starts from)."""
        return self.as_run if self.as_run is not None else self.validation

    @property
    def plots(self) -> Path | None:
        """The plot data (.npz) of this validation, when it was saved."""
        validation = self.validation
        if validation is not None and isinstance(validation.plots, str) and validation.plots:
            return Path(validation.plots)
        return Path(self.job_dir) / "validation.npz" if self.job_dir else None


def failure_hint(validation: Validation) -> str:
    """What to change after a failed validation, chosen by its cause (a tolerance only when
    numbers differ: onnx_studio.engine.validation.validator.failure_hint; a Hugging Face
    export's, its generation check included, as its export's error says it:
    onnx_studio.engine.validation.hf_checks.failure_hint); "" when it passed."""
    if validation.ok:
        return ""
    if validation.generation is not None:
        from onnx_studio.engine.validation.hf_checks import failure_hint as hf_hint

        return hf_hint(validation.to_dict())
    from onnx_studio.engine.validation.validator import failure_hint as hint

    return hint(validation.to_dict())
