"""A model object and its example arguments as a recipe a worker process runs: the module saved
by value into a job folder, each example tensor a .pt file beside it, and [[inputs]] that hand
them to forward() the way the caller did (positional, keyword, inside dicts, tuples and lists,
plain constants), with the dynamic axes `dynamic_shapes` names.

The module goes to the worker as a `torch.save` pickle written with cloudpickle: a class the
worker cannot import (one defined in a notebook's or a script's `__main__`, or in a file of the
caller's own folder) travels by value, its code included; installed libraries (torch,
transformers, ...) travel by reference and the worker imports them. Unpickling that file runs
its code, so the recipe says `trust_pickle = true`: the caller handed us its own object, and
the trust is the caller's. The worker loads nothing else.
"""

from __future__ import annotations

import contextlib
import inspect
import site
import sys
import sysconfig
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from onnx_studio.engine.errors import StudioError, one_line
from onnx_studio.engine.recipe import DimSpec, InputSpec, OutputSpec, Recipe

MODEL_FILE = "model.pt"
_CONSTANTS = {bool: "bool", int: "int", float: "float", str: "str", type(None): "none"}


def wrong(message: str, hint: str = "") -> StudioError:
    """A wrong argument of the call: kind `recipe`, exit status 2."""
    return StudioError("recipe", message, hint, exit_code=2)


@dataclass
class ModelCall:
    """What the caller passed besides the module: its example arguments and their names."""

    args: Any
    kwargs: Any = None
    dynamic_shapes: Any = None
    input_names: Any = None
    output_names: Any = None


def model_recipe(model: Any, call: ModelCall, folder: Path) -> Recipe:
    """The recipe that runs `model(*args, **kwargs)` in a worker: the module saved into
    `folder` (MODEL_FILE), each example tensor a .pt file there, the recipe's base_dir.

    Raises StudioError kind `recipe` (exit 2) for arguments that do not fit: args not a tuple
    or list, a value that is no tensor, number, string, None, or dict/tuple/list of them, names
    or dynamic shapes that do not match the arguments, or arguments forward() does not take.
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        raise wrong(f"model is a {type(model).__name__}, not a torch.nn.Module.",
                    "Pass the module itself (or a recipe, or a recipe file's path).")
    args, kwargs = _arguments(model, call.args, call.kwargs)
    names = _parameter_names(model, args)
    recipe = Recipe(base_dir=folder)
    recipe.model.source = MODEL_FILE
    recipe.model.trust_pickle = True  # the caller's own object: see the module docstring
    shapes = _dynamic_by_argument(call.dynamic_shapes, names, kwargs)
    for name, value in [*zip(names, args, strict=True), *kwargs.items()]:
        recipe.inputs += _entries(name, value, name in kwargs, shapes.get(name), recipe)
    _rename_inputs(recipe, call.input_names)
    recipe.outputs = [OutputSpec(name=name) for name in _names(call.output_names,
                                                               "output_names")]
    folder.mkdir(parents=True, exist_ok=True)
    for i, spec in enumerate(s for s in recipe.inputs if s.is_tensor):
        spec.file = f"input_{i}.pt"
    tensors = [v for v in _leaf_values(args, kwargs) if isinstance(v, torch.Tensor)]
    for spec, tensor in zip((s for s in recipe.inputs if s.is_tensor), tensors, strict=True):
        assert spec.file is not None
        torch.save(tensor.detach().cpu().contiguous().clone(), folder / spec.file)
    save_module(model, folder / MODEL_FILE)
    return recipe


def model_device(model: Any) -> str:
    """The device the module's first parameter (or buffer) is on; "cpu" for a module without."""
    for tensor in (*model.parameters(), *model.buffers()):
        return str(tensor.device)
    return "cpu"


# ---------------------------------------------------------------------------- the module


