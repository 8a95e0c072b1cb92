"""One call that turns a recipe into an ONNX file: `export_model(recipe, events)`.

The steps are load, inputs, capture/convert, check against the request, and write.
Every user-facing failure becomes a `StudioError` on the report, never an exception, and the
file only appears at its target path once it is complete and `onnx.checker` accepts it.
"""

from __future__ import annotations

import contextlib
import runpy
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from onnx_studio.engine import torch_private
from onnx_studio.engine.errors import StudioError, chain_text, one_line
from onnx_studio.engine.events import Events
from onnx_studio.engine.export import (
    blame,
    causes,
    diagnose,
    failures,
    fallback,
    structured,
    symbolic_attributes,
)
from onnx_studio.engine.export.capture import captured, warn
from onnx_studio.engine.export.choice import choose_exporter
from onnx_studio.engine.export.exporter_state import modes_kept
from onnx_studio.engine.export.onnx_file import (
    AtomicOnnxWrite,
    check_output_path,
    wants_external_data,
    write_progress,
)
from onnx_studio.engine.export.request_check import check_request
from onnx_studio.engine.paths import recipe_inputs
from onnx_studio.engine.protocol import ExporterFallback, ExportFacts, ExportReport, Graph
from onnx_studio.engine.recipe import DYNAMO_MIN_OPSET, Recipe, check_recipe
from onnx_studio.engine.source.device import check_device
from onnx_studio.engine.source.trace_sizes import trace_size_warning, trace_sizes


def export_model(recipe: Recipe, events: Events | None = None) -> tuple[ExportReport, Any]:
    """Export the recipe's model: the report, and the loaded model (None when it failed) so a
    validation that follows can reuse it instead of building it again."""
    events = events or Events()
    report = ExportReport(output=str(recipe.output_path))
    try:
        loaded = _export(recipe, events, report)
    except StudioError as err:
        return report.fail(err), None
    except (Exception, SystemExit) as exc:  # a bug of ours or torch's: still a sentence
        return report.fail(StudioError(
            "export", f"The export failed unexpectedly: {causes.real_message(exc)}.",
            "Open the details for the full traceback.", details=chain_text(exc))), None
    report.ok = True
    return report, loaded


def _with_exporter(recipe: Recipe, exporter: str) -> Recipe:
    """The recipe with `exporter` resolved, so every step below reads the one that runs."""
    if recipe.export.exporter == exporter:
        return recipe
    resolved = recipe.copy()
    resolved.export.exporter = exporter
    return resolved


