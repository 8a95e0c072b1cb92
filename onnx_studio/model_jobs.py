"""The Python API's export and validation of a model object (`onnx_studio.export(model,
args=(x,))`), each run in a worker process of its own as a recipe's are.

The module and its example arguments are written into a job folder under the studio's cache
(onnx_studio.model_recipe: the module pickled by value, the tensors as .pt files) and the
worker exports and validates the copy it unpickles: the same code and the same weights, in a
process whose crash (`os._exit`, a segmentation fault, the out-of-memory killer) ends in a
document of kind `worker_crashed`, never in the caller. The job folder is removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typing_extensions import TypeIs

from onnx_studio.engine import dirs
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.protocol import (
    Event,
    ExportReport,
    ExportRequest,
    ExportResult,
    ValidateFileRequest,
)
from onnx_studio.engine.protocol import Progress as ProgressEvent
from onnx_studio.engine.recipe import EXPORTERS, Recipe, check_recipe, to_toml
from onnx_studio.model_recipe import ModelCall, model_device, model_recipe, wrong

if TYPE_CHECKING:
    import torch

ProgressCallback = Callable[[float, str], None]


def is_model(obj: object) -> TypeIs[torch.nn.Module]:
    """Whether `obj` is a torch.nn.Module (without importing torch: a caller holding a module
    has imported it)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def export_model(model: Any, call: ModelCall, *, output: str | os.PathLike[str] | None,
                 opset: int | None, exporter: str | None, validate: bool | None,
                 rtol: float | None, atol: float | None, device: str | None,
                 progress: ProgressCallback | None, timeout: float | None) -> ExportReport:
    """Export `model(*args, **kwargs)` to `output` in a worker (and validate the file against
    the worker's copy of the module unless `validate` is False): onnx_studio.export's document
    for a model object."""
    def job(folder: Path) -> ExportReport:
        from onnx_studio.engine.export.onnx_file import check_output_path

        if output is None:
            raise wrong("output is missing: a model object needs the .onnx path to write.",
                        "Pass output='model.onnx'.")
        target = check_output_path(Path(os.fspath(output)).expanduser())
        if exporter is not None and exporter not in EXPORTERS:
            raise wrong(f"exporter {exporter!r} is not one of {', '.join(EXPORTERS)}.",
                        "Leave it out for auto.")
        recipe = model_recipe(model, call, folder)
        recipe.export.output = str(target)
        recipe.export.opset = opset
        recipe.export.exporter = exporter or "auto"
        recipe.export.device = device or model_device(model)
        _tolerances(recipe, rtol, atol)
        recipe.validate.enabled = validate is not False
        check_recipe(recipe)
        return _run(ExportRequest(recipe=to_toml(recipe), base_dir=str(folder),
                                  validate=recipe.validate.enabled, plots_beside_onnx=True),
                    target.parent, progress, timeout)

    return _in_job_folder(job)


def validate_model(model: Any, onnx: str | os.PathLike[str], call: ModelCall, *,
                   rtol: float | None, atol: float | None, device: str | None,
                   progress: ProgressCallback | None, timeout: float | None) -> ExportReport:
    """Validate the .onnx file `onnx` against `model(*args, **kwargs)` in a worker:
    onnx_studio.validate's document for a model object."""
    def job(folder: Path) -> ExportReport:
        path = Path(os.fspath(onnx)).expanduser().resolve()
        if not path.is_file():
            raise wrong(f"{path} does not exist; name the .onnx file to validate.",
                        "Check the path.")
        recipe = model_recipe(model, call, folder)
        recipe.export.output = str(path)
        recipe.export.device = device or model_device(model)
        _tolerances(recipe, rtol, atol)
        recipe.validate.enabled = True
        check_recipe(recipe)
        return _run(ValidateFileRequest(recipe=to_toml(recipe), base_dir=str(folder),
                                        onnx=str(path)), path.parent, progress, timeout)

    return _in_job_folder(job)


def _tolerances(recipe: Recipe, rtol: float | None, atol: float | None) -> None:
    if rtol is not None:
        recipe.validate.rtol = rtol
    if atol is not None:
        recipe.validate.atol = atol


def _run(request: ExportRequest | ValidateFileRequest, folder: Path,
         progress: ProgressCallback | None, timeout: float | None) -> ExportReport:
    """The job in a fresh worker process, its stages told to `progress`."""
    from onnx_studio.engine.batch.item_run import report_of
    from onnx_studio.engine.job_client import remove_job_folder, run_job
    from onnx_studio.engine.worker_process import remove_abandoned_temps

    def hear(event: Event) -> None:
        if progress is not None and isinstance(event, ProgressEvent):
            progress(event.fraction, event.stage)

    remove_abandoned_temps([folder])
    result = run_job(request, request.TAG, hear, folder=folder, timeout=timeout)
    assert isinstance(result, ExportResult)
    remove_job_folder(result.job_dir)
    return report_of(result)


def _in_job_folder(job: Callable[[Path], ExportReport]) -> ExportReport:
    """The job's document, given a fresh folder under the cache that is removed afterwards;
    on any failure a failed document, as the recipe calls return."""
    from onnx_studio.engine.job_client import CancelledAfterWrite

    folder: Path | None = None
    try:
        parent = dirs.cache_dir() / "models"
        parent.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="model-", dir=parent))
        return job(folder)
    except StudioError as err:
        error = err
    except KeyboardInterrupt:
        error = StudioError("cancelled", "Cancelled (Ctrl+C) before the export finished.",
                            exit_code=130)
    except Exception as exc:  # our own bug: still a document with one sentence
        error = StudioError("export", f"onnx_studio failed unexpectedly: {exc}.",
                            "Report the traceback in the details.",
                            details=traceback.format_exc())
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    doc = ExportReport()
    doc.fail(error)
    if isinstance(error, CancelledAfterWrite):
        doc.output = error.written  # the file is there: never claim it is not
    return doc
