"""Example inputs and dynamic axes from a recipe's [[inputs]] and [[outputs]].

Dynamic dimension names, as measured with torch 2.13 and onnxscript 0.7:
- dynamo: `torch.onnx.export(..., dynamo=True, dynamic_shapes=...)` with one
  `torch.export.Dim(name)` per recipe name writes that name as the ONNX `dim_param` of every
  input axis that uses it, and of output axes derived from it (e.g. ["batch", 1000]).
  `Dim.DYNAMIC`/`Dim.AUTO` would be written as "s17"-style names; plain strings also work but
  warn. `dynamic_axes` given to the dynamo exporter is converted too, with a warning that it is
  not recommended; so we pass Dim objects.
- One Dim object per name makes axes that share a name one dimension (torch.export checks the
  example sizes agree, and so do we, with a clearer message).
- Size 0/1 specialization: plain `torch.export.export` refuses a Dim whose example size is 1
  ("Constraints violated"), but torch.onnx's capture runs it under
  `backed_size_oblivious=True`, so an example size of 1 exports a truly dynamic axis (checked:
  batch 1 export runs at batch 4 in ONNX Runtime, both exporters). We therefore neither bump
  sizes nor warn for 1. Size 0 is a real problem (empty tensors specialize and many ops reject
  them), so `dynamic_size_warnings` flags dynamic axes whose example size is 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import StudioError
from engine.recipe import DTYPES, InputSpec, Recipe
from engine.source.device import check_device

if TYPE_CHECKING:
    import torch

# Bounds for randn/rand-on-integers and randint without `low`; see _fill.
DEFAULT_INT_LOW, DEFAULT_INT_HIGH = 0, 10


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype for a recipe dtype name (aliases such as "long" included)."""
    import torch

    if name not in DTYPES:
        raise StudioError("inputs", f"{name!r} is not a dtype; use one of "
                          f"{', '.join(DTYPES)}.")
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise StudioError("inputs", f"This torch has no dtype {name!r}.",
                          "Upgrade torch or choose another dtype.")
    return dtype


def make_inputs(recipe: Recipe, *, seed: int | None = None, sizes: dict[str, int] | None = None,
                device: str = "cpu") -> tuple[torch.Tensor, ...]:
    """One tensor per [[inputs]] entry, in order; the same seed gives the same tensors.

    `sizes` replaces the example size of named dynamic dimensions, e.g. {"batch": 3}. Values
    are drawn on the CPU from a private generator (independent of torch's global RNG and the
    same on every device), then moved to `device`.
    """
    import torch

    check_device(device)
    sizes = dict(sizes or {})
    known = recipe.dynamic_dims()
    for name in sizes:
        if name not in known:
            raise StudioError("inputs", f"No dynamic dimension is called {name!r}; the recipe "
                              f"has {', '.join(known) or 'none'}.")
    generator = torch.Generator(device="cpu")
    generator.manual_seed(recipe.export.seed if seed is None else seed)
    tensors = []
    for i, spec in enumerate(recipe.inputs):
        where = f"inputs[{i}] ({spec.name})"
        dtype = torch_dtype(spec.dtype)
        if spec.fill == "file":
            tensor = _from_file(recipe, spec, where, dtype)
            for axis, name in spec.dynamic.items():
                index = _axis(axis, tensor.dim(), where)
                if name in sizes and index is not None and tensor.shape[index] != sizes[name]:
                    raise StudioError("inputs", f"{where} comes from a file, so its dimension "
                                      f"{name!r} cannot be resized to {sizes[name]}.",
                                      "Use a generated fill to try other sizes.")
        else:
            shape = _shape(spec, sizes, where)
            tensor = _fill(spec, shape, dtype, generator, where)
        tensors.append(tensor)
    _check_shared_dims(recipe, [list(t.shape) for t in tensors])
    return tuple(t.to(device) for t in tensors)


def input_shapes(recipe: Recipe, sizes: dict[str, int] | None = None) -> list[list[int]]:
    """Shapes make_inputs would give generated inputs (a file input: its recipe shape)."""
    return [_shape(spec, dict(sizes or {}), f"inputs[{i}] ({spec.name})")
            for i, spec in enumerate(recipe.inputs)]


