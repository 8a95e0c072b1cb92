"""The recipe an `onnx-studio export` command line asks for (`recipe_from_args`): a recipe
file or a SOURCE with its --input flags, then every flag's override, checked before any work;
a wrong command line is a `RequestError` (exit 2)."""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine import shipped
from onnx_studio.engine.export.hf_files import check_output_folder
from onnx_studio.engine.export.onnx_file import check_output_path
from onnx_studio.engine.paths import recipe_inputs
from onnx_studio.engine.recipe import DimSpec, InputSpec, OutputSpec, Recipe, check_recipe

__all__ = ["FILL_FORMS", "RequestError", "recipe_from_args"]


class RequestError(Exception):
    """A wrong command line (argparse's complaints, turned into our exit 2 + JSON); `hint`
    says what to write instead."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


INPUT_HINT = ("Write each input as --input NAME=SHAPE (sizes joined by x), NAME the forward() "
              "argument it fills: e.g. --input {name}=1x3x224x224.")


FILL_FORMS = ("auto, randn, rand, rand(LOW,HIGH), randint(LOW,HIGH), zeros, ones, "
              "full(VALUE), arange or file=PATH")
_FILL_CALL = re.compile(r"(?P<name>[a-z]+)(?:\((?P<args>[^()]*)\))?")
# how many numbers each fill takes in parentheses
_FILL_ARGS = {"auto": (0,), "randn": (0,), "rand": (0, 2), "randint": (2,), "zeros": (0,),
              "ones": (0,), "full": (1,), "arange": (0,)}


def _parse_input(text: str) -> InputSpec:
    """NAME=SHAPE[:DTYPE[:FILL]]; the fill keeps any further colons (file=C:/x.npy)."""
    name, sep, rest = text.partition("=")
    if not sep or not name:
        raise RequestError(f"--input {text!r}: write NAME=SHAPE[:DTYPE[:FILL]], e.g. "
                           "x=1x3x224x224 or attention_mask=2x8:int64:ones.",
                           INPUT_HINT.format(name=name if sep and name else "x"))
    shape_text, _, tail = rest.partition(":")
    dtype, _, fill_text = tail.partition(":")
    if shape_text in ("", "scalar"):
        shape: list[int] = []
    else:
        try:
            shape = [int(d) for d in shape_text.lower().split("x")]
        except ValueError:
            raise RequestError(f"--input {text!r}: the shape {shape_text!r} must be sizes "
                               "joined by x, e.g. 1x3x224x224.",
                               INPUT_HINT.format(name=name)) from None
    spec = InputSpec(name=name, shape=shape, dtype=dtype or "float32")
    if fill_text:
        for key, value in _parse_fill(fill_text, text).items():
            setattr(spec, key, value)
    return spec


def _parse_fill(fill_text: str, text: str) -> dict[str, Any]:
    """The InputSpec fields of a FILL: ones -> fill; randint(0,1000) -> fill, low, high;
    full(5) -> fill, value; file=x.npy -> fill, file."""

    def wrong(problem: str) -> RequestError:
        return RequestError(f"--input {text!r}: {problem}; FILL is one of {FILL_FORMS}, e.g. "
                            "attention_mask=2x8:int64:ones or input_ids=2x8:int64:"
                            "randint(0,1000).")

    fill_text = fill_text.strip()
    if fill_text.startswith("file="):
        path = fill_text.removeprefix("file=").strip()
        if not path:
            raise wrong("file= needs a path to a .npy or .pt file")
        return {"fill": "file", "file": path}
    match = _FILL_CALL.fullmatch(fill_text)
    if match is None or match["name"] not in _FILL_ARGS:
        raise wrong(f"{fill_text!r} is not a fill")
    fill, args = match["name"], match["args"]
    numbers = [] if args is None else [_number(a.strip(), wrong) for a in args.split(",")]
    if len(numbers) not in _FILL_ARGS[fill]:
        wanted = " or ".join(str(n) for n in _FILL_ARGS[fill])
        raise wrong(f"{fill} takes {wanted} number(s) in parentheses, got {len(numbers)}")
    if fill == "full":
        return {"fill": fill, "value": numbers[0]}
    if numbers:
        low, high = numbers
        if fill == "randint" and not all(float(n).is_integer() for n in numbers):
            raise wrong(f"randint needs whole-number bounds, got {args}")
        if low >= high:
            raise wrong(f"LOW ({low}) must be below HIGH ({high})")
        return {"fill": fill, "low": low, "high": high}
    return {"fill": fill}


def _number(text: str, wrong: Callable[[str], RequestError]) -> int | float:
    try:
        value = float(text)
    except ValueError:
        raise wrong(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise wrong(f"{text!r} is not a finite number")
    return int(value) if value.is_integer() and re.fullmatch(r"[+-]?\d+", text) else value


def _apply_dynamic(recipe: Recipe, text: str) -> None:
    tensor, _, rest = text.partition(":")
    axis_text, eq, dim_text = rest.partition("=")
    dim, *bounds = dim_text.split(":")
    if (not tensor or not eq or not dim or not axis_text.lstrip("-").isdigit()
            or len(bounds) not in (0, 2) or not all(b == "" or b.isdigit() for b in bounds)):
        raise RequestError(f"--dynamic {text!r}: write NAME:AXIS=DIM or NAME:AXIS=DIM:MIN:MAX, "
                           "e.g. x:0=batch or x:0=batch:1:64.")
    specs: list[Any] = [*recipe.inputs, *recipe.outputs]
    for spec in specs:
        if spec.name == tensor:
            spec.dynamic[int(axis_text)] = dim
            if bounds:
                low, high = (int(b) if b else None for b in bounds)
                recipe.dims[dim] = DimSpec(min=low, max=high)
            return
    names = ", ".join(s.name for s in specs) or "none"
    raise RequestError(f"--dynamic {text!r}: no input or output is named {tensor!r} "
                       f"(known: {names}).")


def _apply_static_dim(recipe: Recipe, text: str) -> None:
    """--static-dim DIM=SIZE: a Hugging Face source's [dims] DIM = { size = SIZE } (its
    dimensions are named when the model loads); otherwise every axis named DIM becomes that
    size in its input's shape and leaves the dynamic axes."""
    dim, eq, size_text = text.partition("=")
    if not dim or not eq or not size_text.isdigit() or int(size_text) < 1:
        raise RequestError(f"--static-dim {text!r}: write DIM=SIZE with a size of 1 or more, "
                           "e.g. sequence_length=128.")
    size = int(size_text)
    if recipes.is_folder_source(recipe.model.source):
        recipe.dims[dim] = DimSpec(size=size)
        return
    found = False
    for spec in recipe.inputs:
        for axis in [a for a, name in spec.dynamic.items() if name == dim]:
            if spec.shape and -len(spec.shape) <= axis < len(spec.shape):
                spec.shape[axis] = size
            del spec.dynamic[axis]
            found = True
    for out in recipe.outputs:
        out.dynamic = {a: name for a, name in out.dynamic.items() if name != dim}
    recipe.dims.pop(dim, None)
    if not found:
        names = sorted(recipe.dynamic_dims()) or ["none"]
        raise RequestError(f"--static-dim {text!r}: no input axis is called {dim!r} (dynamic "
                           f"dimensions: {', '.join(names)}).")


