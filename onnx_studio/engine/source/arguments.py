"""forward()'s arguments from a recipe's [[inputs]]: positional, keyword, dicts, tuples, constants.

A recipe lists leaves: `x`, `inputs.pixel_values` (key pixel_values of the dict argument
`inputs`), `pair.0` (item 0 of the tuple argument `pair`), `flag` with kind "bool" (a constant),
each maybe `keyword = true`. `call_arguments` arranges the values `make_inputs` drew into
(args, kwargs); `tensor_names` lists the tensor leaves in the order the exporters flatten
(args, kwargs), which is the order of the ONNX file's inputs; `structured_dynamic_shapes` gives
the dynamo exporter its `dynamic_shapes` nested to match. `flat_module` wraps a model so that
it takes the tensor leaves positionally and returns its output's tensors as a flat tuple, for
the TorchScript exporter, which takes neither keywords nor constants nor dicts.

Numbered parts make a tuple, or a list when forward()'s annotation of that argument says list.

`follow_signature` goes the other way: the [[inputs]] a forward() read from the model file
(onnx_studio.engine.source.signatures) asks for, keeping what the user set where it still applies.
"""

from __future__ import annotations

import ast
import copy
import inspect
from collections.abc import Sequence
from typing import Any, Protocol

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import InputSpec, Recipe


def is_structured(recipe: Recipe) -> bool:
    """Whether the recipe needs more than positional tensors (keywords, parts, constants)."""
    return any(spec.keyword or "." in spec.name or not spec.is_tensor
               for spec in recipe.inputs)


