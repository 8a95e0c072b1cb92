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
- Size 0/1 specialization: torch.onnx's capture runs under `backed_size_oblivious=True`, so a
  plain model exported at batch 1 keeps a dynamic batch, but models that broadcast, squeeze or
  branch on the size still fix it or trip a guard (`batch <= 2`; timm's MaxViT, several others
  of a random timm draw). The export therefore traces an example size of 0 or 1 at 2
  (onnx_studio.engine.source.trace_sizes), and validation runs the example's size too.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import AUTO_FILL, DTYPES, InputSpec, Recipe
from onnx_studio.engine.source.device import check_device

if TYPE_CHECKING:
    import torch

# Bounds for randn/rand-on-integers and randint without `low`; see _fill.
DEFAULT_INT_LOW, DEFAULT_INT_HIGH = 0, 10
# Token type ids when the model's own count cannot be read: most models have two (BERT's A/B).
DEFAULT_TOKEN_TYPES = 2


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
                device: str = "cpu", model: Any = None) -> tuple[Any, ...]:
    """One value per [[inputs]] entry, in order: a tensor, or a constant entry's Python value
    (onnx_studio.engine.source.arguments arranges them into forward()'s arguments); the same seed
    gives the same tensors.

    `sizes` replaces the example size of named dynamic dimensions, e.g. {"batch": 3}. Values
    are drawn on the CPU from a private generator (independent of torch's global RNG and the
    same on every device), then moved to `device`. A fill of "auto" is chosen by
    `resolve_fill`; given the loaded `model`, token ids stay within its embedding's size.
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
    values: list[Any] = []
    for i, spec in enumerate(recipe.inputs):
        where = f"inputs[{i}] ({spec.name})"
        if not spec.is_tensor:
            values.append(spec.constant_value)
            continue
        dtype = torch_dtype(spec.dtype)
        resolved = resolve_fill(spec, model)
        if resolved.fill == "file":
            tensor = _from_file(recipe, spec, where, dtype)
            for axis, name in spec.dynamic.items():
                index = _axis(axis, tensor.dim(), where)
                if name in sizes and index is not None and tensor.shape[index] != sizes[name]:
                    raise StudioError("inputs", f"{where} comes from a file, so its dimension "
                                      f"{name!r} cannot be resized to {sizes[name]}.",
                                      "Use a generated fill to try other sizes.")
        else:
            shape = _shape(spec, sizes, where)
            tensor = _fill(spec, resolved, shape, dtype, generator, where)
        values.append(tensor.to(device))
    _check_shared_dims(recipe, {spec.name: list(v.shape) for spec, v
                                in zip(recipe.inputs, values, strict=True) if spec.is_tensor})
    return tuple(values)


def input_shapes(recipe: Recipe, sizes: dict[str, int] | None = None) -> list[list[int]]:
    """Shapes make_inputs would give generated inputs (a file input: its recipe shape)."""
    return [_shape(spec, dict(sizes or {}), f"inputs[{i}] ({spec.name})")
            for i, spec in enumerate(recipe.inputs)]


def dynamic_shapes(recipe: Recipe) -> tuple[dict[int, Any] | None, ...] | None:
    """`dynamic_shapes` for the dynamo exporter: per input, axis -> torch.export.Dim.

    One Dim object per name, so a name shared by several inputs is one dimension, and the
    ONNX file's dim_param is the recipe's name. None when nothing is dynamic.
    """
    if not any(spec.dynamic for spec in recipe.inputs):
        return None
    dims = export_dims(recipe)
    out: list[dict[int, Any] | None] = []
    for spec in recipe.inputs:
        rank = _rank(spec)
        if not spec.dynamic:
            out.append(None)
            continue
        out.append({(axis % rank if rank and axis < 0 else axis): dims[name]
                    for axis, name in sorted(spec.dynamic.items())})
    return tuple(out)


def export_dims(recipe: Recipe) -> dict[str, Any]:
    """One torch.export.Dim per dynamic dimension name, with the recipe's [dims] bounds."""
    import torch

    out = {}
    for name in recipe.dynamic_dims():
        bounds = recipe.dims.get(name)
        limits = {} if bounds is None else {
            key: value for key, value in (("min", bounds.min), ("max", bounds.max))
            if value is not None}
        out[name] = torch.export.Dim(name, **limits)
    return out


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


# ---------------------------------------------------------------------------- automatic fills


