"""Export a Hugging Face model's parts into a staging folder (onnx_studio.engine.file_set commits
them)."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.events import Events
from onnx_studio.engine.export.exporter_state import forget_exported_graphs, modes_kept
from onnx_studio.engine.export.onnx_file import (
    INLINE_LIMIT,
    check_writable,
    referenced_data,
    wants_external_data,
)

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


def _rename_dims(model: Any, part: Any) -> None:
    """Give the file's symbolic dimensions the names the part asked for (Optimum's); `model`
    is the exporter's onnx_ir model, renamed before it is saved."""
    import onnx_ir as ir

    renames: dict[str, str] = {}
    for value in model.graph.inputs:
        for axis, dim in part.dynamic.get(value.name, {}).items():
            if value.shape is not None and isinstance(value.shape[axis], ir.SymbolicDim) \
                    and value.shape[axis].value:
                renames.setdefault(value.shape[axis].value, dim)
    ordered = sorted(renames.items(), key=lambda kv: -len(kv[0]))

    def renamed(text: str) -> str:
        for old, new in ordered:
            text = text.replace(old, new) if text == old or old in text.split() else text
        return text

    for value in [*model.graph.inputs, *model.graph.outputs]:
        if value.shape is not None:
            value.shape = ir.Shape([ir.SymbolicDim(renamed(d.value))
                                    if isinstance(d, ir.SymbolicDim) and d.value else d
                                    for d in value.shape])


def _external(choice: str, weight_bytes: int, name: str) -> bool:
    """Whether the part's weights go to a data file beside it (onnx_studio.engine.export.onnx_file's
    rule for one file, applied to each file of the set: "auto" from 512 MiB, or when memory is
    short, or when protobuf's 2 GB limit requires it)."""
    if choice == "never" and weight_bytes > INLINE_LIMIT:
        raise StudioError("write", f"The weights of {name} are larger than 2 GB and cannot be "
                          "stored inside the .onnx file; set external_data = \"auto\".",
                          exit_code=2)
    if choice == "never":
        return False
    return bool(wants_external_data(choice, weight_bytes)) or weight_bytes > INLINE_LIMIT


def export_part(part: Any, staging: Path, opset: int | None, events: Events,
                external_data: str = "auto", exporter: str = "dynamo",
                optimize: bool = True) -> float:
    """Export one part to staging/part.file (with its data file when `external_data` asks
    for one, written a tensor at a time); the seconds it took.

    `exporter` "torchscript" traces the part instead (what Optimum does: several times faster
    on small models; the same validation judges its file); anything else is torch.export.
    """
    import warnings

    import torch

    from onnx_studio.engine.export.failures import part_failure
    from onnx_studio.engine.export.quick_match import quick_matching

    started = time.perf_counter()
    events.log(f"exporting {part.file} ({exporter}): inputs {', '.join(part.inputs)}")
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if exporter == "torchscript":
                _trace_part(part, staging / part.file, opset or DEFAULT_OPSET, external_data,
                            events)
                _warn_fixed_axes(_file_inputs(staging / part.file), part, events)
                return time.perf_counter() - started
            with quick_matching(optimize):  # the same file, its optimizer in less time
                program = torch.onnx.export(
                    part.module, tuple(part.inputs.values()), dynamo=True,
                    input_names=list(part.inputs), output_names=part.output_names,
                    dynamic_shapes=_dims(part), opset_version=opset or DEFAULT_OPSET,
                    optimize=optimize, verbose=False)
    except StudioError:
        raise
    except Exception as exc:  # by its cause: arguments, operators, the exporter's own
        raise part_failure(exc, part, opset or DEFAULT_OPSET, _dims(part)) from exc
    assert program is not None  # dynamo=True always returns the program
    _save_program(program, part, staging, external_data, events)
    del program
    forget_exported_graphs()  # else the optimizer's matchers keep the graph and every weight
    gc.collect()  # the exporter's graphs hold cycles: free them before the next part
    return time.perf_counter() - started


def _save_program(program: Any, part: Any, staging: Path, external_data: str,
                  events: Events) -> None:
    """Write the exported program's model to staging/part.file, renamed dimensions, weights
    inline or in a data file as `external_data` says."""
    import onnx_ir as ir

    model = program.model
    _rename_dims(model, part)
    _warn_fixed_axes([ir.serde.serialize_value(v) for v in model.graph.inputs], part, events)
    weight_bytes = sum(v.const_value.nbytes for v in model.graph.initializers.values()
                       if v.const_value is not None)
    path = staging / part.file
    try:
        if _external(external_data, weight_bytes, part.file):
            _save_external(model, path, weight_bytes, events)
        else:
            ir.save(model, path)
    except OSError as exc:
        raise StudioError("write", f"Cannot write {part.file} into {staging.parent}: "
                          f"{exc.strerror or exc}; free some space or choose another output "
                          "folder.") from None


def _warn_fixed_axes(graph_inputs: list[Any], part: Any, events: Events) -> None:
    """A warning for each axis the part asked to be dynamic that its file fixes (a size the
    model baked in, e.g. Funnel's sequence length), naming the file, the input and the axis."""
    from onnx_studio.engine.export.request_check import check_axes

    for item in check_axes(graph_inputs, part.dynamic, _fixed_hint).warnings:
        item["source"] = part.file
        events.warning(item)


def _fixed_hint(dim: str, size: int) -> str:
    """What to do about a dimension the model fixes while exporting: export at the size the
    file will run at, on purpose."""
    return (f"The model fixes {dim} while exporting (a Python int from .shape, a reshape to a "
            f"constant), so the file runs at {dim}={size} only. Export at the size you will "
            f"run: --static-dim {dim}=N (a recipe's [dims] {dim} = {{ size = N }}); "
            "validation then tries the other dimensions at other sizes.")


