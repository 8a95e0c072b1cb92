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

The variant is written like an export (engine.export.onnx_file.AtomicOnnxWrite: a temp folder
beside the target, onnx.checker, then renamed into place) and validated with
engine.pipeline.validate_file. A variant that misses its tolerance is still written, and the
report says it failed (ok false, error kind "validation": exit status 1).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.analysis.feeds import feeds_from_recipe
from engine.analysis.model_file import ModelFile
from engine.analysis.timing import DEFAULT_RUNS, open_session, percentiles, time_calls
from engine.errors import StudioError, one_line
from engine.events import Events
from engine.export.onnx_file import AtomicOnnxWrite, check_output_path
from engine.protocol import ExportReport
from engine.recipe import Recipe

VARIANT_KINDS = ("optimized", "fp16", "int8")
# (rtol, atol) floors per kind; see the module docstring
TOLERANCES = {"optimized": (1e-3, 1e-4), "fp16": (1e-2, 1e-2), "int8": (1e-1, 1e-1)}
OPTIMIZED_LEVEL = "extended"


def variant_tolerance(kind: str, recipe: Recipe, rtol: float | None = None,
                      atol: float | None = None) -> tuple[float, float]:
    """The (rtol, atol) a `kind` variant is validated with (see the module docstring)."""
    floor_r, floor_a = TOLERANCES[kind]
    return (max(recipe.validate.rtol, floor_r) if rtol is None else rtol,
            max(recipe.validate.atol, floor_a) if atol is None else atol)


def make_variant(source: Path, recipe: Recipe, kind: str, output: Path,
                 events: Events | None = None, *, rtol: float | None = None,
                 atol: float | None = None, keep_io_types: bool = True,
                 optimization: str = OPTIMIZED_LEVEL, runs: int = DEFAULT_RUNS
                 ) -> ExportReport:
    """Write the `kind` variant of `source` to `output`, validate it, and return the export
    document with its `validation` and a `variant` object (sizes, latencies, max error).

    Raises StudioError for a wrong request (unknown kind, missing source, unusable output
    path: exit 2) or a conversion that fails (kind "export"); a variant that misses its
    tolerance is a report with ok false.
    """
    from engine.pipeline import validate_file
    from engine.protocol import VariantFacts, VariantReport

    events = events or Events()
    if kind not in VARIANT_KINDS:
        raise StudioError("recipe", f"Unknown variant kind {kind!r}; use one of "
                          f"{', '.join(VARIANT_KINDS)}.", exit_code=2)
    source = Path(source).resolve()
    original = ModelFile.read(source)
    output = check_output_path(Path(output))
    if output == source:
        raise StudioError("write", "The variant would overwrite its source file; choose "
                          "another -o path.", exit_code=2)
    started = time.perf_counter()
    events.progress(0.0, f"Making the {kind} variant")
    settings = _write(kind, source, output, keep_io_types, optimization)
    made = time.perf_counter() - started

    r, a = variant_tolerance(kind, recipe, rtol, atol)
    checked = dataclasses.replace(recipe, validate=dataclasses.replace(recipe.validate,
                                                                       rtol=r, atol=a))
    checked.base_dir = recipe.base_dir
    base = validate_file(checked, output, events.part(0.2, 0.8))
    report = VariantReport(**{f.name: getattr(base, f.name)
                              for f in dataclasses.fields(ExportReport)})
    report.seconds = {"variant": made, **base.seconds}
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
    report.variant = VariantFacts.from_dict(facts)
    if report.error is not None and report.error.kind == "validation":
        report.error.message = (f"The {kind} variant was written to {output.name} but misses "
                                f"its tolerance (rtol {r:g}, atol {a:g}): "
                                f"{report.error.message}")
    events.progress(1.0, "Variant validated" if report.ok else "Variant failed")
    return report


def _write(kind: str, source: Path, output: Path, keep_io_types: bool, optimization: str
           ) -> dict[str, str]:
    """Make the variant in a temp folder beside `output` and rename it into place."""
    with AtomicOnnxWrite(output) as write:
        target = write.temp_path
        try:
            settings = _convert(kind, source, target, keep_io_types, optimization)
        except StudioError:
            raise
        except Exception as exc:
            raise StudioError("export", f"The {kind} conversion failed: {one_line(exc)}.",
                              "The details hold onnxruntime's message; the other kinds may "
                              "still work.", details=str(exc)) from None
        write.finish("auto")
    return settings


def _convert(kind: str, source: Path, target: Path, keep_io_types: bool, optimization: str
             ) -> dict[str, str]:
    import onnx

    if kind == "optimized":
        session, _ = open_session(source, optimization=optimization,
                                  optimized_output=str(target))
        del session
        return {"optimization": optimization}
    if kind == "fp16":
        from onnxruntime.transformers.float16 import convert_float_to_float16

        model = onnx.load(str(source))
        half = convert_float_to_float16(model, keep_io_types=keep_io_types)
        # the converter appends its input casts at the end of the node list
        topological_sort(half.graph)
        onnx.save_model(half, str(target), save_as_external_data=half.ByteSize() > 2**31 - 1)
        return {"keep_io_types": str(keep_io_types).lower()}
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8)
    return {"weight_type": "QInt8", "method": "dynamic"}


def topological_sort(graph: Any) -> None:
    """Reorder `graph.node` in place so every node comes after the producers of its inputs
    (stable: nodes already in order keep it); values from enclosing graphs count as given."""
    nodes = list(graph.node)
    producer = {out: i for i, n in enumerate(nodes) for out in n.output if out}
    done: list[bool] = [False] * len(nodes)
    order: list[int] = []
    for start in range(len(nodes)):
        stack = [(start, False)]
        while stack:
            i, expanded = stack.pop()
            if done[i]:
                continue
            if expanded:
                done[i] = True
                order.append(i)
                continue
            stack.append((i, True))
            for name in reversed(nodes[i].input):
                j = producer.get(name)
                if j is not None and not done[j] and j != i:
                    stack.append((j, False))
    if order != list(range(len(nodes))):
        del graph.node[:]
        graph.node.extend(nodes[i] for i in order)


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