def _parse_const(text: str, flag: str = "--const") -> InputSpec:
    """--const NAME=VALUE: true/false a bool, none None, a whole number an int, a number a
    float, anything else a string."""
    name, eq, value = text.partition("=")
    if not eq or not name:
        raise RequestError(f"{flag} {text!r}: write NAME=VALUE, e.g. use_cache=false.")
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return InputSpec(name=name, kind="bool", const=lowered == "true")
    if lowered == "none":
        return InputSpec(name=name, kind="none")
    if re.fullmatch(r"[+-]?\d+", value.strip()):
        return InputSpec(name=name, kind="int", const=int(value))
    try:
        number = float(value)
    except ValueError:
        return InputSpec(name=name, kind="str", const=value)
    if not math.isfinite(number):
        raise RequestError(f"{flag} {text!r}: {value!r} is not a finite number.")
    return InputSpec(name=name, kind="float", const=number)


def _apply_structure(recipe: Recipe, args: argparse.Namespace) -> None:
    """--const entries (replacing an entry of that name, else after the inputs); --keyword."""
    for text in args.const:
        spec = _parse_const(text)
        names = [s.name for s in recipe.inputs]
        if spec.name in names:
            spec.keyword = recipe.inputs[names.index(spec.name)].keyword
            recipe.inputs[names.index(spec.name)] = spec
        else:
            recipe.inputs.append(spec)
    for name in args.keyword:
        found = [s for s in recipe.inputs if s.argument == name or s.name == name]
        if not found:
            known = ", ".join(s.name for s in recipe.inputs) or "none"
            raise RequestError(f"--keyword {name!r}: no input or constant is named so "
                               f"(known: {known}).")
        for spec in found:
            spec.keyword = True


