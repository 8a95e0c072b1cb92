"""Exporting models whose forward() takes keywords, dicts, tuples, constants or returns a tree.

The dynamo exporter takes (args, kwargs) as forward() does, with `dynamic_shapes` nested to match
(onnx_studio.engine.source.arguments); its ONNX inputs are the tensor leaves, named by the recipe's
dotted names. The TorchScript exporter takes positional tensors only, so it gets the model wrapped
to take the tensor leaves and return a flat tuple. Outputs that are dicts, nested tuples,
ModelOutputs or dataclasses are named by their flattened paths (`logits`, `present.0.key`) when the
recipe names no outputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from onnx_studio.engine import torch_private
from onnx_studio.engine.recipe import OutputSpec, Recipe
from onnx_studio.engine.source import arguments


def needs_wrapping(recipe: Recipe, result: Any) -> bool:
    """Whether the TorchScript exporter needs the flat wrapper: structured inputs, or an output
    that is more than a tensor or a flat tuple/list of tensors."""
    return arguments.is_structured(recipe) or structured_output(result)


def structured_output(result: Any) -> bool:
    """Whether forward()'s result holds dicts, dataclasses or nesting (named paths matter)."""
    return any(not name.isdigit() and name != "" for name, _ in
               torch_private.named_leaves(result))


def output_names(result: Any) -> list[str]:
    """The flattened names of forward()'s result: `logits`, `present.0.key`, `0`..."""
    return [name or "output" for name, _ in torch_private.named_leaves(result)]


def with_output_names(recipe: Recipe, result: Any) -> Recipe:
    """The recipe naming a structured result's outputs by their paths, when it names none."""
    if recipe.outputs or not structured_output(result):
        return recipe
    named = recipe.copy()
    named.outputs = [OutputSpec(name=name) for name in output_names(result)]
    return named


def prepare_outputs(result: Any) -> None:
    """Let torch.export flatten the dataclasses forward() returns (it refuses unknown ones)."""
    torch_private.register_output_dataclasses(result)


def dynamo_call(recipe: Recipe, module: Any, values: tuple[Any, ...]
                ) -> tuple[tuple[Any, ...], dict[str, Any], list[str], Any]:
    """(args, kwargs, input names, dynamic_shapes) for torch.onnx.export(dynamo=True)."""
    from onnx_studio.engine.source.inputs import export_dims

    args, kwargs = arguments.call_arguments(recipe, values, module)
    shapes = arguments.structured_dynamic_shapes(recipe, export_dims(recipe), module)
    if not kwargs and args and isinstance(args[-1], dict):
        # torch.onnx takes a trailing dict as the keyword arguments; a trailing empty one
        # keeps a dict argument an argument
        args = (*args, {})
    return args, kwargs, arguments.tensor_names(recipe), shapes


def torchscript_call(recipe: Recipe, module: Any, values: tuple[Any, ...]
                     ) -> tuple[Any, tuple[Any, ...], list[str]]:
    """(wrapped model, positional tensors, input names) for the TorchScript exporter."""
    return (arguments.flat_module(recipe, module, values),
            arguments.flat_tensors(recipe, values), arguments.tensor_names(recipe))


def name_input_dims(path: Path, recipe: Recipe) -> None:
    """Give the file's input axes the recipe's dimension names. torch.onnx renames them only
    when every flattened input is a tensor; with constants among the arguments it leaves
    "s17"-style names, which this rewrites across the graph (inputs, outputs, values)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    graph = model.graph
    by_name = {v.name: v for v in graph.input}
    renames: dict[str, str] = {}
    for spec in recipe.inputs:
        value = by_name.get(spec.name)
        if not spec.is_tensor or value is None:
            continue
        dims = value.type.tensor_type.shape.dim
        for axis, name in spec.dynamic.items():
            if -len(dims) <= axis < len(dims):
                dim = dims[axis]
                if dim.HasField("dim_param") and dim.dim_param != name:
                    renames.setdefault(dim.dim_param, name)
    if not renames:
        return
    for value in [*graph.input, *graph.output, *graph.value_info]:
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param in renames:
                dim.dim_param = renames[dim.dim_param]
    onnx.save(model, str(path))  # external data references are kept as they are

