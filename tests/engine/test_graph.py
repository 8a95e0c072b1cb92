"""GraphModel on real exports: module groups, names, shapes, initializers, subgraphs."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.graph.model import GraphModel, auxiliary_nodes, format_shape
from tests.engine import models


def _function_model(path: Path) -> Path:
    """A model calling a local function (what onnxscript and some exporters write)."""
    import onnx
    from onnx import TensorProto, helper

    fn = helper.make_function("custom", "Gelu2", ["a"], ["b"],
                              [helper.make_node("Mul", ["a", "a"], ["sq"]),
                               helper.make_node("Add", ["sq", "a"], ["b"])],
                              [helper.make_opsetid("", 18)])
    graph = helper.make_graph(
        [helper.make_node("Gelu2", ["x"], ["y"], domain="custom", name="call")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])
    model = helper.make_model(graph, functions=[fn],
                              opset_imports=[helper.make_opsetid("", 18),
                                             helper.make_opsetid("custom", 1)])
    onnx.save(model, path)
    return path


def _submodule_names_with_ops() -> set[str]:
    """Qualified names of the tiny net's submodules (the groups a browser should show)."""
    model, _ = models.tiny_blocks_net()
    return {name for name, _m in model.named_modules() if name}


def test_dynamo_groups_match_submodules(graph_exports: dict[str, Path]) -> None:
    g = GraphModel.load(graph_exports["dynamo"])
    quals = {grp.qualname for gid, grp in g.groups.items() if gid}
    expected = _submodule_names_with_ops() - {"blocks", "blocks.0.mlp.1", "blocks.1.mlp.1"}
    # ModuleList itself runs no code; GELU is a single op that may carry its own scope.
    assert expected <= quals | {"blocks.0.mlp.1", "blocks.1.mlp.1"}
    assert "blocks.0.attn.q" in quals and "blocks.1.mlp" in quals
    attn = g.group_of_module("blocks.0.attn")
    assert attn is not None and attn.class_name.endswith("Attn") and attn.name == "attn"
    assert attn.parent == g.group_of_module("blocks.0").id  # type: ignore[union-attr]
    inside = {g.nodes[i].op_type for i in g.group_nodes(attn.id)}
    assert {"MatMul", "Softmax"} <= inside
    assert g.groups[""].class_name.endswith("TinyNet")


def test_torchscript_groups_from_node_names(graph_exports: dict[str, Path]) -> None:
    g = GraphModel.load(graph_exports["torchscript"])
    quals = {grp.qualname for gid, grp in g.groups.items() if gid}
    assert {"embed", "blocks.0", "blocks.0.attn", "blocks.0.attn.q", "blocks.1.mlp",
            "head"} <= quals
    attn = g.group_of_module("blocks.1.attn")
    assert attn is not None
    assert all(g.nodes[i].name.startswith("/blocks.1/attn/") for i in g.group_nodes(attn.id))


def test_nodes_attributes_shapes_and_source(graph_exports: dict[str, Path]) -> None:
    g = GraphModel.load(graph_exports["dynamic"])
    ids = [n.index for n in g.nodes]
    assert ids == list(range(len(g.nodes)))
    assert g.inputs == ["x"] and g.outputs == ["y"]
    assert g.tensor("x").shape == ["batch", "seq", 8]
    assert g.tensor("x").dtype == "float32"
    assert format_shape(g.shape("y")) == "batch×2*seq×2"
    softmax = next(n for n in g.nodes if n.op_type == "Softmax")
    assert softmax.attributes == {"axis": "-1"}
    out = g.tensor(softmax.outputs[0])
    assert out.producer == softmax.index and out.consumers
    assert out.shape is not None and out.shape[0] == "batch"
    # The source line is the user's code (the model's file), not torch's.
    assert softmax.source is not None and softmax.source.startswith(models.__file__)
    assert "w.softmax" in softmax.stack_trace


def test_shape_inference_fills_torchscript_shapes(graph_exports: dict[str, Path]) -> None:
    g = GraphModel.load(graph_exports["torchscript"])
    sm = next(n for n in g.nodes if n.op_type == "Softmax")
    shape = g.shape(sm.outputs[0])
    assert shape is not None and shape[0] == "batch" and shape[-1] == 5


