"""A recipe's fingerprints: canonical texts that are equal when the recipes are, whole
(`fingerprint`), as an export reads it (`export_fingerprint`) and as a validation runs it
(`run_fingerprint`). The dirty flag and every result's stamp (onnx_studio.app.outcomes.Stamp)
compare them. Qt-free.
"""

from __future__ import annotations

import json
from typing import Any

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.recipe import Recipe

__all__ = ["export_fingerprint", "fingerprint", "run_fingerprint"]


def _digest(data: dict[str, Any], recipe: Recipe) -> str:
    """The data and the recipe's folder as one canonical text. Fingerprints are only compared
    in this process, so the text itself serves: exact, and no hash module to load at start."""
    text = json.dumps(data, sort_keys=True, default=str)
    return f"{text}\0{recipe.base_dir}"


def fingerprint(recipe: Recipe) -> str:
    """The recipe's data and its folder as a canonical text: equal recipes, equal fingerprints.

    Cheap (no TOML writing): the dirty flag and every result's stamp use it on each edit.
    """
    return _digest(recipes.to_dict(recipe), recipe)


def export_fingerprint(recipe: Recipe) -> str:
    """The fingerprint of what an export reads: the recipe without its [validate] table, so a
    new tolerance leaves an export current (its validation is judged again instead)."""
    data = recipes.to_dict(recipe)
    data["validate"] = {}
    return _digest(data, recipe)


def run_fingerprint(recipe: Recipe) -> str:
    """The fingerprint of what a validation runs: the recipe without its tolerances, which
    only judge the differences a run found (a new tolerance is judged again, nothing re-run),
    and without `enabled`, which says when a validation runs, not what it does."""
    data = recipes.to_dict(recipe)
    data["validate"] = {k: v for k, v in data["validate"].items()
                        if k not in ("rtol", "atol", "enabled")}
    return _digest(data, recipe)
