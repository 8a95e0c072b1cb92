"""Every problem of a recipe a form can show before any work is done (`recipe_problems`): the
cross-field rules that reading a recipe's keys and types does not cover, each as (field,
sentence saying what to write instead); `check_recipe` raises the first as a RecipeError.
"""

from __future__ import annotations

import math

from onnx_studio.engine.recipe.model_source import is_folder_source
from onnx_studio.engine.recipe.spec import (
    DTYPES,
    DYNAMO_MIN_OPSET,
    EXPORTERS,
    EXTERNAL_DATA,
    FILLS,
    INPUT_KINDS,
    OPERATOR_EXPORT_TYPES,
    TRAINING_MODES,
    DimSpec,
    InputSpec,
    Recipe,
    RecipeError,
)


def _choice(where: str, value: str, allowed: tuple[str, ...]) -> tuple[str, str] | None:
    if value in allowed:
        return None
    return where, f"{value!r} is not allowed; use one of {', '.join(allowed)}."


def _dim_name_problems(where: str, dynamic: dict[int, str]) -> list[tuple[str, str]]:
    return [(where, f"axis {axis} needs a name made of letters, digits and _ (such as "
             f"batch), got {name!r}.") for axis, name in dynamic.items()
            if not isinstance(name, str) or not name.isidentifier()]


def check_recipe(recipe: Recipe) -> None:
    """Raise RecipeError for the first problem `recipe_problems` finds."""
    found = recipe_problems(recipe)
    if found:
        where, sentence = found[0]
        raise RecipeError(f"{where}: {sentence}")


