"""Export, then validate: the path every recipe takes through the engine (CLI and worker).

source (load the model, make the inputs) -> export (convert, check, write) -> validation
(ONNX Runtime against the same loaded model). Above both, so neither imports the other.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.errors import StudioError, one_line
from engine.events import Events
from engine.export import blame
from engine.export.exporter import export_model
from engine.export.onnx_file import check_output_path
from engine.graph.summary import summarize
from engine.protocol import ExportReport, Graph, Validation
from engine.recipe import AUTO_FILL, Recipe
from engine.source.inputs import ResolvedFill, resolve_fills
from engine.validation.validator import failure_hint
from engine.validation.validator import validate as run_validation


def export(recipe: Recipe, events: Events | None = None, *, validate: bool | None = None,
           plot_dir: Path | None = None,
           on_fills: Callable[[list[ResolvedFill]], None] | None = None) -> ExportReport:
    """Export the recipe's model; with `validate` (default: the recipe's), run ONNX Runtime too
    and keep the plot data in `plot_dir` (default: beside the .onnx file).

    The output location is checked first (a `write` error, exit status 2, before any work).
    `on_fills` receives the fill each input got (engine.source.inputs.resolve_fill, with the
    loaded model) once the model is loaded; it is not called when loading failed.
    """
    events = events or Events()
    validate = recipe.validate.enabled if validate is None else validate
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
    """Validate an existing .onnx file against the recipe's model, as an export document."""
    summary = summarize(model)
    report = ExportReport(ok=True, output=str(model), exporter=None,
                          opset=summary["opset_imports"].get(""),
                          graph=Graph.from_summary(summary))
    _validate_into(report, recipe, model, None, events or Events(), plot_dir)
    return report


def _validate_into(report: ExportReport, recipe: Recipe, model: Path, loaded: Any,
                   events: Events, plot_dir: Path | None) -> None:
    started = time.perf_counter()
    try:
        result = run_validation(recipe, model, events, loaded=loaded, plot_dir=plot_dir)
    except StudioError as err:
        report.fail(err)
        return
    except SystemExit as exc:  # the model's code outside a trial (intermediates): its fault
        report.fail(blame.model_error(exc, user_file=getattr(loaded, "source_file", None)))
        return
    except Exception as exc:
        report.fail(StudioError(
            "validation", f"Validation failed unexpectedly: {one_line(exc)}.",
            "Open the details for the full traceback.", details=traceback.format_exc()))
        return
    finally:
        report.seconds["validate"] = time.perf_counter() - started
    report.validation = Validation.from_dict(result)
    if not report.validation.ok:
        report.fail(StudioError(
            "validation", report.validation.message or "ONNX Runtime disagrees with PyTorch.",
            failure_hint(result)))