class ResolvedFill(NamedTuple):
    """The fill an input gets: `fill` is never "auto"; `reason` says why ("" when the recipe
    chose it). `low`/`high` bound randint and rand (None: the fill's defaults)."""

    fill: str
    low: float | None
    high: float | None
    reason: str

    @property
    def text(self) -> str:
        """The fill as the command line writes it: ones, randint(0,99), full(5), file=x.npy."""
        if self.fill in ("randint", "rand") and (self.low is not None or self.high is not None):
            low = _number(self.low if self.low is not None else (0 if self.fill == "rand"
                                                                 else DEFAULT_INT_LOW))
            high = _number(self.high if self.high is not None else (1 if self.fill == "rand"
                                                                    else DEFAULT_INT_HIGH))
            return f"{self.fill}({low},{high})"
        return self.fill


def resolve_fill(spec: InputSpec, model: Any = None) -> ResolvedFill:
    """The fill `make_inputs` uses for `spec`: the recipe's, or for "auto" one chosen from the
    input's name and dtype, in this order:

    - a name with "mask": ones (1 keeps every position), but "padding_mask" (torch's
      key_padding_mask: True/nonzero pads) zeros;
    - floating-point and complex: randn; bool: random True/False (randint 0..2);
    - integers named like positions (position_ids, cache_position): arange along the last axis;
    - token_type_ids: randint below the model's type count (config.type_vocab_size, else the
      token type embedding, else 2);
    - other token ids (input_ids, *_ids, ids, tokens): randint below the model's vocabulary (its
      input embedding, config.vocab_size, else its first token embedding), else below 10;
    - other integers: randint 0..10.

    `model` is the loaded torch module or None: without it (the window, before any export) the
    name and dtype rules apply and token ids keep the 0..10 default. Bounds the recipe sets
    (low/high) win over the chosen ones. Torch is imported only to read a model.
    """
    if spec.fill != AUTO_FILL:
        return ResolvedFill(spec.fill, spec.low, spec.high, "")
    name = spec.name.lower()
    family = dtype_family(spec.dtype)
    if "mask" in name:
        if "padding_mask" in name:
            return ResolvedFill("zeros", None, None, "a padding mask: zeros pad nothing")
        return ResolvedFill("ones", None, None, "a mask: ones keep every position")
    if family in ("float", "complex"):
        return ResolvedFill("randn", spec.low, spec.high, "floating-point values: randn")
    if family == "bool":
        return ResolvedFill("randint", 0, 2, "bool values: random True/False")
    if "position" in name:
        return ResolvedFill("arange", None, None, "positions: 0, 1, 2, ... along the last axis")
    if _token_types(name):
        found = _embedding_rows(model, token_types=True)
        return _ids("token type ids", spec, found, DEFAULT_TOKEN_TYPES,
                    "most models have 2 token types")
    if _token_ids(name):
        found = _embedding_rows(model, token_types=False)
        return _ids("token ids", spec, found, DEFAULT_INT_HIGH,
                    "the model's vocabulary is read once it is loaded")
    return _ids("integer values", spec, None, DEFAULT_INT_HIGH, "")


def resolve_fills(recipe: Recipe, model: Any = None) -> list[ResolvedFill]:
    """`resolve_fill` for every [[inputs]] entry, in order."""
    return [resolve_fill(spec, model) for spec in recipe.inputs]


def with_fills(recipe: Recipe, fills: list[ResolvedFill]) -> Recipe:
    """A copy of `recipe` whose "auto" inputs name the fill they resolved to (a saved recipe
    that says what was used, and keeps meaning it when the automatic rules change)."""
    out = copy.deepcopy(recipe)
    for spec, resolved in zip(out.inputs, fills, strict=True):
        if spec.fill == AUTO_FILL:
            spec.fill, spec.low, spec.high = resolved.fill, resolved.low, resolved.high
    return out


# inclusive ranges of the integer dtypes (and their aliases), read without torch
_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1), "short": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1), "int": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1), "long": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1),
}  # fmt: skip


def dtype_family(dtype: str) -> str:
    """"float", "complex", "bool" or "int" for a recipe dtype name (torch-free)."""
    if dtype == "bool":
        return "bool"
    if dtype.startswith("complex"):
        return "complex"
    if dtype in _INT_RANGES:
        return "int"
    return "float"


def _token_types(name: str) -> bool:
    return "token_type" in name


def _token_ids(name: str) -> bool:
    return (name in ("ids", "tokens", "token") or name.endswith(("_ids", "_tokens"))
            or name.endswith("_token"))


