"""Recipes: everything one export needs, as dataclasses that load from and save to TOML.

`Recipe` and its parts, the values their fields take (spec.py); `load`/`loads`/`from_dict`
(reading.py); `recipe_problems(recipe)`/`check_recipe(recipe)` (checks.py); `save`/`to_dict`/
`to_toml`/`dumps`/`updated_toml` (writing.py); what a `model.source` string names
(model_source.py).
The modules import downward only: the dataclasses import none of their readers, checks or
writers. Callers import these names from `onnx_studio.engine.recipe`. Nothing here imports
torch or Qt.
"""

from onnx_studio.engine.recipe.checks import check_recipe, recipe_problems, valid_input_name
from onnx_studio.engine.recipe.model_source import (
    builtin_source,
    is_folder_source,
    python_source_parts,
    split_source,
)
from onnx_studio.engine.recipe.reading import MAX_NESTING, from_dict, load, loads, too_deep
from onnx_studio.engine.recipe.spec import (
    AUTO_FILL,
    DTYPES,
    DYNAMO_MIN_OPSET,
    EXPORTERS,
    EXTERNAL_DATA,
    FILLS,
    INPUT_KINDS,
    OPERATOR_EXPORT_TYPES,
    RECIPE_VERSION,
    TRAINING_MODES,
    DimSpec,
    ExportOptions,
    InputSpec,
    ModelSpec,
    OutputSpec,
    Recipe,
    RecipeError,
    ValidateOptions,
)
from onnx_studio.engine.recipe.writing import dumps, save, to_dict, to_toml, updated_toml

__all__ = [
    "AUTO_FILL",
    "DTYPES",
    "DYNAMO_MIN_OPSET",
    "EXPORTERS",
    "EXTERNAL_DATA",
    "FILLS",
    "INPUT_KINDS",
    "MAX_NESTING",
    "OPERATOR_EXPORT_TYPES",
    "RECIPE_VERSION",
    "TRAINING_MODES",
    "DimSpec",
    "ExportOptions",
    "InputSpec",
    "ModelSpec",
    "OutputSpec",
    "Recipe",
    "RecipeError",
    "ValidateOptions",
    "builtin_source",
    "check_recipe",
    "dumps",
    "from_dict",
    "is_folder_source",
    "load",
    "loads",
    "python_source_parts",
    "recipe_problems",
    "save",
    "split_source",
    "to_dict",
    "to_toml",
    "too_deep",
    "updated_toml",
    "valid_input_name",
]
