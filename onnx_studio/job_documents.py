"""What every call of the Python API shares: its job run in a fresh worker process, and the
typed document it answers with on every outcome."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.protocol import (
    CompareDocument,
    Event,
    ExplainDocument,
    ExportReport,
    ExportResult,
    ProfileDocument,
    Request,
    Result,
    VariantReport,
)
from onnx_studio.engine.protocol import Progress as ProgressEvent

ProgressCallback = Callable[[float, str], None]  # (fraction done, stage)
D = TypeVar("D", ExportReport, CompareDocument, ProfileDocument, VariantReport,
            ExplainDocument)


def run(request: Request, folder: Path, progress: ProgressCallback | None,
        timeout: float | None) -> Result:
    """The job in a fresh worker process (onnx_studio.engine.job_client), its stages told to
    `progress`; `folder` is where it writes (its abandoned temporary files are swept first)."""
    from onnx_studio.engine.job_client import run_job
    from onnx_studio.engine.worker_process import remove_abandoned_temps

    def hear(event: Event) -> None:
        if progress is not None and isinstance(event, ProgressEvent):
            progress(event.fraction, event.stage)

    remove_abandoned_temps([folder])
    return run_job(request, request.TAG, hear, folder=folder, timeout=timeout)


def export_report(result: Result) -> ExportReport:
    """The export document of an export or validate job, as the CLI prints it."""
    from onnx_studio.engine.batch.item_run import report_of
    from onnx_studio.engine.job_client import remove_job_folder

    assert isinstance(result, ExportResult)
    remove_job_folder(result.job_dir)
    return report_of(result)


def document(empty: type[D], job: Callable[[], D]) -> D:
    """The job's document, or an empty one failed with the error that stopped it: a wrong
    request, a failure, Ctrl+C (kind `cancelled`) or our own bug (one sentence, the traceback
    in `details`)."""
    from onnx_studio.engine.job_client import CancelledAfterWrite

    try:
        return job()
    except StudioError as err:
        error = err
    except KeyboardInterrupt:  # outside a job's run (which ends its worker and says so itself)
        error = StudioError("cancelled", "Stopped by KeyboardInterrupt (Ctrl+C).",
                            "Call it again to run it.")
    except Exception as exc:  # our own bug: still a document with one sentence
        error = StudioError("export", f"onnx_studio failed unexpectedly: {exc}.",
                            "Report the traceback in the details.",
                            details=traceback.format_exc())
    doc = empty()
    doc.fail(error)
    if isinstance(error, CancelledAfterWrite) and isinstance(doc, ExportReport):
        doc.output = error.written  # the file is there: never claim it is not
    return doc
