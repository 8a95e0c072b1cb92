"""Each variant kind of one .onnx file: the kinds and their tolerance floors, the request
check, the conversion into a file (`write_converted`), and the fp16 kind's own part
(`HalfPrecision`: the nodes kept in float32 and the overflow check of the verdict).

onnx_studio.engine.analysis.variants (one file) and onnx_studio.engine.analysis.folder_variants
(a Hugging Face export's folder) stand on these; the tolerances are explained in variants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onnx_studio.engine.analysis.model_file import ModelFile
from onnx_studio.engine.analysis.timing import open_session
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.events import Events
from onnx_studio.engine.protocol import ExportReport
from onnx_studio.engine.recipe import Recipe

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


def check_request(kind: str, keep_fp32: str | None) -> None:
    """A `recipe` error (exit 2) for an unknown kind, or --keep-fp32 with another kind."""
    if kind not in VARIANT_KINDS:
        raise StudioError("recipe", f"Unknown variant kind {kind!r}; use one of "
                          f"{', '.join(VARIANT_KINDS)}.", exit_code=2)
    if keep_fp32 is not None and kind != "fp16":
        raise StudioError("recipe", f"--keep-fp32 applies to the fp16 variant, not {kind}.",
                          exit_code=2)


def fail_message(report: ExportReport, kind: str, output: Path, rtol: float,
                 atol: float) -> None:
    """A failed verdict's message says the variant was written and which tolerance it misses."""
    if report.error is not None and report.error.kind == "validation":
        report.error.message = (f"The {kind} variant was written to {output.name} but misses "
                                f"its tolerance (rtol {rtol:g}, atol {atol:g}): "
                                f"{report.error.message}")


def write_converted(kind: str, source: Path, target: Path, keep_io_types: bool, optimization: str,
             keep: set[str]) -> dict[str, str | bool | None]:
    import onnx

    if kind == "optimized":
        session, _ = open_session(source, optimization=optimization,
                                  optimized_output=str(target))
        del session
        return {"optimization": optimization}
    if kind == "fp16":
        from onnx_studio.engine.analysis.fp16 import convert

        half = convert(onnx.load(str(source)), keep, keep_io_types=keep_io_types)
        onnx.save_model(half, str(target), save_as_external_data=half.ByteSize() > 2**31 - 1)
        return {"keep_io_types": keep_io_types}
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8)
    return {"weight_type": "QInt8", "method": "dynamic"}


def explicit_names(keep_fp32: str | None) -> list[str]:
    """The node names a --keep-fp32 NODE,... list gives (none for None or "auto")."""
    if keep_fp32 in (None, "auto"):
        return []
    return [n.strip() for n in str(keep_fp32).split(",") if n.strip()]


@dataclass
class HalfPrecision:
    """The fp16 variant's own part: the nodes kept in float32, the float32 value ranges on the
    validation inputs, and the overflow check of the verdict."""

    source: Path
    original: ModelFile
    feeds: list[dict[str, Any]]
    rtol: float
    atol: float
    kept: list[str] = field(default_factory=list)
    auto: dict[str, Any] | None = None
    overflows: list[Any] = field(default_factory=list)

    @classmethod
    def prepare(cls, source: Path, original: ModelFile, recipe: Recipe, keep_fp32: str | None,
                rtol: float, atol: float, keep_io_types: bool, events: Events
                ) -> HalfPrecision:
        """Draw the validation inputs and choose the nodes to keep (a `recipe` error, exit 2,
        for names that are no node of the file)."""
        from onnx_studio.engine.analysis.ranges import validation_feeds
        from onnx_studio.engine.source.load import load_model

        names = [t["name"] for t in original.tensors("inputs")]
        events.progress(0.0, "Loading the PyTorch model for the validation inputs")
        module = load_model(recipe, device="cpu").module
        return cls.choose(source, original, validation_feeds(recipe, names, module),
                          explicit_names(keep_fp32), keep_fp32 == "auto", rtol, atol,
                          keep_io_types, events.part(0.2, 1.0))

    @classmethod
    def choose(cls, source: Path, original: ModelFile, feeds: list[dict[str, Any]],
               explicit: list[str], auto: bool, rtol: float, atol: float,
               keep_io_types: bool, events: Events) -> HalfPrecision:
        """The nodes of `source` to keep on the validation `feeds`: `explicit` ones (a
        `recipe` error, exit 2, for a name that is no node of the file), or with `auto` those
        onnx_studio.engine.analysis.fp16.auto_keep finds."""
        from onnx_studio.engine.analysis import fp16

        kept = fp16.kept_fp32_names(original.proto, explicit)
        half = cls(source, original, feeds, rtol, atol,
                   [n.name for n in original.proto.graph.node if n.name in kept])
        if auto:
            found = fp16.auto_keep(source, half.feeds, rtol, atol, keep_io_types=keep_io_types,
                                   events=events)
            half.kept, half.auto = found.kept, {"passes": found.passes, "probes": found.probes}
        return half

    def judge(self, output: Path, report: ExportReport) -> None:
        """Fail `report` for values the variant holds in float16 beyond its range."""
        from onnx_studio.engine.analysis.ranges import overflow_error

        if self.find_overflows(output) and report.ok:
            report.fail(overflow_error(self.overflows))

    def find_overflows(self, output: Path) -> list[Any]:
        """The values the variant `output` holds in float16 beyond its range (kept in
        `overflows`), from the float32 file's values on the validation inputs."""
        from onnx_studio.engine.analysis.ranges import fp16_overflows, value_ranges

        variant = ModelFile.read(output).proto
        ranges = value_ranges(self.source, self.original.proto, self.feeds, self.rtol,
                              self.atol)
        self.overflows = fp16_overflows(self.original.proto, variant, ranges)
        return self.overflows

    def facts(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fp16_overflows": [o.to_dict() for o in self.overflows]}
        if self.kept or self.auto is not None:
            out["kept_fp32"] = list(self.kept)
        return out
