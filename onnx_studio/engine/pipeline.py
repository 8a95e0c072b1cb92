"""Export, then validate: the path every recipe takes through the engine (CLI and worker).

source (load the model, make the inputs) -> export (convert, check, write) -> validation
(ONNX Runtime against the same loaded model). Above both, so neither imports the other.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import StudioError, one_line, plain
from onnx_studio.engine.events import Events
from onnx_studio.engine.export import blame
from onnx_studio.engine.export.exporter import export_model
from onnx_studio.engine.export.onnx_file import check_output_path
from onnx_studio.engine.graph.summary import summarize
from onnx_studio.engine.paths import recipe_inputs
from onnx_studio.engine.protocol import ExportedFile, ExportReport, Graph, Validation, WarningItem
from onnx_studio.engine.recipe import AUTO_FILL, Recipe
from onnx_studio.engine.source.hf import HfModel, is_hf_source
from onnx_studio.engine.source.inputs import ResolvedFill, resolve_fills
from onnx_studio.engine.validation.validator import failure_hint
from onnx_studio.engine.validation.validator import validate as run_validation


def export(recipe: Recipe, events: Events | None = None, *, validate: bool | None = None,
           plot_dir: Path | None = None,
           on_fills: Callable[[list[ResolvedFill]], None] | None = None) -> ExportReport:
    """Export the recipe's model; with `validate` (default: the recipe's), run ONNX Runtime too
    and keep the plot data in `plot_dir` (default: beside the .onnx file).

    The output location is checked first (a `write` error, exit status 2, before any work).
    `on_fills` receives the fill each input got (onnx_studio.engine.source.inputs.resolve_fill, with
    the loaded model) once the model is loaded; it is not called when loading failed.
    """
    events = events or Events()
    validate = recipe.validate.enabled if validate is None else validate
    if is_hf_source(recipe.model.source):  # a folder of files, not one .onnx
        return export_hf(recipe, events, validate=validate)
    try:
        check_output_path(recipe.output_path)
    except StudioError as err:
        return ExportReport(output=str(recipe.output_path)).fail(err)
    report, loaded = export_model(recipe, events.part(0.0, 0.6 if validate else 1.0))
    if loaded is not None:
        fills = resolve_fills(recipe, loaded.module)
        for spec, fill in zip(recipe.inputs, fills, strict=True):
            if spec.fill == AUTO_FILL and spec.is_tensor:  # the Log tab: what "auto" drew, why
                events.log(f"input {spec.name}: fill {fill.text} ({fill.reason})")
        if on_fills is not None:
            on_fills(fills)
    if report.ok and validate:
        _validate_into(report, recipe, recipe.output_path, loaded, events.part(0.6, 1.0),
                       plot_dir)
    if report.ok:
        events.progress(1.0, "Done")
    return report


def validate_file(recipe: Recipe, model: Path, events: Events | None = None, *,
                  plot_dir: Path | None = None) -> ExportReport:
    """Validate an existing .onnx file (a Hugging Face recipe: the folder of its export)
    against the recipe's model, as an export document."""
    if is_hf_source(recipe.model.source):
        return validate_hf_report(recipe, model, events or Events())
    summary = summarize(model)
    report = ExportReport(ok=True, output=str(model), exporter=None,
                          opset=summary["opset_imports"].get(""),
                          graph=Graph.from_summary(summary))
    _validate_into(report, recipe, model, None, events or Events(), plot_dir)
    return report


def validate_existing(recipe: Recipe, onnx: Path, events: Events, *,
                      plot_dir: Path | None = None) -> dict[str, Any]:
    """The validation dict of an existing .onnx file against the recipe's model (the window's
    Validate); for a Hugging Face recipe, `onnx` is the folder its export wrote. A request
    that cannot run at all raises StudioError."""
    if is_hf_source(recipe.model.source):
        return validate_hf_folder(recipe, onnx, events)
    return run_validation(recipe, onnx, events, plot_dir=plot_dir)


def _validate_into(report: ExportReport, recipe: Recipe, model: Path, loaded: Any,
                   events: Events, plot_dir: Path | None) -> None:
    _judge_into(report, lambda: run_validation(recipe, model, events, loaded=loaded,
                                               plot_dir=plot_dir),
                failure_hint, user_file=getattr(loaded, "source_file", None))


