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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typing_extensions import TypeIs

from onnx_studio.engine import dirs
from onnx_studio.engine.protocol import (
    ExportReport,
    ExportRequest,
    ValidateFileRequest,
)
from onnx_studio.engine.recipe import EXPORTERS, Recipe, check_recipe, to_toml
from onnx_studio.job_documents import ProgressCallback, document, export_report, run
from onnx_studio.model_recipe import ModelCall, model_device, model_recipe, wrong

if TYPE_CHECKING:
    import torch



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
        request = ExportRequest(recipe=to_toml(recipe), base_dir=str(folder),
                                validate=recipe.validate.enabled, plots_beside_onnx=True)
        return export_report(run(request, target.parent, progress, timeout))

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
        request = ValidateFileRequest(recipe=to_toml(recipe), base_dir=str(folder),
                                      onnx=str(path))
        return export_report(run(request, path.parent, progress, timeout))

    return _in_job_folder(job)


def _tolerances(recipe: Recipe, rtol: float | None, atol: float | None) -> None:
    if rtol is not None:
        recipe.validate.rtol = rtol
    if atol is not None:
        recipe.validate.atol = atol


def _in_job_folder(job: Callable[[Path], ExportReport]) -> ExportReport:
    """The job's document, given a fresh folder under the cache that is removed afterwards;
    on any failure a failed document, as the recipe calls return."""
    def in_folder() -> ExportReport:
        parent = dirs.cache_dir() / "models"
        parent.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="model-", dir=parent))
        try:
            return job(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    return document(ExportReport, in_folder)
