"""GraphModel on real exports: module groups, names, shapes, initializers, subgraphs."""

from __future__ import annotations

from pathlib import Path

import pytest

from onnx_studio.engine.graph.model import GraphModel, auxiliary_nodes, format_shape
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


def _scan(g: GraphModel, text: str) -> list[int]:
    """What search found before it had an index: one pass over the nodes."""
    q = text.strip().lower()
    if not q:
        return []
    exact = [n.index for n in g.nodes if n.op_type.lower() == q]
    return exact or [n.index for n in g.nodes if q in n.name.lower() or q in n.op_type.lower()
                     or any(q in t.lower() for t in n.outputs + n.inputs)]


def test_search_index_finds_what_a_scan_finds(graph_exports: dict[str, Path]) -> None:
    for kind in ("dynamo", "torchscript"):
        g = GraphModel.load(graph_exports[kind])
        node = g.nodes[len(g.nodes) // 2]
        queries = ["Softmax", " MATMUL ", "mat", "attn", node.name, node.name.upper()[1:6],
                   node.outputs[0], node.inputs[0][:4], g.inputs[0], "/", "_", "", "  ",
                   "no-such-thing-anywhere"]
        for q in queries:
            assert g.search(q) == _scan(g, q), (kind, q)
    # a query never matches across two fields (the end of a name and the start of an op type)
    g = GraphModel.load(graph_exports["torchscript"])
    n = next(n for n in g.nodes if n.name)
    assert n.index not in g.search(n.name[-2:] + n.op_type[:2]) or \
        n.index in _scan(g, n.name[-2:] + n.op_type[:2])


def test_value_types_indexed_on_first_use(graph_exports: dict[str, Path]) -> None:
    """value_info is read when first asked for; graph inputs and outputs win over it."""
    g = GraphModel.load(graph_exports["dynamo"])
    inner = next(o for n in g.nodes for o in n.outputs if o not in g.outputs)
    before = g.tensor(g.inputs[0])
    assert before.kind == "input" and before.shape is not None
    assert g.shape(inner) is not None and g.tensor(inner).dtype == "float32"
    assert g.tensor(g.outputs[0]).kind == "output"
    g.build_indexes()
    assert g.search("softmax") and g.shape(inner) is not None
    # Looked up near their producer or in the index, every value has the type the file gives.
    for kind in ("dynamo", "torchscript"):
        g = GraphModel.load(graph_exports[kind])
        typed = {v.name: v for v in g.proto.value_info}
        typed.update({v.name: v for v in list(g.proto.input) + list(g.proto.output)})
        for name in (o for n in g.nodes for o in n.outputs if o):
            want = typed.get(name)
            assert g._value(name) == want, (kind, name)


def test_file_check_on_the_views_nodes(tmp_path: Path) -> None:
    """check_file given the view's node read and producer index finds what its own read
    finds: a cycle, a dangling input, an unknown operator, a subgraph's dangling input, a
    Constant's external data; nodes out of order but acyclic are no cycle."""
    import onnx
    from onnx import TensorProto, helper

    from onnx_studio.engine.graph.file_check import check_file

    def save(nodes: list[onnx.NodeProto], name: str) -> Path:
        graph = helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
        path = tmp_path / name
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
        return path

    branch = helper.make_graph([helper.make_node("Neg", ["ghost"], ["b"])], "then", [],
                               [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])])
    weight = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    weight.ClearField("float_data")
    weight.data_location = TensorProto.EXTERNAL
    entry = weight.external_data.add()
    entry.key, entry.value = "location", "gone.bin"
    broken = save([
        helper.make_node("Add", ["x", "c"], ["a"], name="first"),
        helper.make_node("Relu", ["a"], ["c"], name="second"),  # a cycle with `first`
        helper.make_node("Mul", ["a", "missing"], ["m"], name="dangles"),
        helper.make_node("Frobnicate", ["m"], ["f"], name="unknown"),
        helper.make_node("Constant", [], ["k"], name="const", value=weight),
        helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=branch,
                         else_branch=branch),
    ], "broken.onnx")
    shuffled = save([helper.make_node("Relu", ["a"], ["y"], name="late"),
                     helper.make_node("Neg", ["x"], ["a"], name="early")], "shuffled.onnx")
    for path in (broken, shuffled):
        g = GraphModel.load(path)
        own = check_file(path, checker=False)
        shared = check_file(path, model=g.model_proto, nodes=g.nodes, producer=g.producer,
                            checker=False)
        assert [(p.code, p.message, p.nodes, p.node_indices) for p in shared] == \
            [(p.code, p.message, p.nodes, p.node_indices) for p in own]
    codes = {p.code for p in check_file(broken, checker=False)}
    assert {"cycle", "dangling_input", "unknown_operator", "missing_external_data"} <= codes
    messages = " ".join(p.message for p in check_file(broken, checker=False))
    assert "ghost" in messages and "gone.bin" in messages
    assert not [p for p in check_file(shuffled, checker=False) if p.code == "cycle"]


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