def _judge_into(report: ExportReport, compute: Callable[[], dict[str, Any]],
                hint: Callable[[dict[str, Any]], str], user_file: Any = None) -> None:
    """Run a validation (`compute`) into `report`: its result, its seconds, and the failure
    when it fails (`hint` says what to do) or cannot run (the model's own exit is its fault;
    anything else unexpected, with the traceback in the details)."""
    started = time.perf_counter()
    try:
        result = compute()
    except StudioError as err:
        report.fail(err)
        return
    except SystemExit as exc:  # the model's code outside a trial (intermediates): its fault
        report.fail(blame.model_error(exc, user_file=user_file))
        return
    except Exception as exc:
        report.fail(StudioError(
            "validation", f"Validation failed unexpectedly: {one_line(exc)}.",
            "Open the details for the full traceback.", details=traceback.format_exc()))
        return
    finally:
        report.seconds["validate"] = time.perf_counter() - started
    report.validation = Validation.from_dict(result)
    if report.validation.verdict == "inconclusive":  # a pass that proves nothing: said on top
        report.warnings.append(WarningItem(
            category="Verdict", message=report.validation.message or "Inconclusive.",
            hint=report.validation.hint))
    if not report.validation.ok:
        report.fail(StudioError(
            "validation", report.validation.message or "ONNX Runtime disagrees with PyTorch.",
            hint(result)))


def export_hf(recipe: Recipe, events: Events | None = None, *,
              validate: bool = False) -> ExportReport:
    """Export a Hugging Face folder (`hf:` / `hf-config:`; the task in the model's kwargs,
    None: the config's) into the folder `export.output`, files named as Optimum names them;
    with `validate`, each file against eager PyTorch and greedy generation over the files.

    The files (and their data files, per `export.external_data`) are one commit
    (onnx_studio.engine.file_set): the folder holds the previous set or the new one, never a mix.
    """
    from onnx_studio.engine.export.hf_files import check_output_folder
    from onnx_studio.engine.source.hf import load_for_recipe

    events = events or Events()
    folder = recipe.output_path
    exporter = "torchscript" if recipe.export.exporter == "torchscript" else "dynamo"
    report = ExportReport(output=str(folder), exporter=exporter)
    events = _reporting_warnings(events, report)
    started = time.perf_counter()
    try:
        check_output_folder(folder, "export", recipe_inputs(recipe))
        events.progress(0.0, "Loading the model")
        hf = load_for_recipe(recipe)
        report.task = hf.task
        report.seconds["load"] = time.perf_counter() - started
        started = time.perf_counter()
        _write_hf_parts(hf, folder, recipe, events.part(0.1, 0.7 if validate else 0.97))
        report.seconds["export"] = time.perf_counter() - started
    except StudioError as err:
        return report.fail(err)
    report.files, report.opset = _exported_files(folder, hf)
    report.graph = report.files[0].graph
    report.ok = True
    if validate:  # the model is ours: freed before ONNX Runtime opens the files
        _validate_hf_into(report, hf, folder, recipe, events.part(0.7, 1.0), release=True)
    events.progress(1.0, "Done")
    return report


def _write_hf_parts(hf: HfModel, folder: Path, recipe: Recipe, events: Events) -> None:
    """Export every part of `hf` into a staging folder, then commit them into `folder` as one
    set; a `write` error when the folder cannot take them."""
    from onnx_studio.engine.export.hf_files import export_part
    from onnx_studio.engine.file_set import CommitBusy, FolderWrite
    from onnx_studio.engine.torch_private import reused_onnx_registry

    # the exporter's translation table built once for all the parts, not once a part; the
    # TorchScript exporter has none (and building it imports onnxscript, a second or more)
    registry = contextlib.nullcontext() if recipe.export.exporter == "torchscript" \
        else reused_onnx_registry()
    try:
        with FolderWrite(folder, output="export", inputs=recipe_inputs(recipe)) as write, \
                registry:
            count = len(hf.parts)
            for index, part in enumerate(hf.parts):
                events.progress(index / count, f"Exporting {part.file}")
                export_part(part, write.staging, recipe.export.opset,
                            events.part(index / count, (index + 1) / count),
                            recipe.export.external_data, recipe.export.exporter,
                            recipe.export.optimize)
            write.commit()
    except (OSError, CommitBusy) as exc:
        raise StudioError("write", f"Cannot write the files into {folder}: "
                          f"{getattr(exc, 'strerror', None) or exc}; free some space or "
                          "choose another output folder.") from None


def _reporting_warnings(events: Events, report: ExportReport) -> Events:
    """`events` whose warnings also land in `report.warnings` (colour codes stripped)."""

    def warning(item: dict[str, Any]) -> None:
        item = {k: plain(v) if isinstance(v, str) else v for k, v in item.items()}
        report.warnings.append(WarningItem.from_dict(item))
        events.warning(item)

    return Events(progress=events.progress, log=events.log, warning=warning)


