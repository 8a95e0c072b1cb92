"""The files that ship with the program, and the user's runnable copies of the example recipes.

The `resources` package holds the example recipes (`recipes/*.toml`) and the model files they
name (`models/*.py`); it is found with importlib.resources, so a checkout, a wheel install and
a frozen build read it the same way. It may be read-only and is never written to: an example
runs from a copy in the user's data folder, `<data>/examples/<name>/`, holding the recipe and
the shipped files it names, so a relative output such as `out/x.onnx` lands there.
"""

from __future__ import annotations

import copy
import filecmp
import importlib.resources
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from onnx_studio.engine import dirs
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.files import write_text_atomic
from onnx_studio.engine.paths import source_path
from onnx_studio.engine.recipe import check_recipe


def root() -> Path:
    """The folder of the shipped files (the `resources` package)."""
    # a Path for a package on disk, which is how every build installs it (never a zip)
    return Path(str(importlib.resources.files("onnx_studio.resources")))


def recipes_dir() -> Path:
    return root() / "recipes"


def models_dir() -> Path:
    return root() / "models"


def recipe_paths() -> list[Path]:
    """Every shipped example recipe, sorted by name."""
    return sorted(recipes_dir().glob("*.toml"))


def default_recipe() -> Path | None:
    """The example a new window opens with (`recipes/default.toml`), if it ships."""
    path = recipes_dir() / "default.toml"
    return path if path.is_file() else None


def is_shipped(path: str | os.PathLike[str]) -> bool:
    """True when `path` lies inside the shipped files."""
    return Path(path).resolve().is_relative_to(root().resolve())


def examples_dir() -> Path:
    return dirs.data_dir() / "examples"


def working_copy(path: str | os.PathLike[str]) -> Path:
    """The runnable copy of the shipped recipe at `path`; returns the copied recipe's path.

    The recipe and every shipped file it names (model, checkpoint, input files, extensions)
    are copied into `examples_dir() / <name>`, keeping their places below the shipped folder
    (`models/net.py`), and the copy's paths are rewritten to match; its comments stay. Each
    call refreshes the copies from the shipped files; anything else in the folder (the
    exports) is left alone. Raises RecipeError for a shipped recipe that does not load.
    """
    _, write = working_recipe(path)
    return write()


def working_recipe(path: str | os.PathLike[str]) -> tuple[recipes.Recipe, Callable[[], Path]]:
    """`working_copy` in two steps: the copy's recipe (its paths rewritten, relative to the
    copy's folder: what loading the copied recipe gives), with the shipped files it names
    copied already; and the call that writes the copy's recipe file (`working_copy`'s
    result), which the window makes after its first frame (writing keeps the comments, with
    tomlkit). Raises RecipeError for a shipped recipe that does not load.
    """
    path = Path(path)
    recipe = recipes.load(path)
    shipped = root().resolve()
    folder = examples_dir() / path.stem
    files: dict[Path, Path] = {}

    def moved(name: str) -> str:
        target = recipe.resolve(name).resolve()
        # not ours to copy, or a folder (a Hugging Face model is only read): point at it
        if not target.is_relative_to(shipped) or target.is_dir():
            return str(target)
        inside = target.relative_to(shipped)
        files[target] = folder / inside
        return inside.as_posix()

    local = copy.deepcopy(recipe)
    located = source_path(recipe.model.source)  # hf:DIR keeps its prefix
    if located is not None:
        prefix, file, suffix = located
        local.model.source = prefix + moved(file) + suffix
    if recipe.model.checkpoint:
        local.model.checkpoint = moved(recipe.model.checkpoint)
    for spec in local.inputs:
        if spec.file:
            spec.file = moved(spec.file)
    local.export.extensions = [moved(e) for e in recipe.export.extensions]

    folder.mkdir(parents=True, exist_ok=True)
    for source, target in files.items():
        if source.is_file() and not (target.is_file() and filecmp.cmp(source, target, False)):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    target = folder / path.name

    def write() -> Path:
        text = recipes.updated_toml(local, path.read_text(encoding="utf-8"))
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            write_text_atomic(target, text)
        return target

    copied = recipes.from_dict(recipes.to_dict(local), target.resolve().parent)
    check_recipe(copied)
    return copied, write


def runnable(path: str | os.PathLike[str]) -> Path:
    """The recipe file to run for `path`: its working copy when it is shipped, else itself."""
    return working_copy(path) if is_shipped(path) else Path(path)
