"""Do the recipe's inputs fit an .onnx file's inputs? Checked before any trial runs.

`validate` of an existing file would otherwise run every trial and fail each with ONNX
Runtime's dimension message (and a tolerance hint). `misfits` compares each recipe input
with the file input it feeds, by name (by position when the names differ and the counts
agree, as validation itself matches them): the rank, every dimension the file fixes, and the
dtype. `refuse_misfits` raises one `inputs` error (exit status 2) naming each input that does
not fit. Constants and structured inputs (keywords, parts of one argument) are not compared:
their mapping to the file's inputs is the exporter's.
"""

from __future__ import annotations

from typing import Any

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.graph.model import dtype_name
from onnx_studio.engine.recipe import Recipe

# recipe dtype aliases -> the names the file's element types are given
# (onnx_studio.engine.graph.model)
_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "short": "int16",
            "int": "int32", "long": "int64"}


def misfits(recipe: Recipe, proto: Any) -> list[str]:
    """One phrase per recipe input that does not fit the file ("x: rank 2, the file takes rank
    4 (1x3x224x224)"); [] when all fit or when the mapping is not the recipe's to check."""
    if any(spec.keyword or "." in spec.name or not spec.is_tensor for spec in recipe.inputs):
        return []
    initializers = {t.name for t in proto.graph.initializer}
    file_inputs = [v for v in proto.graph.input if v.name not in initializers]
    ours = list(recipe.inputs)
    by_name = {v.name: v for v in file_inputs}
    if all(spec.name in by_name for spec in ours):
        pairs = [(spec, by_name[spec.name]) for spec in ours]
    elif len(ours) == len(file_inputs):
        pairs = list(zip(ours, file_inputs, strict=True))
    else:  # counts differ: validation's own sentence names both lists
        return []
    found = []
    for spec, value in pairs:
        problem = _misfit(spec, value)
        if problem:
            found.append(f"{spec.name}: {problem}")
    return found


def _misfit(spec: Any, value: Any) -> str:
    if not value.type.HasField("tensor_type"):
        return ""
    tensor = value.type.tensor_type
    problems = []
    wanted = _ALIASES.get(spec.dtype, spec.dtype)
    if tensor.elem_type and dtype_name(tensor.elem_type) != wanted:
        problems.append(f"dtype {wanted}, the file takes {dtype_name(tensor.elem_type)}")
    if tensor.HasField("shape"):
        dims = list(tensor.shape.dim)
        shown = "x".join(str(d.dim_value) if d.HasField("dim_value") else d.dim_param or "?"
                         for d in dims) or "a scalar"
        if len(dims) != len(spec.shape):
            problems.append(f"rank {len(spec.shape)} ({_shape(spec.shape)}), the file takes "
                            f"rank {len(dims)} ({shown})")
        else:
            fixed = [f"axis {axis} is {size}, the file fixes it at {dim.dim_value}"
                     for axis, (size, dim) in enumerate(zip(spec.shape, dims, strict=True))
                     if dim.HasField("dim_value") and dim.dim_value != size]
            if fixed:
                problems.append("; ".join(fixed) + f" ({shown})")
    return "; ".join(problems)


def _shape(shape: list[int]) -> str:
    return "x".join(str(n) for n in shape) or "a scalar"


def refuse_misfits(recipe: Recipe, proto: Any, file_name: str) -> None:
    """Raise the `inputs` StudioError (exit status 2) naming every input that does not fit."""
    found = misfits(recipe, proto)
    if not found:
        return
    raise StudioError(
        "inputs", f"The recipe's inputs do not fit {file_name}: " + "; ".join(found) + ".",
        "Give each [[inputs]] entry the rank, sizes and dtype the file takes "
        f"(`onnx-studio inspect {file_name}` lists them), or validate the file its recipe "
        "was exported with.")