def _apply_model_options(recipe: Recipe, args: argparse.Namespace) -> None:
    """--model-kwarg NAME=VALUE into model.kwargs (VALUE read as --const reads it);
    --trust-remote-code into model.trust_remote_code (a Hugging Face source's)."""
    for text in args.model_kwarg:
        option = _parse_const(text, "--model-kwarg")
        if not re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", option.name):
            raise RequestError(f"--model-kwarg {text!r}: {option.name!r} is not a keyword "
                               "argument or config attribute name.")
        if option.kind == "none":  # a recipe (TOML) has no none: the option would be lost
            raise RequestError(f"--model-kwarg {text!r}: a model option cannot be none; leave "
                               "it out for the model's default.")
        recipe.model.kwargs[option.name] = option.constant_value
    if args.trust_remote_code:
        if not recipes.is_folder_source(recipe.model.source):
            raise RequestError("--trust-remote-code applies to a Hugging Face source (hf:DIR); "
                               "a pickled file is trusted with model.trust_pickle = true.")
        recipe.model.trust_remote_code = True


def recipe_from_args(args: argparse.Namespace) -> Recipe:
    """The recipe an `export` command line asks for: a recipe file plus flag overrides."""
    if args.recipe:
        if args.source or args.input:
            raise RequestError("give either --recipe or a SOURCE with --input flags, not both.")
        # a shipped example runs from its copy in the data folder, never in the install tree
        recipe = recipes.load(shipped.runnable(args.recipe))
    else:
        if not args.source:
            raise RequestError("name a model SOURCE (e.g. net.py:Net) or a --recipe file.")
        if not args.output:
            raise RequestError("name the output file with -o OUT.onnx.")
        recipe = Recipe(base_dir=Path.cwd())
        recipe.model.source = args.source
        recipe.inputs = [_parse_input(t) for t in args.input]
    if args.output:
        recipe.export.output = os.path.abspath(args.output)
    if args.validate:  # recorded, so a saved recipe validates too
        recipe.validate.enabled = True
    if args.output_name:
        recipe.outputs = [OutputSpec(name=n) for n in args.output_name]
    _apply_structure(recipe, args)
    for text in args.dynamic:
        _apply_dynamic(recipe, text)
    for flag, field in (("opset", "opset"), ("exporter", "exporter"),
                        ("export_type", "operator_export_type"), ("device", "device")):
        if getattr(args, flag) is not None:
            setattr(recipe.export, field, getattr(args, flag))
    if args.task:
        if not recipes.is_folder_source(recipe.model.source):
            raise RequestError("--task applies to a Hugging Face source (hf:DIR).")
        recipe.model.kwargs["task"] = args.task
    _apply_model_options(recipe, args)
    for text in args.static_dim:
        _apply_static_dim(recipe, text)
    # the output location before anything else: a wrong one is a `write` error, and no
    # recipe is saved and nothing is exported (a Hugging Face source's is a folder)
    if recipes.is_folder_source(recipe.model.source):
        check_output_folder(recipe.output_path, "export", recipe_inputs(recipe))
    else:
        check_output_path(recipe.output_path)
    check_recipe(recipe)
    return recipe