def _odd_model(path: Path) -> Path:
    """What exports rarely write but a file may hold: a value made twice, an unnamed node,
    a value read but made nowhere, an absent optional input, a Shape chain to fold."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["a"], name="/m/Relu"),
             helper.make_node("Shape", ["a"], ["s"], name="/m/Shape"),
             helper.make_node("Gather", ["s", "zero"], ["d"], name="/m/Gather"),
             helper.make_node("Reshape", ["a", "s"], ["r"]),  # unnamed
             helper.make_node("Relu", ["r"], ["a"], name="/n/Relu"),  # "a" again
             helper.make_node("Clip", ["a", "", "ghost"], ["c"], name="/n/Clip"),
             helper.make_node("Add", ["c", "d"], ["y"], name="/n/Add")]
    graph = helper.make_graph(nodes, "odd",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor("zero", TensorProto.INT64, [], [0])])
    onnx.save(helper.make_model(graph), path)
    return path


def test_columns_and_folding_agree_with_a_walk_of_the_nodes(graph_exports: dict[str, Path],
                                                            tmp_path: Path) -> None:
    """The graph is read into columns and what opening needs is computed from them at once
    (numbers, numpy); each must say what walking the nodes one by one says."""
    from onnx_studio.engine.graph import folding

    paths = [graph_exports[k] for k in ("dynamo", "dynamic", "torchscript", "loop", "if")]
    for path in [*paths, _odd_model(tmp_path / "odd.onnx"), _function_model(tmp_path / "f.onnx")]:
        g = GraphModel.load(path, checks_now=False)
        producer: dict[str, int] = {}
        consumers: dict[str, list[int]] = {}
        for i, node in enumerate(g.proto.node):
            for t in node.output:
                producer[t] = i
            for t in node.input:
                consumers.setdefault(t, []).append(i)
        producer.pop("", None)
        consumers.pop("", None)
        known = set(producer) | set(g.initializers) | set(g.inputs)
        assert g.producer == producer and list(g.producer) == list(producer), path
        assert list(g.consumers.items()) == list(consumers.items()), path
        assert g.outer_inputs == [t for t in consumers if t not in known], path
        some = list(consumers)[::3]
        assert g.columns.consumers_of(some) == {t: consumers[t] for t in some}, path
        for t in some:
            assert g.tensor(t).consumers == consumers[t], (path, t)
        assert [n.name for n in g.nodes] == [n.name for n in g.proto.node]
        # all nodes at once, and node by node; the readers by value number and by name
        assert folding._auxiliary(g) == folding._auxiliary(g, rounds=0), path
        folded = auxiliary_nodes(g)
        g.columns.unique_made = False
        assert auxiliary_nodes(g) == folded, path
        assert [n.domain for n in g.nodes] == [n.domain for n in g.proto.node]
        if path.name == "odd.onnx":  # its Gather folds; "ghost" is read, made nowhere
            assert "ghost" in g.outer_inputs and 2 in folded