def _file_inputs(path: Path) -> list[Any]:
    """The graph inputs (ValueInfoProtos) of the .onnx file at `path`, weights not read."""
    import onnx

    return list(onnx.load(str(path), load_external_data=False).graph.input)


def _trace_part(part: Any, path: Path, opset: int, external_data: str,
                events: Events) -> None:
    """The TorchScript exporter on the part: the inputs' dynamic axes as the part names them,
    the outputs' found by running the part at two other sizes (an axis whose size follows an
    input dimension, or the sum of two, takes that name).

    The weights then go where `external_data` says, by the rule the dynamo path follows
    (`_external`): above protobuf's 2 GB the exporter writes every weight as a file of its own
    beside the model, and they are gathered into one `<file>.data`, a tensor at a time, as
    Optimum does; a file traced inline is written again with a data file when one is asked
    for."""
    import shutil

    import torch

    axes: dict[str, dict[int, str]] = {n: dict(a) for n, a in part.dynamic.items()}
    axes.update(_output_axes(part))
    alone = path.parent / f"{path.stem}.tensors"  # the part's own folder: weight files of
    alone.mkdir()  # parts exported one after another never meet
    try:
        traced = alone / path.name
        with modes_kept(part.module):
            torch.onnx.export(part.module, tuple(part.inputs.values()), str(traced),
                              dynamo=False, input_names=list(part.inputs),
                              output_names=part.output_names, dynamic_axes=axes,
                              opset_version=opset)
        # the weights' bytes: the files beside the model, or (inline) the model's own size,
        # which the weights are nearly all of
        weight_bytes = sum(p.stat().st_size for p in alone.iterdir())
        if not _external(external_data, weight_bytes, part.file):
            traced.replace(path)
            return
        import onnx_ir as ir

        _save_external(ir.load(traced), path, weight_bytes, events)
    finally:
        shutil.rmtree(alone, ignore_errors=True)


def _output_axes(part: Any) -> dict[str, dict[int, str]]:
    """Each output's dynamic axes, named after the input dimensions they follow."""
    import itertools

    import torch

    probes = []
    for seed, size in ((3, (2, 3, 4)), (5, (3, 5, 7))):
        inputs = part.make_inputs(seed, *size)
        with torch.no_grad():
            out = part.module(*inputs.values())
        out = out if isinstance(out, tuple) else (out,)
        dims = {name: int(inputs[n].shape[a]) for n, axes in part.dynamic.items()
                for a, name in axes.items() if n in inputs}
        probes.append(([tuple(t.shape) for t in out], dims))
    (first, dims_a), (second, dims_b) = probes
    names = list(dims_a)
    found: dict[str, dict[int, str]] = {}
    for output, shape_a, shape_b in zip(part.output_names, first, second, strict=True):
        for axis, (a, b) in enumerate(zip(shape_a, shape_b, strict=True)):
            if a == b:
                continue
            name = next((n for n in names if (dims_a[n], dims_b.get(n)) == (a, b)), None)
            if name is None:
                name = next((f"{m} + {n}" for m, n in itertools.combinations(names, 2)
                             if (dims_a[m] + dims_a[n], dims_b.get(m, 0) + dims_b.get(n, 0))
                             == (a, b)), f"{output}_dim_{axis}")
            found.setdefault(output, {})[axis] = name
    return found


def _save_external(model: Any, path: Path, weight_bytes: int, events: Events) -> None:
    """Save `model` with its weights in `path`.data, a tensor at a time (no copy of the whole
    model in memory), saying how far the write has come."""
    import onnx_ir as ir

    written = 0
    last = 0.0

    def progress(tensor: Any, info: Any) -> None:
        nonlocal written, last
        written += int(tensor.nbytes)
        now = time.monotonic()
        if now - last > 0.25 or written >= weight_bytes:
            last = now
            events.progress(min(written / max(weight_bytes, 1), 1.0),
                            f"Writing the weights of {path.name} ({written / 2**30:.2f} of "
                            f"{weight_bytes / 2**30:.2f} GB)")

    ir.save(model, path, external_data=f"{path.name}.data", callback=progress, max_workers=1)


def data_files(path: Path) -> list[str]:
    """The external data files the ONNX file at `path` reads (names in its folder)."""
    return sorted(referenced_data(path))


def check_output_folder(folder: Path, output: str = "export",
                        inputs: Iterable[Path] = ()) -> Path:
    """The output folder of a multi-file export, or a `write` error (exit status 2): not a
    file, not an .onnx name, files can really be created in it (or in its nearest existing
    parent, when it is still to be made), and it holds nothing the studio did not write there
    as `output`, nor is it one of the command's `inputs` (onnx_studio.engine.file_set)."""
    import os

    from onnx_studio.engine.file_set import check_folder_output

    folder = Path(os.path.abspath(folder))
    if folder.exists() and not folder.is_dir():
        raise StudioError("write", f"The output {folder} is a file; for a Hugging Face model "
                          "-o names a folder.", exit_code=2)
    if folder.suffix.lower() == ".onnx":
        raise StudioError("write", f"The output {folder.name} ends in .onnx; for a Hugging Face "
                          "model -o names a folder the files are written into.", exit_code=2)
    for parent in [folder, *folder.parents]:
        if parent.exists():
            if not parent.is_dir():
                raise StudioError("write", f"Cannot write {folder}: {parent} is a file, not a "
                                  "folder; choose another output folder.", exit_code=2)
            check_writable(parent)
            break
    return check_folder_output(folder, output, inputs)
