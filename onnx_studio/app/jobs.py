"""JobRunner: the jobs the GUI runs in worker processes, on a warm worker with a spare.

Job-level logic on top of the transport (`onnx_studio.app.worker_client.WorkerProcess`): a request
(an onnx_studio.engine.protocol class) gets an id and a callback that hears its typed events until
its result or error. The worker runs its jobs in the order they were sent. Cancelling the job it
runs ends the worker (the jobs waiting behind it go to the spare, never started twice); a worker
that dies fails its jobs with a sentence that names its exit code or signal. Either way the spare
takes over: it is started once the current worker is ready and says ready itself once fully warmed
up, so a replacement never waits for torch to import. A spare is sent no request until it takes
over, and a job a worker had started is never moved to another worker.

One exit is no failure: a worker that exits with status 0 once it has answered every job it started
retired on purpose (onnx_studio.engine.worker ends after a job that ran extension files, so the next
job gets a clean process). The spare takes over without a word to the user, and the requests that
worker never started (sent while it was ending) go to the spare, once.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import itertools
import weakref
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Signal

from onnx_studio.app.worker_client import TERMINATE_GRACE_MS, WorkerProcess, exit_description
from onnx_studio.engine.file_set import written_text
from onnx_studio.engine.protocol import Committing, Error, ErrorEvent, Event, Ready, Request, Result
from onnx_studio.engine.worker_process import remove_abandoned_temps

__all__ = ["LONG_JOBS", "JobCallback", "JobRunner", "exit_description"]

JobCallback = Callable[[Event], None]
# Jobs that run for seconds or more (the user waits on them, Cancel ends them), by their names
LONG_JOBS = {"export": "export", "validate": "validation"}
_RUNNERS: weakref.WeakSet[JobRunner] = weakref.WeakSet()
CANCEL_WAIT_MS = 3000  # Cancel waits this long for the worker's last words (a rename under way)
CANCELLED = "The {job} was cancelled; the form is unchanged."
# The jobs another one can wait behind, as a sentence names them ("Waiting for the export")
WAITED_FOR = {"export": "the export", "validate": "the validation",
              "compare": "the comparison in the Compare tab",
              "profile": "the profile in the Compare tab",
              "variant": "the variant check in the Compare tab",
              "explain": "the Why? of the validation"}


@dataclass
class _Job:
    request: Request  # with its id
    callback: JobCallback
    heard: bool = False  # the worker has said something about it: it has started
    resent: bool = False  # sent again after its worker retired without starting it
    committed: str | None = None  # the file it renamed into place (its `committing` event)
    committed_files: list[str] = field(default_factory=list)  # ... a folder export's files

    @property
    def kind(self) -> str:
        """The request's `job`: export, validate, compare, ..."""
        return self.request.TAG


@atexit.register
def _shutdown_all() -> None:
    # A QProcess destroyed while its process runs warns and waits: end the workers first.
    for runner in list(_RUNNERS):
        with contextlib.suppress(RuntimeError):  # its Qt side is already gone
            runner.shutdown()