def save_module(model: Any, path: Path) -> None:
    """`torch.save(model)` with cloudpickle: the caller's own code (its `__main__`, modules
    outside the Python installation) by value, installed packages by reference."""
    import cloudpickle
    import torch

    registered = []
    try:
        for module in _own_modules():
            with contextlib.suppress(ValueError):
                cloudpickle.register_pickle_by_value(module)
                registered.append(module)
        torch.save(model, path, pickle_module=cloudpickle)
    except Exception as exc:
        raise StudioError(
            "source", f"The model cannot be sent to a worker process: pickling it raised "
            f"{type(exc).__name__}: {one_line(exc)}.",
            "Keep only tensors, modules and plain values on the module (an open file, a lock "
            "or a data loader cannot be pickled), or save it with torch.export.save and "
            "export the .pt2 as a recipe source.", exit_code=2) from None
    finally:
        for module in registered:
            cloudpickle.unregister_pickle_by_value(module)


def _own_modules() -> Iterator[ModuleType]:
    """The caller's own top-level modules: loaded from a file outside the Python installation
    (the script's folder, a notebook's, an editable checkout); this package excepted."""
    roots = []
    places = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              *site.getsitepackages(), site.getusersitepackages(),
              *(path for key, path in sysconfig.get_paths().items()
                if key in ("stdlib", "platstdlib", "purelib", "platlib"))}
    for place in places:
        with contextlib.suppress(OSError, ValueError):
            roots.append(Path(place).resolve())
    for name, module in list(sys.modules.items()):
        if "." in name or name in ("__main__", "onnx_studio"):
            continue  # __main__ travels by value anyway; submodules go with their package
        file = getattr(module, "__file__", None)
        if not isinstance(file, str):
            continue
        with contextlib.suppress(OSError, ValueError):
            if not any(Path(file).resolve().is_relative_to(root) for root in roots):
                yield module


# ---------------------------------------------------------------------------- the arguments