def dynamic_shapes(recipe: Recipe) -> tuple[dict[int, Any] | None, ...] | None:
    """`dynamic_shapes` for the dynamo exporter: per input, axis -> torch.export.Dim.

    One Dim object per name, so a name shared by several inputs is one dimension, and the
    ONNX file's dim_param is the recipe's name. None when nothing is dynamic.
    """
    import torch

    if not any(spec.dynamic for spec in recipe.inputs):
        return None
    dims = {name: torch.export.Dim(name) for name in recipe.dynamic_dims()}
    out: list[dict[int, Any] | None] = []
    for spec in recipe.inputs:
        rank = _rank(spec)
        if not spec.dynamic:
            out.append(None)
            continue
        out.append({(axis % rank if rank and axis < 0 else axis): dims[name]
                    for axis, name in sorted(spec.dynamic.items())})
    return tuple(out)


def dynamic_axes(recipe: Recipe) -> dict[str, dict[int, str]] | None:
    """`dynamic_axes` for the TorchScript exporter, inputs and outputs; None when empty."""
    axes: dict[str, dict[int, str]] = {}
    for spec in recipe.inputs:
        if spec.dynamic:
            rank = _rank(spec)
            axes[spec.name] = {(a % rank if rank and a < 0 else a): n
                               for a, n in sorted(spec.dynamic.items())}
    for out in recipe.outputs:
        if out.dynamic:
            axes[out.name] = dict(sorted(out.dynamic.items()))
    return axes or None


def dynamic_size_warnings(recipe: Recipe) -> list[str]:
    """Sentences for dynamic axes whose example size would make the export specialize."""
    found = []
    for spec in recipe.inputs:
        if spec.fill == "file":
            continue
        for axis, name in sorted(spec.dynamic.items()):
            if -len(spec.shape) <= axis < len(spec.shape) and spec.shape[axis] == 0:
                found.append(f"{spec.name} axis {axis} ({name!r}) has example size 0; an "
                             "empty example fixes the axis or fails the export, so use 2 "
                             "or more.")
    return found


# ---------------------------------------------------------------------------- helpers


def _rank(spec: InputSpec) -> int:
    return len(spec.shape)


def _axis(axis: int, rank: int, where: str) -> int | None:
    if not -rank <= axis < rank:
        raise StudioError("inputs", f"{where}: dynamic axis {axis} is beyond its rank {rank}.",
                          f"Use an axis from 0 to {max(rank - 1, 0)}.")
    return axis % rank if rank else axis


def _shape(spec: InputSpec, sizes: dict[str, int], where: str) -> list[int]:
    shape = list(spec.shape)
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise StudioError("inputs", f"{where}: shape {shape} must be whole numbers, 0 or more.")
    for axis, name in spec.dynamic.items():
        index = _axis(axis, len(shape), where)
        if name in sizes and index is not None:
            if sizes[name] < 0:
                raise StudioError("inputs", f"Size {sizes[name]} for {name!r} is negative.")
            shape[index] = sizes[name]
    return shape


def _check_shared_dims(recipe: Recipe, shapes: list[list[int]]) -> None:
    by_name = {spec.name: shape for spec, shape in zip(recipe.inputs, shapes, strict=True)}
    for name, uses in recipe.dynamic_dims().items():
        seen: list[tuple[str, int, int]] = []
        for input_name, axis in uses:
            shape = by_name[input_name]
            if -len(shape) <= axis < len(shape):
                seen.append((input_name, axis, shape[axis]))
        if len({size for _, _, size in seen}) > 1:
            listed = ", ".join(f"{i} axis {a} is {s}" for i, a, s in seen)
            raise StudioError("inputs", f"Dimension {name!r} has different example sizes "
                              f"({listed}); one name is one dimension.",
                              "Give every axis that shares the name the same size, or rename "
                              "one of them.")


def _is_int(dtype: torch.dtype) -> bool:
    import torch

    return not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)


