"""Variants of an exported file — ORT-optimized, fp16, dynamic int8 — each validated against
eager PyTorch with a tolerance fit for its precision.

- `optimized`: onnxruntime's graph optimizations saved as a file
  (`SessionOptions.optimized_model_filepath`) at level "extended" by default: "all" adds
  layout changes (NCHWc) tied to this machine's CPU, which onnxruntime advises against saving.
- `fp16`: onnxruntime.transformers' float16 converter (weights and compute in float16);
  `keep_io_types` (default true) keeps the inputs and outputs float32, so the same feeds run it.
- `int8`: onnxruntime.quantization.quantize_dynamic, int8 weights (QInt8), activations
  quantized at run time.

Tolerances, each the larger of the recipe's [validate] value and the kind's floor (explicit
`rtol`/`atol` arguments replace both): optimized rtol 1e-3, atol 1e-4 (fusions reorder float
sums); fp16 rtol 1e-2, atol 1e-2 (float16 keeps ~3 significant digits, errors add up over
layers); int8 rtol 0.1, atol 0.1 (8-bit weights and activations). These are fixed numbers
on the output values, so a model with large outputs may need its own.

The variant is written like an export (onnx_studio.engine.export.onnx_file.AtomicOnnxWrite: a temp
folder beside the target, onnx.checker, then renamed into place) and validated with
onnx_studio.engine.pipeline.validate_file. A variant that misses its tolerance is still written, and
the report says it failed (ok false, error kind "validation": exit status 1).

For a Hugging Face recipe the source and the variant are folders, every file of the export
converted and the folder validated (onnx_studio.engine.analysis.folder_variants).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onnx_studio.engine.analysis.conversions import (
    OPTIMIZED_LEVEL,
    TOLERANCES,
    HalfPrecision,
    check_request,
    fail_message,
    variant_tolerance,
    write_converted,
)
from onnx_studio.engine.analysis.feeds import feeds_from_recipe
from onnx_studio.engine.analysis.model_file import ModelFile
from onnx_studio.engine.analysis.timing import DEFAULT_RUNS, open_session, percentiles, time_calls
from onnx_studio.engine.errors import StudioError, one_line
from onnx_studio.engine.events import Events
from onnx_studio.engine.export.onnx_file import (
    AtomicOnnxWrite,
    check_output_path,
    with_data_files,
)
from onnx_studio.engine.file_set import check_apart
from onnx_studio.engine.protocol import ExportReport
from onnx_studio.engine.recipe import Recipe

# the kinds and their tolerance floors are the conversions' (re-exported: callers name them here)
__all__ = ["OPTIMIZED_LEVEL", "TOLERANCES", "make_variant"]


def make_variant(source: Path, recipe: Recipe, kind: str, output: Path,
                 events: Events | None = None, *, rtol: float | None = None,
                 atol: float | None = None, keep_io_types: bool = True,
                 optimization: str = OPTIMIZED_LEVEL, runs: int = DEFAULT_RUNS,
                 keep_fp32: str | None = None) -> ExportReport:
    """Write the `kind` variant of `source` to `output`, validate it, and return the export
    document with its `validation` and a `variant` object (sizes, latencies, max error).

    fp16: `keep_fp32` is "auto" (onnx_studio.engine.analysis.fp16.auto_keep) or node names joined by
    commas, computed in float32; the verdict also fails on a value the variant holds in
    float16 beyond its range (onnx_studio.engine.analysis.ranges), naming the node.

    Raises StudioError for a wrong request (unknown kind, missing source, unusable output
    path, --keep-fp32 for another kind or naming no node: exit 2) or a conversion that fails
    (kind "export"); a variant that misses its tolerance is a report with ok false.
    """
    from onnx_studio.engine.pipeline import validate_file
    from onnx_studio.engine.protocol import VariantFacts, VariantReport
    from onnx_studio.engine.source.hf import is_hf_source

    events = events or Events()
    check_request(kind, keep_fp32)
    if is_hf_source(recipe.model.source):
        from onnx_studio.engine.analysis.folder_variants import make_folder_variant

        return make_folder_variant(source, recipe, kind, output, events, rtol=rtol,
                                   atol=atol, keep_io_types=keep_io_types,
                                   optimization=optimization, runs=runs, keep_fp32=keep_fp32)
    source = Path(source).resolve()
    original = ModelFile.read(source)
    output = check_output_path(Path(output))
    inputs = with_data_files(source)
    check_apart([output], inputs, "The variant")
    r, a = variant_tolerance(kind, recipe, rtol, atol)
    started = time.perf_counter()
    half = HalfPrecision.prepare(source, original, recipe, keep_fp32, r, a, keep_io_types,
                         events.part(0.0, 0.3)) if kind == "fp16" else None
    events.progress(0.3 if half else 0.0, f"Making the {kind} variant")
    settings = _write(kind, source, output, keep_io_types, optimization,
                      set(half.kept) if half else set(), inputs)
    if kind == "fp16":  # what was asked (the nodes it came to are `kept_fp32`)
        settings["keep_fp32"] = keep_fp32
    made = time.perf_counter() - started

    checked = dataclasses.replace(recipe, validate=dataclasses.replace(recipe.validate,
                                                                       rtol=r, atol=a))
    checked.base_dir = recipe.base_dir
    base = validate_file(checked, output, events.part(0.35 if half else 0.2, 0.8))
    report = VariantReport(**{f.name: getattr(base, f.name)
                              for f in dataclasses.fields(ExportReport)})
    report.seconds = {"variant": made, **base.seconds}
    if half is not None:
        half.judge(output, report)
    events.progress(0.8, "Measuring latency")
    facts: dict[str, Any] = {"kind": kind, "source": str(source), "settings": settings,
                             "rtol": r, "atol": a}
    facts["size_bytes"] = ModelFile.read(output).size_bytes
    facts["source_size_bytes"] = original.size_bytes
    facts["size_ratio"] = round(facts["size_bytes"] / facts["source_size_bytes"], 4)
    try:
        lat_source, lat_variant = _latencies(source, output, recipe, runs)
        facts.update(latency_ms=lat_variant, source_latency_ms=lat_source,
                     latency_ratio=round(lat_variant["p50"] / lat_source["p50"], 4)
                     if lat_source["p50"] else None)
    except StudioError as err:  # a variant that does not run has no latency; validation says
        facts["note"] = err.message
    if report.validation is not None:
        diffs = [o.max_abs_diff for o in report.validation.outputs if o.max_abs_diff is not None]
        facts["max_abs_diff"] = max(diffs) if diffs else None
    if half is not None:
        facts.update(half.facts())
    report.variant = VariantFacts.from_dict(facts)
    fail_message(report, kind, output, r, a)
    events.progress(1.0, "Variant validated" if report.ok else "Variant failed")
    return report


def _write(kind: str, source: Path, output: Path, keep_io_types: bool, optimization: str,
           keep: set[str], inputs: list[Path]) -> dict[str, str | bool | None]:
    """Make the variant in a staging folder beside `output` and commit it into place (never
    over one of `inputs`: the source file and its data)."""
    with AtomicOnnxWrite(output, inputs) as write:
        target = write.temp_path
        try:
            settings = write_converted(kind, source, target, keep_io_types, optimization, keep)
        except StudioError:
            raise
        except Exception as exc:
            raise StudioError("export", f"The {kind} conversion failed: {one_line(exc)}.",
                              "The details hold onnxruntime's message; the other kinds may "
                              "still work.", details=str(exc)) from None
        write.finish("auto")
    return settings


def _runner(session: Any, feeds: dict[str, Any]) -> Callable[[], Any]:
    return lambda: session.run(None, feeds)


def _latencies(source: Path, variant: Path, recipe: Recipe, runs: int
               ) -> tuple[dict[str, float], dict[str, float]]:
    """p50/p90 of the source and the variant on the recipe's export inputs."""
    results = []
    feeds = None
    for path in (source, variant):
        session, _ = open_session(path, providers=recipe.validate.providers)
        if feeds is None:
            names = [i.name for i in session.get_inputs()]
            feeds = feeds_from_recipe(recipe, names).arrays
        wanted = {i.name for i in session.get_inputs()}
        mine = {k: v for k, v in feeds.items() if k in wanted}
        results.append(percentiles(time_calls(_runner(session, mine), runs)))
    return results[0], results[1]
