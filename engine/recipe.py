"""Recipes: everything one export needs, as dataclasses that load from and save to TOML.

The recipe is the single source of truth shared by the window, the CLI and the worker. This
module imports neither torch nor Qt, so the GUI process can use it freely.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import toml_writer
from engine.errors import StudioError
from engine.files import write_text_atomic

RECIPE_VERSION = 1

# torch dtype names (and their aliases) accepted in `inputs.dtype`; kept here as plain strings
# because the GUI process must not import torch to validate a form.
DTYPES = (
    "float32", "float", "float64", "double", "float16", "half", "bfloat16",
    "int8", "int16", "short", "int32", "int", "int64", "long",
    "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128",
    "float8_e4m3fn", "float8_e5m2",
)  # fmt: skip
# "auto" (the default, and what a recipe without `fill` means) picks the fill from the
# input's name and dtype: engine.source.inputs.resolve_fill. "arange" counts 0, 1, ...
# along the last axis (position ids).
FILLS = ("auto", "randn", "rand", "zeros", "ones", "randint", "full", "file", "arange")
AUTO_FILL = "auto"
# "auto" (the default) follows the source: TorchScript for a TorchScript archive or
# model.script = true, dynamo otherwise (engine.export.exporter.choose_exporter)
EXPORTERS = ("auto", "dynamo", "torchscript")
# the oldest opset the dynamo exporter's translations write (older requests it cannot honour)
DYNAMO_MIN_OPSET = 18
OPERATOR_EXPORT_TYPES = ("ONNX", "ONNX_ATEN", "ONNX_ATEN_FALLBACK", "ONNX_FALLTHROUGH")
TRAINING_MODES = ("eval", "preserve", "train")
EXTERNAL_DATA = ("auto", "always", "never")
# What an [[inputs]] entry hands forward(): a tensor (the default), or a constant of a plain
# Python type ("none" passes None). Constants are fixed into the exported file, never inputs.
INPUT_KINDS = ("tensor", "bool", "int", "float", "str", "none")


class RecipeError(StudioError):
    """A recipe that cannot be used; the message names the field and what to write instead."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__("recipe", message, hint)


@dataclass
class ModelSpec:
    source: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)
    checkpoint: str | None = None
    # a folder (relative to the recipe) on sys.path and the current folder while the model
    # loads: sources that import siblings, pickled modules saved next to their .py
    workdir: str | None = None
    trust_pickle: bool = False
    script: bool = False
    # a Hugging Face folder's own code (config.json's auto_map) runs only when this is true
    trust_remote_code: bool = False


@dataclass
class InputSpec:
    name: str = "x"
    shape: list[int] = field(default_factory=list)
    dtype: str = "float32"
    fill: str = AUTO_FILL
    low: float | None = None
    high: float | None = None
    value: float | None = None
    file: str | None = None
    dynamic: dict[int, str] = field(default_factory=dict)
    # structured inputs: a dotted name is a part of one forward() argument ("inputs.pixel_values"
    # is key pixel_values of the dict `inputs`, "pair.0" item 0 of the tuple `pair`); `keyword`
    # passes the argument by name; a `kind` other than "tensor" passes `const` as it is
    kind: str = "tensor"
    const: bool | int | float | str | None = None
    keyword: bool = False

    @property
    def is_tensor(self) -> bool:
        """Whether this entry is a tensor (an input of the ONNX file), not a constant."""
        return self.kind == "tensor"

    @property
    def argument(self) -> str:
        """The forward() argument this entry is (or is a part of): the name's first part."""
        return self.name.split(".", 1)[0]

    @property
    def constant_value(self) -> bool | int | float | str | None:
        """The Python value a constant entry passes (None for kind "none")."""
        if self.kind == "float" and isinstance(self.const, int):
            return float(self.const)
        return None if self.kind == "none" else self.const


@dataclass
class DimSpec:
    """Bounds of one named dynamic dimension (torch.export.Dim min/max); None: unbounded.
    `size` (Hugging Face sources, whose inputs the studio derives): the dimension is not
    dynamic but fixed at that size, in the export and in every validation trial."""

    min: int | None = None
    max: int | None = None
    size: int | None = None


@dataclass
class OutputSpec:
    name: str = "output"
    dynamic: dict[int, str] = field(default_factory=dict)


@dataclass
class ExportOptions:
    output: str = "model.onnx"
    exporter: str = "auto"
    opset: int | None = None
    operator_export_type: str = "ONNX"
    training: str = "eval"
    do_constant_folding: bool = True
    export_params: bool = True
    keep_initializers_as_inputs: bool = False
    external_data: str = "auto"
    optimize: bool = True
    custom_opsets: dict[str, int] = field(default_factory=dict)
    extensions: list[str] = field(default_factory=list)
    device: str = "cpu"
    seed: int = 0
    # CPUs one export takes: `onnx-studio batch --executor ray` reserves this many per task
    # (None: 1)
    cpus: int | None = None


