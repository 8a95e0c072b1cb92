"""onnx_studio.engine.validation against real tiny models: real torch, real onnx exports, real
onnxruntime.

Every model is a class in a .py file written to a temp folder and named by a recipe
("models.py:Name"), loaded and fed by onnx_studio.engine.source, as a user's would be.
Exports are made once per session with torch.onnx.export directly, so that some can be wrong
on purpose (a baked `.item()`, a dynamic axis left out).
"""

from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import torch

from onnx_studio.engine import recipe as recipe_mod
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.events import Events
from onnx_studio.engine.source.inputs import dynamic_shapes, make_inputs
from onnx_studio.engine.source.load import load_model
from onnx_studio.engine.validation.metrics import load_plots
from onnx_studio.engine.validation.validator import other_sizes, plan_trials, validate

MODELS = textwrap.dedent('''
    import torch
    from torch import nn


    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(4, 8)
            self.head = nn.Linear(8, 3)

        def forward(self, x):
            h = torch.relu(self.body(x))
            return self.head(h).softmax(-1), h.sum(-1)


    class ItemScale(nn.Module):
        """Traced, x.mean().item() becomes a constant: right only for the export inputs."""

        def forward(self, x):
            return x * x.mean().item()


    class Flatten(nn.Module):
        """Traced, int(x.shape[0]) bakes the export batch size into the Reshape."""

        def forward(self, x):
            return (x * 2).reshape(int(x.shape[0]), -1)


    class Seq(nn.Module):
        """The FAQ's LSTM; its (output, (hn, cn)) result is a nested tuple."""

        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(10, 20, num_layers=2, bidirectional=True)

        def forward(self, input, h0, c0):
            return self.lstm(input, (h0, c0))


    class Kinds(nn.Module):
        """Integer and bool outputs (compared exactly) and a nested dict result."""

        def forward(self, x):
            return {"index": x.argmax(-1), "parts": (x > 0, x * 3)}


    class Pair(nn.Module):
        def forward(self, a, b):
            return a + b


    class Pieces(nn.Module):
        """Scripted, a returned list of tensors becomes one ONNX sequence output."""

        def forward(self, x):
            pieces = [x * 2, x + 1]
            return pieces


    class SumDiff(nn.Module):
        def forward(self, a, b):
            return a + b, a - b
''')


def _write_recipe(folder: Path, name: str, body: str) -> recipe_mod.Recipe:
    path = folder / f"{name}.toml"
    path.write_text(f'version = 1\n\n[model]\nsource = "models.py:{body}', encoding="utf-8")
    return recipe_mod.load(path)