def test_initializers_lazy_external_data(graph_exports: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    src = graph_exports["dynamo"]
    data = src.with_name(src.name + ".data")
    assert data.exists(), "the dynamo exporter was asked for external data"
    copy = tmp_path / src.name
    shutil.copy(src, copy)
    g = GraphModel.load(copy)  # no .data next to it: loading must not need it
    external = [n for n, t in g.initializers.items() if t.data_location == 1]
    assert external, "some weights live in the .data file"
    weight = external[0]
    info = g.tensor(weight)
    assert info.is_initializer and info.shape is not None and len(info.shape) == 2
    assert info.consumers  # the exporter's transposed weight feeds a MatMul
    assert g.initializer_array("blocks.0.norm.bias").shape == (16,)  # stored inline
    with pytest.raises(Exception):  # noqa: B017 - onnx raises its own error types
        g.initializer_array(weight)
    shutil.copy(data, tmp_path / data.name)
    values = g.initializer_array(weight)
    assert list(values.shape) == info.shape and values.dtype.name == "float32"


def test_loop_subgraph(graph_exports: dict[str, Path]) -> None:
    g = GraphModel.load(graph_exports["loop"])
    loop = next(n for n in g.nodes if n.op_type == "Loop")
    assert g.has_subgraphs(loop.index)
    assert loop.subgraph_attributes == ["body"]
    body = g.subgraph(loop.index, "body")
    assert body.parent is g and body.nodes
    assert any(n.op_type == "Add" for n in body.nodes)
    assert [m.title for m in body.breadcrumb()] == [g.title, f"{loop.label}.body"]
    assert body.outer_inputs or body.inputs  # iteration count, condition, carried x


def test_if_branches(graph_exports: dict[str, Path]) -> None:
    g = GraphModel.load(graph_exports["if"])
    node = next(n for n in g.nodes if n.op_type == "If")
    assert set(node.subgraph_attributes) == {"then_branch", "else_branch"}
    then = g.subgraph(node.index, "then_branch")
    other = g.subgraph(node.index, "else_branch")
    assert {n.op_type for n in then.nodes} != {n.op_type for n in other.nodes}
    assert "graph" in node.attributes["then_branch"]


def test_local_function(tmp_path: Path) -> None:
    g = GraphModel.load(_function_model(tmp_path / "fn.onnx"))
    assert g.function_of(0) == ("custom", "Gelu2")
    assert g.has_subgraphs(0)
    body = g.function_graph(("custom", "Gelu2"))
    assert [n.op_type for n in body.nodes] == ["Mul", "Add"]
    assert body.inputs == ["a"] and body.outputs == ["b"]


def test_search(graph_exports: dict[str, Path]) -> None:
    g = GraphModel.load(graph_exports["dynamo"])
    hits = g.search("softmax")
    assert hits and g.nodes[hits[0]].op_type == "Softmax"
    assert len([i for i in hits if g.nodes[i].op_type == "Softmax"]) == 2
    by_name = g.search(g.nodes[3].name)
    assert 3 in by_name
    assert g.search("") == [] and g.search("no-such-thing-anywhere") == []


def test_shape_arithmetic_is_folded(graph_exports: dict[str, Path]) -> None:
    g = GraphModel.load(graph_exports["dynamic"])
    folded = auxiliary_nodes(g)
    shapes = [n.index for n in g.nodes if n.op_type == "Shape"]
    assert shapes and all(i in folded for i in shapes)
    for aux, owner in folded.items():
        assert owner not in folded and owner != aux
    # Real computation is never folded.
    assert not any(g.nodes[i].op_type in ("MatMul", "Gemm", "Softmax") for i in folded)


def test_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not a protobuf \xff\xfe")
    with pytest.raises(ValueError, match=r"bad\.onnx"):
        GraphModel.load(bad)
    with pytest.raises(FileNotFoundError):
        GraphModel.load(tmp_path / "missing.onnx")
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ValueError):
        GraphModel.load(empty)
