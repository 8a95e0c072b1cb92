"""One item of a batch run in a worker process of its own (onnx_studio.engine.job_client), answered
with its record: the export document, how long it took, where and when it ran.

Both executors run this: the local one on a thread per item, the Ray one inside a task on the
node the task lands on. Whatever the item does to its worker (a crash, a hang past the time
limit, the out-of-memory killer) ends in the record's error, never in the caller.
"""

from __future__ import annotations

import dataclasses
import datetime
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onnx_studio.engine.batch.items import ItemJob
from onnx_studio.engine.batch.records import stamps
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.protocol import (
    BatchRecord,
    Event,
    ExportReport,
    ExportRequest,
    ExportResult,
)
from onnx_studio.engine.worker_process import remove_abandoned_temps


def run_item(job: ItemJob, executor: str, on_event: Callable[[Event], None], *,
             timeout: float | None = None, stop: threading.Event | None = None,
             stderr_to: Any = None) -> BatchRecord | None:
    """Export (and validate, as the item says) `job` in a fresh worker; its record.

    None when `stop` ended it first (a cancelled item has no result: --resume runs it again).
    `stderr_to` hears the worker's standard error (default: nowhere; a crash's last lines are
    kept in its error's details either way).
    """
    from onnx_studio.engine.job_client import remove_job_folder, run_job

    started = time.monotonic()
    folder = Path(job.folder)
    remove_abandoned_temps([folder])  # what killed runs left there
    before = stamps(Path(job.output))
    request = ExportRequest(recipe=job.recipe, base_dir=job.base_dir, validate=job.validate,
                            plots_beside_onnx=True)
    try:
        result = run_job(request, request.TAG, on_event, folder=folder, timeout=timeout,
                         stop=stop, stderr_to=stderr_to or _Discard())
        assert isinstance(result, ExportResult)
        remove_job_folder(result.job_dir)
        report = report_of(result)
    except StudioError as err:
        # stopped: whatever the job ended with (a terminal's Ctrl+C reaches the worker too,
        # which may answer with its own error first) is no result of the item
        if stop is not None and stop.is_set():
            return None
        report = ExportReport().fail(err)
    # what the item wrote is what changed on disk while it ran (a timeout or a cancel may
    # come after the commit): the record names that output, normalised, or none at all
    after = stamps(Path(job.output))
    written = after if report.ok or after != before else []
    report.output = job.output if written else None
    return BatchRecord(recipe=job.key, fingerprint=job.fingerprint,
                       seconds=round(time.monotonic() - started, 3), executor=executor,
                       node=socket.gethostname(),
                       finished=datetime.datetime.now(datetime.UTC).isoformat(
                           timespec="seconds"),
                       report=report, outputs=written)


def report_of(result: ExportResult) -> ExportReport:
    """The export document as the worker made it, its error's details and exit status put
    back (they travel beside it): what `onnx-studio export --json` prints."""
    report = result.report
    report.extra = result.extra
    if report.error is not None:
        report.error = dataclasses.replace(report.error, details=result.details,
                                           exit_code=result.exit_code)
    return report


class _Discard:
    """A stream that keeps nothing: where the worker's standard error goes unless asked for."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass
