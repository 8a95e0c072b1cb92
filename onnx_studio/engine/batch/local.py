"""The executors' common shape, and the local one: N items at a time on this machine, each in
a worker process of its own (a thread per running item waits on its worker)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Protocol

from onnx_studio.engine.batch.item_run import run_item
from onnx_studio.engine.batch.items import ItemJob
from onnx_studio.engine.batch.progress import BatchProgress
from onnx_studio.engine.protocol import BatchRecord

Finished = Callable[[ItemJob, BatchRecord], None]
_POLL_S = 0.2


class Executor(Protocol):
    """Runs a batch's items; `finished` is called on the caller's thread as each one ends."""

    name: str

    def open(self) -> None:
        """Get ready (start or join a cluster); may raise StudioError (exit status 2)."""

    def close(self) -> None:
        """Let go of what `open` took (a local Ray instance is stopped)."""

    def run(self, jobs: list[ItemJob], finished: Finished, progress: BatchProgress,
            stop: threading.Event, timeout: float | None) -> None:
        """Run every job, or until `stop` is set: then every running item's worker (and its
        children) is ended and the items not yet started are not started."""


def default_workers() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


class LocalExecutor:
    """`workers` items at a time, each a worker process of this machine."""

    name = "local"

    def __init__(self, workers: int | None = None, verbose: bool = False) -> None:
        self.workers = workers or default_workers()
        self.verbose = verbose

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def run(self, jobs: list[ItemJob], finished: Finished, progress: BatchProgress,
            stop: threading.Event, timeout: float | None) -> None:
        def one(job: ItemJob) -> BatchRecord | None:
            if stop.is_set():
                return None
            progress.started(job)
            return run_item(job, self.name, lambda event: progress.event(job, event),
                            timeout=timeout, stop=stop,
                            stderr_to=progress.stream if self.verbose else None)

        with ThreadPoolExecutor(max_workers=self.workers,
                                thread_name_prefix="batch-item") as pool:
            futures: dict[Future[BatchRecord | None], ItemJob] = {
                pool.submit(one, job): job for job in jobs}
            order = {future: i for i, future in enumerate(futures)}
            pending = set(futures)
            while pending:
                # a timeout, so that this (the main) thread runs the signal handlers
                done, pending = wait(pending, timeout=_POLL_S, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: order[f]):
                    if future.cancelled():
                        continue
                    record = future.result()
                    if record is not None:
                        finished(futures[future], record)
                if stop.is_set():
                    for future in pending:
                        future.cancel()  # not started yet: never starts
