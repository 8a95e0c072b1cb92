"""Jobs: what the session runs in the worker, followed by one handler, and the export and
validation jobs that make the session's results.

`send` submits a protocol request and follows it: progress to the caller, log lines to the Log,
warnings to the session's warnings, the end (a typed result or error) to the caller. The compare,
profile and variant jobs (onnx_studio.app.session.analysis), the describe job and the devices job go
through it as the export and the validation do. `activity` says what runs now, for the status bar.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from PySide6.QtCore import QObject, Signal

from onnx_studio.app.session.recipe_edits import RecipeEdits
from onnx_studio.app.session.results import Results
from onnx_studio.engine.recipe import to_toml

if TYPE_CHECKING:  # the job machinery and the protocol load after the window's first paint
    from onnx_studio.app.jobs import JobRunner
    from onnx_studio.app.outcomes import FileStamp, JobStart, Stamp
    from onnx_studio.engine.protocol import Error, ErrorEvent, Event, Request, Result

__all__ = ["End", "Jobs"]

End: TypeAlias = "Callable[[Result | ErrorEvent], None]"


@dataclass
class _Following:
    """A job sent and not answered yet, and who hears it."""

    activity: str  # what the status bar says while it runs ("": a quiet job, say describe)
    end: End
    progress: Callable[[float, str], None] | None
    warnings: bool  # its warning events are the session's warnings
    job: int = 0


@dataclass(frozen=True)
class _Sent:
    """What a running export or validation was sent with."""

    started: float  # perf_counter
    recipe: str  # the recipe's fingerprints
    export: str
    run: str
    model: str  # the model source and its folder (RecipeEdits.model_key)
    validates: bool
    onnx: Path
    file: FileStamp | None  # the file a validation checks, as it was when sent
    label: str  # RecipeEdits.recipe_label() when sent

    def stamp(self, onnx: FileStamp | None) -> Stamp:
        """The stamp of what this job produced: its file, and now as the time it ran."""
        from onnx_studio.app.outcomes import Stamp  # loaded with the first job

        return Stamp(recipe=self.recipe, export=self.export, run=self.run, onnx=onnx,
                     label=self.label, at=time.time())


class Jobs(QObject):
    """Sends the session's jobs and follows them; runs its export and validation."""

    aboutToRun = Signal()  # before a job reads the recipe: views commit text being edited
    exportStarted = Signal(object)  # JobStart
    exportProgress = Signal(float, str)  # (fraction of the job, stage)
    exportFinished = Signal(object)  # ExportOutcome
    validationStarted = Signal(object)  # JobStart
    validationProgress = Signal(float, str)
    validationFinished = Signal(object)  # ValidationOutcome
    refused = Signal(str)  # an action cannot run now: why
    activityChanged = Signal()  # a job the status bar names started or ended
    logLine = Signal(str)

    def __init__(self, runner: Callable[[], JobRunner], edits: RecipeEdits,
                 results: Results) -> None:
        """`runner`: gives the session's JobRunner (made on first use,
        onnx_studio.app.session.model)."""
        super().__init__(edits)
        self._runner = runner
        self.edits = edits
        self.results = results
        self.export_job: int | None = None
        self.validate_job: int | None = None
        self.running: JobStart | None = None  # the export or validation running, as it started
        self._following: dict[int, _Following] = {}

    @property
    def runner(self) -> JobRunner:
        return self._runner()

    # ----------------------------------------------------------------- the one handler

    def send(self, request: Request, end: End, *, activity: str = "",
             progress: Callable[[float, str], None] | None = None,
             warnings: bool = False) -> int:
        """Submit `request` and follow it; the job's id. `end` hears its result or error,
        `progress` its progress; `activity` names it in the status bar while it runs."""
        following = _Following(activity, end, progress, warnings)
        following.job = self.runner.submit(request, functools.partial(self._heard, following))
        self._following[following.job] = following
        if activity:
            self.activityChanged.emit()
        return following.job

    def _heard(self, following: _Following, event: Event) -> None:
        from onnx_studio.engine.protocol import ErrorEvent, LogLine, Progress, Result, WarningEvent

        if isinstance(event, Progress):
            if following.progress is not None:
                following.progress(event.fraction, event.stage)
        elif isinstance(event, LogLine):
            self.logLine.emit(event.line)
        elif isinstance(event, WarningEvent):
            if following.warnings:
                self.results.add_warnings([event.warning])
        elif isinstance(event, Result | ErrorEvent):
            self._following.pop(following.job, None)
            following.end(event)
            if following.activity:
                self.activityChanged.emit()

    def activity(self) -> str:
        """What the worker runs now, as the status bar says it ("" when it runs nothing the
        user asked for); the jobs waiting behind it are counted."""
        named = [f.activity for f in self._following.values() if f.activity]
        if not named:
            return ""
        more = f" ({len(named) - 1} more waiting)" if len(named) > 1 else ""
        return named[0] + more

    @property
    def busy(self) -> bool:
        """True while an export or a validation runs."""
        return self.export_job is not None or self.validate_job is not None

    def cancel(self) -> None:
        """Cancel the running export or validation (a Compare-tab job goes on)."""
        if self.busy:
            self.runner.cancel([j for j in (self.export_job, self.validate_job) if j is not None])

    def _sent(self, validates: bool, onnx: Path, file: FileStamp | None) -> _Sent:
        edits = self.edits
        return _Sent(time.perf_counter(), edits.fingerprint, edits.export_fingerprint,
                     edits.run_fingerprint, edits.model_key(), validates, onnx, file,
                     edits.recipe_label())

    # ----------------------------------------------------------------- what Validate checks

    def validate_state(self) -> tuple[Path | None, str]:
        """The file Validate checks now, and why Validate is disabled ("" when it is not)."""
        target, missing = self.results.validation_target()
        if self.busy:
            return target, "a job is running."
        # the output path does not matter for validating an existing file
        problems = {k: v for k, v in self.edits.problems.items()
                    if not k.startswith("export.output")}
        if problems:
            field, sentence = next(iter(problems.items()))
            return target, f"{field}: {sentence}"
        return target, missing

    # ----------------------------------------------------------------- export

    def start_export(self) -> int | None:
        """Send the recipe to the worker to export (and validate, if it says so); the job id,
        or None when Export is disabled (a problem, or a job running)."""
        from onnx_studio.app.outcomes import JobStart
        from onnx_studio.engine.protocol import ExportRequest

        self.aboutToRun.emit()
        self.edits.recheck()
        if self.busy or self.edits.problems:
            return None
        recipe = self.edits.recipe
        ready = self.runner.ready_info is not None
        self.results.export_started()
        self.logLine.emit(f"=== Export started {time.strftime('%H:%M:%S')}: "
                          f"{recipe.model.source} -> {recipe.output_path}")
        sent = self._sent(recipe.validate.enabled, recipe.output_path, None)
        request = ExportRequest(recipe=to_toml(recipe), base_dir=str(recipe.base_dir))
        self.export_job = self.send(
            request, functools.partial(self._export_done, sent),
            activity=f"Exporting {recipe.output_path.name}…",
            progress=self.exportProgress.emit, warnings=True)
        self.running = JobStart(self.export_job, recipe.output_path, ready,
                                recipe.validate.enabled, self.runner.ahead_of(self.export_job))
        self.exportStarted.emit(self.running)
        self.edits.recheck()
        return self.export_job

    def _export_done(self, sent: _Sent, final: Result | ErrorEvent) -> None:
        from onnx_studio.app.outcomes import ExportOutcome, FileStamp
        from onnx_studio.engine.protocol import ErrorEvent, ExportResult

        job, self.export_job, self.running = self.export_job or 0, None, None
        if not isinstance(final, ExportResult | ErrorEvent):  # a result of another job
            final = ErrorEvent(id=job, error=_wrong_result(final))
        outcome = ExportOutcome(job, final, sent.stamp(None), time.perf_counter() - sent.started,
                                sent.validates)
        output = outcome.output
        if outcome.written and output is not None:  # stamp the file it wrote
            outcome = ExportOutcome(job, final, sent.stamp(FileStamp.of(output)),
                                    outcome.seconds, sent.validates)
        self.results.set_export(outcome, sent.model)
        report, error = outcome.report, outcome.error
        if report is not None and report.ok:
            self.logLine.emit(f"=== Export finished in {outcome.seconds:.1f} s: {report.output}")
        else:
            self.logLine.emit(f"=== {error.kind if error else 'export'}: "
                              f"{error.message if error else 'Export failed.'}")
        self.edits.recheck()
        self.exportFinished.emit(outcome)
        written = outcome.written_before_cancel
        if written is not None:
            # Cancel came after the new file was renamed into place: it is there, so it is the
            # session's file (Summary, Graph, Validate), never a "nothing changed"
            self.results.open_onnx(written)
            self.edits.recheck()

    # ----------------------------------------------------------------- validation

    def start_validation(self) -> int | None:
        """Validate the target file with the recipe's [validate] settings in the worker; the
        job id, or None when Validate is disabled (`refused` says why)."""
        from onnx_studio.app.outcomes import FileStamp, JobStart
        from onnx_studio.engine.protocol import ValidateRequest

        self.aboutToRun.emit()
        self.results.follow_disk()  # a change no watcher heard: the file as it is now
        self.edits.recheck()
        target, reason = self.validate_state()
        if reason or target is None:
            self.refused.emit(f"Validate is disabled: {reason}")
            return None
        recipe = self.edits.recipe
        ready = self.runner.ready_info is not None
        self.logLine.emit(f"=== Validation started {time.strftime('%H:%M:%S')}: {target} "
                          f"against {recipe.model.source}")
        sent = self._sent(True, target, FileStamp.of(target))
        request = ValidateRequest(recipe=to_toml(recipe), base_dir=str(recipe.base_dir),
                                  onnx=str(target))
        self.validate_job = self.send(
            request, functools.partial(self._validation_done, sent),
            activity=f"Validating {target.name}…", progress=self.validationProgress.emit,
            warnings=True)
        self.running = JobStart(self.validate_job, target, ready, True,
                                self.runner.ahead_of(self.validate_job))
        self.validationStarted.emit(self.running)
        self.edits.recheck()
        return self.validate_job

    def _validation_done(self, sent: _Sent, final: Result | ErrorEvent) -> None:
        from onnx_studio.app.outcomes import ValidationOutcome
        from onnx_studio.engine.protocol import ErrorEvent, ValidateResult

        job, self.validate_job, self.running = self.validate_job or 0, None, None
        seconds = time.perf_counter() - sent.started
        stamp = sent.stamp(sent.file)
        if isinstance(final, ValidateResult):
            validation = final.validation
            outcome = ValidationOutcome(job, Path(final.onnx), validation, None, "",
                                        final.job_dir, stamp, seconds, from_export=False)
            self.logLine.emit(f"=== Validation {'passed' if validation.ok else 'failed'} in "
                              f"{seconds:.1f} s"
                              + ("" if validation.ok else f": {validation.message or ''}"))
        else:
            error = final.error if isinstance(final, ErrorEvent) else _wrong_result(final)
            details = final.details if isinstance(final, ErrorEvent) else ""
            outcome = ValidationOutcome(job, sent.onnx, None, error, details, None, stamp,
                                        seconds, from_export=False)
            self.logLine.emit(f"=== {error.kind}: {error.message}")
        self.results.set_validation(outcome)
        self.edits.recheck()
        self.validationFinished.emit(outcome)


def _wrong_result(result: Result) -> Error:
    """The error of a job answered with another job's result (a protocol mix-up)."""
    from onnx_studio.engine.protocol import Error

    return Error(kind="worker_protocol",
                 message=f"The worker answered with a {type(result).__name__}.")
