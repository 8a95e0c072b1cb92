"""A `Recipe` as TOML: its plain data (`to_dict`), the house style's text (`dumps`, `to_toml`),
a recipe file's own text updated in place (`updated_toml`), written atomically (`save`).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from pathlib import Path
from typing import Any

from onnx_studio.engine.file_set import write_file
from onnx_studio.engine.recipe.spec import AUTO_FILL, InputSpec, Recipe, RecipeError

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
    from onnx_studio.engine import toml_writer  # tomlkit: loaded when a recipe is first written

    try:
        return toml_writer.dumps(data)
    except ValueError as exc:
        raise RecipeError(f"{exc}; a recipe holds numbers, strings, true/false, lists and "
                          "tables.") from None


def to_toml(recipe: Recipe) -> str:
    """The recipe as TOML text in the house style (what `save` writes to a new file)."""
    return dumps(to_dict(recipe))


def updated_toml(recipe: Recipe, text: str | None) -> str:
    """The recipe as TOML; given the text of the recipe file it replaces, that text with its
    values updated in place: the user's comments, key order and spelling of unchanged values
    stay, keys no longer set go, new keys come at the end of their table."""
    from onnx_studio.engine import toml_writer

    try:
        return toml_writer.update(text, to_dict(recipe))
    except ValueError as exc:
        raise RecipeError(f"{exc}; a recipe holds numbers, strings, true/false, lists and "
                          "tables.") from None


def save(recipe: Recipe, path: str | os.PathLike[str]) -> None:
    """Write the recipe atomically; saved over a recipe file, that file's text is updated in
    place (see `updated_toml`) rather than replaced."""
    path = Path(path)
    write_file(path, updated_toml(recipe, _recipe_text(path)).encode("utf-8"),
               what="The recipe")


def _recipe_text(path: Path) -> str | None:
    """The text of the recipe file at `path`; None when there is none (or no recipe there)."""
    try:
        text = path.read_text(encoding="utf-8")
        is_recipe = "version" in tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return None
    return text if is_recipe else None
