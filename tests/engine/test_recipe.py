"""Recipes: TOML round trips, relative paths, and errors that name the field."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.recipe import RecipeError, recipe_problems, to_toml

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
    assert saved.read_text() == to_toml(again)  # a fixed point: saving twice changes nothing


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
     "export.exporter", ["magic", "auto, dynamo, torchscript"]),
    ('version = 1\n[model]\nsource = "a.py:N"\n[export]\nexporter = "dynamo"\n'
     'operator_export_type = "ONNX_ATEN"\n', "export.operator_export_type", ["torchscript"]),
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
    fields = [f for f, _ in recipe_problems(recipe)]
    assert fields == ["model.source", "inputs[0].shape", "inputs[1].name", "export.output"]


def test_the_exporter_defaults_to_auto_and_round_trips(tmp_path: Path) -> None:
    """A recipe without `exporter` (every recipe written before "auto") means "auto": the
    export picks the exporter from the source; a saved one says so and loads back the same."""
    assert recipes.EXPORTERS[0] == "auto" and recipes.ExportOptions().exporter == "auto"
    old = recipes.loads('version = 1\n[model]\nsource = "a.py:N"\n[export]\nopset = 17\n')
    assert old.export.exporter == "auto" and recipe_problems(old) == []
    path = tmp_path / "r.toml"
    recipes.save(old, path)
    assert 'exporter = "auto"' in path.read_text()
    assert recipes.load(path) == old
    for name in recipes.EXPORTERS:
        text = f'version = 1\n[model]\nsource = "a.py:N"\n[export]\nexporter = "{name}"\n'
        recipe = recipes.loads(text)
        assert recipe.export.exporter == name
        assert recipes.loads(to_toml(recipe)).export.exporter == name


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


# ---------------------------------------------------------------------------- saving over a file

COMMENTED = """\
# The export our CI runs.
version = 1

[model]   # what to export
source = "models/net.py:Net"   # the class, after the colon
checkpoint = "weights.pt"
# keyword arguments for the constructor
kwargs = { num_classes = 10 }

# inputs, in forward() order
[[inputs]]   # the image
shape = [10, 3, 224, 224]
name = "x"
dynamic = { 0 = "batch" }   # any batch size

# the token ids
[[inputs]]
name = "tokens"
shape = [10, 7]
dtype = "int64"
fill = "randint"
high = 10

[export]
opset = 18   # pinned: our runtime is old
output = "out/model.onnx"
# tolerances are in [validate]