def _export(recipe: Recipe, events: Events, report: ExportReport) -> Any:
    from onnx_studio.engine.source import load as sources

    check_recipe(recipe)
    original = recipe
    exporter, report.exporter_reason = choose_exporter(recipe)
    report.exporter = exporter
    _check_opset(exporter, recipe.export.opset)
    check_device(recipe.export.device)
    target = check_output_path(recipe.output_path)

    events.progress(0.0, "Loading extensions")
    translation_table = _run_extensions(recipe)

    events.progress(0.02, "Loading the model")
    started = time.perf_counter()
    loaded = sources.load_model(recipe, device=recipe.export.device)
    exporter, report.exporter_reason = choose_exporter(recipe, loaded)
    if exporter != report.exporter:  # the file was not what its name said; same rule, now sure
        _check_opset(exporter, recipe.export.opset)
        report.exporter = exporter
    recipe = _with_exporter(recipe, exporter)
    opts = recipe.export
    # an example size of 0 or 1 on a dynamic axis is traced at 2: torch specialises 0 and 1
    report.traced_sizes = trace_sizes(recipe) or None
    events.progress(0.1, "Running the model once")
    first = _first_run(recipe, loaded, report.traced_sizes)
    if first is None:  # it runs only at the example's sizes: those are traced, as given
        report.traced_sizes = None
        first = _first_run(recipe, loaded, None)
    assert first is not None  # without trace sizes a failure raises
    args, result = first
    structured.prepare_outputs(result)  # dataclass outputs: torch.export must know them
    recipe = structured.with_output_names(recipe, result)  # present.0.key, logits, ...
    report.seconds["load"] = time.perf_counter() - started
    found = [{"category": "Environment", "message": text, "source": ""}
             for text in loaded.notes]
    if report.traced_sizes:
        found.append({"category": "DynamicShape", "source": "",
                      "message": trace_size_warning(recipe, report.traced_sizes)})
    if loaded.source_file is not None:
        found += diagnose.scan_source(Path(loaded.source_file),
                                      diagnose.used_class_names(loaded.module))
    for item in found:
        warn(report, events, item)

    events.progress(0.15, "Exporting")
    started = time.perf_counter()
    if loaded.kind != "exported_program":  # a captured program keeps the mode it was made in
        _set_training_mode(loaded.module, opts.training)
    with AtomicOnnxWrite(target, recipe_inputs(recipe)) as write, \
            captured(events.part(0.15, 0.85), report, loaded):
        try:
            _convert(recipe, loaded, args, result, write.temp_path, translation_table, report,
                     events)
        except StudioError as err:
            why_not = fallback.may_fall_back(original, recipe.export.exporter, err)
            if why_not is not None:
                if why_not:
                    err.message = f"{err.message.rstrip('.')}; {why_not}."
                raise
            recipe = _with_exporter(recipe, "torchscript")
            try:
                _convert(recipe, loaded, args, result, write.temp_path, translation_table,
                         report, events)
            except StudioError as second:
                raise fallback.both_failed(err, second) from None
            report.exporter = "torchscript"
            report.fallback = ExporterFallback(tried="dynamo", kind=err.kind,
                                               message=fallback.short_cause(err))
            warn(report, events, fallback.fallback_warning(err))
        opts = recipe.export
        report.seconds["export"] = time.perf_counter() - started
        checked = check_request(write.temp_path, recipe,
                                output_axes=opts.exporter != "dynamo")
        for item in checked.warnings:
            warn(report, events, item)
        if checked.error is not None:
            raise checked.error
        events.progress(0.88, "Checking the ONNX file")
        write.finish(external_data=opts.external_data)
    events.progress(0.97, "Reading the graph")
    from onnx_studio.engine.graph.summary import summarize

    summary = summarize(target)
    report.graph = Graph.from_summary(summary)
    report.opset = summary["opset_imports"].get("", None)
    report.extra = ExportFacts(
        file_bytes=write.total_bytes, external_data=write.external_data_file,
        opset_imports=summary["opset_imports"],
    )
    return loaded


def _convert(recipe: Recipe, loaded: Any, args: tuple[Any, ...], result: Any, path: Path,
             translation_table: dict[Any, Any], report: ExportReport, events: Events) -> None:
    """Run the recipe's exporter (resolved: dynamo or torchscript) into `path`."""
    if recipe.export.exporter == "dynamo":
        # an ExportedProgram goes to dynamo as it is; TorchScript traces its eager module
        model = loaded.exported_program if loaded.exported_program is not None \
            else loaded.module
        _export_dynamo(recipe, model, args, path, translation_table, loaded.source_file,
                       progress=events.part(0.75, 0.85).progress)
        if structured.arguments.is_structured(recipe):
            structured.name_input_dims(path, recipe)
        for note in _name_output_dims(path, recipe):
            warn(report, events, {"category": "DynamicShape", "message": note, "source": ""})
    else:
        _export_torchscript(recipe, loaded.module, args, path,
                            fixed_mode=loaded.kind == "exported_program",
                            user_file=loaded.source_file,
                            flat=structured.needs_wrapping(recipe, result))