def _fill(spec: InputSpec, shape: list[int], dtype: torch.dtype,
          generator: torch.Generator, where: str) -> torch.Tensor:
    """Draw one input. Values are drawn in a wide type, then cast, so every dtype works.

    randn/rand on an integer dtype draw integers like randint (low..high, default 0..10) and
    on bool draw True/False, rather than failing: a form that switches dtype keeps working.
    """
    import torch

    fill = spec.fill
    if dtype == torch.bool and fill in ("randn", "rand", "randint"):
        return torch.randint(0, 2, shape, generator=generator).to(torch.bool)
    if fill in ("randint",) or (fill in ("randn", "rand") and _is_int(dtype)):
        low = DEFAULT_INT_LOW if spec.low is None else spec.low
        high = DEFAULT_INT_HIGH if spec.high is None else spec.high
        if int(low) != low or int(high) != high:
            raise StudioError("inputs", f"{where}: randint needs whole-number bounds, got "
                              f"low={low}, high={high}.")
        if low >= high:
            raise StudioError("inputs", f"{where}: low ({low}) must be below high ({high}).")
        if _is_int(dtype):
            info = torch.iinfo(dtype)
            if low < info.min or high - 1 > info.max:
                raise StudioError("inputs", f"{where}: {spec.dtype} holds {info.min} to "
                                  f"{info.max}, but the range is {low} to {high - 1}.",
                                  "Narrow low/high or choose a wider dtype.")
        drawn = torch.randint(int(low), int(high), shape, generator=generator,
                              dtype=torch.int64)
        return drawn.to(dtype)
    if fill in ("randn", "rand"):
        wide = torch.complex128 if dtype.is_complex else torch.float64
        if fill == "randn":
            drawn = torch.randn(shape, generator=generator, dtype=wide)
        else:
            low = 0.0 if spec.low is None else float(spec.low)
            high = 1.0 if spec.high is None else float(spec.high)
            if low >= high:
                raise StudioError("inputs", f"{where}: low ({low}) must be below high ({high}).")
            drawn = low + (high - low) * torch.rand(shape, generator=generator, dtype=wide)
        return _cast(drawn, dtype, where)
    if fill == "zeros":
        return torch.zeros(shape, dtype=dtype)
    if fill == "ones":
        return torch.ones(shape, dtype=dtype)
    if fill == "full":
        if spec.value is None:
            raise StudioError("inputs", f"{where}: fill \"full\" needs a value.")
        if _is_int(dtype) and int(spec.value) != spec.value:
            raise StudioError("inputs", f"{where}: value {spec.value} is not a whole number, "
                              f"but the dtype is {spec.dtype}.",
                              "Use a whole number or a floating-point dtype.")
        if _is_int(dtype):
            info = torch.iinfo(dtype)
            if not info.min <= spec.value <= info.max:
                raise StudioError("inputs", f"{where}: value {spec.value} does not fit "
                                  f"{spec.dtype} ({info.min} to {info.max}).")
        value: float | int | bool = spec.value
        if dtype == torch.bool:
            value = bool(spec.value)
        elif _is_int(dtype):
            value = int(spec.value)
        return torch.full(shape, value, dtype=dtype)
    raise StudioError("inputs", f"{where}: fill {fill!r} is unknown; use randn, rand, zeros, "
                      "ones, randint, full or file.")


def _cast(tensor: torch.Tensor, dtype: torch.dtype, where: str) -> torch.Tensor:
    try:
        return tensor.to(dtype)
    except (RuntimeError, TypeError) as exc:
        raise StudioError("inputs", f"{where}: cannot make {dtype} values: {exc}.") from None


def _from_file(recipe: Recipe, spec: InputSpec, where: str,
               dtype: torch.dtype) -> torch.Tensor:
    """A .npy or .pt tensor; its shape is the file's, its dtype cast to the recipe's."""
    import torch

    if not spec.file:
        raise StudioError("inputs", f"{where}: fill \"file\" needs file = \"x.npy\" or \".pt\".")
    path: Path = recipe.resolve(spec.file)
    if not path.is_file():
        raise StudioError("inputs", f"{where}: input file {path} does not exist.",
                          "Check the path; relative paths are resolved against the recipe "
                          "file's folder.")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            import numpy as np

            array = np.load(path, allow_pickle=False)  # no code from the file runs
            tensor = torch.from_numpy(np.ascontiguousarray(array))
        elif suffix in (".pt", ".pth"):
            loaded = torch.load(str(path), map_location="cpu", weights_only=True)
            if not isinstance(loaded, torch.Tensor):
                raise StudioError("inputs", f"{where}: {path.name} holds a "
                                  f"{type(loaded).__name__}, not a tensor.",
                                  "Save it with torch.save(tensor, path).")
            tensor = loaded
        else:
            raise StudioError("inputs", f"{where}: {path.name} is neither .npy nor .pt.",
                              "Save the input with numpy.save or torch.save.")
    except StudioError:
        raise
    except Exception as exc:
        raise StudioError("inputs", f"{where}: cannot read {path.name}: {exc}.") from None
    if spec.shape and list(tensor.shape) != list(spec.shape):
        raise StudioError("inputs", f"{where}: {path.name} holds shape {list(tensor.shape)}, "
                          f"but the recipe says {spec.shape}.",
                          "Set shape = [] (the file decides) or match the file.")
    return _cast(tensor.detach().clone(), dtype, where)
