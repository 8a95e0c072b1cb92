"""compare: the seed's AlexNet exported by dynamo and by TorchScript, and a copy with one
weight patched — the static diff, the node matching, and both files run on the same inputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from onnx_studio.engine.analysis.compare import compare_files
from onnx_studio.engine.analysis.matching import match_graphs
from onnx_studio.engine.cli import main
from onnx_studio.engine.recipe import load as load_recipe
from tests.engine.analysis_models import ALEXNET, export_recipe, write_recipe


@pytest.fixture(scope="module")
def alexnet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """AlexNet at 224x224 (TorchScript needs the 6x6 pooling to divide evenly) by both
    exporters, a recipe for it, and the dynamo file with one weight patched by +0.5."""
    folder = tmp_path_factory.mktemp("alexnet")
    paths = {}
    for exporter in ("dynamo", "torchscript"):
        recipe = write_recipe(folder, f"{exporter}.toml",
                              ALEXNET.format(output=f"{exporter}.onnx", exporter=exporter))
        paths[exporter] = export_recipe(recipe)
        paths[f"{exporter}_recipe"] = recipe
    model = onnx.load(str(paths["dynamo"]))
    target = next(t for t in model.graph.initializer if t.name == "features.3.weight")
    values = numpy_helper.to_array(target).copy()
    values[0, 0, 0, 0] += 0.5
    target.CopyFrom(numpy_helper.from_array(values, target.name))
    paths["patched"] = folder / "patched.onnx"
    onnx.save_model(model, str(paths["patched"]))
    return paths


def test_dynamo_and_torchscript_differ_in_ops_but_match_and_agree(alexnet: dict[str, Path]
                                                                   ) -> None:
    recipe = load_recipe(alexnet["dynamo_recipe"])
    doc = compare_files(alexnet["dynamo"], alexnet["torchscript"], recipe, runs=3)
    assert doc["ok"], doc["parity"]
    # the two exporters spell the flatten before the classifier differently
    ops_a, ops_b = doc["ops"]["a"], doc["ops"]["b"]
    assert ops_a != ops_b
    assert ops_a.get("Reshape", 0) > ops_b.get("Reshape", 0)
    assert ops_b.get("Flatten", 0) > ops_a.get("Flatten", 0)
    assert ops_a["Conv"] == ops_b["Conv"] == 5
    assert doc["nodes"] == {"a": sum(ops_a.values()), "b": sum(ops_b.values())}
    # names differ between the exporters: the matching is structural, and covers all but the
    # flatten
    matching = doc["matching"]
    assert matching["by_structure"] >= 15 and matching["matched"] >= doc["nodes"]["a"] - 2
    model_a = onnx.load(str(alexnet["dynamo"]), load_external_data=False)
    model_b = onnx.load(str(alexnet["torchscript"]), load_external_data=False)
    for i, j in matching["pairs"]:
        assert model_a.graph.node[i].op_type == model_b.graph.node[j].op_type
    matched_a = {i for i, _ in matching["pairs"]}
    unmatched_ops = {n.op_type for i, n in enumerate(model_a.graph.node) if i not in matched_a}
    assert unmatched_ops <= {"Reshape", "Constant", "Flatten"}
    # the same weights (the same seed) under the same names
    assert doc["initializers"]["changed"] == []
    # equal outputs: with each other and with eager PyTorch
    assert doc["parity"]["ok"] and doc["parity"]["max_abs_diff"] < 1e-4
    assert doc["parity"]["torch"]["ok"]
    assert doc["parity"]["torch"]["a"]["ok"] and doc["parity"]["torch"]["b"]["ok"]
    for side in ("a", "b"):
        assert 0 < doc["latency_ms"][side]["p50"] <= doc["latency_ms"][side]["p90"]
        assert doc["load_ms"][side] > 0
        assert doc["size_bytes"][side] == alexnet["dynamo" if side == "a"
                                                  else "torchscript"].stat().st_size
    assert doc["inputs"]["a"][0]["shape"] == [1, 3, 224, 224]


def test_a_patched_initializer_is_named_and_breaks_parity(alexnet: dict[str, Path],
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    code = main(["compare", str(alexnet["dynamo"]), str(alexnet["patched"]), "--runs", "2",
                 "--json"])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 1, doc
    assert doc["ok"] is False and doc["error"]["kind"] == "validation"
    assert doc["initializers"]["changed"] == [{"name": "features.3.weight",
                                               "max_abs_diff": pytest.approx(0.5, abs=1e-6)}]
    assert doc["initializers"]["added"] == doc["initializers"]["removed"] == []
    assert doc["parity"]["ok"] is False and doc["parity"]["max_abs_diff"] > 0
    assert "features.3.weight" in doc["error"]["hint"]
    # no recipe: the inputs came from the file's own shapes, so PyTorch is not part of it
    assert "torch" not in doc["parity"]
    # the contract's keys, in the order
    assert list(doc)[:7] == ["ok", "ops", "nodes", "size_bytes", "initializers", "parity",
                             "latency_ms"]
    # identical graphs: every node matched by name
    assert doc["matching"]["by_name"] == doc["nodes"]["a"] == doc["nodes"]["b"]


def test_missing_file_is_a_wrong_request(tmp_path: Path, alexnet: dict[str, Path],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compare", str(alexnet["dynamo"]), str(tmp_path / "nope.onnx"), "--json"])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 2 and doc["ok"] is False and doc["error"]["kind"] == "source"
    assert "nope.onnx" in doc["error"]["message"]


def _chain(ops: list[str]) -> onnx.ModelProto:
    """A chain of unary float ops on x, nodes named by position, for matching tests."""
    from onnx import TensorProto, helper

    nodes, prev = [], "x"
    for i, op in enumerate(ops):
        nodes.append(helper.make_node(op, [prev], [f"v{i}"], name=f"{op.lower()}_{i}"))
        prev = f"v{i}"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                           [2])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [2])])
    return helper.make_model(graph)


def test_matching_links_around_an_inserted_node() -> None:
    a = _chain(["Relu", "Sigmoid", "Tanh", "Abs", "Neg"])
    b = _chain(["Relu", "Sigmoid", "Identity", "Tanh", "Abs", "Neg"])
    for node in b.graph.node:  # other names: structure only
        node.name = "b_" + node.name
    m = match_graphs(a.graph, b.graph)
    ops_b = [n.op_type for n in b.graph.node]
    assert {a.graph.node[i].op_type: ops_b[j] for i, j in m.pairs.items()} == {
        "Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Abs": "Abs", "Neg": "Neg"}
    assert m.unmatched_a == [] and [ops_b[j] for j in m.unmatched_b] == ["Identity"]
    assert m.by_name == 0 and m.by_structure == 5


def test_matching_prefers_names() -> None:
    a = _chain(["Relu", "Relu", "Relu"])
    b = _chain(["Relu", "Relu", "Relu"])
    m = match_graphs(a.graph, b.graph)
    assert m.pairs == {0: 0, 1: 1, 2: 2} and m.by_name == 3


def test_dims_fill_symbolic_sizes(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    from onnx_studio.engine.analysis.feeds import feeds_from_file

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 4])])
    path = tmp_path / "dyn.onnx"
    onnx.save_model(helper.make_model(graph), str(path))
    feeds = feeds_from_file(path, {"seq": 5})
    assert feeds.arrays["x"].shape == (2, 5, 4) and feeds.arrays["x"].dtype == np.float32
    assert "batch" in feeds.notes[0] and "--dim" in feeds.notes[0]
    from onnx_studio.engine.errors import StudioError

    with pytest.raises(StudioError) as err:
        feeds_from_file(path, {"time": 3})
    assert err.value.kind == "inputs" and "'time'" in err.value.message


FLAGGED = '''
import torch
from torch import nn


class Flagged(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, use_relu: bool = False, *, mode: str = "sum"):
        y = self.lin(x)
        if use_relu:
            y = torch.relu(y)
        return y.sum(-1) if mode == "sum" else y.mean(-1)
'''

FLAGGED_RECIPE = '''version = 1
[model]
source = "flagged.py:Flagged"
[[inputs]]
name = "x"
shape = [2, 4]
[[inputs]]
name = "use_relu"
kind = "bool"
const = true
[[inputs]]
name = "mode"
kind = "str"
const = "mean"
keyword = true
[export]
output = "{output}"
exporter = "torchscript"
'''


def test_compare_and_profile_feed_only_the_tensor_inputs_of_a_structured_recipe(
        tmp_path: Path) -> None:
    """Constants are fixed into the file: ONNX Runtime gets the tensors alone, and the eager
    model is called with the constants, by keyword where the recipe says so."""
    (tmp_path / "flagged.py").write_text(FLAGGED)
    paths = []
    for name in ("a", "b"):
        recipe = tmp_path / f"{name}.toml"
        recipe.write_text(FLAGGED_RECIPE.format(output=f"{name}.onnx"))
        paths.append(export_recipe(recipe))
    recipe = load_recipe(tmp_path / "a.toml")
    doc = compare_files(paths[0], paths[1], recipe, runs=2)
    assert doc["ok"], doc
    assert doc["parity"]["ok"] and doc["parity"]["torch"]["a"]["ok"], doc["parity"]

    # the eager side really used the constants: with their defaults it computes another value
    recipe.inputs[1].const = False
    recipe.inputs[2].const = "sum"
    changed = compare_files(paths[0], paths[1], recipe, runs=2)
    assert not changed["parity"]["torch"]["a"]["ok"]

    from onnx_studio.engine.analysis.profile import profile_file

    profile = profile_file(paths[0], load_recipe(tmp_path / "a.toml"), runs=3)
    assert profile["ok"] and profile["torch_latency_ms"]["p50"] > 0