def recipe_problems(recipe: Recipe) -> list[tuple[str, str]]:
    """(field, sentence) for every problem found, in the order of the recipe's fields."""
    found: list[tuple[str, str]] = []
    if not recipe.model.source.strip():
        found.append(("model.source", "no model given; name a .py file and class, "
                      "a .pt2/.pt file or an example such as example:alexnet."))
    names: set[str] = set()
    for i, spec in enumerate(recipe.inputs):
        where = f"inputs[{i}]"
        if not valid_input_name(spec.name):
            found.append((f"{where}.name", f"{spec.name!r} is not a valid name; use letters, "
                          "digits and _, and dots for the parts of a dict or tuple argument "
                          "(inputs.pixel_values, pair.0)."))
        elif spec.name in names:
            found.append((f"{where}.name", f"the name {spec.name!r} is used twice; "
                          "give every input its own name."))
        names.add(spec.name)
        if not spec.is_tensor:
            found += _constant_problems(where, spec)
            continue
        if spec.const is not None:
            found.append((f"{where}.const", "a tensor input takes no const; set kind to bool, "
                          "int, float or str to pass a constant."))
        if any(d < 0 for d in spec.shape):
            found.append((f"{where}.shape", f"{spec.shape} has a negative size; "
                          "every size must be 0 or more."))
        if bad := _choice(f"{where}.dtype", spec.dtype, DTYPES):
            found.append(bad)
        if bad := _choice(f"{where}.fill", spec.fill, FILLS):
            found.append(bad)
        if spec.fill == "file" and not spec.file:
            found.append((f"{where}.file", "fill is \"file\" but no file is given; "
                          "name a .npy or .pt file."))
        if spec.fill == "full" and spec.value is None:
            found.append((f"{where}.value", "fill is \"full\" but no value is given."))
        if spec.fill == "randint" and spec.high is None:
            found.append((f"{where}.high", "fill is \"randint\" but no high bound is given."))
        if spec.low is not None and spec.high is not None and spec.low >= spec.high:
            found.append((f"{where}.low", f"low ({spec.low}) must be below high ({spec.high})."))
        found += _dim_name_problems(f"{where}.dynamic", spec.dynamic)
        for axis in spec.dynamic:
            if spec.fill != "file" and not -len(spec.shape) <= axis < len(spec.shape):
                found.append((f"{where}.dynamic", f"axis {axis} is beyond the input's rank "
                              f"{len(spec.shape)}; use an axis from 0 to "
                              f"{max(len(spec.shape) - 1, 0)}."))
    found += _structure_problems(recipe)
    found += _bound_problems(recipe)
    out_names: set[str] = set()
    for i, out in enumerate(recipe.outputs):
        where = f"outputs[{i}]"
        if not out.name.strip():
            found.append((f"{where}.name", "empty output name; give every output a name."))
        elif out.name in out_names or out.name in names:
            found.append((f"{where}.name", f"the name {out.name!r} is used twice; "
                          "inputs and outputs need distinct names."))
        out_names.add(out.name)
        found += _dim_name_problems(f"{where}.dynamic", out.dynamic)
        if any(axis < 0 for axis in out.dynamic):
            found.append((f"{where}.dynamic", "output axes count from 0; write the axis "
                          "number, not a negative index."))
    opts = recipe.export
    if not opts.output.strip():
        found.append(("export.output", "no output file; name an .onnx file."))
    elif opts.output.endswith(".onnx") == is_folder_source(recipe.model.source):
        found.append(("export.output", f"{opts.output!r} should end in .onnx." if
                      opts.output.endswith(".onnx") is False else f"{opts.output!r} names a "
                      "file; a Hugging Face source writes into a folder: drop the .onnx."))
    for where, value, allowed in (
        ("export.exporter", opts.exporter, EXPORTERS),
        ("export.operator_export_type", opts.operator_export_type, OPERATOR_EXPORT_TYPES),
        ("export.training", opts.training, TRAINING_MODES),
        ("export.external_data", opts.external_data, EXTERNAL_DATA),
    ):
        if bad := _choice(where, value, allowed):
            found.append(bad)
    if opts.opset is not None and not 7 <= opts.opset <= 30:
        found.append(("export.opset", f"{opts.opset} is not an ONNX opset; use 7 to 30, "
                      "or leave it out for the exporter's default."))
    elif opts.opset is not None and opts.exporter == "dynamo" and opts.opset < DYNAMO_MIN_OPSET:
        # below 18 dynamo only tries a version conversion that fails for most operators and
        # then silently keeps 18: the request would not be honoured
        found.append(("export.opset", f"the dynamo exporter writes opset {DYNAMO_MIN_OPSET} "
                      f"or newer; choose {DYNAMO_MIN_OPSET}+ or the TorchScript exporter."))
    if opts.operator_export_type != "ONNX" and opts.exporter == "dynamo":
        found.append(("export.operator_export_type", "only the torchscript exporter takes an "
                      "operator export type; set exporter = \"torchscript\" or use \"ONNX\"."))
    if opts.cpus is not None and opts.cpus < 1:
        found.append(("export.cpus", f"{opts.cpus} CPUs: write 1 or more, or leave it out."))
    dev = opts.device
    if not (dev in ("cpu", "cuda", "mps") or (dev.startswith("cuda:") and dev[5:].isdigit())):
        found.append(("export.device", f"{dev!r} is not a device; use cpu, cuda, cuda:N or mps."))
    val = recipe.validate
    for where, tolerance in (("validate.rtol", val.rtol), ("validate.atol", val.atol)):
        # NaN compares False with everything: a NaN tolerance would pass every difference
        if not math.isfinite(tolerance) or tolerance < 0:
            found.append((where, f"{tolerance} is not a tolerance; use a finite number, 0 or "
                          "more (e.g. 1e-3)."))
    if val.random_trials < 0:
        found.append(("validate.random_trials", "must be 0 or more."))
    return found


def valid_input_name(name: str) -> bool:
    """A name forward() can take: an identifier, then dotted parts that are identifiers or
    whole numbers (a dict key or a tuple/list index)."""
    first, *parts = name.split(".")
    return first.isidentifier() and all(p.isidentifier() or p.isdigit() for p in parts)


def _constant_problems(where: str, spec: InputSpec) -> list[tuple[str, str]]:
    if spec.kind not in INPUT_KINDS:
        return [(f"{where}.kind", f"{spec.kind!r} is not allowed; use one of "
                 f"{', '.join(INPUT_KINDS)}.")]
    found = []
    if spec.dynamic:
        found.append((f"{where}.dynamic", f"a {spec.kind} constant has no axes; remove "
                      "dynamic or make it a tensor."))
    value = spec.const
    expected = {"bool": (bool,), "int": (int,), "float": (int, float), "str": (str,)}
    if spec.kind == "none":
        if value is not None:
            found.append((f"{where}.const", "kind \"none\" passes None; remove const."))
    elif value is None:
        found.append((f"{where}.const", f"kind {spec.kind!r} needs a value: const = ..."))
    elif not isinstance(value, expected[spec.kind]) or (
            spec.kind != "bool" and isinstance(value, bool)):
        found.append((f"{where}.const", f"{value!r} is not a {spec.kind}; write a "
                      f"{spec.kind} or change kind."))
    return found


