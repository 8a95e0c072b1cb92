"""Export a Hugging Face model's parts to ONNX files in one folder, each written whole."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from engine.errors import StudioError
from engine.events import Events
from engine.files import write_bytes_atomic

DEFAULT_OPSET = 18


def _dims(part: Any) -> tuple[Any, ...]:
    """The dynamic_shapes tuple of a part: one torch.export.Dim per dimension name."""
    from torch.export import Dim

    made: dict[str, Any] = {}
    shapes: list[Any] = []
    for name in part.inputs:
        axes = part.dynamic.get(name, {})
        bounds = getattr(part, "bounds", {})
        shapes.append({axis: made.setdefault(dim, Dim(dim, max=bounds[dim]) if dim in bounds
                                             else Dim(dim)) if dim != "total_sequence_length"
                       else Dim.DYNAMIC for axis, dim in axes.items()} or None)
    # a forward(*tensors) parameter takes the rest as one tuple, and so do its shapes
    import inspect

    params = list(inspect.signature(part.module.forward).parameters.values())
    fixed = [p for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL]
    if len(fixed) < len(params):
        return (*shapes[:len(fixed)], tuple(shapes[len(fixed):]))
    return tuple(shapes)


def _rename_dims(proto: Any, part: Any) -> None:
    """Give the file's symbolic dimensions the names the part asked for (Optimum's)."""
    renames: dict[str, str] = {}
    for value in proto.graph.input:
        for axis, dim in part.dynamic.get(value.name, {}).items():
            d = value.type.tensor_type.shape.dim[axis]
            if d.dim_param:
                renames.setdefault(d.dim_param, dim)
    for value in list(proto.graph.input) + list(proto.graph.output):
        for d in value.type.tensor_type.shape.dim:
            if d.dim_param:
                text = d.dim_param
                for old, new in sorted(renames.items(), key=lambda kv: -len(kv[0])):
                    text = text.replace(old, new) if text == old or old in text.split() \
                        else text
                d.dim_param = text


def export_part(part: Any, folder: Path, opset: int | None, events: Events) -> float:
    """Export one part to folder/part.file (temp file then rename); the seconds it took."""
    import warnings

    import torch

    from engine.export.failures import part_failure
    from engine.export.request_check import check_axes

    started = time.perf_counter()
    events.log(f"exporting {part.file}: inputs {', '.join(part.inputs)}")
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                part.module, tuple(part.inputs.values()), dynamo=True,
                input_names=list(part.inputs), output_names=part.output_names,
                dynamic_shapes=_dims(part), opset_version=opset or DEFAULT_OPSET,
                optimize=True, verbose=False)
    except Exception as exc:  # by its cause: arguments, operators, the exporter's own
        raise part_failure(exc, part, opset or DEFAULT_OPSET, _dims(part)) from exc
    assert program is not None  # dynamo=True always returns the program
    proto = program.model_proto
    _rename_dims(proto, part)
    for item in check_axes(proto, part.dynamic).warnings:  # an axis the export fixed
        item["source"] = part.file
        events.warning(item)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        write_bytes_atomic(folder / part.file, proto.SerializeToString())
    except OSError as exc:
        raise StudioError("write", f"Cannot write {folder / part.file}: {exc.strerror or exc}; "
                          "choose another output folder.") from exc
    return time.perf_counter() - started


def check_output_folder(folder: Path) -> Path:
    """The output folder of a multi-file export, or a `write` error (exit status 2)."""
    import os

    folder = Path(os.path.abspath(folder))
    if folder.exists() and not folder.is_dir():
        raise StudioError("write", f"The output {folder} is a file; for a Hugging Face model "
                          "-o names a folder.", exit_code=2)
    if folder.suffix.lower() == ".onnx":
        raise StudioError("write", f"The output {folder.name} ends in .onnx; for a Hugging Face "
                          "model -o names a folder the files are written into.", exit_code=2)
    for parent in [folder, *folder.parents]:
        if parent.exists():
            if not os.access(parent, os.W_OK):
                raise StudioError("write", f"Cannot write into {parent}; choose another output "
                                  "folder.", exit_code=2)
            break
    return folder
