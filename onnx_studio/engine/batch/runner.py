"""A batch, run: the items on an executor, each record appended to results.jsonl as it comes,
--resume's skipping, Ctrl+C, and the summary and report.html at the end."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TextIO

from onnx_studio.engine.batch import records
from onnx_studio.engine.batch.items import ItemJob
from onnx_studio.engine.batch.local import Executor, LocalExecutor, default_workers
from onnx_studio.engine.batch.progress import BatchProgress
from onnx_studio.engine.batch.report_html import write_report
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.protocol import BatchRecord, BatchResult, BatchSummary

EXECUTORS = ("local", "ray")
_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


@dataclass
class BatchOptions:
    """How to run a batch (the command's flags)."""

    workers: int | None = None  # items at a time; None: the cores (local), the cluster (ray)
    executor: str = "local"
    ray_address: str | None = None
    timeout: float | None = None  # seconds per item, its worker's start included
    resume: bool = False
    verbose: bool = False
    retry_failed: bool = False  # with resume: run the recorded failures again too
    wait: bool = False  # another batch holds the report folder: wait for it, not refuse

    def check(self) -> None:
        """A StudioError (exit status 2) for options that cannot work together."""
        problem = ""
        if self.executor not in EXECUTORS:
            problem = f"--executor {self.executor!r}: use local or ray."
        elif self.workers is not None and self.workers < 1:
            problem = f"--workers {self.workers}: run at least 1 item at a time."
        elif self.timeout is not None and not self.timeout > 0:
            problem = f"--timeout {self.timeout}: give a number of seconds above 0."
        elif self.ray_address and self.executor != "ray":
            problem = "--ray-address goes with --executor ray."
        elif self.retry_failed and not self.resume:
            problem = "--retry-failed goes with --resume (without it every item runs)."
        if problem:
            raise StudioError("recipe", problem, exit_code=2)


def make_executor(options: BatchOptions) -> Executor:
    if options.executor == "ray":
        from onnx_studio.engine.batch.ray_executor import RayExecutor

        return RayExecutor(options.ray_address, options.workers, options.verbose)
    return LocalExecutor(options.workers or default_workers(), options.verbose)


def run_batch(jobs: list[ItemJob], report_dir: Path, options: BatchOptions,
              stream: TextIO | None = None, stop: threading.Event | None = None
              ) -> BatchSummary:
    """Run the items, appending each record to REPORT_DIR/results.jsonl as it finishes, and
    write REPORT_DIR/report.html; the summary.

    With `options.resume`, an item whose last record in results.jsonl has its fingerprint and
    whose written files are on disk as recorded is not run again (its row comes from the
    record), unless it failed and the new options may change that (`retry_failed`, or a
    timeout run again with a longer or no --timeout). SIGINT or SIGTERM (on the main thread), or
    `stop` set from elsewhere, ends every running item's worker and its children; the items
    that finished are recorded, and the summary's error is kind `cancelled` (exit status 130
    or 143). A StudioError for options or a report folder that cannot work (exit status 2).
    """
    started = time.monotonic()
    options.check()
    stream = stream or sys.stderr
    stop = stop or threading.Event()
    with records.RecordLog(report_dir, wait=options.wait) as log:
        return _run_logged(jobs, log, options, stream, stop, started)


def _run_logged(jobs: list[ItemJob], log: records.RecordLog, options: BatchOptions,
                stream: TextIO, stop: threading.Event, started: float) -> BatchSummary:
    report_dir, results = log.folder, log.path
    recorded = log.read() if options.resume else {}
    done: dict[str, BatchRecord] = {j.key: recorded[j.key] for j in jobs
                                    if j.key in recorded
                                    and _still_holds(recorded[j.key], j, options)}
    resumed = set(done)
    todo = [j for j in jobs if j.key not in resumed]
    progress = BatchProgress(stream, len(todo), options.verbose)
    executor = make_executor(options)

    def finished(job: ItemJob, record: BatchRecord) -> None:
        record.timeout = options.timeout
        log.append(record)
        done[job.key] = record
        progress.finished(job, record)

    with _interrupts(stop) as signals:
        if todo:  # (an executor that cannot start leaves the previous results as they were)
            executor.open()
        try:
            if not options.resume:
                log.start_fresh()
            at_once = options.workers or ("the cluster's CPUs" if options.executor == "ray"
                                          else default_workers())
            progress.say(f"{len(todo)} items to run, {at_once} at a time ({executor.name})"
                         + (f"; {len(resumed)} recorded by an earlier run (--resume)"
                            if resumed else ""))
            signals.again()  # starting Ray may have put its own handlers in
            if todo and not stop.is_set():
                executor.run(todo, finished, progress, stop, options.timeout)
        finally:
            executor.close()
    summary = _summary(jobs, done, resumed, time.monotonic() - started, report_dir)
    if stop.is_set():
        signum = signals.received or signal.SIGINT
        summary.fail(StudioError(
            "cancelled", f"Stopped by {signal.Signals(signum).name}: {len(done)} of "
            f"{len(jobs)} items had finished; they are in {results}.",
            "Run the same command with --resume to run the others.",
            exit_code=_EXIT.get(signal.Signals(signum), 1)))
    write_report(report_dir, summary)
    progress.say(f"{summary.passed} passed, {summary.failed} failed of {summary.total} in "
                 f"{summary.seconds:.1f} s; report: {report_dir / 'report.html'}")
    return summary


def _still_holds(record: BatchRecord, job: ItemJob, options: BatchOptions) -> bool:
    """Does --resume keep this record of `job`? Its inputs (the fingerprint) and its outputs
    (the files it wrote, as stamped) are as they were, and running it again cannot change a
    failure (no --retry-failed; a timeout only under the same or a shorter --timeout)."""
    if record.fingerprint != job.fingerprint or not records.outputs_unchanged(record):
        return False
    error = record.report.error
    if error is None:
        return True
    if options.retry_failed:
        return False
    if error.kind == "timeout":
        return options.timeout is not None and record.timeout is not None \
            and options.timeout <= record.timeout
    return True


def _summary(jobs: list[ItemJob], done: dict[str, BatchRecord], resumed: set[str],
             seconds: float, report_dir: Path) -> BatchSummary:
    """The counts and the rows of the items that have a record, in the items' order."""
    ordered = [done[j.key] for j in jobs if j.key in done]
    passed = sum(1 for r in ordered if r.ok)
    return BatchSummary(
        ok=passed == len(jobs), total=len(jobs), passed=passed,
        failed=len(ordered) - passed, seconds=round(seconds, 3),
        results=[BatchResult.of(r, resumed=r.recipe in resumed) for r in ordered],
        skipped=len(resumed), report_dir=str(report_dir.resolve()), records=ordered)


class _Signals:
    """SIGINT and SIGTERM set the batch's stop event (on the main thread; elsewhere the
    caller's handlers stay); `received` is the signal that did."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.received: int | None = None
        self.previous: dict[int, object] = {}

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum
        self.stop.set()

    def again(self) -> None:
        """(Re)install the handlers."""
        if threading.current_thread() is not threading.main_thread():
            return
        for s in _EXIT:
            previous = signal.signal(s, self.handle)
            self.previous.setdefault(s, previous)

    def restore(self) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)  # type: ignore[arg-type]


@contextlib.contextmanager
def _interrupts(stop: threading.Event) -> Iterator[_Signals]:
    signals = _Signals(stop)
    signals.again()
    try:
        yield signals
    finally:
        signals.restore()
