"""Moving a recipe to another folder: every path it names keeps pointing at the same file.

One rule for the CLI (--save-recipe) and the window (Save recipe as): a path becomes
relative to the new folder when the two share a folder below the filesystem root, so a
project folder moved or checked out elsewhere keeps working; otherwise (only the root or a
different Windows drive in common) it stays absolute, because `../../../usr/...` would break
as soon as the recipe moves. Torch-free and Qt-free.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from engine.recipe import Recipe, split_source


def rebase_recipe_paths(recipe: Recipe, new_folder: Path, *, absolute: bool = False) -> Recipe:
    """A copy of `recipe` that lives in `new_folder`, its paths rewritten to point where they did.

    With `absolute` every path becomes absolute (a recipe copied out of a read-only folder
    whose files stay there).
    """
    folder = os.path.abspath(new_folder)

    def moved(path: str) -> str:
        # normpath, not resolve(): the new folder may not exist yet, and symlinks stay as named
        target = os.path.normpath(os.path.abspath(recipe.resolve(path)))
        return target if absolute else portable_path(target, folder)

    out = copy.deepcopy(recipe)
    file, name = split_source(recipe.model.source)
    if file is not None:
        out.model.source = moved(file) + (f":{name}" if name else "")
    if recipe.model.checkpoint:
        out.model.checkpoint = moved(recipe.model.checkpoint)
    if recipe.model.workdir:
        out.model.workdir = moved(recipe.model.workdir)
    for spec in out.inputs:
        if spec.file:
            spec.file = moved(spec.file)
    out.export.extensions = [moved(e) for e in recipe.export.extensions]
    out.export.output = moved(recipe.export.output)
    out.base_dir = Path(folder)
    return out


def portable_path(target: str, folder: str) -> str:
    """`target` relative to `folder` when they share a folder below the root, else absolute."""
    try:
        common = os.path.commonpath([target, folder])
        if os.path.dirname(common) == common:  # only "/" (or a drive's root) in common
            return target
        return os.path.relpath(target, folder)
    except ValueError:  # different drives on Windows
        return target
