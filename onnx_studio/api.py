"""The Python API's calls: each one runs its job in a worker process of its own and returns the
typed document the command line prints as JSON.

Every call returns its document on every outcome, as the CLI does: `doc.ok` says whether it
passed, `doc.error` (an `onnx_studio.engine.protocol.Error`) what failed and what to change, and
`doc.error.exit_status()` the CLI's exit status (2: the request itself is wrong). Whatever the
model does to its worker (`os._exit`, a segmentation fault, the out-of-memory killer) ends in
an error of kind `worker_crashed`, never in the caller; Ctrl+C (SIGINT on the main thread)
ends the job and returns kind `cancelled`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine import shipped
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.paths import output_folder
from onnx_studio.engine.protocol import (
    BatchSummary,
    CompareDocument,
    CompareRequest,
    CompareResult,
    ExplainDocument,
    ExplainRequest,
    ExplainResult,
    ExportReport,
    ExportRequest,
    ProfileDocument,
    ProfileRequest,
    ProfileResult,
    ValidateFileRequest,
    VariantReport,
    VariantRequest,
    VariantResult,
)
from onnx_studio.engine.recipe import Recipe, check_recipe, to_toml
from onnx_studio.job_documents import ProgressCallback, document, export_report, run

if TYPE_CHECKING:
    import torch

PathLike = str | os.PathLike[str]
RecipeLike = Recipe | PathLike  # a Recipe object, or the path of a recipe file


def load_recipe(path: PathLike) -> Recipe:
    """The recipe in a TOML file (relative paths resolve against its folder); raises
    `StudioError` kind `recipe` naming the field at fault."""
    return recipes.load(shipped.runnable(path))


def loads_recipe(text: str, base_dir: PathLike | None = None) -> Recipe:
    """The recipe in TOML text (relative paths resolve against `base_dir`, default the current
    folder); raises `StudioError` kind `recipe` naming the field at fault."""
    return recipes.loads(text, base_dir=None if base_dir is None else Path(base_dir))


def export(recipe: RecipeLike | torch.nn.Module, args: Sequence[Any] | None = None,
           kwargs: Mapping[str, Any] | None = None, *, output: PathLike | None = None,
           dynamic_shapes: Any = None, input_names: Sequence[str] | None = None,
           output_names: Sequence[str] | None = None, opset: int | None = None,
           exporter: str | None = None, validate: bool | None = None,
           rtol: float | None = None, atol: float | None = None, device: str | None = None,
           progress: ProgressCallback | None = None,
           timeout: float | None = None) -> ExportReport:
    """Export the recipe's model (and validate it when `validate`, or when the recipe says so
    and `validate` is None): what `onnx-studio export --recipe R --json` prints.

    `output` replaces the recipe's `export.output`; `progress(fraction, stage)` hears the
    job's stages; past `timeout` seconds the job is ended (kind `timeout`).

    Given a `torch.nn.Module` instead of a recipe, export it as `torch.onnx.export` would:
    `export(model, args=(x,), kwargs=None, output="m.onnx", dynamic_shapes=...,
    input_names=..., output_names=..., opset=...)`, validated (`validate` True unless False)
    against that very module on those arguments. `dynamic_shapes` is torch.export's: a dict
    keyed by forward()'s parameter names (or a tuple in their order), each tensor's entry
    `{axis: dim}` or one dim per axis, a dim a name, a `torch.export.Dim` (its min/max kept),
    `Dim.AUTO`/`Dim.DYNAMIC` or None. Your module is left as it is; the worker's copy is
    exported in eval mode, on the device of its parameters unless `device` says otherwise.

    The module runs in a worker process, as a recipe's does: it is pickled with cloudpickle
    (a class defined in a notebook's or a script's `__main__`, or in a file of your own
    folder, travels with its code; installed packages are imported by the worker) and the
    example tensors saved beside it, in a job folder under the studio's cache that is removed
    afterwards. A model that crashes its process comes back as kind `worker_crashed`. The
    worker unpickles what you passed, so this needs no `trust_pickle` from you: the trust is
    the one you have in your own object. A module that cannot be pickled (it holds an open
    file, a lock, a data loader) is a document of kind `source` saying so; it cannot be
    exported in this process instead. The validation runs on your example arguments (the
    worker cannot draw other sizes of a dynamic dimension from values it did not make).
    """
    from onnx_studio.model_jobs import is_model

    if is_model(recipe):
        from onnx_studio.model_jobs import export_model
        from onnx_studio.model_recipe import ModelCall

        return export_model(recipe, ModelCall(args, kwargs, dynamic_shapes, input_names,
                                              output_names),
                            output=output, opset=opset, exporter=exporter, validate=validate,
                            rtol=rtol, atol=atol, device=device, progress=progress,
                            timeout=timeout)
    model_only = {"args": args, "kwargs": kwargs, "dynamic_shapes": dynamic_shapes,
                  "input_names": input_names, "output_names": output_names, "opset": opset,
                  "exporter": exporter, "rtol": rtol, "atol": atol, "device": device}
    given = [name for name, value in model_only.items() if value is not None]
    if given:
        return ExportReport().fail(StudioError(
            "recipe", f"{given[0]} applies to a model object, not a recipe; the recipe says "
            "it.", "Set it in the recipe, or pass the torch.nn.Module itself.", exit_code=2))

    def job() -> ExportReport:
        _check(output=(output, _PATH_OR_NONE), validate=(validate, _BOOL_OR_NONE),
               progress=(progress, _CALLABLE_OR_NONE), timeout=(timeout, _SECONDS_OR_NONE))
        chosen = _recipe(recipe)
        if output is not None:
            chosen.export.output = os.path.abspath(output)
        if validate:
            chosen.validate.enabled = True
        check_recipe(chosen)
        result = run(ExportRequest(recipe=to_toml(chosen), base_dir=str(chosen.base_dir),
                                    validate=validate, plots_beside_onnx=True),
                      output_folder(chosen), progress, timeout)
        return export_report(result)

    return document(ExportReport, job)


def validate(model: PathLike | torch.nn.Module, recipe: RecipeLike | PathLike,
             args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None, *,
             rtol: float | None = None, atol: float | None = None, device: str | None = None,
             progress: ProgressCallback | None = None,
             timeout: float | None = None) -> ExportReport:
    """Validate an .onnx file (or a Hugging Face export's folder) against the recipe's
    PyTorch model: what `onnx-studio validate MODEL --recipe R --json` prints.

    Given a `torch.nn.Module` first, validate the .onnx file named second against it on the
    example arguments: `validate(model, "m.onnx", args=(x,))`, in a worker process as
    `export(model, ...)` does (see there).
    """
    from onnx_studio.model_jobs import is_model

    if is_model(model):
        from onnx_studio.model_jobs import validate_model
        from onnx_studio.model_recipe import ModelCall

        if isinstance(recipe, Recipe):
            return ExportReport().fail(StudioError(
                "recipe", "Given a model object, validate takes the .onnx file's path second, "
                "not a recipe.", "Call validate(model, 'model.onnx', args=(x,)).", exit_code=2))
        return validate_model(model, recipe, ModelCall(args, kwargs), rtol=rtol, atol=atol,
                              device=device, progress=progress, timeout=timeout)
    if args is not None or kwargs is not None or device is not None:
        return ExportReport().fail(StudioError(
            "recipe", "args, kwargs and device apply to a model object, not a recipe; the "
            "recipe says them.", "Pass the torch.nn.Module first, or leave them out.",
            exit_code=2))

    def job() -> ExportReport:
        _check(model=(model, _PATH), rtol=(rtol, _TOLERANCE_OR_NONE),
               atol=(atol, _TOLERANCE_OR_NONE), progress=(progress, _CALLABLE_OR_NONE),
               timeout=(timeout, _SECONDS_OR_NONE))
        chosen = _recipe(recipe)
        if rtol is not None:
            chosen.validate.rtol = rtol
        if atol is not None:
            chosen.validate.atol = atol
        check_recipe(chosen)
        path = Path(model).expanduser().resolve()
        result = run(ValidateFileRequest(recipe=to_toml(chosen),
                                          base_dir=str(chosen.base_dir), onnx=str(path)),
                      path.parent, progress, timeout)
        return export_report(result)

    return document(ExportReport, job)


def compare(a: PathLike, b: PathLike, *, recipe: RecipeLike | None = None, runs: int = 20,
            dims: dict[str, int] | None = None, progress: ProgressCallback | None = None,
            timeout: float | None = None) -> CompareDocument:
    """Compare two .onnx files (graphs, weights, outputs on the same inputs, latency), A the
    reference: what `onnx-studio compare A B --json` prints; files that disagree are a failed
    document (kind `validation`). `dims` sizes dynamic dimensions when there is no recipe."""
    from onnx_studio.engine.analysis.commands import judge_comparison

    def job() -> CompareDocument:
        _check(a=(a, _PATH), b=(b, _PATH), runs=(runs, _COUNT), dims=(dims, _DIMS_OR_NONE),
               progress=(progress, _CALLABLE_OR_NONE), timeout=(timeout, _SECONDS_OR_NONE))
        chosen = None if recipe is None else _recipe(recipe)
        result = run(CompareRequest(a=_absolute(a), b=_absolute(b),
                                     recipe=None if chosen is None else to_toml(chosen),
                                     base_dir=None if chosen is None else str(chosen.base_dir),
                                     dims=dict(dims or {}), runs=runs),
                      Path.cwd(), progress, timeout)
        assert isinstance(result, CompareResult)
        judge_comparison(result.comparison)
        return result.comparison

    return document(CompareDocument, job)


def profile(model: PathLike, *, recipe: RecipeLike | None = None, runs: int = 20,
            warmup: int = 3, provider: str = "CPUExecutionProvider",
            threads: int | None = None, optimization: str = "all",
            dims: dict[str, int] | None = None, progress: ProgressCallback | None = None,
            timeout: float | None = None) -> ProfileDocument:
    """Time an .onnx file in ONNX Runtime, per node, operator and module group (and eager
    PyTorch with a recipe): what `onnx-studio profile MODEL --json` prints."""
    def job() -> ProfileDocument:
        _check(model=(model, _PATH), runs=(runs, _COUNT), warmup=(warmup, _COUNT_OR_ZERO),
               provider=(provider, _TEXT), threads=(threads, _COUNT_OR_NONE),
               optimization=(optimization, _TEXT), dims=(dims, _DIMS_OR_NONE),
               progress=(progress, _CALLABLE_OR_NONE), timeout=(timeout, _SECONDS_OR_NONE))
        chosen = None if recipe is None else _recipe(recipe)
        result = run(ProfileRequest(onnx=_absolute(model),
                                     recipe=None if chosen is None else to_toml(chosen),
                                     base_dir=None if chosen is None else str(chosen.base_dir),
                                     runs=runs, warmup=warmup,
                                     provider=provider, threads=threads,
                                     optimization=optimization, dims=dict(dims or {})),
                      Path.cwd(), progress, timeout)
        assert isinstance(result, ProfileResult)
        return result.profile

    return document(ProfileDocument, job)


def variant(model: PathLike, recipe: RecipeLike, kind: str, output: PathLike, *,
            rtol: float | None = None, atol: float | None = None, keep_io_types: bool = True,
            optimization: str = "extended", keep_fp32: str | Sequence[str] | None = None,
            progress: ProgressCallback | None = None,
            timeout: float | None = None) -> VariantReport:
    """Write an `optimized`, `fp16` or `int8` copy of an .onnx file and validate it against
    the recipe's PyTorch model: what `onnx-studio variant --json` prints. `keep_fp32` (fp16
    only): `"auto"` finds the nodes to keep in float32 so the variant passes, or name them."""
    def job() -> VariantReport:
        _check(model=(model, _PATH), kind=(kind, _TEXT), output=(output, _PATH),
               rtol=(rtol, _TOLERANCE_OR_NONE), atol=(atol, _TOLERANCE_OR_NONE),
               keep_io_types=(keep_io_types, _BOOL), optimization=(optimization, _TEXT),
               keep_fp32=(keep_fp32, _NAMES_OR_NONE), progress=(progress, _CALLABLE_OR_NONE),
               timeout=(timeout, _SECONDS_OR_NONE))
        if kind not in ("fp16", "int8", "optimized"):
            raise StudioError("recipe", f"kind {kind!r}: use fp16, int8 or optimized.",
                              exit_code=2)
        from onnx_studio.engine.analysis.commands import keep_fp32_request

        chosen = _recipe(recipe)
        target = _absolute(output)
        keep = keep_fp32 if keep_fp32 is None or isinstance(keep_fp32, str) \
            else ",".join(keep_fp32)
        result = run(VariantRequest(onnx=_absolute(model), recipe=to_toml(chosen),
                                     base_dir=str(chosen.base_dir), kind=kind, output=target,
                                     rtol=rtol, atol=atol, keep_io_types=keep_io_types,
                                     optimization=optimization,
                                     keep_fp32=keep_fp32_request(keep, kind)),
                      Path(target).parent, progress, timeout)
        assert isinstance(result, VariantResult)
        return result.variant_report

    return document(VariantReport, job)


def explain(model: PathLike, recipe: RecipeLike, *, repro_dir: PathLike | None = None,
            write_repro: bool = True, progress: ProgressCallback | None = None,
            timeout: float | None = None) -> ExplainDocument:
    """Name the first node of an .onnx file (a Hugging Face recipe: its export folder) whose
    outputs leave the tolerance while its inputs are within it, with its module and source
    line, and write a repro folder (default: beside the file): what `onnx-studio explain
    --json` prints; `diverges` is false for a file that computes what the model computes."""
    def job() -> ExplainDocument:
        _check(model=(model, _PATH), repro_dir=(repro_dir, _PATH_OR_NONE),
               write_repro=(write_repro, _BOOL), progress=(progress, _CALLABLE_OR_NONE),
               timeout=(timeout, _SECONDS_OR_NONE))
        chosen = _recipe(recipe)
        target = _absolute(model)
        repro = None if repro_dir is None else _absolute(repro_dir)
        result = run(ExplainRequest(onnx=target, recipe=to_toml(chosen),
                                     base_dir=str(chosen.base_dir), repro_dir=repro,
                                     write_repro=write_repro),
                      Path(repro).parent if repro else Path(target).parent, progress, timeout)
        assert isinstance(result, ExplainResult)
        return result.explanation

    return document(ExplainDocument, job)


def batch(items: Sequence[RecipeLike], report_dir: PathLike, *, list_file: PathLike | None = None,
          workers: int | None = None, executor: str = "local", ray_address: str | None = None,
          timeout: float | None = None, resume: bool = False, retry_failed: bool = False,
          wait: bool = False, verbose: bool = False,
          stream: TextIO | None = None) -> BatchSummary:
    """Export (and validate, as each recipe says) many items, each in a worker process of its
    own, `workers` at a time, here (`executor="local"`) or as Ray tasks (`"ray"`): what
    `onnx-studio batch ... -o REPORT_DIR --json` prints, with every item's full document in
    `summary.records`. An item is a recipe (object or path) or an `"hf:DIR"` /
    `"hf-config:DIR"` folder. REPORT_DIR gets results.jsonl and report.html; progress lines go
    to `stream` (default standard error).
    """
    from onnx_studio.engine.batch import BatchOptions, read_items, run_batch

    options = BatchOptions(workers=workers, executor=executor, ray_address=ray_address,
                           timeout=timeout, resume=resume, verbose=verbose,
                           retry_failed=retry_failed, wait=wait)
    try:
        _check(items=(items, _ITEMS), report_dir=(report_dir, _PATH),
               list_file=(list_file, _PATH_OR_NONE), workers=(workers, _COUNT_OR_NONE),
               executor=(executor, _TEXT), ray_address=(ray_address, _TEXT_OR_NONE),
               timeout=(timeout, _SECONDS_OR_NONE), resume=(resume, _BOOL),
               retry_failed=(retry_failed, _BOOL), wait=(wait, _BOOL),
               verbose=(verbose, _BOOL))
        options.check()
        named = [item if isinstance(item, Recipe) else os.fspath(item) for item in items]
        jobs = read_items(named, None if list_file is None else os.fspath(list_file),
                          Path(report_dir))
        return run_batch(jobs, Path(report_dir), options, stream or sys.stderr)
    except StudioError as err:
        return BatchSummary().fail(err)
    except KeyboardInterrupt:
        return BatchSummary().fail(StudioError("cancelled", "Stopped by KeyboardInterrupt "
                                               "(Ctrl+C).", "Call it again to run it."))


# ---------------------------------------------------------------------------- the request check
#
# Every argument is checked at the edge, before any work: a wrong one is a document of kind
# `recipe` (exit status 2, as the CLI's), never a TypeError from deep inside.

Check = tuple[Callable[[object], bool], str]  # (accepts the value?, what it should be)


def _is_path(value: object) -> bool:
    return isinstance(value, str | os.PathLike) and bool(os.fspath(value))


def _number_at_least(value: object, low: float, *, above: bool = False) -> bool:
    """A real number (not a bool, not NaN) >= low (> low with `above`)."""
    if not isinstance(value, int | float) or isinstance(value, bool) or value != value:
        return False
    return value > low if above else value >= low


_PATH: Check = (_is_path, "a path (str or os.PathLike)")
_PATH_OR_NONE: Check = (lambda v: v is None or _is_path(v), "a path (str or os.PathLike) or None")
_BOOL: Check = (lambda v: isinstance(v, bool), "True or False")
_BOOL_OR_NONE: Check = (lambda v: v is None or isinstance(v, bool), "True, False or None")
_TEXT: Check = (lambda v: isinstance(v, str) and bool(v), "a non-empty string")
_TEXT_OR_NONE: Check = (lambda v: v is None or (isinstance(v, str) and bool(v)),
                        "a non-empty string or None")
_CALLABLE_OR_NONE: Check = (lambda v: v is None or callable(v),
                            "a function progress(fraction, stage), or None")
_SECONDS_OR_NONE: Check = (lambda v: v is None or _number_at_least(v, 0, above=True),
                           "a number of seconds above 0, or None")
_TOLERANCE_OR_NONE: Check = (lambda v: v is None or _number_at_least(v, 0),
                             "a number of at least 0, or None")
_COUNT: Check = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                 "a whole number of at least 1")
_COUNT_OR_ZERO: Check = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                         "a whole number of at least 0")
_COUNT_OR_NONE: Check = (lambda v: v is None or _COUNT[0](v), "a whole number of at least 1, "
                         "or None")
_DIMS_OR_NONE: Check = (lambda v: v is None or (isinstance(v, dict) and all(
    isinstance(k, str) and _COUNT[0](n) for k, n in v.items())),
    "a dict of dimension name -> size (a whole number of at least 1), or None")
_NAMES_OR_NONE: Check = (lambda v: v is None or isinstance(v, str) or (
    isinstance(v, Sequence) and all(isinstance(n, str) for n in v)),
    '"auto", node names (a string or a list of strings), or None')
_ITEMS: Check = (lambda v: isinstance(v, Sequence) and not isinstance(v, str | bytes)
                 and all(isinstance(i, Recipe) or _is_path(i) for i in v),
                 "a list of recipes (Recipe objects or recipe paths) and hf:DIR folders")


def _check(**arguments: tuple[object, Check]) -> None:
    """A `recipe` StudioError (exit status 2) naming the first argument that is not what it
    should be."""
    for name, (value, (accepts, wanted)) in arguments.items():
        if not accepts(value):
            raise StudioError("recipe", f"{name} must be {wanted}; got {_shown(value)}.",
                              f"Pass {name} as {wanted}.", exit_code=2)


def _shown(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


# ---------------------------------------------------------------------------- the plumbing


def _recipe(recipe: RecipeLike) -> Recipe:
    """A copy of a Recipe object (the caller's stays as it was), or the recipe file loaded."""
    if not isinstance(recipe, Recipe) and not _is_path(recipe):
        raise StudioError("recipe", f"recipe must be a Recipe or the path of a recipe file; got "
                          f"{_shown(recipe)}.", "Pass a Recipe (onnx_studio.load_recipe(path)) "
                          "or the path of a .toml recipe.", exit_code=2)
    chosen = recipe.copy() if isinstance(recipe, Recipe) else load_recipe(recipe)
    check_recipe(chosen)
    return chosen


def _absolute(path: PathLike) -> str:
    return str(Path(path).expanduser().resolve())

