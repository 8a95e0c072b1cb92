"""Structured inputs and outputs: keywords, dicts, tuples, constants, bounded dims; dict,
dataclass and nested outputs. Real exports (dynamo and TorchScript), validated in ONNX Runtime.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx
import pytest

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.pipeline import export
from onnx_studio.engine.protocol import ExportReport, Validation
from onnx_studio.engine.recipe import (
    DimSpec,
    InputSpec,
    OutputSpec,
    Recipe,
    recipe_problems,
    to_toml,
)
from onnx_studio.engine.source.describe import describe
from onnx_studio.engine.source.examples import EXAMPLES, RECIPES

MODELS = textwrap.dedent('''
    import dataclasses

    import torch
    from torch import nn


    class DictInput(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, inputs: dict[str, torch.Tensor]):
            return self.lin(inputs["features"]) * inputs["scale"]


    class KwargsOnly(nn.Module):
        def forward(self, *, query, key):
            return torch.softmax(query @ key.transpose(-1, -2), dim=-1)


    class Flagged(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x, use_relu: bool = False, mode: str = "sum", eps: float = 0.0,
                    mask=None):
            y = self.lin(x) + eps
            if use_relu:
                y = torch.relu(y)
            if mask is not None:
                y = y * mask
            return y.sum(-1) if mode == "sum" else y.mean(-1)


    class TupleInput(nn.Module):
        def forward(self, pair: tuple[torch.Tensor, torch.Tensor], items: list[torch.Tensor]):
            assert isinstance(items, list)
            return pair[0] * 2 + pair[1] - items[0]


    class DictOutput(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            h = self.lin(x)
            return {"logits": h.sum(-1), "present": ((h, h * 2), (h + 1, None))}


    @dataclasses.dataclass
    class Result:
        logits: torch.Tensor
        attentions: torch.Tensor | None = None
        hidden: torch.Tensor | None = None


    class DataclassOutput(nn.Module):
        def forward(self, x):
            return Result(logits=x.relu(), hidden=x * 3)


    class NestedTuple(nn.Module):
        def forward(self, x):
            return x + 1, (x * 2, (x - 1,))


    class Bounded(nn.Module):
        def forward(self, x):
            return torch.cumsum(x, dim=0)
''')


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("structured")
    (folder / "models.py").write_text(MODELS)
    return folder


def _recipe(folder: Path, cls: str, inputs: list[InputSpec], name: str,
            exporter: str = "dynamo", **extra: object) -> Recipe:
    recipe = Recipe(inputs=inputs, base_dir=folder, **extra)  # type: ignore[arg-type]
    recipe.model.source = f"models.py:{cls}"
    recipe.export.output = f"{name}.onnx"
    recipe.export.exporter = exporter
    recipe.validate.random_trials = 1
    return recipe


def _inputs(path: Path) -> list[str]:
    return [i.name for i in onnx.load(str(path), load_external_data=False).graph.input]


def _outputs(path: Path) -> list[str]:
    return [o.name for o in onnx.load(str(path), load_external_data=False).graph.output]


def _dims(path: Path, name: str) -> list[object]:
    graph = onnx.load(str(path), load_external_data=False).graph
    value = next(v for v in [*graph.input, *graph.output] if v.name == name)
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def _check_ok(report: ExportReport) -> Validation:
    assert report.ok, report.error
    validation = report.validation
    assert validation is not None and validation.ok
    assert all(t.ok for t in validation.trials)
    return validation


def dict_input_recipe(folder: Path, exporter: str = "dynamo") -> Recipe:
    return _recipe(folder, "DictInput", [
        InputSpec(name="inputs.features", shape=[2, 4], dynamic={0: "batch"}),
        InputSpec(name="inputs.scale", shape=[3]),
    ], f"dict_{exporter}", exporter)


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_dict_input_exports_with_flattened_names_and_validates(models_dir: Path,
                                                               exporter: str) -> None:
    recipe = dict_input_recipe(models_dir, exporter)
    validation = _check_ok(export(recipe, validate=True))
    assert _inputs(recipe.output_path) == ["inputs.features", "inputs.scale"]
    assert _dims(recipe.output_path, "inputs.features")[0] == "batch"
    sizes = [t.sizes or {} for t in validation.trials if t.kind == "dynamic-size"]
    assert sorted(s["batch"] for s in sizes) == [3, 4]  # other_sizes(2)


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_kwargs_only_model_exports_in_keyword_order(models_dir: Path, exporter: str) -> None:
    # the key listed first: the ONNX inputs follow the recipe, forward() gets them by name
    recipe = _recipe(models_dir, "KwargsOnly", [
        InputSpec(name="key", shape=[2, 5, 8], keyword=True, dynamic={1: "keys"}),
        InputSpec(name="query", shape=[2, 3, 8], keyword=True),
    ], f"kwargs_{exporter}", exporter)
    report = export(recipe, validate=True)
    _check_ok(report)
    assert _inputs(recipe.output_path) == ["key", "query"]
    assert _dims(recipe.output_path, "key")[1] == "keys"


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_constants_bool_str_float_none_are_fixed_into_the_file(models_dir: Path,
                                                               exporter: str) -> None:
    recipe = _recipe(models_dir, "Flagged", [
        InputSpec(name="x", shape=[2, 4], dynamic={0: "batch"}),
        InputSpec(name="use_relu", kind="bool", const=True),
        InputSpec(name="mode", kind="str", const="mean", keyword=True),
        InputSpec(name="eps", kind="float", const=0.5, keyword=True),
        InputSpec(name="mask", kind="none", keyword=True),
    ], f"flag_{exporter}", exporter)
    report = export(recipe, validate=True)
    _check_ok(report)
    assert _inputs(recipe.output_path) == ["x"]
    assert _dims(recipe.output_path, "x")[0] == "batch"
    ops = {n.op_type for n in onnx.load(str(recipe.output_path)).graph.node}
    assert "Relu" in ops and "ReduceMean" in ops  # the flag and the mode were honoured
    # the other value of the flag gives another file: the constant really is used
    recipe.inputs[1].const = False
    recipe.export.output = f"flag_off_{exporter}.onnx"
    _check_ok(export(recipe, validate=True))
    assert "Relu" not in {n.op_type for n in onnx.load(str(recipe.output_path)).graph.node}


def test_tuple_and_list_parts(models_dir: Path) -> None:
    recipe = _recipe(models_dir, "TupleInput", [
        InputSpec(name="pair.0", shape=[3, 2], dynamic={0: "n"}),
        InputSpec(name="pair.1", shape=[3, 2], dynamic={0: "n"}),
        InputSpec(name="items.0", shape=[3, 2], dynamic={0: "n"}),
    ], "tuples")
    report = export(recipe, validate=True)
    _check_ok(report)
    assert _inputs(recipe.output_path) == ["pair.0", "pair.1", "items.0"]


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_dict_output_named_by_paths(models_dir: Path, exporter: str) -> None:
    recipe = _recipe(models_dir, "DictOutput", [InputSpec(name="x", shape=[2, 4])],
                     f"dict_out_{exporter}", exporter)
    validation = _check_ok(export(recipe, validate=True))
    names = ["logits", "present.0.0", "present.0.1", "present.1.0"]
    assert _outputs(recipe.output_path) == names
    assert [o.name for o in validation.outputs] == names


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_dataclass_output(models_dir: Path, exporter: str) -> None:
    recipe = _recipe(models_dir, "DataclassOutput", [InputSpec(name="x", shape=[2, 4])],
                     f"dataclass_{exporter}", exporter)
    report = export(recipe, validate=True)
    _check_ok(report)
    assert _outputs(recipe.output_path) == ["logits", "hidden"]


def test_nested_tuple_output_validates(models_dir: Path) -> None:
    recipe = _recipe(models_dir, "NestedTuple", [InputSpec(name="x", shape=[2, 4])], "nested")
    report = export(recipe, validate=True)
    _check_ok(report)
    assert _outputs(recipe.output_path) == ["0", "1.0", "1.1.0"]


def test_model_output_is_named_by_its_fields(tmp_path: Path) -> None:
    (tmp_path / "hf_out.py").write_text(textwrap.dedent('''
        import torch
        from transformers.modeling_outputs import BaseModelOutput

        class Net(torch.nn.Module):
            def forward(self, x):
                return BaseModelOutput(last_hidden_state=x * 2, hidden_states=(x, x + 1))
    '''))
    recipe = _recipe(tmp_path, "Net", [InputSpec(name="x", shape=[2, 3])], "hf_out")
    recipe.model.source = "hf_out.py:Net"
    _check_ok(export(recipe, validate=True))
    assert _outputs(recipe.output_path) == ["last_hidden_state", "hidden_states.0",
                                            "hidden_states.1"]


def test_bounded_dim_validates_inside_and_reports_outside(models_dir: Path) -> None:
    recipe = _recipe(models_dir, "Bounded", [
        InputSpec(name="x", shape=[4, 3], dynamic={0: "batch"})], "bounded",
        dims={"batch": DimSpec(min=2, max=5)})
    validation = _check_ok(export(recipe, validate=True))
    tried = sorted((t.sizes or {})["batch"] for t in validation.trials
                   if t.kind == "dynamic-size")
    assert tried == [2, 5]  # other_sizes(4) is 2 and 6; 6 is outside, the bound 5 tried
    skipped = validation.not_tried
    assert skipped and skipped[0].dim == "batch" and skipped[0].size == 6
    assert "not tried" in skipped[0].reason
    assert any("not tried" in w.message for w in validation.warnings or [])


def test_bounds_reach_torch_export(models_dir: Path) -> None:
    """An example size outside the bounds is refused before any work, naming the field."""
    recipe = _recipe(models_dir, "Bounded", [
        InputSpec(name="x", shape=[9, 3], dynamic={0: "batch"})], "bounded_bad",
        dims={"batch": DimSpec(min=2, max=5)})
    problems = recipe_problems(recipe)
    assert problems and problems[0][0] == "dims.batch" and "outside" in problems[0][1]
    recipe.dims = {"seq": DimSpec(max=3)}
    assert any(w == "dims.seq" for w, _ in recipe_problems(recipe))


# ---------------------------------------------------------------------------- the recipe


STRUCTURED = '''version = 1

[model]
source = "models.py:Flagged"

[[inputs]]
name = "x"
shape = [2, 4]
dynamic = { 0 = "batch" }

[[inputs]]
name = "use_relu"
kind = "bool"
const = true

[[inputs]]
name = "mode"
kind = "str"
const = "mean"
keyword = true

[dims]
batch = { min = 1, max = 64 }

[export]
output = "from_toml.onnx"
'''


def test_structured_recipe_round_trips(tmp_path: Path) -> None:
    loaded = recipes.loads(STRUCTURED, base_dir=tmp_path)
    assert loaded.inputs[1].kind == "bool" and loaded.inputs[1].const is True
    assert loaded.inputs[2].keyword and loaded.dims["batch"] == DimSpec(1, 64)
    again = recipes.loads(to_toml(loaded), base_dir=tmp_path)
    assert again == loaded
    assert "shape" not in to_toml(loaded).split('name = "use_relu"')[1].split("[[")[0]


@pytest.mark.parametrize(("inputs", "field", "words"), [
    ([InputSpec(name="flag", kind="bool", const=3)], "inputs[0].const", "is not a bool"),
    ([InputSpec(name="flag", kind="int")], "inputs[0].const", "needs a value"),
    ([InputSpec(name="flag", kind="wat")], "inputs[0].kind", "not allowed"),
    ([InputSpec(name="x", const=1.0)], "inputs[0].const", "takes no const"),
    ([InputSpec(name="a.0"), InputSpec(name="a.x")], "inputs", "mix numbers and names"),
    ([InputSpec(name="a.0"), InputSpec(name="a.2")], "inputs", "without gaps"),
    ([InputSpec(name="a"), InputSpec(name="a.b")], "inputs", "also holds"),
    ([InputSpec(name="a.b", keyword=True), InputSpec(name="a.c")], "inputs", "same"),
    ([InputSpec(name="a..b")], "inputs[0].name", "not a valid name"),
])
def test_structure_problems_name_the_field(inputs: list[InputSpec], field: str,
                                           words: str) -> None:
    found = recipe_problems(Recipe(inputs=inputs))
    matching = [s for w, s in found if w == field]
    assert matching and words in matching[0], found


def test_every_shipped_recipe_loads_and_saves_unchanged() -> None:
    """Version stays 1: every shipped recipe loads as before (tensor inputs, positional), and
    saving writes none of the new fields, so an older release still reads what this saves."""
    files = sorted(set(RECIPES.glob("*.toml")) | {ex.recipe for ex in EXAMPLES.values()})
    assert len(files) >= len(EXAMPLES) >= 10
    for path in files:
        loaded = recipes.load(path)
        assert loaded.version == 1
        assert all(s.is_tensor and not s.keyword for s in loaded.inputs)
        text = recipes.updated_toml(loaded, path.read_text(encoding="utf-8"))
        assert not any(f"\n{key} =" in text for key in ("kind", "const", "keyword")), path.name
        assert "[dims]" not in text
        assert recipes.loads(text, base_dir=path.parent) == loaded


# ---------------------------------------------------------------------------- the CLI


def test_cli_dynamic_bounds_and_const(models_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli.onnx"
    saved = tmp_path / "saved.toml"
    result = subprocess.run(
        [sys.executable, "-m", "onnx_studio.engine.cli", "export",
         str(models_dir / "models.py:Flagged"),
         "-o", str(out), "--input", "x=4x4", "--dynamic", "x:0=batch:2:8",
         "--const", "use_relu=true", "--const", "mode=mean", "--validate", "--json",
         "--save-recipe", str(saved)],
        capture_output=True, text=True, timeout=110)
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 0, doc["error"]
    assert doc["validation"]["ok"]
    assert [i["name"] for i in doc["graph"]["inputs"]] == ["x"]
    fills = [line for line in result.stderr.splitlines() if "filled automatically" in line]
    assert fills and "x randn" in fills[0] and "use_relu" not in fills[0]  # constants: no fill
    back = recipes.load(saved)
    assert back.dims["batch"] == DimSpec(2, 8)
    assert [(s.name, s.kind, s.const) for s in back.inputs[1:]] == [
        ("use_relu", "bool", True), ("mode", "str", "mean")]


def test_cli_bad_bounds_are_a_wrong_request(models_dir: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "onnx_studio.engine.cli", "export",
         str(models_dir / "models.py:Flagged"),
         "-o", str(tmp_path / "x.onnx"), "--input", "x=4x4", "--dynamic", "x:0=batch:9:2",
         "--json"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert "batch" in doc["error"]["message"]


def test_output_spec_names_may_be_dotted() -> None:
    recipe = Recipe(inputs=[InputSpec(name="x", shape=[1])],
                    outputs=[OutputSpec(name="present.0.key")])
    recipe.model.source = "m.py:M"
    assert recipe_problems(recipe) == []


def test_describe_reports_the_forward_signature(models_dir: Path) -> None:
    """The form offers keywords and constants from what describe reads (no torch, no run)."""
    desc = describe("models.py:Flagged", models_dir)
    assert [(p.name, p.kind, p.default, p.annotation) for p in desc.forward_signature] == [
        ("x", "positional", None, ""), ("use_relu", "positional", "False", "bool"),
        ("mode", "positional", "'sum'", "str"), ("eps", "positional", "0.0", "float"),
        ("mask", "positional", "None", "")]
    kinds = [p.kind for p in describe("models.py:KwargsOnly", models_dir).forward_signature]
    assert kinds == ["keyword", "keyword"]


def test_intermediates_say_why_they_are_skipped(models_dir: Path) -> None:
    recipe = dict_input_recipe(models_dir)
    recipe.export.output = "dict_nodes.onnx"
    recipe.validate.intermediates = True
    validation = _check_ok(export(recipe, validate=True))
    assert validation.intermediates is not None
    assert validation.intermediates.compared == 0
    assert "constant inputs" in (validation.intermediates.message or "")


def test_the_python_script_refuses_what_it_cannot_write(models_dir: Path) -> None:
    from onnx_studio.engine.errors import StudioError
    from onnx_studio.engine.export.codegen import generate

    with pytest.raises(StudioError, match="keyword, dict/tuple or constant"):
        generate(dict_input_recipe(models_dir))
    plain = _recipe(models_dir, "Bounded", [InputSpec(name="x", shape=[4, 3])], "plain")
    assert "torch.onnx.export(" in generate(plain)
