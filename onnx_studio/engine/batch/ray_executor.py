"""The Ray executor: each item a Ray task that runs the item's worker process on the node it
lands on, and sends its record back.

A task reserves the recipe's `export.cpus` CPUs (1 when unset) and one GPU when its device is
CUDA (`task_options`). The files are written where the recipe says, on the task's node: on a
cluster of several machines, recipes, models and outputs must sit in a folder every node
reaches at the same path (docs/batch.md). Without an address a local Ray
instance is started and stopped with the batch; with one the batch joins that cluster; a
caller that has already called `ray.init` keeps its session. The tasks' stages come back
through a `ray.util.queue.Queue` (an actor that takes no CPU). `ray` is an optional extra:
`pip install 'onnx-export-studio[cluster]'`.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import sys
import threading
import time
from typing import Any

from onnx_studio.engine.batch.item_run import run_item
from onnx_studio.engine.batch.items import ItemJob
from onnx_studio.engine.batch.local import Finished
from onnx_studio.engine.batch.progress import BatchProgress
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.protocol import BatchRecord, Event, ExportReport, Progress, encode

_POLL_S = 0.2
_CANCEL_GRACE_S = 10.0  # a cancelled task ends its worker in well under a second
_LOCAL_OBJECT_STORE = 128 * 1024 * 1024  # records are small; Ray's default takes 30% of RAM


def import_ray() -> Any:
    """The `ray` module, or a StudioError (exit status 2) saying how to install it."""
    try:
        import ray
    except ImportError:
        raise StudioError("recipe", "--executor ray needs Ray, which is not installed.",
                          "pip install 'onnx-export-studio[cluster]' (or pip install ray), "
                          "or use --executor local.", exit_code=2) from None
    return ray


def task_options(job: ItemJob) -> dict[str, Any]:
    """The Ray task options of an item: its CPUs and GPUs, and no retry (a crash is the
    item's result, not a reason to run it again)."""
    return {"num_cpus": job.cpus, "num_gpus": job.gpus, "max_retries": 0,
            "retry_exceptions": False, "name": f"onnx-studio batch: {job.label}"}


def run_on_node(job: ItemJob, timeout: float | None, verbose: bool, stages: Any = None) -> str:
    """The task's body, on its node: the item in a worker process there; its record as a JSON
    line. Its stages go to the driver through `stages` (a ray.util.queue.Queue, or None). A
    cancel (ray.cancel) reaches run_job as KeyboardInterrupt, which ends the worker and its
    children."""
    def tell(event: Event) -> None:
        if stages is not None and isinstance(event, Progress):
            with contextlib.suppress(Exception):  # progress is never worth failing an item
                stages.put_nowait((job.key, event.fraction, event.stage))

    record = run_item(job, "ray", tell, timeout=timeout,
                      stderr_to=sys.stderr if verbose else None)
    assert record is not None  # no stop event here
    return encode(record)


class RayExecutor:
    """The items as Ray tasks, at most `workers` at once (None: as many as the cluster's
    resources take)."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None,
                 verbose: bool = False) -> None:
        self.address = address
        self.workers = workers
        self.verbose = verbose
        self._ray: Any = None
        self._joined = False  # whether close() ends the session open() began

    def open(self) -> None:
        ray = self._ray = import_ray()
        if ray.is_initialized():
            return
        try:
            if self.address:
                ray.init(address=self.address, log_to_driver=self.verbose,
                         logging_level=logging.WARNING)
            else:
                ray.init(address="local", include_dashboard=False,
                         object_store_memory=_LOCAL_OBJECT_STORE, log_to_driver=self.verbose,
                         logging_level=logging.WARNING)
        except Exception as exc:  # Ray's own errors (ConnectionError, RuntimeError, ...)
            where = f"the Ray cluster at {self.address}" if self.address else "a local Ray"
            raise StudioError("recipe", f"Cannot start or reach {where}: {exc}",
                              "Check --ray-address (`ray status` on the head node shows it), "
                              "or leave it out to start a local instance.",
                              exit_code=2) from None
        self._joined = True

    def close(self) -> None:
        if self._joined:
            self._ray.shutdown()
            self._joined = False

    def run(self, jobs: list[ItemJob], finished: Finished, progress: BatchProgress,
            stop: threading.Event, timeout: float | None) -> None:
        ray = self._ray
        remote = ray.remote(run_on_node)
        stages = self._stage_queue()
        waiting = list(jobs)
        running: dict[Any, ItemJob] = {}
        try:
            while waiting or running:
                while waiting and not stop.is_set() and (
                        self.workers is None or len(running) < self.workers):
                    job = waiting.pop(0)
                    ref = remote.options(**task_options(job)).remote(job, timeout,
                                                                     self.verbose, stages)
                    running[ref] = job
                    progress.started(job, "submitted as a Ray task")
                if stop.is_set():
                    self._cancel(list(running))
                    return
                ready, _ = ray.wait(list(running), num_returns=1, timeout=_POLL_S)
                _relay(stages, {job.key: job for job in running.values()}, progress)
                for ref in ready:
                    job = running.pop(ref)
                    finished(job, self._record(ref, job))
        finally:
            if stages is not None:
                with contextlib.suppress(Exception):
                    stages.shutdown()

    def _stage_queue(self) -> Any:
        """A queue the tasks put their stages on (an actor that takes no CPU); None when Ray
        cannot make one: the items run all the same, without their stages."""
        try:
            from ray.util.queue import Queue

            return Queue(actor_options={"num_cpus": 0})
        except Exception:
            return None

    def _record(self, ref: Any, job: ItemJob) -> BatchRecord:
        """The task's record; a task that ended without one (its Ray worker or node died)
        is the item's `worker_crashed`."""
        try:
            return BatchRecord.from_dict(json.loads(self._ray.get(ref)))
        except Exception as exc:  # ray.exceptions.RayError and its kinds
            error = StudioError(
                "worker_crashed", f"The Ray task running the item ended without its result "
                f"({type(exc).__name__}).",
                "The task's process or node died (out of memory, a node lost): see the "
                "details, and the Ray logs of the node.", details=str(exc))
            return BatchRecord(recipe=job.key, fingerprint=job.fingerprint, seconds=0.0,
                               executor=self.name, node="",
                               finished=datetime.datetime.now(datetime.UTC).isoformat(
                                   timespec="seconds"),
                               report=ExportReport().fail(error))

    def _cancel(self, refs: list[Any]) -> None:
        """End the running tasks: a cancel (the task ends its worker and its children), then
        a kill of the tasks that have not ended within the grace (their workers see their
        client gone and end themselves)."""
        ray = self._ray
        for ref in refs:
            ray.cancel(ref, force=False)
        deadline = time.monotonic() + _CANCEL_GRACE_S
        pending = refs
        while pending and time.monotonic() < deadline:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=_POLL_S)
        for ref in pending:
            ray.cancel(ref, force=True)


def _relay(stages: Any, jobs: dict[str, ItemJob], progress: BatchProgress) -> None:
    """The stages the tasks have put on the queue since the last look, to `progress`."""
    if stages is None:
        return
    try:
        count = stages.qsize()
        told = stages.get_nowait_batch(count) if count else []
    except Exception:
        return
    for key, fraction, stage in told:
        if key in jobs:
            progress.event(jobs[key], Progress(id=None, fraction=fraction, stage=stage))