def _export_dynamo(recipe: Recipe, model: Any, args: tuple[Any, ...], path: Path,
                   translation_table: dict[Any, Any], user_file: Path | None = None,
                   progress: Callable[[float, str], None] | None = None) -> None:
    import torch

    from onnx_studio.engine.source import inputs as inputs_mod

    opts = recipe.export
    dynamic_shapes = inputs_mod.dynamic_shapes(recipe)
    kwargs: dict[str, Any] = {}
    input_names = [s.name for s in recipe.inputs]
    if structured.arguments.is_structured(recipe):  # keywords, dicts, tuples, constants
        args, kwargs, input_names, dynamic_shapes = structured.dynamo_call(recipe, model, args)
    from onnx_studio.engine.export.quick_match import quick_matching

    try:
        with quick_matching(opts.optimize):  # the same file, its optimizer in less time
            program = torch.onnx.export(
                model, args, None, kwargs=kwargs or None, dynamo=True,
                input_names=input_names or None,
                output_names=[s.name for s in recipe.outputs] or None,
                opset_version=opts.opset,
                dynamic_shapes=dynamic_shapes,
                custom_translation_table=translation_table or None,
                optimize=opts.optimize,
                export_params=opts.export_params,
                keep_initializers_as_inputs=opts.keep_initializers_as_inputs,
                do_constant_folding=opts.do_constant_folding,
            )
    except (Exception, SystemExit) as exc:  # sys.exit() in the traced forward: blamed
        found = symbolic_attributes.find(exc)
        if found is not None:  # an attribute computed from a dynamic size (CondConv's groups)
            raise symbolic_attributes.attribute_error(
                exc, found, recipe, lambda node: symbolic_attributes.model_line(
                    model, args, dynamic_shapes, node)) from None
        raise _classify(exc, recipe, lambda: diagnose.unsupported_operators_dynamo(
            model, args, dynamic_shapes, opts.opset, translation_table), user_file) from None
    assert program is not None
    # None lets ONNXProgram decide by size (external above 2 GB); the writer then enforces
    # "never". See onnx_file.wants_external_data for what "auto" picks.
    weight_bytes = sum(value.const_value.nbytes for value in program.model.graph.initializers
                       .values() if value.const_value is not None)
    external = wants_external_data(opts.external_data, weight_bytes)
    try:
        with write_progress(path.parent, weight_bytes, progress or (lambda *_: None)):
            program.save(str(path), external_data=external)
    except OSError as exc:
        raise StudioError("write", f"Cannot write the ONNX file into {path.parent.parent}: "
                          f"{exc.strerror or exc}; free some space or choose another "
                          "folder.") from None


def _name_output_dims(path: Path, recipe: Recipe) -> list[str]:
    """Give a dynamo export's output axes the recipe's names (dynamo names them after the
    inputs' dimensions or s0, s1...); returns sentences for the axes it cannot name."""
    wanted = {o.name: o.dynamic for o in recipe.outputs if o.dynamic}
    if not wanted:
        return []
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    graph = model.graph
    input_dims = {d.dim_param for v in graph.input for d in v.type.tensor_type.shape.dim}
    renames: dict[str, str] = {}
    notes = []
    for out in graph.output:
        dims = out.type.tensor_type.shape.dim
        for axis, name in sorted(wanted.get(out.name, {}).items()):
            if axis >= len(dims):
                notes.append(f"Output {out.name!r} has no axis {axis}; fix its dynamic axes.")
            elif dims[axis].HasField("dim_value"):
                notes.append(f"Output {out.name!r} axis {axis} ({name!r}) came out fixed at "
                             f"{dims[axis].dim_value}: the exporter found it does not vary; "
                             "check the input axes it should follow are dynamic.")
            elif dims[axis].dim_param in input_dims and dims[axis].dim_param != name:
                notes.append(f"Output {out.name!r} axis {axis} is the input dimension "
                             f"{dims[axis].dim_param!r}, so the file keeps that name; use "
                             f"{dims[axis].dim_param!r} for it in the recipe too.")
            elif dims[axis].dim_param != name:
                renames[dims[axis].dim_param] = name
    if renames:
        for value in [*graph.output, *graph.value_info]:
            for dim in value.type.tensor_type.shape.dim:
                if dim.dim_param in renames:
                    dim.dim_param = renames[dim.dim_param]
        onnx.save(model, str(path))  # external data references are kept as they are
    return notes