def _exported_files(folder: Path, hf: HfModel) -> tuple[list[ExportedFile], int | None]:
    """What the export document says of each file of `folder` the task exports (its graph
    and the data files it reads), and the first file's opset: each file read once."""
    from onnx_studio.engine.export.hf_files import data_files

    files: list[ExportedFile] = []
    opset: int | None = None
    for part in hf.parts:
        summary = summarize(folder / part.file)
        opset = summary["opset_imports"].get("") if not files else opset
        files.append(ExportedFile(name=part.file, path=str(folder / part.file),
                                  graph=Graph.from_summary(summary),
                                  data_files=data_files(folder / part.file)))
    return files, opset


def _hf_validation(hf: HfModel, folder: Path, recipe: Recipe, events: Events,
                   release: bool = False) -> dict[str, Any]:
    """Each file of `folder` against eager PyTorch, then (generation tasks) greedy tokens over
    the files against transformers' generate: the validation dict, failed when either fails.
    `release`: `hf` is this command's own, its model freed once PyTorch's side is computed
    (never while ONNX Runtime holds a copy of the weights too)."""
    from onnx_studio.engine.validation.hf_checks import validate_hf

    return validate_hf(hf, folder, recipe.validate.rtol, recipe.validate.atol, events,
                       release=release)


def _validate_hf_into(report: ExportReport, hf: HfModel, folder: Path, recipe: Recipe,
                      events: Events, release: bool = False) -> None:
    from onnx_studio.engine.validation.hf_checks import failure_hint as hf_failure_hint

    _judge_into(report, lambda: _hf_validation(hf, folder, recipe, events, release),
                hf_failure_hint)


def hf_model_for_folder(recipe: Recipe, folder: Path) -> HfModel:
    """The recipe's Hugging Face model, its parts checked against the files of `folder` (a
    `validation` error, exit 2, as for `validate FOLDER`)."""
    return _load_for_folder(recipe, folder)[0]


def _load_for_folder(recipe: Recipe, folder: Path, hf: HfModel | None = None
                     ) -> tuple[HfModel, list[ExportedFile], int | None]:
    """The recipe's Hugging Face model (`hf`, when loaded already), the files of `folder` its
    task exports and their opset; a `validation` error (exit 2) when a file is missing or
    takes other inputs than the task feeds (no export yet, or an export for another task)."""
    from onnx_studio.engine.source.hf import load_for_recipe

    hf = hf or load_for_recipe(recipe)
    hint = ("Export first, or choose the task the folder was exported for; name the folder "
            "the export wrote.")
    missing = [part.file for part in hf.parts if not (folder / part.file).is_file()]
    if missing:
        raise StudioError("validation", f"{folder} has no {', '.join(missing)} for the task "
                          f"{hf.task}.", hint, exit_code=2)
    files, opset = _exported_files(folder, hf)
    for part, file in zip(hf.parts, files, strict=True):
        names = [value.name for value in file.graph.inputs]
        if sorted(names) != sorted(part.inputs):
            raise StudioError(
                "validation", f"{part.file} takes {', '.join(names)}, but the task {hf.task} "
                f"feeds {', '.join(part.inputs)}: the folder was exported for another task.",
                hint, exit_code=2)
    return hf, files, opset


def validate_hf_folder(recipe: Recipe, folder: Path, events: Events) -> dict[str, Any]:
    """The validation dict of the files a Hugging Face export wrote into `folder`, as
    export_hf validates them after an export (each file, then greedy generation)."""
    events.progress(0.0, "Loading the model")
    hf, _, _ = _load_for_folder(recipe, folder)
    return _hf_validation(hf, folder, recipe, events.part(0.1, 1.0), release=True)


def validate_hf_report(recipe: Recipe, folder: Path, events: Events,
                       hf: HfModel | None = None) -> ExportReport:
    """`onnx-studio validate FOLDER --recipe R` of a Hugging Face recipe: the export document
    of validating the folder's files (files, task, validation with generation); `hf`: the
    recipe's model when loaded already."""
    report = ExportReport(output=str(folder), exporter=None)
    started = time.perf_counter()
    owned = hf is None  # loaded here: freed once PyTorch's side of the validation is done
    try:
        events.progress(0.0, "Loading the model")
        hf, report.files, report.opset = _load_for_folder(recipe, folder, hf)
    except StudioError as err:
        return report.fail(err)
    report.seconds["load"] = time.perf_counter() - started
    report.task = hf.task
    report.graph = report.files[0].graph
    report.ok = True
    _validate_hf_into(report, hf, folder, recipe, events.part(0.1, 1.0), release=owned)
    if report.ok:
        events.progress(1.0, "Done")
    return report