def call_arguments(recipe: Recipe, values: tuple[Any, ...] | list[Any],
                   module: Any = None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """(args, kwargs) for forward(): one value per [[inputs]] entry arranged by their names."""
    return _arrange(recipe.inputs, list(values), _list_arguments(module))


def tensor_names(recipe: Recipe) -> list[str]:
    """The tensor entries' names in the order the exporters flatten (args, kwargs)."""
    args, kwargs = _arrange(recipe.inputs, [s.name for s in recipe.inputs], set())
    names = set(s.name for s in recipe.inputs if s.is_tensor)
    return [name for name in _leaves((args, kwargs)) if name in names]


def structured_dynamic_shapes(recipe: Recipe, dims: dict[str, Any], module: Any,
                              ) -> dict[str, Any] | tuple[Any, ...] | None:
    """`dynamic_shapes` for the dynamo exporter nested like (args, kwargs): keyed by forward()'s
    parameter names (torch.export matches a tuple in signature order, not in the kwargs'
    order); a tuple for positional arguments alone. None when no axis is dynamic."""
    if not recipe.dynamic_dims():
        return None
    specs = [_axes(spec, dims) for spec in recipe.inputs]
    args, kwargs = _arrange(recipe.inputs, specs, _list_arguments(module))
    if not kwargs:
        return args
    signature = _signature(module)
    if signature is None:
        raise StudioError("inputs", "The model's forward() signature cannot be read, so its "
                          "keyword arguments cannot be given dynamic axes.",
                          "Pass the inputs positionally (keyword = false).")
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise StudioError("inputs", f"The inputs do not fit forward(): {exc}.",
                          "Name keyword inputs after forward()'s parameters.") from None
    return dict(bound.arguments)


def flat_module(recipe: Recipe, module: Any, values: tuple[Any, ...]) -> Any:
    """`module` wrapped to take the tensor entries positionally (in `tensor_names` order) and return
    the tensors of its output as a flat tuple (onnx_studio.engine.torch_private.named_leaves order);
    constants and the structure are rebuilt inside forward, so the exporter sees only tensors.
    """
    import torch

    from onnx_studio.engine import torch_private

    order = tensor_names(recipe)
    index = {spec.name: i for i, spec in enumerate(recipe.inputs)}
    lists = _list_arguments(module)
    fixed = list(values)

    class FlatCall(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = module

        def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
            given = list(fixed)
            for name, tensor in zip(order, tensors, strict=True):
                given[index[name]] = tensor
            args, kwargs = _arrange(recipe.inputs, given, lists)
            result = self.model(*args, **kwargs)
            return tuple(leaf for _, leaf in torch_private.named_leaves(result))

    wrapper = FlatCall()
    wrapper.train(getattr(module, "training", False))
    return wrapper


def flat_tensors(recipe: Recipe, values: tuple[Any, ...]) -> tuple[Any, ...]:
    """The tensor entries' values in `tensor_names` order (what `flat_module` takes)."""
    by_name = {spec.name: value for spec, value in zip(recipe.inputs, values, strict=True)}
    return tuple(by_name[name] for name in tensor_names(recipe))


# ---------------------------------------------------------------------------- from forward()


class Param(Protocol):
    """A forward() parameter read from the file (onnx_studio.engine.source.signatures.ForwardParam,
    or the protocol's copy of it)."""

    name: str
    kind: str
    default: str | None
    annotation: str
    shape: list[int] | None
    dtype: str
    dynamic: dict[str, str]


CONSTANT_KINDS: tuple[tuple[str, type, bool | int | float | str], ...] = (
    ("bool", bool, False), ("int", int, 0), ("float", float, 0.0), ("str", str, ""))


def constant_for(param: Param) -> tuple[str, bool | int | float | str | None]:
    """(kind, value) forward()'s parameter suggests: its default's literal, else its
    annotation; ("tensor", None) when neither says it is a plain Python value."""
    literal: Any = ...
    if param.default is not None:
        try:
            literal = ast.literal_eval(param.default)
        except (ValueError, SyntaxError):
            literal = ...
    if literal is None:
        return "none", None
    for kind, python_type, _ in CONSTANT_KINDS:
        if literal is not ... and type(literal) is python_type:
            return kind, literal  # type: ignore[return-value]
    annotation = param.annotation.replace(" ", "")
    for kind, _, empty in CONSTANT_KINDS:
        if annotation in (kind, f"{kind}|None", f"Optional[{kind}]"):
            return kind, empty
    return "tensor", None


def spec_for(param: Param) -> InputSpec | None:
    """The [[inputs]] entry forward()'s parameter asks for: a tensor (with the shape, dtype
    and dynamic axes the file gives, else [1]), a constant with its default, or None when
    forward() does without it (a default of None, a default that is no plain value, *args)."""
    if param.kind not in ("positional", "keyword"):
        return None
    keyword = param.kind == "keyword"
    kind, value = constant_for(param)
    if kind == "none" or (kind == "tensor" and param.default is not None):
        return None
    if kind != "tensor":
        return InputSpec(name=param.name, kind=kind, const=value, keyword=keyword)
    spec = InputSpec(name=param.name, shape=list(param.shape or [1]),
                     dtype=param.dtype or "float32", keyword=keyword)
    spec.dynamic = {int(axis): name for axis, name in param.dynamic.items()}
    return spec


def follow_signature(previous: list[InputSpec], names: Sequence[str],
                     signature: Sequence[Param] = ()) -> list[InputSpec]:
    """The inputs of a forward(`names`) whose parameters the file describes as `signature`
    (may be empty): an input of the same name keeps what the user set; a tensor without one
    takes a previous tensor the new forward() does not name (by position: it keeps its shape,
    dtype and fill) or else what the file says (spec_for); a parameter forward() can do
    without is left out. Without a signature every name is a tensor, [1] when new."""
    by_name = {spec.name: spec for spec in previous}
    wanted: list[InputSpec] = []
    if signature:
        wanted = [spec for spec in map(spec_for, signature) if spec is not None]
    else:
        wanted = [InputSpec(name=name, shape=[1]) for name in names]
    taken = {spec.name for spec in wanted}
    spare = [spec for spec in previous if spec.name not in taken and spec.is_tensor]
    out = []
    for fresh in wanted:
        kept = by_name.get(fresh.name)
        if kept is None and fresh.is_tensor and spare:
            kept = copy.deepcopy(spare.pop(0))
            kept.name, kept.keyword = fresh.name, fresh.keyword
        out.append(kept if kept is not None else fresh)
    return out


# ---------------------------------------------------------------------------- arranging


def _arrange(specs: list[InputSpec], values: list[Any],
             lists: set[str]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Positional arguments in the order they first appear, then keyword ones likewise; a
    dotted name places its value inside the argument's dict/tuple."""
    trees: dict[str, Any] = {}
    keyword: dict[str, bool] = {}
    for spec, value in zip(specs, values, strict=True):
        root, *parts = spec.name.split(".")
        keyword.setdefault(root, spec.keyword)
        if not parts:
            trees[root] = value
            continue
        node = trees.setdefault(root, _Node())
        for part in parts[:-1]:
            node = node.setdefault(part, _Node())
        node[parts[-1]] = value
    args = tuple(_freeze(trees[r], r in lists) for r in trees if not keyword[r])
    kwargs = {r: _freeze(trees[r], r in lists) for r in trees if keyword[r]}
    return args, kwargs


class _Node(dict[str, Any]):
    """A container being built from dotted names (a leaf may itself be a dict: axis -> Dim)."""


def _freeze(node: Any, as_list: bool) -> Any:
    """Nodes become dicts, or tuples when numbered (lists when `as_list`)."""
    if not isinstance(node, _Node):
        return node
    items = {k: _freeze(v, as_list) for k, v in node.items()}
    if items and all(k.isdigit() for k in items):
        ordered = [items[str(i)] for i in range(len(items))]
        return ordered if as_list else tuple(ordered)
    return items


def _leaves(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [leaf for v in node.values() for leaf in _leaves(v)]
    if isinstance(node, tuple | list):
        return [leaf for v in node for leaf in _leaves(v)]
    return [node]


def _axes(spec: InputSpec, dims: dict[str, Any]) -> Any:
    if not spec.is_tensor or not spec.dynamic:
        return None
    rank = len(spec.shape)
    return {(axis % rank if rank and axis < 0 else axis): dims[name]
            for axis, name in sorted(spec.dynamic.items())}


def _signature(module: Any) -> inspect.Signature | None:
    forward = getattr(module, "forward", None)
    if forward is None:
        return None
    try:
        return inspect.signature(forward)
    except (TypeError, ValueError):
        return None


def _list_arguments(module: Any) -> set[str]:
    """forward()'s parameters annotated as a list (their numbered parts make a list)."""
    signature = _signature(module) if module is not None else None
    if signature is None:
        return set()
    out = set()
    for name, param in signature.parameters.items():
        text = param.annotation if isinstance(param.annotation, str) else repr(param.annotation)
        if param.annotation is not inspect.Parameter.empty and (
                text.startswith(("list", "List", "typing.List")) or text is list
                or param.annotation is list):
            out.add(name)
    return out
