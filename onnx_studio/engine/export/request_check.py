"""Does a written ONNX file hold what the recipe asked for: opset, inputs, outputs, dynamic axes.

Run on the exporter's file before it replaces the previous one, so a request that was not
honoured is an error (the old file stays) or a warning that names what differs; never a
silent success. Reads the graph only (no weights), no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import Recipe


@dataclass
class RequestCheck:
    """What the file holds against the recipe: warnings to show; `error` when it must not land."""

    warnings: list[dict[str, Any]] = field(default_factory=list)
    error: StudioError | None = None

    def warn(self, category: str, message: str, hint: str = "") -> None:
        item: dict[str, Any] = {"category": category, "message": message, "source": ""}
        if hint:
            item["hint"] = hint
        self.warnings.append(item)


def _dims(value: Any) -> list[Any]:
    tensor = value.type.tensor_type
    return list(tensor.shape.dim) if tensor.HasField("shape") else []


def check_request(path: Path, recipe: Recipe, *, output_axes: bool = True) -> RequestCheck:
    """Compare the file at `path` with `recipe`.

    `output_axes=False` leaves the outputs' dynamic axes to the caller (the dynamo path names
    them itself and reports the ones it cannot name).
    """
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    graph = model.graph
    found = RequestCheck()
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    asked = recipe.export.opset
    if asked is not None and opset != asked:
        found.error = StudioError(
            "export", f"The {recipe.export.exporter} exporter wrote opset {opset}, not the "
            f"opset {asked} the recipe asks for; the file was not saved.",
            f"Choose opset {opset} or another exporter; the exporter could not convert this "
            f"model to opset {asked}.")
        return found
    if not graph.output:
        found.error = StudioError(
            "export", "The exported graph has no outputs, so the file would compute nothing; "
            "it was not saved.", "Make forward() return the tensors the ONNX file should "
            "compute.")
        return found

    initializers = {i.name for i in graph.initializer}
    graph_inputs = {v.name: v for v in graph.input if v.name not in initializers}
    for spec in recipe.inputs:
        value = graph_inputs.get(spec.name)
        if value is None:
            found.warn(
                "DroppedInput", f"Input {spec.name!r} is not an input of the ONNX file: the "
                "exported graph never reads it, so ONNX Runtime will refuse it if you pass it.",
                f"Check that forward() uses {spec.name!r}; if it is unused on purpose, remove "
                "it from the inputs (or pass it as a constant).")
            continue
        _check_axes(found, "Input", spec.name, spec.dynamic, _dims(value))

    outputs = {v.name: v for v in graph.output}
    for out in recipe.outputs:
        value = outputs.get(out.name)
        if value is None:
            found.warn(
                "MissingOutput", f"Output {out.name!r} is not an output of the ONNX file (it "
                f"has {', '.join(outputs)}).", "Name the outputs in the order forward() "
                "returns them.")
        elif output_axes:
            _check_axes(found, "Output", out.name, out.dynamic, _dims(value))
    return found


def check_axes(graph_inputs: Iterable[Any], inputs: dict[str, dict[int, str]],
               fixed_hint: Callable[[str, int], str] | None = None) -> RequestCheck:
    """The warnings for `inputs`' dynamic axes (input name -> axis -> dimension name) that a
    file's graph inputs (ValueInfoProtos) fix at a size or lack: a file exported without a
    recipe of [[inputs]] (a Hugging Face part) checked as check_request checks one.
    `fixed_hint(dimension, size)`: the hint of an axis the file fixes, instead of the
    recipe's."""
    found = RequestCheck()
    graph_inputs = {v.name: v for v in graph_inputs}
    for name, dynamic in inputs.items():
        if name in graph_inputs:
            _check_axes(found, "Input", name, dynamic, _dims(graph_inputs[name]), fixed_hint)
    return found


def _check_axes(found: RequestCheck, role: str, name: str, dynamic: dict[int, str],
                dims: list[Any], fixed_hint: Callable[[str, int], str] | None = None) -> None:
    for axis, dim_name in sorted(dynamic.items()):
        index = axis % len(dims) if dims and -len(dims) <= axis < len(dims) else None
        if index is None:
            found.warn("DynamicShape", f"{role} {name!r} has no axis {axis} in the ONNX file "
                       f"(its rank is {len(dims)}); fix its dynamic axes.")
        elif dims[index].HasField("dim_value"):
            found.warn(
                "DynamicShape", f"{role} {name!r} axis {axis} ({dim_name!r}) was asked to be "
                f"dynamic but the file fixes it at {dims[index].dim_value}: the file runs only "
                "at that size.", fixed_hint(dim_name, dims[index].dim_value) if fixed_hint
                else "The exporter found a size baked into the model along this axis (a "
                "reshape to a constant, a Python int from .shape, a loop); see the warnings "
                "above it, or validate to see which sizes fail.")
