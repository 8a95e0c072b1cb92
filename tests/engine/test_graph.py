"""GraphModel on real exports: module groups, names, shapes, initializers, subgraphs."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.graph import GraphModel, auxiliary_nodes, format_shape


def _tiny_net():  # type: ignore[no-untyped-def]
    import torch
    from torch import nn

    class Attn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q = nn.Linear(16, 16)
            self.k = nn.Linear(16, 16)

        def forward(self, x):  # type: ignore[no-untyped-def]
            w = self.q(x) @ self.k(x).transpose(-1, -2)
            return w.softmax(-1) @ x

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(16)
            self.attn = Attn()
            self.mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))

        def forward(self, x):  # type: ignore[no-untyped-def]
            x = x + self.attn(self.norm(x))
            return x + self.mlp(x)

    class TinyNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(8, 16)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(16, 4)

        def forward(self, x):  # type: ignore[no-untyped-def]
            x = self.embed(x)
            for b in self.blocks:
                x = b(x)
            # Positions and a reshape from the input's shape: shape arithmetic in a
            # dynamic export.
            x = x + torch.arange(x.shape[1]).unsqueeze(-1).to(x.dtype)
            h = self.head(x)
            return h.reshape(h.shape[0], h.shape[1] * 2, 2)

    torch.manual_seed(0)
    return TinyNet().eval(), torch.randn(2, 5, 8)


_EXPORTS: dict[str, Path] = {}  # shared by the modules that import the fixture below


@pytest.fixture(scope="session")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One tiny model exported three ways, plus the seed's scripted loop and an If.

    test_layout and test_graph_view import this fixture; pytest then holds one fixture per
    module, so the files themselves are cached here and exported once per session."""
    if _EXPORTS and all(p.exists() for p in _EXPORTS.values()):
        return _EXPORTS
    import warnings

    import torch

    out = tmp_path_factory.mktemp("graph_exports")
    model, x = _tiny_net()
    paths = {"dynamo": out / "tiny_dynamo.onnx", "dynamic": out / "tiny_dynamic.onnx",
             "torchscript": out / "tiny_ts.onnx", "loop": out / "loop.onnx",
             "if": out / "cond.onnx"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), paths["dynamo"], dynamo=True, input_names=["x"],
                          output_names=["y"], external_data=True)
        batch = torch.export.Dim("batch", min=1, max=64)
        seq = torch.export.Dim("seq", min=2, max=64)
        torch.onnx.export(model, (x,), paths["dynamic"], dynamo=True, input_names=["x"],
                          output_names=["y"], dynamic_shapes=({0: batch, 1: seq},),
                          external_data=False)
        torch.onnx.export(model, (x,), paths["torchscript"], dynamo=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}})

        # The seed's LoopModel2: a scripted loop becomes an ONNX Loop with a body graph.
        from engine.examples.loops import LoopModel2

        torch.onnx.export(LoopModel2(), (torch.ones(2, 3, dtype=torch.long), torch.tensor(5)),
                          paths["loop"], dynamo=False, input_names=["input_data", "loop_range"])

        @torch.jit.script
        def cond(x: torch.Tensor) -> torch.Tensor:
            if bool(x.sum() > 0):
                return x * 2
            return x - 1

        class CondModel(torch.nn.Module):
            def forward(self, x):  # type: ignore[no-untyped-def]
                return cond(x)

        torch.onnx.export(CondModel(), (torch.ones(3),), paths["if"], dynamo=False,
                          input_names=["x"])
    _EXPORTS.update(paths)
    return _EXPORTS


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
    model, _ = _tiny_net()
    return {name for name, _m in model.named_modules() if name}


def test_dynamo_groups_match_submodules(exports: dict[str, Path]) -> None:
    g = GraphModel.load(exports["dynamo"])
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


def test_torchscript_groups_from_node_names(exports: dict[str, Path]) -> None:
    g = GraphModel.load(exports["torchscript"])
    quals = {grp.qualname for gid, grp in g.groups.items() if gid}
    assert {"embed", "blocks.0", "blocks.0.attn", "blocks.0.attn.q", "blocks.1.mlp",
            "head"} <= quals
    attn = g.group_of_module("blocks.1.attn")
    assert attn is not None
    assert all(g.nodes[i].name.startswith("/blocks.1/attn/") for i in g.group_nodes(attn.id))


def test_nodes_attributes_shapes_and_source(exports: dict[str, Path]) -> None:
    g = GraphModel.load(exports["dynamic"])
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
    # The source line is the user's code (this file), not torch's.
    assert softmax.source is not None and softmax.source.startswith(__file__)
    assert "w.softmax" in softmax.stack_trace


def test_shape_inference_fills_torchscript_shapes(exports: dict[str, Path]) -> None:
    g = GraphModel.load(exports["torchscript"])
    sm = next(n for n in g.nodes if n.op_type == "Softmax")
    shape = g.shape(sm.outputs[0])
    assert shape is not None and shape[0] == "batch" and shape[-1] == 5


def test_initializers_lazy_external_data(exports: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    src = exports["dynamo"]
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


def test_loop_subgraph(exports: dict[str, Path]) -> None:
    g = GraphModel.load(exports["loop"])
    loop = next(n for n in g.nodes if n.op_type == "Loop")
    assert g.has_subgraphs(loop.index)
    assert loop.subgraph_attributes == ["body"]
    body = g.subgraph(loop.index, "body")
    assert body.parent is g and body.nodes
    assert any(n.op_type == "Add" for n in body.nodes)
    assert [m.title for m in body.breadcrumb()] == [g.title, f"{loop.label}.body"]
    assert body.outer_inputs or body.inputs  # iteration count, condition, carried x


def test_if_branches(exports: dict[str, Path]) -> None:
    g = GraphModel.load(exports["if"])
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


def test_search(exports: dict[str, Path]) -> None:
    g = GraphModel.load(exports["dynamo"])
    hits = g.search("softmax")
    assert hits and g.nodes[hits[0]].op_type == "Softmax"
    assert len([i for i in hits if g.nodes[i].op_type == "Softmax"]) == 2
    by_name = g.search(g.nodes[3].name)
    assert 3 in by_name
    assert g.search("") == [] and g.search("no-such-thing-anywhere") == []


def test_shape_arithmetic_is_folded(exports: dict[str, Path]) -> None:
    g = GraphModel.load(exports["dynamic"])
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