@dataclass
class ValidateOptions:
    enabled: bool = False
    rtol: float = 1e-3
    atol: float = 1e-5
    random_trials: int = 3
    dynamic_sizes: bool = True
    providers: list[str] = field(default_factory=lambda: ["CPUExecutionProvider"])
    intermediates: bool = False


@dataclass
class Recipe:
    model: ModelSpec = field(default_factory=ModelSpec)
    inputs: list[InputSpec] = field(default_factory=list)
    outputs: list[OutputSpec] = field(default_factory=list)
    export: ExportOptions = field(default_factory=ExportOptions)
    validate: ValidateOptions = field(default_factory=ValidateOptions)
    # bounds of named dynamic dimensions: `[dims]` `batch = { min = 1, max = 64 }`
    dims: dict[str, DimSpec] = field(default_factory=dict)
    version: int = RECIPE_VERSION
    # Folder that relative paths resolve against (the recipe file's folder); not saved.
    base_dir: Path = field(default_factory=Path.cwd, compare=False, repr=False)

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """Return `path` made absolute against the recipe's folder (absolute paths unchanged)."""
        p = Path(os.path.expanduser(os.fspath(path)))
        return p if p.is_absolute() else (self.base_dir / p)

    @property
    def output_path(self) -> Path:
        return self.resolve(self.export.output)

    def dynamic_dims(self) -> dict[str, list[tuple[str, int]]]:
        """Map each dynamic dimension name to the (input name, axis) pairs that share it."""
        dims: dict[str, list[tuple[str, int]]] = {}
        for spec in self.inputs:
            if not spec.is_tensor:
                continue
            for axis, name in sorted(spec.dynamic.items()):
                dims.setdefault(name, []).append((spec.name, axis))
        return dims

    def problems(self) -> list[tuple[str, str]]:
        """Return (field, sentence) for every problem a form can show before any work is done."""
        return _check(self)

    def check(self) -> None:
        """Raise RecipeError for the first problem found."""
        found = self.problems()
        if found:
            where, sentence = found[0]
            raise RecipeError(f"{where}: {sentence}")

    def copy(self) -> Recipe:
        return from_dict(to_dict(self), self.base_dir)

    def to_toml(self) -> str:
        return dumps(to_dict(self))


# ---------------------------------------------------------------------------- model.source

_PY_SOURCE = re.compile(r"^(?P<path>.+\.py)(?::(?P<name>[^:/\\]*))?$")


def split_source(source: str) -> tuple[str | None, str]:
    """(file, name) of a source string, by parse's rules and without touching the disk.

    "net.py:Net" -> ("net.py", "Net"); "model.pt" or "C:\\m\\model.pt" -> (that path, "");
    "example:alexnet" -> (None, "alexnet"); "" -> (None, "").
    """
    text = source.strip()
    builtin = builtin_source(text)
    if builtin is not None:
        return None, builtin[2]
    if not text:
        return None, ""
    return python_source_parts(text) or (text, "")


def is_folder_source(source: str) -> bool:
    """True for the sources that export several files into a folder (`hf:`, `hf-config:`)."""
    return source.strip().startswith(("hf:", "hf-config:"))


def builtin_source(text: str) -> tuple[str, None, str] | None:
    """(kind, None, name) for the example: and torchvision: sources, which name no file."""
    for prefix in ("example", "torchvision"):
        if text.startswith(prefix + ":"):
            return prefix, None, text[len(prefix) + 1:].strip()
    return None


def python_source_parts(text: str) -> tuple[str, str] | None:
    """(file, name) when `text` names a .py file (a Windows drive colon is not a name's)."""
    match = _PY_SOURCE.match(text)
    return (match["path"], (match["name"] or "").strip()) if match else None


# ---------------------------------------------------------------------------- loading

_SECTIONS: dict[str, type] = {
    "model": ModelSpec, "export": ExportOptions, "validate": ValidateOptions,
}


