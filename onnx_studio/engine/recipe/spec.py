"""What a recipe is: `Recipe` and its parts as dataclasses, the values their fields take, and
`RecipeError`.

The recipe is the single source of truth shared by the window, the CLI and the worker. This package
imports neither torch nor Qt, so the GUI process can use it freely. Reading it from TOML is
onnx_studio.engine.recipe.reading, checking it onnx_studio.engine.recipe.checks, writing it
onnx_studio.engine.recipe.writing: they stand on these classes, which import none of them.
"""

from __future__ import annotations

import os
from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import StudioError

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
# input's name and dtype: onnx_studio.engine.source.inputs.resolve_fill. "arange" counts 0, 1, ...
# along the last axis (position ids).
FILLS = ("auto", "randn", "rand", "zeros", "ones", "randint", "full", "file", "arange")
AUTO_FILL = "auto"
# "auto" (the default) follows the source: TorchScript for a TorchScript archive or
# model.script = true, dynamo otherwise (onnx_studio.engine.export.exporter.choose_exporter)
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

    def copy(self) -> Recipe:
        """An independent copy: its lists and tables copied too, base_dir kept."""
        return deepcopy(self)