def _export_torchscript(recipe: Recipe, model: Any, args: tuple[Any, ...], path: Path,
                        fixed_mode: bool = False, user_file: Path | None = None,
                        flat: bool = False) -> None:
    import torch

    from onnx_studio.engine.source import inputs as inputs_mod

    opts = recipe.export
    training = {
        "eval": torch.onnx.TrainingMode.EVAL,
        "preserve": torch.onnx.TrainingMode.PRESERVE,
        "train": torch.onnx.TrainingMode.TRAINING,
    }["preserve" if fixed_mode else opts.training]  # ep.module() refuses train()/eval()
    operator_export_type = getattr(torch.onnx.OperatorExportTypes, opts.operator_export_type)
    opset = opts.opset or torchscript_default_opset()
    input_names = [s.name for s in recipe.inputs]
    if flat:  # it takes positional tensors and returns tensors: the model wrapped to fit
        model, args, input_names = structured.torchscript_call(recipe, model, args)
    try:
        with modes_kept(model):  # a wrapper's mode never reaches the model
            torch.onnx.export(
                model, args, str(path), dynamo=False,
                input_names=input_names or None,
                output_names=[s.name for s in recipe.outputs] or None,
                opset_version=opset,
                dynamic_axes=inputs_mod.dynamic_axes(recipe),
                export_params=opts.export_params,
                keep_initializers_as_inputs=opts.keep_initializers_as_inputs,
                training=training,
                operator_export_type=operator_export_type,
                do_constant_folding=opts.do_constant_folding,
                custom_opsets=opts.custom_opsets or None,
            )
    except (Exception, SystemExit) as exc:  # sys.exit() in the traced forward: blamed
        raise _classify(exc, recipe, lambda: diagnose.unsupported_operators_torchscript(
            model, args, opset, opts.operator_export_type), user_file) from None


def torchscript_default_opset() -> int:
    """The opset the TorchScript exporter writes when the recipe names none."""
    return min(torch_private.onnx_default_opset(), torch_private.torchscript_max_opset())


def exporter_opsets() -> dict[str, tuple[int, int]]:
    """The opsets each exporter of the installed torch writes, lowest and highest."""
    lowest, highest = torch_private.onnx_opset_range()
    return {
        # dynamo's translations start at 18; below it only a version conversion is tried,
        # which fails for most operators and then silently keeps 18
        "dynamo": (DYNAMO_MIN_OPSET, highest),
        "torchscript": (lowest, torch_private.torchscript_max_opset()),
    }


def _check_opset(exporter: str, opset: int | None) -> None:
    """Refuse, before any work, an opset the chosen exporter cannot write."""
    if opset is None:
        return
    low, high = exporter_opsets()[exporter]
    if low <= opset <= high:
        return
    if exporter == "dynamo" and opset < low:
        message = (f"The dynamo exporter writes opset {low} or newer; choose {low}+ or the "
                   "TorchScript exporter.")
    else:
        message = (f"The {exporter} exporter of this torch writes opsets {low} to {high}, "
                   f"not {opset}.")
    raise StudioError("recipe", message, f"Set export.opset between {low} and {high}, or leave "
                      "it out for the exporter's default.")


def _classify(exc: BaseException, recipe: Recipe, find_all: Any,
              user_file: Path | None = None) -> StudioError:
    """Turn an exporter exception into a StudioError chosen by its cause
    (onnx_studio.engine.export.failures.export_failure)."""
    return failures.export_failure(exc, recipe.export.exporter, find_all, user_file)


def _first_run(recipe: Recipe, loaded: Any, sizes: dict[str, int] | None
               ) -> tuple[tuple[Any, ...], Any] | None:
    """The export's inputs at `sizes` and what forward() returns on them. With `sizes` (the
    trace sizes), a model that fails there gives None: the caller tries the example's own
    sizes, whose failure is the one to report."""
    from onnx_studio.engine.source import inputs as inputs_mod

    device = recipe.export.device
    try:
        args = inputs_mod.make_inputs(recipe, device=device, model=loaded.module, sizes=sizes)
        with _checking_mode(loaded.module, loaded.kind):
            return args, _dry_run(loaded.module, args, recipe, loaded.source_file)
    except StudioError:
        if not sizes:
            raise
        return None


