"""Recipes: TOML round trips, relative paths, and errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import recipe as recipes
from engine.recipe import RecipeError

FULL = """
version = 1

[model]
source = "models/net.py:Net"
kwargs = { num_classes = 10, name = "x", sizes = [1, 2], nested = { a = 1.5 } }
checkpoint = "weights.pt"
trust_pickle = false
script = false

[[inputs]]
name = "x"
shape = [10, 3, 224, 224]
dtype = "float32"
fill = "randn"
dynamic = { 0 = "batch" }

[[inputs]]
name = "tokens"
shape = [10, 7]
dtype = "int64"
fill = "randint"
low = 0
high = 10
dynamic = { 0 = "batch", 1 = "sequence" }

[[inputs]]
name = "scale"
shape = []
fill = "full"
value = 5

[[outputs]]
name = "logits"
dynamic = { 0 = "batch" }

[export]
output = "out/model.onnx"
exporter = "torchscript"
opset = 17
operator_export_type = "ONNX_ATEN_FALLBACK"
training = "preserve"
do_constant_folding = false
export_params = true
keep_initializers_as_inputs = true
external_data = "always"
optimize = false
custom_opsets = { custom_domain = 2 }
extensions = ["symbolics.py"]
device = "cuda:1"
seed = 7

[validate]
enabled = true
rtol = 0.01
atol = 0.0001
random_trials = 5
dynamic_sizes = false
providers = ["CPUExecutionProvider"]
intermediates = true
"""


def test_every_field_loads_and_round_trips_exactly(tmp_path: Path) -> None:
    path = tmp_path / "full.toml"
    path.write_text(FULL)
    recipe = recipes.load(path)
    assert recipe.model.kwargs["nested"] == {"a": 1.5}
    assert recipe.inputs[1].dynamic == {0: "batch", 1: "sequence"}
    assert recipe.inputs[2].shape == [] and recipe.inputs[2].value == 5
    assert recipe.export.custom_opsets == {"custom_domain": 2}
    assert recipe.export.device == "cuda:1" and recipe.validate.intermediates is True
    saved = tmp_path / "again.toml"
    recipes.save(recipe, saved)
    again = recipes.load(saved)
    assert again == recipe
    assert saved.read_text() == again.to_toml()  # a fixed point: saving twice changes nothing


def test_relative_paths_resolve_against_the_recipe_folder(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "r.toml"
    path.write_text(FULL)
    recipe = recipes.load(path)
    assert recipe.output_path == tmp_path / "sub" / "out" / "model.onnx"
    assert recipe.resolve("/abs/file.pt") == Path("/abs/file.pt")


def test_shared_dimension_names_are_one_dimension(tmp_path: Path) -> None:
    recipe = recipes.loads(FULL)
    assert recipe.dynamic_dims() == {
        "batch": [("x", 0), ("tokens", 0)], "sequence": [("tokens", 1)]}


@pytest.mark.parametrize(("text", "field", "words"), [
    ('[model]\nsource = "a.py:N"\n', "version", ["version = 1"]),
    ('version = 2\n[model]\nsource = "a.py:N"\n', "version", ["2"]),
    ('version = 1\n[model]\nsorce = "a.py:N"\n', "model.sorce", ["unknown field", "source"]),
    ('version = 1\n[mdl]\n', "mdl", ["unknown section"]),
    ('version = 1\n[model]\nsource = "a.py:N"\n[[inputs]]\nname = "x"\nshape = [1, "a"]\n',
     "inputs[0].shape", ["whole numbers"]),
    ('version = 1\n[model]\nsource = "a.py:N"\n[[inputs]]\nname = "x"\nshape = [1]\n'
     'dtype = "float33"\n', "inputs[0].dtype", ["float33", "float32"]),
    ('version = 1\n[model]\nsource = "a.py:N"\n[[inputs]]\nname = "x"\nshape = [1]\n'
     'dynamic = { 3 = "batch" }\n', "inputs[0].dynamic", ["beyond", "rank 1"]),
    ('version = 1\n[model]\nsource = "a.py:N"\n[export]\nexporter = "magic"\n',
     "export.exporter", ["magic", "dynamo, torchscript"]),
    ('version = 1\n[model]\nsource = "a.py:N"\n[export]\noperator_export_type = "ONNX_ATEN"\n',
     "export.operator_export_type", ["torchscript"]),
    ('version = 1\n[model]\nsource = "a.py:N"\n[export]\ndevice = "tpu"\n', "export.device",
     ["cuda:N"]),
    ('version = 1\n[model]\nsource = "a.py:N"\n[export]\nopset = "18"\n', "export.opset",
     ["whole number"]),
    ('version = 1\n[model]\nsource = "a.py:N"\n[[inputs]]\nname = "x"\n[[inputs]]\nname = "x"\n',
     "inputs[1].name", ["twice"]),
    ('version = 1\n[model\n', "line 2", ["not valid TOML"]),
])
def test_errors_name_the_field_and_what_to_write(text: str, field: str, words: list[str]
                                                 ) -> None:
    with pytest.raises(RecipeError) as caught:
        recipes.loads(text)
    message = str(caught.value)
    assert field in message, message
    for word in words:
        assert word in message, message
    assert caught.value.kind == "recipe" and caught.value.exit_code == 2


def test_problems_lists_everything_a_form_should_mark() -> None:
    recipe = recipes.Recipe()
    recipe.inputs = [recipes.InputSpec(name="x", shape=[-1]), recipes.InputSpec(name="x")]
    recipe.export.output = "model.txt"
    fields = [f for f, _ in recipe.problems()]
    assert fields == ["model.source", "inputs[0].shape", "inputs[1].name", "export.output"]


def test_a_missing_recipe_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="does not exist"):
        recipes.load(tmp_path / "nope.toml")


def test_save_leaves_no_temporary_file_and_keeps_the_old_one_on_error(tmp_path: Path) -> None:
    path = tmp_path / "r.toml"
    recipe = recipes.loads(FULL)
    recipes.save(recipe, path)
    before = path.read_text()
    recipe.model.kwargs = {"bad": object()}
    with pytest.raises(RecipeError):
        recipes.save(recipe, path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.toml"]