class JobRunner(QObject):
    """Submits jobs to a warm worker, routes its events to callbacks, replaces it when it ends.

    Signals: `workerReady(Ready)` when the current worker has imported torch (again when a
    spare takes over); `workerLost(str)` with the sentence shown when the current worker died;
    `log(str)` for the current worker's stderr lines.
    """

    workerReady = Signal(object)
    workerLost = Signal(str)
    log = Signal(str)

    MAX_EARLY_DEATHS = 3  # a worker that dies before it is ready this often is not restarted
    SPARE_LOG_LINES = 200  # a spare's stderr kept until it takes over

    def __init__(self, parent: QObject | None = None, command: list[str] | None = None) -> None:
        super().__init__(parent)
        _RUNNERS.add(self)
        self._command = command  # None: the real worker (tests may pass another program)
        self._ids = itertools.count(1)
        self._jobs: dict[int, _Job] = {}
        self._worker: WorkerProcess | None = None  # runs the jobs
        self._spare: WorkerProcess | None = None  # warm and idle until it takes over
        self._spare_log: list[str] = []
        self._ending: set[WorkerProcess] = set()  # terminated, not yet exited
        self._cancelling: WorkerProcess | None = None  # being ended by `cancel`
        self._skipped: set[int] = set()  # cancelled while waiting: answered, never to run
        self._early_deaths = 0
        self._stopping = False

    # ----------------------------------------------------------------- lifecycle

    @property
    def ready_info(self) -> Ready | None:
        """The current worker's Ready event; None until it has imported torch."""
        return self._worker.ready_info if self._worker else None

    @property
    def worker_pid(self) -> int | None:
        return self._worker.pid if self._worker else None

    @property
    def spare_pid(self) -> int | None:
        return self._spare.pid if self._spare else None

    @property
    def spare_ready(self) -> bool:
        """True when a spare worker has imported torch and waits to take over."""
        return self._spare is not None and self._spare.ready_info is not None

    def start(self) -> None:
        """Make sure a worker is running: the spare takes over, or a new one starts."""
        if self._worker is not None or self._stopping:
            return
        spare, self._spare = self._spare, None
        if spare is None:
            self._worker = self._launch(spare=False)
            return
        self._worker = spare
        lines, self._spare_log = self._spare_log, []
        if lines:
            self.log.emit("\n".join(lines))
        if spare.ready_info is not None:
            self._on_ready(spare)

    def shutdown(self, timeout_ms: int = 2000) -> None:
        """End every worker and wait for them (window close); a later job starts a fresh one."""
        self._stopping = True
        workers = [w for w in (self._worker, self._spare, *self._ending) if w is not None]
        self._worker = self._spare = None
        self._spare_log.clear()
        for worker in workers:
            worker.terminate()
        for worker in workers:  # the kill timers cannot fire while this waits: kill here
            if not worker.wait(TERMINATE_GRACE_MS):
                worker.kill()
                worker.wait(timeout_ms)
        self._ending.clear()

    def _launch(self, spare: bool) -> WorkerProcess:
        worker = WorkerProcess(self, self._command, warm_first=spare)
        worker.ready.connect(self._on_ready)
        worker.received.connect(self._on_event)
        worker.stderrText.connect(self._on_stderr)
        worker.exited.connect(self._on_exited)
        worker.start()
        return worker

    def _start_spare(self) -> None:
        if (self._spare is None and not self._stopping and self._worker is not None
                and self._worker.ready_info is not None
                and self._early_deaths < self.MAX_EARLY_DEATHS):
            self._spare = self._launch(spare=True)

    def _end(self, worker: WorkerProcess) -> None:
        self._ending.add(worker)
        worker.terminate()

    # ----------------------------------------------------------------- jobs

    def submit(self, request: Request, callback: JobCallback) -> int:
        """Send a job; `callback` gets each of its events, the last one a result or an
        ErrorEvent. The request is sent with the job's id (the id it carries is replaced)."""
        if self._worker is None:
            self._early_deaths = 0
            self._stopping = False
            self.start()
        assert self._worker is not None
        job_id = next(self._ids)
        request = copy.copy(request)  # the caller's stays as it was
        request.id = job_id
        self._jobs[job_id] = _Job(request, callback)
        self._worker.send(request)
        return job_id

    def busy(self) -> bool:
        return any(job.kind in LONG_JOBS for job in self._jobs.values())

    def ahead_of(self, job_id: int) -> tuple[str, ...]:
        """The long jobs the worker runs before `job_id`, named for a sentence (it runs its
        jobs in the order they were sent)."""
        return tuple(WAITED_FOR[job.kind] for i, job in self._jobs.items()
                     if i < job_id and job.kind in WAITED_FOR)

    def cancel(self, job_ids: Collection[int] | None = None) -> None:
        """Cancel the jobs `job_ids` (every pending job when None); any other job goes on.

        The worker runs its jobs in the order they were sent. Cancelling the one it runs ends
        the worker: the spare takes over and is sent the jobs that were waiting behind it.
        Honest about the file: the worker is waited for (it ends in milliseconds, or once a
        rename under way is done) and what it said meanwhile is read, so a job that had
        already renamed its file into place is reported as finished, never as cancelled.
        A job still waiting is answered `cancelled` at once, and its worker is replaced when
        it comes to it (`_on_event`), so the job before it finishes undisturbed.
        """
        cancelled = set(self._jobs) if job_ids is None else set(job_ids) & set(self._jobs)
        if not cancelled:
            return
        if next(iter(self._jobs)) not in cancelled:  # waiting behind another job
            self._skipped |= cancelled
            self._fail(cancelled, "cancelled", CANCELLED, "")
            return
        waiting = [i for i in self._jobs if i not in cancelled]  # behind the one it runs
        worker, self._worker = self._worker, None
        if worker is not None:
            self._cancelling = worker
            self._end(worker)
            worker.wait(CANCEL_WAIT_MS)
            self._cancelling = None
            remove_abandoned_temps()  # the temporary files of the export it was writing
        for job_id in [i for i in cancelled if self._jobs[i].committed]:
            job = self._jobs.pop(job_id)
            job.callback(ErrorEvent(id=job_id, written=job.committed, error=Error(
                kind="cancelled", message=f"The export had already finished: "
                f"{written_text(str(job.committed), job.committed_files)} before Cancel; only "
                "what came after it (the validation) was stopped.")))
        self._fail(cancelled & set(self._jobs), "cancelled", CANCELLED, "")
        self.start()
        self._resend(waiting)  # (not a job a callback above may have sent meanwhile)

    def _resend(self, job_ids: list[int]) -> None:
        """Send the current worker these jobs, which an ended worker never started, once."""
        assert self._worker is not None
        for job_id in job_ids:
            job = self._jobs.get(job_id)
            if job is not None:
                job.resent = True
                self._worker.send(job.request)

    def _fail(self, job_ids: Collection[int], kind: str, message: str, hint: str) -> None:
        """Fail these pending jobs; `{job}` in `message` becomes the job's name."""
        for job_id in sorted(job_ids):
            job = self._jobs.pop(job_id)
            text = message.replace("{job}", LONG_JOBS.get(job.kind, "job"))
            job.callback(ErrorEvent(id=job_id, error=Error(kind=kind, message=text, hint=hint)))

    # ----------------------------------------------------------------- worker events

    def _on_ready(self, worker: WorkerProcess) -> None:
        if worker is self._spare:
            self._early_deaths = 0
        elif worker is self._worker:
            self._early_deaths = 0
            self.workerReady.emit(worker.ready_info)
            self._start_spare()

    def _on_event(self, worker: WorkerProcess, event: Event) -> None:
        job_id = getattr(event, "id", None)
        if worker is self._cancelling and isinstance(event, Committing):
            job = self._jobs.get(job_id) if isinstance(job_id, int) else None
            if job is not None:
                job.committed = event.output
                job.committed_files = list(event.files)
            return
        if worker is not self._worker:
            return  # a spare has no jobs; an ended worker's jobs were failed already
        if job_id in self._skipped:  # the worker came to a job cancelled while it waited
            self._skipped.clear()  # (the jobs sent before it are answered: FIFO)
            self._worker = None
            self._end(worker)
            self.start()
            self._resend(list(self._jobs))
            return
        entry = self._jobs.get(job_id) if isinstance(job_id, int) else None
        if entry is None:
            if isinstance(event, ErrorEvent):  # a line no job owns that did not fit: say so
                self.log.emit(f"!! {event.error.message}")
            return
        entry.heard = True
        if isinstance(event, Committing):
            entry.committed = event.output
            entry.committed_files = list(event.files)
        if isinstance(event, Result | ErrorEvent):
            del self._jobs[job_id]  # type: ignore[arg-type]
        entry.callback(event)

    def _on_stderr(self, worker: WorkerProcess, text: str) -> None:
        if worker is not self._spare:
            self.log.emit(text)  # the current worker's, or an ended one's last words
            return
        self._spare_log.extend(text.splitlines())
        del self._spare_log[:-self.SPARE_LOG_LINES]

    def _on_exited(self, worker: WorkerProcess, code: int, crashed: bool) -> None:
        self._ending.discard(worker)
        worker.deleteLater()
        how = exit_description(code, crashed)
        if worker is self._spare:
            self._spare = None
            self._spare_log.clear()
            if worker.ready_info is None:
                self._early_deaths += 1
            self.log.emit(f"The spare worker stopped ({how}).")
            self._start_spare()
            return
        if worker is not self._worker:
            return  # ended on purpose (cancel, shutdown) and already replaced
        self._worker = None
        if self._stopping:
            return
        if self._retired(worker, code, crashed):
            return
        sentence = f"The export worker stopped unexpectedly ({how})."
        self._fail(
            list(self._jobs), "worker_crashed", sentence,
            "A fresh worker has been started; try again, or lower the model size or input "
            "shapes if it ran out of memory.",
        )
        self.workerLost.emit(sentence)
        if worker.ready_info is None:
            self._early_deaths += 1
        if self._early_deaths < self.MAX_EARLY_DEATHS:
            self.start()

    def _retired(self, worker: WorkerProcess, code: int, crashed: bool) -> bool:
        """Take a worker's clean exit quietly; True when it was one.

        Status 0 from a worker that was ready and had started none of the jobs still waiting:
        it retired after answering its last job (onnx_studio.engine.worker, after extensions ran).
        The spare takes over and is sent the jobs the worker never started, once each. An exit
        during a job, or a second one before a resent job started, is a failure as any other.
        """
        jobs = list(self._jobs.items())
        if code != 0 or crashed or worker.ready_info is None or any(
                job.heard or job.resent for _, job in jobs):
            return False
        self.log.emit(f"The worker ended after its job ({exit_description(code, crashed)}); "
                      "the spare takes over.")
        self.start()
        self._resend([job_id for job_id, _ in jobs])
        return True