class Workspace:
    """A folder with models.py, a recipe per case, and its exports made once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        (folder / "models.py").write_text(MODELS, encoding="utf-8")

    def recipe(self, name: str, body: str) -> recipe_mod.Recipe:
        return _write_recipe(self.folder, name, body)

    def export(self, recipe: recipe_mod.Recipe, *, dynamo: bool, dynamic: bool = True) -> Path:
        """Export with torch.onnx.export; `dynamic=False` leaves the dynamic axes out.

        load_model seeds torch by the recipe, so validate() rebuilding the model gets the same
        random weights as the export did.
        """
        loaded = load_model(recipe)
        args = make_inputs(recipe)
        path = recipe.output_path
        names = [s.name for s in recipe.inputs]
        out_names = [s.name for s in recipe.outputs] or None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if dynamo:
                torch.onnx.export(loaded.module, args, str(path), dynamo=True,
                                  input_names=names, output_names=out_names,
                                  dynamic_shapes=dynamic_shapes(recipe) if dynamic else None,
                                  verbose=False)
            else:
                axes = {s.name: dict(s.dynamic) for s in recipe.inputs if s.dynamic}
                axes.update({s.name: dict(s.dynamic) for s in recipe.outputs if s.dynamic})
                torch.onnx.export(loaded.module, args, str(path), dynamo=False,
                                  input_names=names, output_names=out_names,
                                  dynamic_axes=axes if dynamic else None, opset_version=17)
        return path


TWO_HEADS = '''TwoHeads"
checkpoint = "two_heads.pt"

[[inputs]]
name = "x"
shape = [4, 4]
dynamic = { 0 = "batch" }

[[outputs]]
name = "probs"
dynamic = { 0 = "batch" }

[[outputs]]
name = "total"
dynamic = { 0 = "batch" }

[export]
output = "two_heads.onnx"
seed = 7

[validate]
random_trials = 2
'''


@pytest.fixture(scope="session")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("validate"))


@pytest.fixture(scope="session")
def two_heads(ws: Workspace) -> tuple[recipe_mod.Recipe, Path]:
    """A dynamo export of a two-output model with a checkpoint (weights fixed on disk)."""
    torch.manual_seed(0)
    import importlib.util

    spec = importlib.util.spec_from_file_location("ws_models", ws.folder / "models.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.save(module.TwoHeads().state_dict(), ws.folder / "two_heads.pt")
    recipe = ws.recipe("two_heads", TWO_HEADS)
    return recipe, ws.export(recipe, dynamo=True)


def _variant(recipe: recipe_mod.Recipe, **validate_opts: Any) -> recipe_mod.Recipe:
    copy = recipe.copy()
    for key, value in validate_opts.items():
        setattr(copy.validate, key, value)
    return copy


# ---------------------------------------------------------------------------- good cases


def test_two_outputs_pass_with_names_and_all_trial_kinds(two_heads, tmp_path: Path) -> None:
    recipe, path = two_heads
    progress: list[float] = []
    result = validate(recipe, path, Events(progress=lambda f, _s: progress.append(f)),
                      plot_dir=tmp_path)
    assert result["ok"] is True, result
    assert [o["name"] for o in result["outputs"]] == ["probs", "total"]
    for out in result["outputs"]:
        assert out["passed"] is True
        assert 0 <= out["max_abs_diff"] < 1e-5
        assert out["max_rel_diff"] is not None and out["cosine_similarity"] > 0.9999
        assert out["mismatched"] == 0
    kinds = [t["kind"] for t in result["trials"]]
    assert kinds == ["export-inputs", "random", "random", "dynamic-size", "dynamic-size"]
    assert [t["sizes"] for t in result["trials"]][-2:] == [{"batch": 2}, {"batch": 6}]
    assert len({t["seed"] for t in result["trials"]}) == len(kinds)  # every draw is fresh
    for trial in result["trials"]:
        assert trial["ok"] and [o["name"] for o in trial["outputs"]] == ["probs", "total"]
        assert all(o["shape"] == o["onnx_shape"] for o in trial["outputs"])
    assert result["trials"][-1]["outputs"][0]["shape"] == [6, 3]
    assert progress == sorted(progress) and progress[-1] == 1.0
    assert result["plots"] == str(tmp_path / "validation.npz")
    json.dumps(result, allow_nan=False)  # strict JSON: the CLI prints it as is


def test_unwritable_plot_folder_is_a_warning(two_heads, tmp_path: Path) -> None:
    recipe, path = two_heads
    (tmp_path / "a_file").write_text("x")
    result = validate(_variant(recipe, random_trials=0), path, plot_dir=tmp_path / "a_file" / "p")
    assert result["ok"] is True and result["plots"] is None
    assert any("Plot data could not be saved" in w["message"] for w in result["warnings"])


def test_plot_data_sampled_with_the_same_indices(two_heads) -> None:
    recipe, path = two_heads
    result = validate(recipe, path)
    assert result["plots"] == str(path.with_name("two_heads.validation.npz"))
    plots = load_plots(Path(result["plots"]))
    assert set(plots) == {"probs", "total"}
    probs = plots["probs"]
    assert probs["reference"].shape == probs["candidate"].shape == probs["index"].shape
    assert np.allclose(probs["reference"], probs["candidate"], atol=1e-5)
    assert probs["hist_counts"].sum() > 0 and len(probs["hist_edges"]) == len(
        probs["hist_counts"]) + 1


def test_strict_tolerance_fails_with_max_diffs(two_heads) -> None:
    recipe, path = two_heads
    strict = _variant(recipe, atol=0.0, rtol=0.0)
    result = validate(strict, path)
    assert result["ok"] is False
    assert (result["rtol"], result["atol"]) == (0.0, 0.0)
    failing = [o for o in result["outputs"] if not o["passed"]]
    assert failing, "float32 ONNX Runtime kernels are not bit-exact with torch here"
    for out in failing:
        assert out["max_abs_diff"] > 0 and out["max_rel_diff"] > 0
        assert out["mismatched"] > 0 and 0 < out["mismatched_fraction"] <= 1
    assert not result["trials"][0]["ok"]
    assert "differ" in result["trials"][0]["message"]


def test_lstm_with_dynamic_sequence_passes_at_other_lengths(ws: Workspace) -> None:
    recipe = ws.recipe("lstm", '''Seq"

[[inputs]]
name = "input"
shape = [5, 3, 10]
dynamic = { 0 = "sequence" }

[[inputs]]
name = "h0"
shape = [4, 3, 20]

[[inputs]]
name = "c0"
shape = [4, 3, 20]

[[outputs]]
name = "output"
dynamic = { 0 = "sequence" }

[[outputs]]
name = "hn"

[[outputs]]
name = "cn"

[export]
output = "lstm.onnx"
exporter = "torchscript"

[validate]
random_trials = 1
''')
    path = ws.export(recipe, dynamo=False)
    result = validate(recipe, path)
    assert result["ok"] is True, [t["message"] for t in result["trials"]]
    assert [o["name"] for o in result["outputs"]] == ["output", "hn", "cn"]
    sizes = [t["sizes"]["sequence"] for t in result["trials"] if t["kind"] == "dynamic-size"]
    assert sizes == [2, 7]
    assert result["trials"][-1]["outputs"][0]["shape"] == [7, 3, 40]


def test_int_bool_and_nested_outputs_compare_exactly(ws: Workspace) -> None:
    recipe = ws.recipe("kinds", '''Kinds"

[[inputs]]
name = "x"
shape = [3, 5]

[export]
output = "kinds.onnx"
''')
    path = ws.export(recipe, dynamo=False)
    result = validate(recipe, path)
    assert result["ok"] is True, result["trials"][0]["message"]
    first = result["trials"][0]["outputs"]
    assert [o["dtype"] for o in first] == ["int64", "bool", "float32"]  # dict, then tuple order
    assert [o["exact"] for o in first] == [True, True, False]
    assert [o["shape"] for o in first] == [[3], [3, 5], [3, 5]]


def test_sequence_output_is_compared_element_by_element(ws: Workspace) -> None:
    recipe = ws.recipe("pieces", '''Pieces"
script = true

[[inputs]]
name = "x"
shape = [2, 3]

[[outputs]]
name = "pieces"

[export]
output = "pieces.onnx"
exporter = "torchscript"

[validate]
random_trials = 1
''')
    path = ws.export(recipe, dynamo=False)
    assert onnx.load(str(path)).graph.output[0].type.HasField("sequence_type")
    result = validate(recipe, path)
    assert result["ok"] is True, result["trials"][0]["message"]
    assert [o["name"] for o in result["outputs"]] == ["pieces[0]", "pieces[1]"]
    assert set(load_plots(Path(result["plots"]))) == {"pieces[0]", "pieces[1]"}


# ---------------------------------------------------------------------------- wrong on purpose


def test_baked_item_value_fails_the_random_draws(ws: Workspace) -> None:
    recipe = ws.recipe("item", '''ItemScale"

[[inputs]]
name = "x"
shape = [2, 8]

[export]
output = "item.onnx"
exporter = "torchscript"

[validate]
random_trials = 2
''')
    path = ws.export(recipe, dynamo=False)
    result = validate(recipe, path)
    assert result["ok"] is False
    export_trial, *draws = result["trials"]
    assert export_trial["kind"] == "export-inputs" and export_trial["ok"] is True
    assert draws and all(t["kind"] == "random" and not t["ok"] for t in draws)
    assert f"seed {draws[0]['seed']}" in draws[0]["message"]
    assert result["message"].startswith("2 of 3 trials failed; first: random draw (seed 1)")
    assert result["outputs"][0]["passed"] is False
    assert result["outputs"][0]["max_abs_diff"] > 1e-3


def test_baked_reshape_size_fails_the_other_batch_sizes(ws: Workspace) -> None:
    recipe = ws.recipe("flatten", '''Flatten"

[[inputs]]
name = "x"
shape = [4, 3, 2]
dynamic = { 0 = "batch" }

[[outputs]]
name = "y"
dynamic = { 0 = "batch" }

[export]
output = "flatten.onnx"
exporter = "torchscript"

[validate]
random_trials = 0
''')
    path = ws.export(recipe, dynamo=False)
    result = validate(recipe, path)
    assert result["ok"] is False
    by_kind = {t["kind"]: t for t in result["trials"]}
    assert by_kind["export-inputs"]["ok"] is True
    sized = [t for t in result["trials"] if t["kind"] == "dynamic-size"]
    assert [t["sizes"] for t in sized] == [{"batch": 2}, {"batch": 6}]
    assert not any(t["ok"] for t in sized)
    assert "batch=2" in sized[0]["message"] and "shape" in sized[0]["message"]


def test_dynamic_axis_left_out_is_a_failed_trial_with_a_warning(ws: Workspace) -> None:
    recipe = ws.recipe("static", '''Pair"

[[inputs]]
name = "a"
shape = [3, 4]
dynamic = { 0 = "rows" }

[[inputs]]
name = "b"
shape = [3, 4]
dynamic = { 0 = "rows" }

[export]
output = "static.onnx"
exporter = "torchscript"

[validate]
random_trials = 0
''')
    path = ws.export(recipe, dynamo=False, dynamic=False)
    told: list[dict[str, Any]] = []
    result = validate(recipe, path, Events(warning=told.append))
    assert result["ok"] is False
    assert any("fixed to 3" in w["message"] for w in result["warnings"])
    assert told == result["warnings"]
    sized = [t for t in result["trials"] if t["kind"] == "dynamic-size"]
    # one name shared by both inputs: one dimension, changed on both at once
    assert [t["sizes"] for t in sized] == [{"rows": 2}, {"rows": 4}]
    assert all(not t["ok"] and "ONNX Runtime failed at rows=" in t["message"] for t in sized)
    assert "[ONNXRuntimeError]" not in sized[0]["message"]


def test_weights_that_differ_from_the_file_fail_and_say_why(two_heads, tmp_path: Path) -> None:
    recipe, path = two_heads
    model = onnx.load(str(path))
    for init in model.graph.initializer:
        if init.name == "head.weight":
            # (a shifted bias would cancel out in the softmax)
            values = onnx.numpy_helper.to_array(init) * 2
            init.CopyFrom(onnx.numpy_helper.from_array(values, init.name))
    tampered = tmp_path / "tampered.onnx"
    onnx.save(model, str(tampered))
    result = validate(_variant(recipe, intermediates=True), tampered, plot_dir=tmp_path)
    assert result["ok"] is False
    assert any("'head.weight' differs" in w["message"] for w in result["warnings"])
    nodes = result["intermediates"]["nodes"]
    # the first Linear still agrees; the head (whose bias changed) is where it diverges
    assert nodes["node_linear"]["passed"] is True
    assert result["intermediates"]["first_divergent"] == "node_linear_1"
    assert nodes["node_linear_1"]["max_abs_diff"] > 0.01
    # error against tolerance, element by element: within it <= 1, the tampered node beyond
    assert 0 <= nodes["node_linear"]["tolerance_ratio"] <= 1
    assert nodes["node_linear_1"]["tolerance_ratio"] > 1
    assert not result["trials"][0]["ok"] and "'probs'" in result["trials"][0]["message"]


def test_intermediates_keyed_by_onnx_node_name(two_heads) -> None:
    recipe, path = two_heads
    result = validate(_variant(recipe, intermediates=True, random_trials=0,
                               dynamic_sizes=False), path)
    assert result["ok"] is True
    inter = result["intermediates"]
    node_names = {n.name for n in onnx.load(str(path)).graph.node}
    assert inter["compared"] >= 2 and set(inter["nodes"]) <= node_names
    assert inter["first_divergent"] is None
    assert all(v["max_abs_diff"] < 1e-5 for v in inter["nodes"].values())


def test_intermediates_are_streamed_within_the_memory_budget(two_heads, monkeypatch) -> None:
    """With a budget smaller than any value, every value gets an ONNX Runtime run of its own
    and is dropped once compared: the numbers are those of the one-run comparison."""
    from onnx_studio.engine.validation import nodes

    recipe, path = two_heads
    recipe = _variant(recipe, intermediates=True, random_trials=0, dynamic_sizes=False)
    whole = validate(recipe, path)["intermediates"]
    assert whole["onnxruntime_runs"] == 1
    monkeypatch.setattr(nodes, "BUDGET", 1)
    streamed = validate(recipe, path)["intermediates"]
    assert streamed["onnxruntime_runs"] == streamed["compared"] == whole["compared"] >= 2
    assert streamed["nodes"] == whole["nodes"]
    assert list(streamed["nodes"]) == list(whole["nodes"])  # graph order kept


def test_intermediates_of_a_torchscript_export_say_they_need_dynamo(ws: Workspace) -> None:
    recipe = ws.recipe("kinds_inter", '''Kinds"

[[inputs]]
name = "x"
shape = [3, 5]

[export]
output = "kinds.onnx"

[validate]
intermediates = true
random_trials = 0
''')
    path = recipe.output_path
    if not path.exists():
        ws.export(recipe, dynamo=False)
    result = validate(recipe, path)
    assert result["intermediates"]["nodes"] == {}
    assert any("dynamo" in w["message"] for w in result["warnings"])


# ---------------------------------------------------------------------------- bad requests


def test_missing_onnx_file(two_heads, tmp_path: Path) -> None:
    recipe, _ = two_heads
    with pytest.raises(StudioError) as err:
        validate(recipe, tmp_path / "nope.onnx")
    assert err.value.kind == "validation" and "does not exist" in err.value.message


def test_corrupt_onnx_file(two_heads, tmp_path: Path) -> None:
    recipe, path = two_heads
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 3])
    with pytest.raises(StudioError) as err:
        validate(recipe, corrupt)
    assert err.value.kind == "validation"
    assert "corrupt.onnx" in err.value.message and "Traceback" not in err.value.message


def test_input_count_mismatch(ws: Workspace) -> None:
    recipe = ws.recipe("pair", '''Pair"

[[inputs]]
name = "a"
shape = [3, 4]

[[inputs]]
name = "b"
shape = [3, 4]

[export]
output = "pair.onnx"
''')
    path = ws.export(recipe, dynamo=False)
    one_input = recipe.copy()
    one_input.inputs = one_input.inputs[:1]
    with pytest.raises(StudioError) as err:
        validate(one_input, path)
    assert err.value.kind == "validation"
    assert "takes 2 input(s) (a, b)" in err.value.message and "describes 1 (a)" in err.value.message


def test_output_count_mismatch_is_a_clear_failure(ws: Workspace) -> None:
    body = '''"

[[inputs]]
name = "a"
shape = [3, 4]

[[inputs]]
name = "b"
shape = [3, 4]

[export]
output = "pair.onnx"

[validate]
random_trials = 0
'''
    one = ws.recipe("pair_one", "Pair" + body)
    path = ws.export(one, dynamo=False)
    two = ws.recipe("pair_two", "SumDiff" + body)  # same inputs, two outputs
    result = validate(two, path)
    assert result["ok"] is False
    assert "returned 2 output(s) but the ONNX file has 1" in result["trials"][0]["message"]


def test_missing_provider_is_a_request_error(two_heads) -> None:
    recipe, path = two_heads
    with pytest.raises(StudioError) as err:
        validate(_variant(recipe, providers=["NoSuchExecutionProvider"]), path)
    assert err.value.kind == "validation" and "NoSuchExecutionProvider" in err.value.message
    assert "CPUExecutionProvider" in err.value.hint


def test_opset_above_onnxruntime_is_refused_with_the_reason(two_heads, tmp_path: Path) -> None:
    from onnx_studio.engine.validation.ort_session import ort_max_opset

    recipe, path = two_heads
    model = onnx.load(str(path))
    for op in model.opset_import:
        if op.domain == "":
            op.version = ort_max_opset() + 1
    future = tmp_path / "future.onnx"
    onnx.save(model, str(future))
    with pytest.raises(StudioError) as err:
        validate(recipe, future)
    assert f"supports up to {ort_max_opset()}" in err.value.hint


def test_trial_planning() -> None:
    assert other_sizes(1) == [2, 3]
    assert other_sizes(2) == [3, 4]
    assert other_sizes(4) == [2, 6]
    assert other_sizes(10) == [5, 15]
    recipe = recipe_mod.loads('version = 1\n[model]\nsource = "m.py:M"\n'
                              '[validate]\nrandom_trials = 1\ndynamic_sizes = false\n')
    assert [t.kind for t in plan_trials(recipe, {"batch": 4})] == ["export-inputs"]
    recipe.inputs = [recipe_mod.InputSpec(name="x", shape=[4], fill="rand")]
    assert [t.kind for t in plan_trials(recipe, {"batch": 4})] == ["export-inputs", "random"]
    recipe.inputs[0].fill = "ones"  # every draw would be the same: no random trials
    assert [t.kind for t in plan_trials(recipe, {"batch": 4})] == ["export-inputs"]
    recipe.validate.dynamic_sizes = True
    sized = plan_trials(recipe, {"batch": 4, "seq": 8})[1:]
    assert [(t.changed, t.sizes, t.label) for t in sized] == [
        ("batch", {"batch": 2, "seq": 8}, "at batch=2"),
        ("batch", {"batch": 6, "seq": 8}, "at batch=6"),
        ("seq", {"batch": 4, "seq": 4}, "at seq=4"),
        ("seq", {"batch": 4, "seq": 12}, "at seq=12"),
    ]
    assert [t.kind for t in plan_trials(recipe, {"batch": 4}, skip={"batch"})] == [
        "export-inputs"]


def test_file_inputs_keep_their_size(ws: Workspace) -> None:
    np.save(ws.folder / "x.npy", np.random.default_rng(0).standard_normal((3, 5), np.float32))
    recipe = ws.recipe("from_file", '''Kinds"

[[inputs]]
name = "x"
shape = [3, 5]
fill = "file"
file = "x.npy"
dynamic = { 0 = "rows" }

[export]
output = "from_file.onnx"

[validate]
random_trials = 0
''')
    path = ws.export(recipe, dynamo=False)
    result = validate(recipe, path)
    assert result["ok"] is True
    assert [t["kind"] for t in result["trials"]] == ["export-inputs"]
    assert any("'rows' comes from an input read from a file" in w["message"]
               for w in result["warnings"])


def test_exported_program_source_is_the_reference(ws: Workspace, two_heads) -> None:
    recipe, _ = two_heads
    loaded = load_model(recipe)
    program = torch.export.export(loaded.module, make_inputs(recipe), strict=False)
    torch.export.save(program, ws.folder / "two_heads.pt2")
    pt2 = recipe.copy()
    pt2.model.source = "two_heads.pt2"
    pt2.model.checkpoint = None
    pt2.export.output = "two_heads_pt2.onnx"
    pt2.validate.dynamic_sizes = False  # exported without dynamic shapes
    pt2.validate.intermediates = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(program, make_inputs(recipe), str(pt2.output_path), dynamo=True,
                          input_names=["x"], output_names=["probs", "total"], verbose=False)
    result = validate(pt2, pt2.output_path)
    assert result["ok"] is True, [t["message"] for t in result["trials"]]
    assert result["intermediates"]["compared"] >= 2


EXPORTING_EXAMPLES = ["loop_traced", "loop_scripted", "inplace_index", "inplace_scatter",
                      "list_loop", "split_list", "unbind", "lstm", "implicit_cast",
                      "autograd_function"]  # alexnet (61M weights) is left to the slow suite


@pytest.mark.parametrize("name", EXPORTING_EXAMPLES)
def test_seed_examples_validate(name: str, tmp_path: Path) -> None:
    from onnx_studio.engine.pipeline import export
    from onnx_studio.engine.source.examples import EXAMPLES

    recipe = recipe_mod.load(EXAMPLES[name].recipe)
    recipe.export.output = str(tmp_path / f"{name}.onnx")
    report = export(recipe, validate=True)
    assert report.ok, report.error and report.error.to_dict()
    assert report.validation is not None and report.validation.ok is True
    assert report.validation.trials[0].kind == "export-inputs"
    if name == "lstm":  # the FAQ's point: other sequence lengths work
        sizes = [t.sizes for t in report.validation.trials if t.kind == "dynamic-size"]
        assert sizes == [{"sequence": 2}, {"sequence": 7}]


def test_custom_op_example_cannot_run_and_says_why(tmp_path: Path) -> None:
    from onnx_studio.engine.pipeline import export
    from onnx_studio.engine.source.examples import EXAMPLES

    recipe = recipe_mod.load(EXAMPLES["custom_op"].recipe)
    recipe.export.output = str(tmp_path / "custom_op.onnx")
    report = export(recipe, validate=True)
    assert report.error is not None and report.error.kind == "validation"
    assert "custom_domain" in report.error.message + report.error.hint


# ---------------------------------------------------------------------------- metrics


def test_nan_and_inf_must_agree() -> None:
    from onnx_studio.engine.validation.metrics import compare

    ref = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
    same = compare(ref, ref.copy(), 1e-3, 1e-5)
    assert same["passed"] and same["nan_mismatch"] == same["inf_mismatch"] == 0
    other = ref.copy()
    other[1], other[2] = 0.0, -np.inf
    bad = compare(ref, other, 1e-3, 1e-5)
    assert not bad["passed"] and bad["nan_mismatch"] == 1 and bad["inf_mismatch"] == 1
    assert bad["mismatched"] == 2 and bad["mismatched_fraction"] == 0.5
    assert bad["max_abs_diff"] == 0.0  # the finite pair agrees


def test_metrics_tolerance_rule_shape_dtype_and_cosine() -> None:
    from onnx_studio.engine.validation.metrics import compare

    ref = np.array([1.0, 100.0, 0.0], np.float32)
    near = np.array([1.0 + 9e-6, 100.05, 1e-6], np.float32)  # all inside atol + rtol*|ref|
    assert compare(ref, near, 1e-3, 1e-5)["passed"]
    far = np.array([1.0, 100.2, 0.0], np.float32)
    result = compare(ref, far, 1e-3, 1e-5)
    assert not result["passed"] and result["mismatched"] == 1
    assert result["max_abs_diff"] == pytest.approx(0.2, rel=1e-3)
    assert result["cosine_similarity"] == pytest.approx(1.0, abs=1e-5)
    assert compare(ref, -ref, 0, 0)["cosine_similarity"] == pytest.approx(-1.0)
    wrong_shape = compare(ref, ref[:2], 1e-3, 1e-5)
    assert not wrong_shape["passed"] and "shape [2]" in wrong_shape["message"]
    wrong_dtype = compare(ref, ref.astype(np.float64), 1e-3, 1e-5)
    assert not wrong_dtype["passed"] and "dtype float64" in wrong_dtype["message"]
    ints = compare(np.array([1, 2, 3]), np.array([1, 2, 4]), 1.0, 1.0)  # exact: tolerances unused
    assert not ints["passed"] and ints["exact"] and ints["mismatched"] == 1


def test_plot_sample_is_capped_and_evenly_spaced() -> None:
    from onnx_studio.engine.validation.metrics import PLOT_POINTS, plot_sample

    ref = np.arange(250_000, dtype=np.float32)
    sample = plot_sample(ref, ref + 1)
    assert len(sample["index"]) == PLOT_POINTS
    assert sample["index"][0] == 0 and sample["index"][-1] == ref.size - 1
    assert np.all(np.diff(sample["index"]) > 0)
    assert np.array_equal(sample["reference"], ref[sample["index"]])
    assert np.array_equal(sample["candidate"], ref[sample["index"]] + 1)
    assert sample["hist_counts"].sum() == ref.size


def test_int64_outputs_are_compared_exactly_beyond_float_precision() -> None:
    from onnx_studio.engine.validation.metrics import compare

    metrics = compare(np.array([2**53 + 1, 7]), np.array([2**53, 7]), 0.0, 0.0)
    assert metrics["passed"] is False and metrics["mismatched"] == 1
