"""The inputs every analysis runs on: from a recipe (and its eager model), or, without one,
drawn from an ONNX file's own input shapes.

Without a recipe, a dimension the file leaves symbolic (`batch`, `seq`) takes the size given for it
(`--dim NAME=SIZE`), else `DEFAULT_DIM` = 2, with a note saying so: 2 rather than 1 because an
export made at size 1 may broadcast where other sizes cannot, and torch.export specializes 1, so a
file with a dynamic axis was exported at 2 or more. Values follow the same rule as a recipe's `fill
= "auto"` (onnx_studio.engine.source.inputs.resolve_fill): masks ones, positions arange, token ids
small integers, floats randn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import InputSpec, Recipe

DEFAULT_DIM = 2


@dataclass
class Feeds:
    """Arrays by ONNX input name, the notes on how they were drawn, and, from a recipe, the
    (args, kwargs) the eager model is called with (constants and structures included)."""

    arrays: dict[str, np.ndarray]
    notes: list[str] = field(default_factory=list)
    call: tuple[tuple[Any, ...], dict[str, Any]] | None = None


def onnx_inputs(path: Path) -> list[tuple[str, str, list[int | str | None]]]:
    """(name, dtype, shape) of each graph input that is no initializer (shape: ints, names of
    symbolic dims, None for unknown ones)."""
    import onnx

    from onnx_studio.engine.graph.model import dtype_name

    model = onnx.load(str(path), load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    found = []
    for value in model.graph.input:
        if value.name in inits:
            continue
        tensor = value.type.tensor_type
        shape: list[int | str | None] = []
        for dim in tensor.shape.dim:
            if dim.HasField("dim_value"):
                shape.append(int(dim.dim_value))
            else:
                shape.append(dim.dim_param or None)
        found.append((value.name, dtype_name(tensor.elem_type), shape))
    return found


def feeds_from_file(path: Path, dims: dict[str, int] | None = None, seed: int = 0) -> Feeds:
    """Inputs drawn from the file's declared shapes; symbolic sizes from `dims`, else 2."""
    from onnx_studio.engine.source.inputs import make_inputs

    dims = dict(dims or {})
    notes: list[str] = []
    specs = []
    defaulted: set[str] = set()
    for name, dtype, shape in onnx_inputs(path):
        sizes = []
        for axis, dim in enumerate(shape):
            if isinstance(dim, int):
                sizes.append(dim)
                continue
            key = dim or f"{name}:{axis}"
            if key in dims:
                sizes.append(int(dims[key]))
            else:
                sizes.append(DEFAULT_DIM)
                defaulted.add(key)
        specs.append(InputSpec(name=name, shape=sizes, dtype=dtype))
    if defaulted:
        notes.append(f"Dynamic dimension(s) {', '.join(sorted(defaulted))} were set to "
                     f"{DEFAULT_DIM}; give other sizes with --dim NAME=SIZE.")
    unknown = sorted(set(dims) - defaulted - _symbolic_names(path))
    if unknown:
        raise StudioError("inputs", f"No input of {path.name} has a dynamic dimension named "
                          f"{unknown[0]!r}.", "Name a dimension the file declares "
                          "(onnx-studio inspect lists them).", exit_code=2)
    try:
        tensors = make_inputs(Recipe(inputs=specs), seed=seed)
    except StudioError as err:
        raise StudioError("inputs", f"Inputs for {path.name} cannot be drawn: {err.message}",
                          "Give a recipe with --recipe.", details=err.details) from None
    arrays = {spec.name: _numpy(t) for spec, t in zip(specs, tensors, strict=True)}
    return Feeds(arrays, notes)


def _symbolic_names(path: Path) -> set[str]:
    return {d for _, _, shape in onnx_inputs(path) for d in shape if isinstance(d, str)}


def feeds_from_recipe(recipe: Recipe, onnx_names: list[str], model: Any = None, *,
                      seed: int | None = None, sizes: dict[str, int] | None = None) -> Feeds:
    """The recipe's export inputs (seeded as in the export; another `seed` and dynamic `sizes`
    draw a validation trial's), keyed by the ONNX input each one feeds: by name, or by
    position when the names differ and the counts agree."""
    from onnx_studio.engine.source.arguments import call_arguments, tensor_names
    from onnx_studio.engine.source.inputs import make_inputs

    values = make_inputs(recipe, model=model, seed=seed, sizes=sizes)
    # constants are fixed into the file: only the tensor entries are ONNX inputs, in the
    # order the exporters flatten (args, kwargs)
    by_name = {s.name: v for s, v in zip(recipe.inputs, values, strict=True) if s.is_tensor}
    ours = tensor_names(recipe)
    if set(onnx_names) <= set(ours):
        arrays = {n: _numpy(by_name[n]) for n in ours if n in onnx_names}
    elif len(onnx_names) == len(ours):
        arrays = {n: _numpy(by_name[o]) for n, o in zip(onnx_names, ours, strict=True)}
    else:
        raise StudioError(
            "inputs", f"The ONNX file takes {len(onnx_names)} input(s) "
            f"({', '.join(onnx_names)}) but the recipe describes {len(ours)} "
            f"({', '.join(ours)}).", "Give the recipe one [[inputs]] entry per ONNX input.",
            exit_code=2)
    return Feeds(arrays, [], call_arguments(recipe, values, model))


def eager_outputs(module: Any, call: tuple[tuple[Any, ...], dict[str, Any]]
                  ) -> list[np.ndarray]:
    """The eager model's outputs on `call` (args, kwargs; tensors cloned, so a forward that
    writes into its inputs changes nothing else), flattened as the exporters flatten them."""
    import torch

    from onnx_studio.engine.validation.validator import flatten_outputs

    args, kwargs = cloned(call)
    with torch.no_grad():
        return flatten_outputs(module(*args, **kwargs))


def cloned(value: Any) -> Any:
    """`value` with every tensor inside (tuples, lists, dicts) cloned."""
    if hasattr(value, "clone") and hasattr(value, "dtype"):
        return value.clone()
    if isinstance(value, tuple | list):
        return type(value)(cloned(v) for v in value)
    if isinstance(value, dict):
        return {k: cloned(v) for k, v in value.items()}
    return value


def _numpy(tensor: Any) -> np.ndarray:
    import torch

    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return np.ascontiguousarray(tensor.detach().cpu().numpy())