[validate]
atol = 1e-5   # written my way
enabled = true
"""


def _saved_over(tmp_path: Path, text: str, change) -> tuple[Path, recipes.Recipe]:
    path = tmp_path / "r.toml"
    path.write_text(text)
    recipe = recipes.load(path)
    change(recipe)
    recipes.save(recipe, path)
    again = recipes.load(path)
    assert again == recipe, "the file loads to the recipe that was saved"
    return path, recipe


def test_saving_over_a_recipe_keeps_its_comments_and_key_order(tmp_path: Path) -> None:
    def change(recipe: recipes.Recipe) -> None:
        recipe.model.kwargs["num_classes"] = 7
        recipe.model.checkpoint = None  # no longer set: the key goes
        recipe.inputs[1].shape = [10, 9]
        recipe.export.opset = 20
        recipe.validate.rtol = 0.5

    path, recipe = _saved_over(tmp_path, COMMENTED, change)
    text = path.read_text()
    for comment in ("# The export our CI runs.", "[model]   # what to export",
                    "# the class, after the colon", "# keyword arguments for the constructor",
                    "# inputs, in forward() order", "[[inputs]]   # the image",
                    "# any batch size", "# the token ids", "opset = 20   # pinned: our runtime",
                    "# tolerances are in [validate]", "atol = 1e-5   # written my way"):
        assert comment in text, comment
    assert "checkpoint" not in text
    assert "kwargs = { num_classes = 7 }" in text and "shape = [10, 9]" in text
    lines = text.splitlines()
    # the user's order stays (shape before name, opset before output, atol before enabled) ...
    assert lines.index("shape = [10, 3, 224, 224]") < lines.index('name = "x"')
    assert lines.index("opset = 20   # pinned: our runtime is old") < lines.index(
        'output = "out/model.onnx"')
    assert lines.index("atol = 1e-5   # written my way") < lines.index("enabled = true")
    # ... and keys the file did not have come after the last key of their table, before the
    # comment that leads into the next header
    assert lines.index("script = false") < lines.index("# inputs, in forward() order")
    assert lines.index('output = "out/model.onnx"') < lines.index('exporter = "auto"') < (
        lines.index("# tolerances are in [validate]"))
    assert lines[-1] == "intermediates = false" and "rtol = 0.5" in lines
    # saving the same recipe again changes nothing
    recipes.save(recipe, path)
    assert path.read_text() == text


def test_inputs_rewritten_when_their_count_changes_keep_their_comments(tmp_path: Path) -> None:
    def insert_first(recipe: recipes.Recipe) -> None:
        recipe.inputs.insert(0, recipes.InputSpec(name="mask", shape=[10, 7], dtype="bool",
                                                  fill="ones"))

    path, _ = _saved_over(tmp_path, COMMENTED, insert_first)
    text = path.read_text()
    assert text.index('name = "mask"') < text.index("[[inputs]]   # the image") < text.index(
        "# any batch size") < text.index('name = "tokens"')
    assert "\n\n\n" not in text, "one blank line between tables"

    def drop_image(recipe: recipes.Recipe) -> None:
        del recipe.inputs[0]
        recipe.outputs = []

    path, recipe = _saved_over(tmp_path, COMMENTED, drop_image)
    text = path.read_text()
    assert "# the image" not in text and "# any batch size" not in text
    assert 'name = "tokens"' in text and "# inputs, in forward() order" in text
    assert [s.name for s in recipe.inputs] == ["tokens"]


def test_a_new_section_goes_where_the_schema_puts_it(tmp_path: Path) -> None:
    def add_output(recipe: recipes.Recipe) -> None:
        recipe.outputs = [recipes.OutputSpec(name="logits", dynamic={0: "batch"})]

    path, _ = _saved_over(tmp_path, COMMENTED, add_output)
    text = path.read_text()
    assert text.index('name = "tokens"') < text.index("[[outputs]]") < text.index("[export]")
    assert '[[outputs]]\nname = "logits"\ndynamic = { 0 = "batch" }\n\n[export]' in text


@pytest.mark.parametrize("existing", [
    "not toml at all [",
    'title = "something else"\n',  # TOML, but not a recipe: replaced, not merged into
    "version = 1\n\nmodel.source = 'net.py:Net'   # dotted keys: rewritten plainly\n",
])
def test_saving_over_other_files_writes_the_plain_recipe(tmp_path: Path, existing: str) -> None:
    path = tmp_path / "r.toml"
    path.write_text(existing)
    recipe = recipes.loads(FULL)
    recipes.save(recipe, path)
    assert recipes.load(path) == recipe
    if "dotted" not in existing:
        assert path.read_text() == to_toml(recipe)


def test_every_value_type_round_trips_through_a_save_over_a_file(tmp_path: Path) -> None:
    recipe = recipes.loads(FULL)
    recipe.model.kwargs = {
        "nan": math.nan, "inf": math.inf, "minus_inf": -math.inf, "minus_zero": -0.0,
        "tiny": 5e-324, "huge": 1.7976931348623157e308, "big": 2**63 - 1, "neg": -(2**63),
        "yes": True, "no": False, "text": 'quote " backslash \\ tab \t newline \n é ✓',
        "empty": "", "list": [1, 2.5, "x", [True], {"in": "table"}], "none": [], "table": {},
        "nested": {"a": {"b": [{"c": 1}]}}, "odd key": 1, "a.b": 2, "": 3, "ключ": 4,
    }
    recipe.inputs[1].low, recipe.inputs[1].high = -math.inf, 1e300
    recipe.inputs[2].value = math.nan
    path = tmp_path / "r.toml"
    recipes.save(recipe, path)
    fresh = path.read_text()
    recipe.model.kwargs["nan"] = -math.nan  # still NaN: the file need not change
    recipes.save(recipe, path)  # over the file: the update path
    assert path.read_text() == fresh
    again = recipes.load(path)
    kwargs = again.model.kwargs
    assert math.isnan(kwargs.pop("nan")) and math.isnan(recipe.model.kwargs.pop("nan"))
    assert kwargs == recipe.model.kwargs
    assert [type(v) for v in kwargs.values()] == [type(v) for v in recipe.model.kwargs.values()]
    assert math.copysign(1, kwargs["minus_zero"]) == -1
    assert again.inputs[1].low == -math.inf and again.inputs[1].high == 1e300
    assert math.isnan(again.inputs[2].value)
    again.inputs[2].value = recipe.inputs[2].value = 0
    again.model.kwargs = recipe.model.kwargs = {}
    assert again == recipe