def _dry_run(module: Any, args: tuple[Any, ...], recipe: Recipe,
             user_file: Path | None = None) -> Any:
    """Run forward once in eval mode so wrong inputs fail with a sentence about the inputs,
    not deep inside the exporter; also check the recipe does not name more outputs than exist.
    Returns what forward() returned."""
    import torch

    from onnx_studio.engine.source.arguments import call_arguments

    # clones: a model that writes into its inputs must not change the export's example inputs
    copies = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
    call_args, call_kwargs = call_arguments(recipe, copies, module)
    try:
        with torch.no_grad():
            result = module(*call_args, **call_kwargs)
    except (Exception, SystemExit) as exc:  # sys.exit() in user code must not end us
        given = ", ".join(f"{s.name}{list(s.shape)}" if s.is_tensor else
                          f"{s.name}={s.constant_value!r}" for s in recipe.inputs) or "no inputs"
        # by its cause: sys.exit, memory, inputs that do not fit, or the model's own error
        raise blame.model_error(exc, user_file=user_file, given=given) from None
    leaves = [leaf for _, leaf in torch_private.named_leaves(result)]
    if not any(isinstance(leaf, torch.Tensor) for leaf in leaves):
        returned = "None" if result is None else f"no tensor ({type(result).__name__})"
        raise StudioError(
            "export", f"The model's forward() returns {returned}, so an ONNX file of it would "
            "compute nothing; nothing was written.",
            "Make forward() return the tensors the ONNX file should compute.")
    count = len(leaves)
    if len(recipe.outputs) > count:
        raise StudioError(
            "recipe", f"The recipe names {len(recipe.outputs)} outputs but forward() returns "
            f"{count}; remove the extra [[outputs]] entries.")
    return result


@contextlib.contextmanager
def _checking_mode(module: Any, kind: str) -> Iterator[None]:
    """Eval mode for the check run, each submodule's own mode restored afterwards.

    With training = "preserve" the module may be in train mode; the check run must not
    update BatchNorm statistics before the export reads them. The `training` flags are set
    directly because ep.module() refuses eval(), and restored one by one because a saved
    module may mix modes.
    """
    subs = list(module.modules()) if kind != "exported_program" and hasattr(
        module, "modules") else []
    modes = [m.training for m in subs]
    try:
        for m in subs:
            m.training = False
        yield
    finally:
        for m, mode in zip(subs, modes, strict=True):
            m.training = mode


def _set_training_mode(module: Any, training: str) -> None:
    if training == "preserve" or not hasattr(module, "train"):
        return
    module.train(training == "train")


# Every extension file run in this process, as (resolved path, mtime), recorded before it runs.
# What an extension registers (custom symbolics, torch.library ops) cannot be undone, so a
# process that ran one is not clean any more: the warm worker ends after such a job.
_extensions_run: set[tuple[str, float]] = set()


def extensions_run() -> frozenset[tuple[str, float]]:
    """The extension files this process has run, as (resolved path, mtime); empty when none."""
    return frozenset(_extensions_run)


def _run_extensions(recipe: Recipe) -> dict[Any, Any]:
    """Run each extension file; collect its `custom_translation_table` (dynamo) if it has one."""
    table: dict[Any, Any] = {}
    for ext in recipe.export.extensions:
        path = recipe.resolve(ext)
        if not path.is_file():
            raise StudioError("source", f"Extension file {path} does not exist; fix "
                              "export.extensions.")
        with contextlib.suppress(OSError):
            _extensions_run.add((str(path.resolve()), path.stat().st_mtime))
        try:
            namespace = runpy.run_path(str(path), run_name=f"onnx_studio_extension_{path.stem}")
        except (Exception, SystemExit) as exc:
            raise StudioError("source", f"Extension {path.name} failed to run: "
                              f"{one_line(exc)}.", "Fix the extension file.",
                              details=chain_text(exc)) from None
        table.update(namespace.get("custom_translation_table", {}) or {})
    return table
