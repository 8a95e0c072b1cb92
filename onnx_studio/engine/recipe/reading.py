"""A `Recipe` from a TOML file, TOML text or plain data (`load`, `loads`, `from_dict`): every
key and type checked, a RecipeError naming the field at fault; how deep values may nest
(`MAX_NESTING`, `too_deep`).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import missing_file_hint
from onnx_studio.engine.recipe.checks import check_recipe
from onnx_studio.engine.recipe.spec import (
    RECIPE_VERSION,
    DimSpec,
    ExportOptions,
    InputSpec,
    ModelSpec,
    OutputSpec,
    Recipe,
    RecipeError,
    ValidateOptions,
)

_SECTIONS: dict[str, type] = {
    "model": ModelSpec, "export": ExportOptions, "validate": ValidateOptions,
}


def load(path: str | os.PathLike[str]) -> Recipe:
    """Read a recipe file; raises RecipeError that names the file and the field at fault."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecipeError(f"Recipe file {path} does not exist; check the path.",
                          missing_file_hint(path, ".toml")) from None
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
    check_recipe(recipe)
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