def load(path: str | os.PathLike[str]) -> Recipe:
    """Read a recipe file; raises RecipeError that names the file and the field at fault."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecipeError(f"Recipe file {path} does not exist; check the path.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecipeError(f"Cannot read recipe file {path}: {exc}.") from None
    return loads(text, base_dir=path.resolve().parent, name=str(path))


def loads(text: str, base_dir: Path | None = None, name: str = "recipe") -> Recipe:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(
            f"{name} is not valid TOML ({exc}).", "Fix the line named in the message."
        ) from None
    except RecursionError:  # tomllib reads nested arrays and tables recursively
        raise RecipeError(f"{name} nests arrays or tables too deeply to read; a recipe's "
                          f"values nest at most {MAX_NESTING} levels.") from None
    recipe = from_dict(data, base_dir or Path.cwd())
    recipe.check()
    return recipe


def from_dict(data: dict[str, Any], base_dir: Path) -> Recipe:
    """Build a Recipe from plain data, checking keys and types (not cross-field rules)."""
    data = dict(data)
    if (deep := too_deep(data)) is not None:
        raise RecipeError(f"{deep}: nested more than {MAX_NESTING} levels deep; a recipe's "
                          f"values nest at most {MAX_NESTING} levels.")
    version = data.pop("version", None)
    if version is None:
        raise RecipeError("version: missing; add `version = 1` at the top of the recipe.")
    if version != RECIPE_VERSION:
        raise RecipeError(
            f"version: this is a version {version!r} recipe, but this program reads version "
            f"{RECIPE_VERSION}; write `version = {RECIPE_VERSION}` or use a matching release."
        )
    kwargs: dict[str, Any] = {"version": version, "base_dir": base_dir}
    for key, value in data.items():
        if key in _SECTIONS:
            kwargs[key] = _build(_SECTIONS[key], value, key)
        elif key == "dims":
            if not isinstance(value, dict):
                raise RecipeError("dims: must be a table of name = { min = 1, max = 64 }.")
            kwargs[key] = {str(name): _build(DimSpec, bounds, f"dims.{name}")
                           for name, bounds in value.items()}
        elif key in ("inputs", "outputs"):
            cls = InputSpec if key == "inputs" else OutputSpec
            if not isinstance(value, list):
                raise RecipeError(f"{key}: must be an array of tables ([[{key}]]).")
            kwargs[key] = [_build(cls, item, f"{key}[{i}]") for i, item in enumerate(value)]
        else:
            allowed = ", ".join(["version", *_SECTIONS, "inputs", "outputs", "dims"])
            raise RecipeError(f"{key}: unknown section; the recipe has {allowed}.")
    return Recipe(**kwargs)


# Deeper values would exhaust Python's recursion limit in the code that writes, copies or
# sends them (the TOML writer, deepcopy, the worker protocol) long after they were read.
MAX_NESTING = 64


def too_deep(data: dict[str, Any], depth: int = 0) -> str | None:
    """The place of a value nested more than MAX_NESTING levels deep in the recipe, `data`
    sitting `depth` levels down in it (2 for model.kwargs), or None. Walked without
    recursion: the data may be as deep as the parser allowed."""
    stack: list[tuple[Any, str, int]] = [(data, "", depth)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_NESTING:
            return where if len(where) <= 60 else where[:60] + "…"
        if isinstance(value, dict):
            stack += [(item, f"{where}.{key}" if where else str(key), depth + 1)
                      for key, item in value.items()]
        elif isinstance(value, list):  # a[…]: which item does not matter
            place = where if where.endswith("[…]") else f"{where}[…]"
            stack += [(item, place, depth + 1) for item in value]
    return None


def _build(cls: type, value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise RecipeError(f"{where}: must be a table.")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for key, raw in value.items():
        if key not in fields:
            raise RecipeError(
                f"{where}.{key}: unknown field; {where.split('[')[0]} has {', '.join(fields)}."
            )
        out[key] = _coerce(raw, str(fields[key].type), f"{where}.{key}")
    return cls(**out)


def _coerce(raw: Any, annotation: str, where: str) -> Any:
    """Check a TOML value against a field annotation (the annotation is a string here)."""
    optional = annotation.endswith("| None")
    base = annotation.removesuffix(" | None")
    if raw is None and optional:
        return None

    def fail(expected: str) -> RecipeError:
        return RecipeError(f"{where}: expected {expected}, got {raw!r}.")

    if base == "bool | int | float | str":
        if not isinstance(raw, bool | int | float | str):
            raise fail("true/false, a number or a string")
        return raw
    if base == "bool":
        if not isinstance(raw, bool):
            raise fail("true or false")
        return raw
    if base == "int":
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise fail("a whole number")
        return raw
    if base == "float":
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise fail("a number")
        return raw
    if base == "str":
        if not isinstance(raw, str):
            raise fail("a string")
        return raw
    if base == "list[int]":
        if not isinstance(raw, list) or any(isinstance(v, bool) or not isinstance(v, int)
                                            for v in raw):
            raise fail("a list of whole numbers such as [1, 3, 224, 224]")
        return list(raw)
    if base == "list[str]":
        if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
            raise fail('a list of strings such as ["a", "b"]')
        return list(raw)
    if base == "dict[int, str]":
        if not isinstance(raw, dict):
            raise fail('a table of axis = "name", such as { 0 = "batch" }')
        out: dict[int, str] = {}
        for k, v in raw.items():
            try:
                axis = int(k)
            except (TypeError, ValueError):
                raise RecipeError(f"{where}: axis {k!r} is not a whole number.") from None
            if not isinstance(v, str):
                raise RecipeError(f"{where}: axis {axis} needs a name in quotes, got {v!r}.")
            out[axis] = v
        return out
    if base == "dict[str, int]":
        if not isinstance(raw, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in raw.values()
        ):
            raise fail("a table of domain = version")
        return dict(raw)
    if base == "dict[str, Any]":
        if not isinstance(raw, dict):
            raise fail("a table")
        return dict(raw)
    raise AssertionError(f"unhandled annotation {annotation}")  # pragma: no cover


# ---------------------------------------------------------------------------- checking


def _choice(where: str, value: str, allowed: tuple[str, ...]) -> tuple[str, str] | None:
    if value in allowed:
        return None
    return where, f"{value!r} is not allowed; use one of {', '.join(allowed)}."


def _dim_name_problems(where: str, dynamic: dict[int, str]) -> list[tuple[str, str]]:
    return [(where, f"axis {axis} needs a name made of letters, digits and _ (such as "
             f"batch), got {name!r}.") for axis, name in dynamic.items()
            if not isinstance(name, str) or not name.isidentifier()]


def _check(recipe: Recipe) -> list[tuple[str, str]]:
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


# ---------------------------------------------------------------------------- saving

# fields an entry that is not a tensor does not write (they describe a tensor)
_TENSOR_FIELDS = ("shape", "dtype", "fill", "low", "high", "value", "file", "dynamic")


def to_dict(recipe: Recipe) -> dict[str, Any]:
    """Plain TOML-ready data; None values and empty optional tables are left out."""

    def clean(obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if value is None:
                continue
            if f.name == "fill" and value == AUTO_FILL:
                continue  # the default: a recipe without `fill` stays without it
            # structured-input fields at their defaults stay out: old recipes round-trip
            if (f.name == "kind" and value == "tensor") or (f.name == "keyword" and not value):
                continue
            if f.name == "trust_remote_code" and not value:  # added later: old recipes round-trip
                continue
            if isinstance(obj, InputSpec) and not obj.is_tensor and f.name in _TENSOR_FIELDS:
                continue
            if f.name == "dynamic":
                if not value:
                    continue
                value = {str(k): v for k, v in sorted(value.items())}
            out[f.name] = value
        return out

    data: dict[str, Any] = {"version": recipe.version, "model": clean(recipe.model)}
    data["inputs"] = [clean(s) for s in recipe.inputs]
    data["outputs"] = [clean(s) for s in recipe.outputs]
    data["export"] = clean(recipe.export)
    data["validate"] = clean(recipe.validate)
    for key in ("inputs", "outputs"):
        if not data[key]:
            del data[key]
    if recipe.dims:  # after the outputs, before [export]
        bounded = {name: clean(spec) for name, spec in recipe.dims.items()}
        data = {**{k: v for k, v in data.items() if k not in ("export", "validate")},
                "dims": bounded, "export": data["export"], "validate": data["validate"]}
    return data


def dumps(data: dict[str, Any]) -> str:
    """TOML in the recipe's house style: scalars first, one-line arrays and inline tables."""
    try:
        return toml_writer.dumps(data)
    except ValueError as exc:
        raise RecipeError(f"{exc}; a recipe holds numbers, strings, true/false, lists and "
                          "tables.") from None


def updated_toml(recipe: Recipe, text: str | None) -> str:
    """The recipe as TOML; given the text of the recipe file it replaces, that text with its
    values updated in place: the user's comments, key order and spelling of unchanged values
    stay, keys no longer set go, new keys come at the end of their table."""
    try:
        return toml_writer.update(text, to_dict(recipe))
    except ValueError as exc:
        raise RecipeError(f"{exc}; a recipe holds numbers, strings, true/false, lists and "
                          "tables.") from None


def save(recipe: Recipe, path: str | os.PathLike[str]) -> None:
    """Write the recipe atomically; saved over a recipe file, that file's text is updated in
    place (see `updated_toml`) rather than replaced."""
    path = Path(path)
    write_text_atomic(path, updated_toml(recipe, _recipe_text(path)))


def _recipe_text(path: Path) -> str | None:
    """The text of the recipe file at `path`; None when there is none (or no recipe there)."""
    try:
        text = path.read_text(encoding="utf-8")
        is_recipe = "version" in tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return None
    return text if is_recipe else None