def _arguments(model: Any, args: Any, kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    import torch

    if isinstance(args, torch.Tensor):
        raise wrong("args is a tensor; it takes the tuple of forward()'s positional "
                    "arguments.", "Write args=(x,) for one tensor.")
    if not isinstance(args, tuple | list):
        raise wrong(f"args is a {type(args).__name__}; it takes the tuple of forward()'s "
                    "positional arguments.", "Write args=(x,) for one tensor.")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise wrong(f"kwargs is a {type(kwargs).__name__}; it takes a dict of forward()'s "
                    "keyword arguments by name.", "Write kwargs={'mask': m}.")
    if not args and not kwargs:
        raise wrong("No example arguments: the export needs an input to trace forward() with.",
                    "Pass args=(x,) with an example input.")
    try:
        inspect.signature(model.forward).bind(*args, **kwargs)
    except TypeError as exc:
        raise wrong(f"The arguments do not fit {type(model).__name__}.forward"
                    f"{_signature_text(model)}: {exc}.",
                    "Pass forward()'s arguments in args (positional) and kwargs.") from None
    except ValueError:  # no signature to check against: forward() will say
        pass
    return tuple(args), dict(kwargs)


def _signature_text(model: Any) -> str:
    try:
        return str(inspect.signature(model.forward))
    except (TypeError, ValueError):
        return "(...)"


def _parameter_names(model: Any, args: tuple[Any, ...]) -> list[str]:
    """A name for each positional argument: forward()'s parameter's, `args_N` beyond them."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    named = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), "args")
    return [named[i] if i < len(named) else f"{star}_{i - len(named)}"
            for i in range(len(args))]


def _entries(name: str, value: Any, keyword: bool, shape: Any,
             recipe: Recipe) -> list[InputSpec]:
    """The [[inputs]] entries of one argument: one per leaf, dotted names inside containers."""
    import torch

    where = name
    if isinstance(value, torch.Tensor):
        return [_tensor_entry(name, value, keyword, shape, recipe)]
    if type(value) in _CONSTANTS:
        if shape is not None:
            raise wrong(f"dynamic_shapes gives {where} axes, but it is a "
                        f"{type(value).__name__}, not a tensor.", "Give it None.")
        return [InputSpec(name=name, kind=_CONSTANTS[type(value)], const=value,
                          keyword=keyword)]
    if isinstance(value, Mapping):
        items = list(value.items())
        bad = [k for k, _ in items if not (isinstance(k, str) and k.isidentifier())]
        if bad:
            raise wrong(f"{where} is a dict with the key {bad[0]!r}; its keys must be names "
                        "made of letters, digits and _.", "Rename the key.")
    elif isinstance(value, tuple | list):
        items = [(str(i), v) for i, v in enumerate(value)]
    else:
        raise wrong(f"{where} is a {type(value).__name__}; an argument is a tensor, a number, "
                    "a string, None, or a dict, tuple or list of them.",
                    "Pass its tensors instead (e.g. as a dict).")
    if not items:
        raise wrong(f"{where} is empty; an empty {type(value).__name__} cannot be an input.",
                    "Leave the argument out, or give it a value.")
    parts = _parts_of(shape, items, where)
    return [entry for key, item in items
            for entry in _entries(f"{name}.{key}", item, keyword, parts.get(key), recipe)]


def _parts_of(shape: Any, items: list[tuple[str, Any]], where: str) -> dict[str, Any]:
    """dynamic_shapes for a container, by key: a dict of the same keys or a tuple/list."""
    if shape is None:
        return {}
    if isinstance(shape, Mapping):
        extra = [str(k) for k in shape if str(k) not in dict(items)]
        if extra:
            raise wrong(f"dynamic_shapes names {where}.{extra[0]}, which {where} does not hold.",
                        f"Name the keys of {where}: {', '.join(k for k, _ in items)}.")
        return {str(k): v for k, v in shape.items()}
    if isinstance(shape, tuple | list) and len(shape) == len(items):
        return {key: part for (key, _), part in zip(items, shape, strict=True)}
    raise wrong(f"dynamic_shapes for {where} does not match it: give a dict or tuple with one "
                f"entry per part ({len(items)}).", f"Give {where} None to keep it static.")


def _tensor_entry(name: str, tensor: Any, keyword: bool, shape: Any,
                  recipe: Recipe) -> InputSpec:
    dtype = str(tensor.dtype).removeprefix("torch.")
    if tensor.layout != _strided() or tensor.is_quantized:
        raise wrong(f"{name} is a {tensor.layout} tensor; the export takes dense tensors.",
                    f"Pass {name}.to_dense().")
    spec = InputSpec(name=name, shape=list(tensor.shape), dtype=dtype, fill="file",
                     keyword=keyword)
    spec.dynamic = _axes(name, shape, tensor.dim(), recipe)
    return spec


def _strided() -> Any:
    import torch

    return torch.strided


def _axes(name: str, shape: Any, rank: int, recipe: Recipe) -> dict[int, str]:
    """axis -> dimension name from a tensor's dynamic_shapes entry: a dict {axis: dim} or one
    dim per axis; a dim is a name, a torch.export.Dim (its bounds go to [dims]), Dim.AUTO or
    Dim.DYNAMIC (named after the input and axis), or None / Dim.STATIC (static)."""
    if shape is None:
        return {}
    if isinstance(shape, Mapping):
        pairs = list(shape.items())
    elif isinstance(shape, tuple | list):
        if len(shape) != rank:
            raise wrong(f"dynamic_shapes gives {name} {len(shape)} axes, but it has {rank}.",
                        f"Give one entry per axis of {name} (None for a static one).")
        pairs = list(enumerate(shape))
    else:
        raise wrong(f"dynamic_shapes for {name} is a {type(shape).__name__}; give a dict "
                    "{axis: name} or one entry per axis.", "Write {0: 'batch'}.")
    axes: dict[int, str] = {}
    for axis, dim in pairs:
        if not isinstance(axis, int) or not -rank <= axis < rank:
            raise wrong(f"dynamic_shapes names axis {axis!r} of {name}, which has {rank} axes.",
                        f"Name axes 0 to {rank - 1}.")
        dim_name = _dim_name(dim, f"{name.replace('.', '_')}_{axis % rank}", recipe)
        if dim_name is not None:
            axes[axis % rank] = dim_name
    return axes


def _dim_name(dim: Any, automatic: str, recipe: Recipe) -> str | None:
    from torch.export.dynamic_shapes import Dim

    if dim is None or dim is Dim.STATIC:
        return None
    if dim is Dim.AUTO or dim is Dim.DYNAMIC:
        return automatic
    if isinstance(dim, str):
        if not dim.isidentifier():
            raise wrong(f"dynamic_shapes names a dimension {dim!r}; a dimension's name is "
                        "made of letters, digits and _.", "Call it e.g. 'batch'.")
        return dim
    if hasattr(dim, "root"):  # a derived dimension (2 * batch)
        raise wrong(f"dynamic_shapes uses the derived dimension {dim.__name__}; only plain "
                    "dimensions are taken here.", "Give the axis a Dim of its own.")
    if isinstance(dim, Dim):
        low, high = getattr(dim, "min", 0), getattr(dim, "max", None)
        bounds = DimSpec(min=low if isinstance(low, int) and low > 0 else None,
                         max=high if type(high) is int else None)
        if bounds.min is not None or bounds.max is not None:
            recipe.dims[dim.__name__] = bounds
        return str(dim.__name__)
    raise wrong(f"dynamic_shapes holds a {type(dim).__name__}; a dimension is a name, a "
                "torch.export.Dim, Dim.AUTO, Dim.DYNAMIC or None.", "Write {0: 'batch'}.")


def _dynamic_by_argument(shapes: Any, names: list[str], kwargs: dict[str, Any]
                         ) -> dict[str, Any]:
    """dynamic_shapes by argument name: given by forward()'s parameter names (a dict), or in
    the order of the positional arguments (a tuple or list)."""
    if shapes is None:
        return {}
    everything = [*names, *kwargs]
    if isinstance(shapes, Mapping):
        unknown = [k for k in shapes if k not in everything]
        if unknown:
            raise wrong(f"dynamic_shapes names {unknown[0]!r}, which is none of the arguments "
                        f"({', '.join(everything)}).", "Key it by forward()'s parameter names.")
        return dict(shapes)
    if isinstance(shapes, tuple | list):
        if len(shapes) != len(everything):
            raise wrong(f"dynamic_shapes has {len(shapes)} entries for {len(everything)} "
                        "arguments.", "Give one entry per argument (None for a static one), "
                        "or a dict keyed by forward()'s parameter names.")
        return dict(zip(everything, shapes, strict=True))
    raise wrong(f"dynamic_shapes is a {type(shapes).__name__}; give a dict keyed by forward()'s "
                "parameter names, or a tuple in their order.",
                "Write dynamic_shapes={'x': {0: 'batch'}}.")


def _leaf_values(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """Every leaf in the order `_entries` lists them."""
    def leaves(value: Any) -> list[Any]:
        if isinstance(value, Mapping):
            return [leaf for v in value.values() for leaf in leaves(v)]
        if isinstance(value, tuple | list):
            return [leaf for v in value for leaf in leaves(v)]
        return [value]

    return [leaf for value in (*args, *kwargs.values()) for leaf in leaves(value)]


def _names(names: Any, what: str) -> list[str]:
    if names is None:
        return []
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise wrong(f"{what} takes a list of names.", f"Write {what}=['x'].")
    bad = [n for n in names if not n.isidentifier()]
    if bad:
        raise wrong(f"{what}: {bad[0]!r} is not a name; use letters, digits and _.",
                    "Rename it.")
    if len(set(names)) != len(names):
        raise wrong(f"{what} names one input twice.", "Give every one its own name.")
    return list(names)


def _rename_inputs(recipe: Recipe, input_names: Any) -> None:
    """The ONNX input names: positional tensor arguments take them in order."""
    names = _names(input_names, "input_names")
    if not names:
        return
    tensors = [spec for spec in recipe.inputs if spec.is_tensor]
    if any(spec.keyword or "." in spec.name for spec in tensors) or \
            len(tensors) != len(recipe.inputs):
        raise wrong("input_names renames positional tensor arguments only; keyword, nested and "
                    "constant arguments keep their names.",
                    "Leave input_names out, or pass only tensors in args.")
    if len(names) != len(tensors):
        raise wrong(f"input_names has {len(names)} names for {len(tensors)} inputs.",
                    "Give one name per tensor in args.")
    renamed = dict(zip((s.name for s in tensors), names, strict=True))
    for spec in tensors:
        spec.name = renamed[spec.name]