def _structure_problems(recipe: Recipe) -> list[tuple[str, str]]:
    """Dotted names must describe one argument each: a name is either a value or a container
    of parts, a container's parts are all numbered (0, 1, ... : a tuple) or all named (a
    dict), and every part of an argument is passed the same way (keyword or not)."""
    found: list[tuple[str, str]] = []
    specs = [s for s in recipe.inputs if valid_input_name(s.name)]
    names = {s.name for s in specs}
    for spec in specs:
        parts = spec.name.split(".")
        for depth in range(1, len(parts)):
            prefix = ".".join(parts[:depth])
            if prefix in names:
                found.append(("inputs", f"{prefix!r} is an input and also holds "
                              f"{spec.name!r}; use one or the other."))
    children: dict[str, set[str]] = {}
    for spec in specs:
        parts = spec.name.split(".")
        for depth in range(1, len(parts)):
            children.setdefault(".".join(parts[:depth]), set()).add(parts[depth])
    for parent, keys in children.items():
        numbered = {k for k in keys if k.isdigit()}
        if numbered and numbered != keys:
            found.append(("inputs", f"the parts of {parent!r} mix numbers and names "
                          f"({', '.join(sorted(keys))}); number all (a tuple) or name all "
                          "(a dict)."))
        elif numbered and sorted(int(k) for k in numbered) != list(range(len(numbered))):
            found.append(("inputs", f"the parts of {parent!r} are numbered "
                          f"{', '.join(sorted(numbered, key=int))}; number them 0, 1, 2, ... "
                          "without gaps."))
    by_argument: dict[str, set[bool]] = {}
    for spec in specs:
        by_argument.setdefault(spec.argument, set()).add(spec.keyword)
    for argument, ways in by_argument.items():
        if len(ways) > 1:
            found.append(("inputs", f"some parts of {argument!r} are keyword and some not; "
                          "mark all of them the same."))
    return found


def _bound_problems(recipe: Recipe) -> list[tuple[str, str]]:
    """[dims] bounds: for a dimension some input has, 0 <= min <= max, example sizes inside."""
    found: list[tuple[str, str]] = []
    uses = recipe.dynamic_dims()
    by_name = {s.name: s for s in recipe.inputs}
    folder = is_folder_source(recipe.model.source)
    for name, bounds in recipe.dims.items():
        where = f"dims.{name}"
        if folder:  # the dimensions are the studio's, named when the model is loaded
            found += _fixed_size_problems(where, bounds)
            continue
        if bounds.size is not None:
            found.append((where, "size applies to a Hugging Face source; for this source give "
                          "the size in the inputs' shape and leave the axis out of dynamic."))
            continue
        if name not in uses:
            found.append((where, f"no input axis is called {name!r}; bound a dimension named "
                          f"in some input's dynamic ({', '.join(uses) or 'none yet'})."))
            continue
        low, high = bounds.min, bounds.max
        if low is not None and low < 0:
            found.append((where, f"min {low} is negative; use 0 or more."))
        if low is not None and high is not None and low > high:
            found.append((where, f"min {low} is above max {high}."))
            continue
        for input_name, axis in uses[name]:
            spec = by_name[input_name]
            if spec.fill == "file" or not -len(spec.shape) <= axis < len(spec.shape):
                continue
            size = spec.shape[axis]
            if (low is not None and size < low) or (high is not None and size > high):
                found.append((where, f"{input_name} axis {axis} has example size {size}, "
                              f"outside {name}'s bounds {_bounds_text(bounds)}; choose an "
                              "example size inside them."))
    return found


def _fixed_size_problems(where: str, bounds: DimSpec) -> list[tuple[str, str]]:
    """A Hugging Face source's [dims] entry: a size of 1 or more, and nothing else."""
    if bounds.size is None or bounds.min is not None or bounds.max is not None:
        return [(where, "a Hugging Face source's dimension takes only size = N (the size "
                 "to export at, not dynamic); the studio bounds its dynamic ones itself.")]
    if bounds.size < 1:
        return [(where, f"size {bounds.size} is below 1; give the size the file will run at.")]
    return []


def _bounds_text(bounds: DimSpec) -> str:
    low = "0" if bounds.min is None else str(bounds.min)
    high = "∞" if bounds.max is None else str(bounds.max)
    return f"[{low}, {high}]"
