"""ExportSession: the state of one window, the one object its views subscribe to (napari's
ViewerModel): the recipe being edited, every result with its provenance, the jobs that make
them, the model's description, the worker's capabilities and the analysis.

It is the recipe's editor (onnx_studio.app.session.recipe_edits, its base) and owns a part per
concern: `results` (onnx_studio.app.session.results: the export, the validation, the opened file,
the warnings, and whether each is current), `jobs` (onnx_studio.app.session.jobs: one handler
follows every job), `describer` (onnx_studio.app.session.describing), Hugging Face folders
(onnx_studio.app.session.hugging_face) and `analysis` (onnx_studio.app.session.analysis: compare,
profile, variants) and `explainer` (onnx_studio.app.session.explaining: the Why? of a failed
validation). The parts' signals are the session's: views connect to the session and write back only
through its methods. The session owns the JobRunner that runs the jobs, unless it was handed one to
share, and never imports a view (an import contract checks it). Its own JobRunner (and the worker it
starts) is made on first use: the window's first paint loads no job machinery and starts no process.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from onnx_studio.app.session import hugging_face
from onnx_studio.app.session.belonging import Standing
from onnx_studio.app.session.describing import Describer
from onnx_studio.app.session.explaining import Explainer
from onnx_studio.app.session.jobs import Jobs
from onnx_studio.app.session.recipe_edits import RecipeEdits
from onnx_studio.app.session.results import Results, Stale

if TYPE_CHECKING:  # the job machinery and the protocol load after the window's first paint
    from onnx_studio.app.jobs import JobRunner
    from onnx_studio.app.outcomes import ExportOutcome, OpenedFile, ValidationOutcome
    from onnx_studio.app.session.analysis import AnalysisModel
    from onnx_studio.engine.protocol import (
        Candidate,
        DevicesResult,
        ErrorEvent,
        Ready,
        Result,
        SourceDescription,
        WarningItem,
    )

__all__ = ["ExportSession"]


class ExportSession(RecipeEdits):
    """The recipe, the results and the jobs of one window; views subscribe to its signals."""

    descriptionChanged = Signal(object)  # SourceDescription of the model file, or None
    capabilitiesChanged = Signal(object)  # DevicesResult: devices, opsets, onnxruntime's max
    resultsChanged = Signal()  # the export, the validation (re-judged too) or the opened file
    warningsChanged = Signal()  # `warnings` was cleared, replaced or grew
    fileOpened = Signal(object)  # OpenedFile: an .onnx the user opened is the session's file
    aboutToRun = Signal()  # before a job reads the recipe: views commit text being edited
    exportStarted = Signal(object)  # JobStart
    exportProgress = Signal(float, str)  # (fraction of the job, stage)
    exportFinished = Signal(object)  # ExportOutcome
    validationStarted = Signal(object)  # JobStart
    validationProgress = Signal(float, str)
    validationFinished = Signal(object)  # ValidationOutcome
    activityChanged = Signal()  # what the worker runs changed (`activity`)
    refused = Signal(str)  # an action cannot run now: why
    workerReady = Signal(object)  # Ready: a worker has imported torch (again after a restart)
    workerLost = Signal(str)  # the sentence that says how the worker died
    logLine = Signal(str)  # a line for the Log: the worker's stderr, a job's log, our own

    def __init__(self, parent: QObject | None = None, runner: JobRunner | None = None,
                 use_worker: bool = True) -> None:
        """`runner`: a JobRunner to share (never shut down here); None: the session's own.
        `use_worker` False: no worker is started, describe runs in this process."""
        super().__init__(parent)
        self.owns_runner = runner is None
        self._runner = runner  # the session's own is made on first use (`runner`)
        self._describe_held = False  # a describe asked for before the runner was made
        self.use_worker = use_worker
        self.worker_torch: str | None = None  # the torch version of the worker, once ready
        self.capabilities: DevicesResult | None = None
        self.validate_target: Path | None = None  # the file Validate checks now
        self.validate_reason = ""  # why Validate is disabled ("" when it is not)
        self.results = Results(self)
        self.jobs = Jobs(lambda: self.runner, self, self.results)
        self.describer = Describer(self, self.jobs, use_worker)
        self._analysis: AnalysisModel | None = None  # made on first use (`analysis`)
        self.explainer = Explainer(self, self.jobs, self.results)
        # the Why? of a validation goes with it: an export or another file starts afresh
        self.jobs.exportStarted.connect(self.explainer.drop)
        self.results.fileOpened.connect(self.explainer.drop)
        self.results.changed.connect(self.explainer.follow)
        # watched too: a profile's, a comparison's (none before the analysis is first used)
        self.results.more_files = lambda: self._analysis.files() if self._analysis else []
        # the file read again after it changed on disk: Validate checks it as it is now
        self.results.fileOpened.connect(lambda _opened: self.recheck())
        chained = (
            (self.results.changed, self.resultsChanged),
            (self.results.warningsChanged, self.warningsChanged),
            (self.results.fileOpened, self.fileOpened),
            (self.results.logLine, self.logLine),
            (self.describer.descriptionChanged, self.descriptionChanged),
            (self.jobs.aboutToRun, self.aboutToRun),
            (self.jobs.exportStarted, self.exportStarted),
            (self.jobs.exportProgress, self.exportProgress),
            (self.jobs.exportFinished, self.exportFinished),
            (self.jobs.validationStarted, self.validationStarted),
            (self.jobs.validationProgress, self.validationProgress),
            (self.jobs.validationFinished, self.validationFinished),
            (self.jobs.activityChanged, self.activityChanged),
            (self.jobs.refused, self.refused),
            (self.jobs.logLine, self.logLine),
        )
        for part, own in chained:
            part.connect(own)
        self._listening = False
        self._listen(True)

    @property
    def analysis(self) -> AnalysisModel:
        """The compare, profile and variant jobs and what they found; made on first use
        (the Compare tab, a job): the window's first paint does without its module."""
        if self._analysis is None:
            from onnx_studio.app.session.analysis import AnalysisModel

            self._analysis = AnalysisModel(self, self.jobs)
            self._analysis.finished.connect(lambda _job, _found: self.results.refollow())
        return self._analysis

    # ================================================================= the worker

    @property
    def runner(self) -> JobRunner:
        """The JobRunner that runs the session's jobs: the one handed in, else the session's
        own, made on first use (`start_worker`, a job, a look at it); a describe asked for
        before then is sent now."""
        if self._runner is None:
            from onnx_studio.app.jobs import (
                JobRunner,  # the job machinery loads after the first paint
            )

            self._runner = JobRunner(self)
            if self._listening:
                self._connect_runner(True)
            if self._describe_held:
                self._describe_held = False
                self.describer.describe()
        return self._runner

    def _listen(self, on: bool) -> None:
        if on == self._listening:
            return
        if self._runner is not None:  # else connected when it is made
            self._connect_runner(on)
        self._listening = on

    def _connect_runner(self, on: bool) -> None:
        runner = self.runner
        pairs = ((runner.workerReady, self._on_ready),
                 (runner.workerLost, self._on_lost), (runner.log, self.logLine))
        for signal, slot in pairs:
            if on:
                signal.connect(slot)
            else:
                signal.disconnect(slot)

    def start_worker(self) -> None:
        """Start the worker (torch imports in the background); one that is ready already
        is announced again (`workerReady`), as a new one would be. Nothing after `shutdown`."""
        if not self._listening:
            return
        ready = self.runner.ready_info
        self.runner.start()
        if ready is not None:
            self._on_ready(ready)

    def shutdown(self) -> None:
        """Stop hearing the worker; end it too when the session owns it (the window closes)."""
        self._listen(False)
        self._describe_held = False
        if self.owns_runner and self._runner is not None:
            self._runner.shutdown()

    def _on_ready(self, ready: Ready) -> None:
        from onnx_studio.engine.protocol import DevicesRequest
        from onnx_studio.engine.torch_private import untested_torch_sentence

        self.worker_torch = ready.torch
        self.workerReady.emit(ready)
        sentence = untested_torch_sentence(ready.torch) if ready.torch_tested is False else None
        if sentence:  # torch_tested is left out by workers that predate the field
            self.notice.emit(sentence)
        self.jobs.send(DevicesRequest(), self._on_devices)

    def _on_devices(self, final: Result | ErrorEvent) -> None:
        from onnx_studio.engine.protocol import DevicesResult, ErrorEvent

        if isinstance(final, DevicesResult):
            self.set_capabilities(final)
        elif isinstance(final, ErrorEvent):
            self.logLine.emit(f"!! {final.error.message}")

    def set_capabilities(self, result: DevicesResult) -> None:
        """What the worker can do (its `devices` answer): devices, each exporter's opsets,
        the newest opset onnxruntime runs; the options follow it."""
        self.capabilities = result
        self.capabilitiesChanged.emit(result)
        self.recheck()

    def _on_lost(self, sentence: str) -> None:
        self.logLine.emit(f"!! {sentence}")
        self.workerLost.emit(sentence)

    # ================================================================= the recipe's checks

    def recheck(self) -> None:
        """Check the recipe again (its problems), judge the last validation again if only
        the tolerance changed, and what Validate would check; `readinessChanged`."""
        self.check_problems()
        self.results.follow_tolerance()
        self.explainer.follow()
        self.validate_target, self.validate_reason = self.jobs.validate_state()
        self.readinessChanged.emit()

    def validate_tip(self) -> str:
        """What Validate does now, or why it is disabled (its buttons' tooltip)."""
        if self.validate_reason:
            return f"Validate is disabled: {self.validate_reason}"
        name = self.validate_target.name if self.validate_target else "the export"
        return f"Validate {name} with ONNX Runtime (Ctrl+Shift+V)"

    @property
    def not_applicable(self) -> dict[str, str]:
        """The form's fields that do not apply to the recipe's source, and why (a Hugging Face
        folder's checkpoint, pickle trust, scripting, inputs and outputs)."""
        described = self.description
        hf = described is not None and described.kind == "hf"  # else: another model's, or none
        listed = (None if described.error else True) if hf and described else False
        return hugging_face.not_applicable(self.recipe, listed)

    # ================================================================= the model's description

    @property
    def description(self) -> SourceDescription | None:
        return self.describer.description

    def describe(self) -> None:
        """Describe the model source (onnx_studio.app.session.describing). Before the session's own
        JobRunner is made (`runner`: the window makes it after the first paint, in
        `start_worker`) the describe waits for it: loading a recipe starts no worker process."""
        if self.use_worker and self._runner is None:
            self._describe_held = True
            return
        self.describer.describe()

    def _recipe_replaced(self) -> None:
        self.describer.set_description(None)

    def choose_candidate(self, candidate: Candidate) -> None:
        """Use a class or factory of the model file (onnx_studio.app.session.describing)."""
        self.describer.choose_candidate(candidate)

    def open_hf_folder(self, path: Path) -> str | None:
        """Export a save_pretrained folder as `hf:PATH` (onnx_studio.app.session.hugging_face); why
        not, or None."""
        return hugging_face.open_folder(self, path, self.results.forget_opened)

    def set_task(self, task: str) -> None:
        """Export the Hugging Face source for `task`."""
        hugging_face.set_task(self, task)

    # ================================================================= jobs

    def start_export(self) -> int | None:
        """Export (and validate, if the recipe says so); the job id, or None
        (onnx_studio.app.session.jobs)."""
        return self.jobs.start_export()

    def start_validation(self) -> int | None:
        """Validate the target file; the job id, or None and `refused` says why."""
        return self.jobs.start_validation()

    def cancel(self) -> None:
        """Cancel the running export or validation (a Compare-tab job goes on)."""
        self.jobs.cancel()

    @property
    def busy(self) -> bool:
        """True while an export or a validation runs."""
        return self.jobs.busy

    @property
    def export_job(self) -> int | None:
        return self.jobs.export_job

    @property
    def validate_job(self) -> int | None:
        return self.jobs.validate_job

    def activity(self) -> str:
        """What the worker runs now, as the status bar says it ("": nothing)."""
        return self.jobs.activity()

    # ================================================================= results

    @property
    def export_result(self) -> ExportOutcome | None:
        return self.results.export

    @property
    def validation_result(self) -> ValidationOutcome | None:
        """The last validation, judged at the form's tolerance (re-judged after a change)."""
        return self.results.validation

    @property
    def opened(self) -> OpenedFile | None:
        """An .onnx the user opened since the last export."""
        return self.results.opened

    @property
    def warnings(self) -> list[WarningItem]:
        return self.results.warnings

    def add_warnings(self, items: list[WarningItem]) -> None:
        """Add the warnings not listed yet (events and reports repeat them)."""
        self.results.add_warnings(items)

    def is_current(self, result: ExportOutcome | ValidationOutcome) -> bool:
        """True while `result` still describes what the session holds
        (onnx_studio.app.session.results)."""
        return self.results.is_current(result)

    def stale(self, shown: ExportOutcome | ValidationOutcome | OpenedFile) -> Stale | None:
        """Why `shown` is out of date and the job that brings it up to date; None: current."""
        return self.results.stale(shown)

    def standing(self) -> Standing:
        """The session's file, the validation of it as it is now and why it is out of date:
        what every view says of it (onnx_studio.app.session.belonging)."""
        return self.results.standing()

    def check_files(self) -> bool:
        """Look at the files shown on disk now (the window does when it becomes active; the
        watcher when it hears a change); True when one changed."""
        return self.results.follow_disk()

    def open_onnx(self, path: Path) -> OpenedFile:
        """Make an existing .onnx the session's file: Summary shows what it holds and Validate
        checks it with the recipe's inputs, until the next export writes another."""
        opened = self.results.open_onnx(path)
        self.recheck()
        return opened