def _ids(what: str, spec: InputSpec, found: tuple[int, str] | None, default_high: int,
         fallback_reason: str) -> ResolvedFill:
    """randint for integer ids: below the size found in the model, else below the default."""
    low = DEFAULT_INT_LOW if spec.low is None else spec.low
    if spec.high is not None:
        return ResolvedFill("randint", low, spec.high, f"{what}: bounds from the recipe")
    high = found[0] if found else default_high
    if found:
        reason = f"{what} below {high}: {found[1]}"
    else:
        reason = f"{what} below {high}" + (f" ({fallback_reason})" if fallback_reason else "")
    top = _INT_RANGES.get(spec.dtype, (0, high - 1))[1]
    if high - 1 > top:  # a vocabulary larger than the dtype holds (int8 ids)
        high = top + 1
        reason += f"; {spec.dtype} holds up to {top}"
    return ResolvedFill("randint", low, high, reason)


def _embedding_rows(model: Any, *, token_types: bool) -> tuple[int, str] | None:
    """(rows, where they were read) of the model's token (or token type) embedding; None when
    there is no model or nothing can be read. Best effort: never raises."""
    if model is None:
        return None
    try:
        return _read_embedding_rows(model, token_types)
    except Exception:  # a model that is not a plain nn.Module, a config that is not a dict...
        return None


def _read_embedding_rows(model: Any, token_types: bool) -> tuple[int, str] | None:
    config = getattr(model, "config", None)
    key = "type_vocab_size" if token_types else "vocab_size"
    if not token_types:
        from onnx_studio.engine.source.hf.dummies import input_embeddings  # Hugging Face models

        rows = _rows(input_embeddings(model))
        if rows:
            return rows, "the model's input embedding size"
    value = getattr(config, key, None)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value, f"the model's config.{key}"
    named = getattr(model, "named_modules", None)
    if not callable(named):
        return None
    for path, module in named():
        rows = _rows(module)
        if not rows:
            continue
        lowered = path.lower()
        if token_types and "token_type" in lowered:
            return rows, f"the size of the embedding {path}"
        if not token_types and not any(w in lowered for w in ("position", "token_type",
                                                               "pos_emb", "wpe")):
            return rows, f"the size of the embedding {path or 'model'}"
    return None


def _rows(module: Any) -> int | None:
    """An embedding's number of rows (nn.Embedding, or a scripted one); None otherwise."""
    import torch

    if isinstance(module, torch.nn.Embedding):
        return int(module.num_embeddings)
    if getattr(module, "original_name", None) == "Embedding":  # a TorchScript submodule
        weight = getattr(module, "weight", None)
        if isinstance(weight, torch.Tensor) and weight.dim() == 2:
            return int(weight.shape[0])
    return None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


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


def _check_shared_dims(recipe: Recipe, by_name: dict[str, list[int]]) -> None:
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


def _fill(spec: InputSpec, resolved: ResolvedFill, shape: list[int], dtype: torch.dtype,
          generator: torch.Generator, where: str) -> torch.Tensor:
    """Draw one input. Values are drawn in a wide type, then cast, so every dtype works.

    randn/rand on an integer dtype draw integers like randint (low..high, default 0..10) and
    on bool draw True/False, rather than failing: a form that switches dtype keeps working.
    """
    import torch

    fill = resolved.fill
    if dtype == torch.bool and fill in ("randn", "rand", "randint"):
        return torch.randint(0, 2, shape, generator=generator).to(torch.bool)
    if fill in ("randint",) or (fill in ("randn", "rand") and _is_int(dtype)):
        low = DEFAULT_INT_LOW if resolved.low is None else resolved.low
        high = DEFAULT_INT_HIGH if resolved.high is None else resolved.high
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
            low = 0.0 if resolved.low is None else float(resolved.low)
            high = 1.0 if resolved.high is None else float(resolved.high)
            if low >= high:
                raise StudioError("inputs", f"{where}: low ({low}) must be below high ({high}).")
            drawn = low + (high - low) * torch.rand(shape, generator=generator, dtype=wide)
        return _cast(drawn, dtype, where)
    if fill == "arange":  # 0, 1, 2, ... along the last axis, the same in every row
        if not shape:
            return torch.zeros((), dtype=dtype)
        return torch.arange(shape[-1], dtype=torch.int64).expand(shape).to(dtype).contiguous()
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
    raise StudioError("inputs", f"{where}: fill {fill!r} is unknown; use auto, randn, rand, "
                      "zeros, ones, randint, full, file or arange.")


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
