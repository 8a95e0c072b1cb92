"""The layered, per-group layout on real exports and on hand-made graphs."""

from __future__ import annotations

from itertools import combinations, pairwise
from pathlib import Path

import pytest

from onnx_studio.engine.graph.layered import LayeredLayout
from onnx_studio.engine.graph.layout import GraphLayout
from onnx_studio.engine.graph.model import GraphModel
from onnx_studio.engine.graph.scene import Box, Scene


def _overlap(a: Box, b: Box) -> bool:
    return a.x < b.x + b.w - 0.01 and b.x < a.x + a.w - 0.01 and \
        a.y < b.y + b.h - 0.01 and b.y < a.y + a.h - 0.01


def _inside(inner: Box, outer: Box) -> bool:
    return (outer.x <= inner.x + 0.01 and inner.x + inner.w <= outer.x + outer.w + 0.01
            and outer.y <= inner.y + 0.01 and inner.y + inner.h <= outer.y + outer.h + 0.01)


def _check_geometry(lay: GraphLayout, scene: Scene) -> None:
    """Siblings never overlap; children sit inside their expanded parent."""
    by_parent: dict[str, list[Box]] = {}
    for b in scene.boxes:
        by_parent.setdefault(lay.parent_of[b.key], []).append(b)
    for gid, boxes in by_parent.items():
        for a, b in combinations(boxes, 2):
            assert not _overlap(a, b), (gid, a.key, b.key)
        if gid:
            parent = scene.boxes[scene.index["g:" + gid]]
            assert parent.expanded
            for b in boxes:
                assert _inside(b, parent), (b.key, gid)


def test_collapsed_top_level(graph_exports: dict[str, Path]) -> None:
    g = GraphModel.load(graph_exports["dynamo"])
    lay = GraphLayout(g)
    sc = lay.scene()
    keys = {b.key for b in sc.boxes}
    assert {"i:x", "o:y", "g:embed", "g:blocks.0", "g:blocks.1", "g:head"} <= keys
    assert not any(k.startswith("g:blocks.0/") for k in keys)
    assert all(not b.expanded for b in sc.boxes)
    _check_geometry(lay, sc)
    # The chain reads top to bottom: input above embed above the blocks above head.
    y = {b.key: b.y for b in sc.boxes}
    assert y["i:x"] < y["g:embed"] < y["g:blocks.0"] < y["g:blocks.1"] < y["g:head"] < y["o:y"]
    # Every box is connected: one edge per step of the chain at least.
    assert len(sc.edges) >= 5
    for e in sc.edges:
        if not e.reversed:
            assert e.points[-1][1] > e.points[0][1]


def test_expand_changes_scene_and_keeps_other_groups(graph_exports: dict[str, Path]) -> None:
    g = GraphModel.load(graph_exports["dynamo"])
    lay = GraphLayout(g)
    before = lay.scene()
    lay.expand("blocks.1")
    lay.scene()
    kept = lay._placement["blocks.1"]
    lay.expand("blocks.0")
    after = lay.scene()
    assert len(after.boxes) > len(before.boxes)
    assert after.boxes[after.index["g:blocks.0"]].expanded
    assert "g:blocks.0/blocks.0.attn" in after.index
    # Expanding blocks.0 re-laid out blocks.0 and the root, not its sibling.
    assert lay._placement["blocks.1"] is kept
    _check_geometry(lay, after)
    # Entry edges of an expanded group start on its top border.
    top = after.boxes[after.index["g:blocks.0"]].y
    assert any(abs(e.points[0][1] - top) < 0.01 for e in after.edges)
    lay.collapse("blocks.0")
    again = lay.scene()
    assert not again.boxes[again.index["g:blocks.0"]].expanded
    assert "g:blocks.0/blocks.0.attn" not in again.index
    assert "g:blocks.1/blocks.1.attn" in again.index
    lay.collapse("")  # the whole graph never collapses
    assert "" in lay.expanded


def test_expand_all_and_collapse_to_depth(graph_exports: dict[str, Path]) -> None:
    g = GraphModel.load(graph_exports["torchscript"])
    lay = GraphLayout(g)
    lay.expand_all()
    full = lay.scene()
    nodes = [b for b in full.boxes if b.kind == "node"]
    assert len(nodes) == len(g.nodes) - len(lay.folded)
    _check_geometry(lay, full)
    lay.collapse_to_depth(1)
    d1 = lay.scene()
    assert d1.boxes[d1.index["g:blocks.0"]].expanded
    assert not d1.boxes[d1.index["g:blocks.0/attn"]].expanded
    lay.collapse_to_depth(0)
    assert len(lay.scene().boxes) < len(d1.boxes) < len(full.boxes)


def test_reveal_and_visible_key(graph_exports: dict[str, Path]) -> None:
    g = GraphModel.load(graph_exports["dynamo"])
    lay = GraphLayout(g)
    sm = next(n.index for n in g.nodes if n.op_type == "Softmax")
    key = lay.node_key(sm)
    assert lay.visible_key(key) == "g:blocks.0"
    lay.reveal(key)
    sc = lay.scene()
    assert key in sc.index and lay.visible_key(key) == key
    # The box showing a node is remembered per group: every change of what is expanded
    # must forget it.
    lay.collapse("blocks.0")
    assert lay.visible_key(key) == "g:blocks.0"
    lay.expand_all()
    assert lay.visible_key(key) == key
    lay.collapse_to_depth(0)
    assert lay.visible_key(key) == "g:blocks.0"
    lay.toggle("blocks.0")
    assert lay.visible_key(key) == "g:blocks.0/blocks.0.attn"
    lay.toggle("blocks.0")
    assert lay.visible_key(key) == "g:blocks.0"


def test_children_in_graph_order(graph_exports: dict[str, Path]) -> None:
    """Every group lists its children in graph order (inputs first, outputs last), which
    the layering starts from: built without sorting, it must come out sorted."""
    for kind in ("dynamo", "torchscript", "dynamic"):
        lay = GraphLayout(GraphModel.load(graph_exports[kind]))
        for vg in lay.groups.values():
            ranks = [lay.rank(k) for k in vg.items]
            assert ranks == sorted(ranks), (kind, vg.id)
        root = lay.groups[""].items
        inputs = [k for k in root if k.startswith("i:")]
        assert root[:len(inputs)] == inputs
        assert [k[2:] for k in inputs][:len(lay.model.inputs)] == lay.model.inputs


def test_folding_hides_shape_chains(graph_exports: dict[str, Path]) -> None:
    g = GraphModel.load(graph_exports["dynamic"])
    folded = GraphLayout(g)
    folded.expand_all()
    keys = set(folded.scene().index)
    shapes = [n.index for n in g.nodes if n.op_type == "Shape"]
    assert shapes and not any(f"n{i}" in keys for i in shapes)
    # A folded node maps to the box of the node it feeds.
    assert folded.node_key(shapes[0]) in keys
    plain = GraphLayout(g, fold=False)
    plain.expand_all()
    assert all(f"n{i}" in plain.scene().index for i in shapes)


def _chain_model(path: Path, n: int) -> Path:
    """A flat chain of n Relu nodes with a skip edge: no module metadata at all."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"relu{i}") for i in range(n)]
    nodes.append(helper.make_node("Add", [f"t{n}", "t0"], ["y"], name="skip"))
    graph = helper.make_graph(nodes, "chain",
                              [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph), path)
    return path


def test_large_group_is_split_into_sections(tmp_path: Path) -> None:
    g = GraphModel.load(_chain_model(tmp_path / "chain.onnx", 1200))
    lay = GraphLayout(g)
    sc = lay.scene()
    sections = [b for b in sc.boxes if b.kind == "section"]
    assert len(sections) == 3  # 1201 nodes in sections of 500
    assert len(sc.boxes) == len(sections) + 2  # plus the input and the output
    lay.expand(sections[1].key[2:])
    sc2 = lay.scene()
    assert sum(1 for b in sc2.boxes if b.kind == "node") == 500
    _check_geometry(lay, sc2)


@pytest.mark.parametrize("name", ["dynamo", "dynamic", "torchscript"])
def test_every_group_lists_its_items_in_graph_order(graph_exports: dict[str, Path], name: str,
                                                     tmp_path: Path) -> None:
    """What GraphLayout's shared layouts rely on: a group's structure is its edges and size
    because its items (nodes, modules, sections, inputs, outputs) are in graph order."""
    models = [GraphModel.load(graph_exports[name])]
    if name == "dynamo":  # and a group split into sections
        models.append(GraphModel.load(_chain_model(tmp_path / "chain.onnx", 1200)))
    for g in models:
        lay = GraphLayout(g)
        for gid, vg in lay.groups.items():
            ranks = [lay.rank(k) for k in vg.items]
            assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks), gid


def test_top_level_edges_before_lifting_match_the_lifted(graph_exports: dict[str, Path],
                                                          tmp_path: Path) -> None:
    """A graph opened collapsed finds its top-level edges in one pass; lifting every edge
    into the modules later (the first expand) must give the top level the same edges, in
    the same order, and the expanded scene must hold together."""
    paths = [graph_exports[k] for k in ("dynamo", "torchscript", "dynamic")]
    paths.append(_chain_model(tmp_path / "chain.onnx", 1200))  # top level in sections
    for path in paths:
        g = GraphModel.load(path)
        for fold in (True, False):
            quick = GraphLayout(g, fold=fold)
            top = dict(quick._edges_of(""))
            assert not quick._lifted and set(quick._edges) == {""}
            lifted = GraphLayout(g, fold=fold)
            lifted._build_edges()
            assert list(top.items()) == list(lifted._edges.get("", {}).items()), path
            assert top, path
            quick.scene()
            quick.expand_all()
            _check_geometry(quick, quick.scene())
            assert quick._lifted and quick._edges_of("") == top


def test_small_graph_is_not_split(tmp_path: Path) -> None:
    g = GraphModel.load(_chain_model(tmp_path / "chain.onnx", 30))
    sc = GraphLayout(g).scene()
    assert sum(1 for b in sc.boxes if b.kind == "node") == 31
    # The skip edge goes around the chain: through dummies, so it does not cross a box.
    skip = max(sc.edges, key=lambda e: len(e.points))
    boxes = [b for b in sc.boxes if b.kind == "node"]
    for (x0, y0), (x1, y1) in pairwise(skip.points):
        if abs(x0 - x1) < 0.01:  # vertical runs: must not pass through a node
            for b in boxes:
                assert not (b.x < x0 < b.x + b.w and min(y0, y1) < b.y + b.h / 2 < max(y0, y1))


@pytest.mark.parametrize("flip", [False, True])
def test_core_layers_and_dummies(flip: bool) -> None:
    # a -> b -> c -> d and a long edge a -> d; with flip, ranks disagree with one edge.
    edges = [(0, 1), (1, 2), (2, 3), (0, 3)]
    rank = [0.0, 1.0, 2.0, 3.0]
    if flip:
        edges.append((3, 1))  # a back edge: a cycle the layering must break
    core = LayeredLayout(4, edges, rank)
    assert core.layer[:4] == [0, 1, 2, 3]
    long_chain = core.chains[3]
    assert len(long_chain) == 4  # two dummies on a -> d
    pl = core.place([(40.0, 20.0)] * 4)
    ys = [p[1] for p in pl.pos]
    assert ys == sorted(ys)
    assert core.flipped[-1] is flip
    for route in pl.routes:
        assert route[0][1] <= route[-1][1]


def test_core_fan_out_does_not_overlap() -> None:
    edges = [(0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (3, 4)]
    core = LayeredLayout(5, edges, [float(i) for i in range(5)])
    sizes = [(60.0, 20.0), (120.0, 30.0), (50.0, 20.0), (80.0, 20.0), (60.0, 20.0)]
    pl = core.place(sizes)
    spans = sorted((pl.pos[v][0], pl.pos[v][0] + sizes[v][0]) for v in (1, 2, 3))
    for (_a0, a1), (b0, _b1) in pairwise(spans):
        assert a1 <= b0
    # The source sits above the middle of its fan, the sink below it.
    mid = (spans[0][0] + spans[-1][1]) / 2
    assert abs(pl.pos[0][0] + 30 - mid) < 40 and abs(pl.pos[4][0] + 30 - mid) < 40


def test_left_to_right_layout(graph_exports: dict[str, Path]) -> None:
    """Layers run across: every edge between two boxes goes right, nothing overlaps, and the
    whole graph is wider than tall where top to bottom it is taller than wide."""
    model = GraphModel.load(graph_exports["dynamo"])
    down = GraphLayout(model)
    down.expand_all()
    across = GraphLayout(model, left_to_right=True)
    across.expand_all()
    sd, sa = down.scene(), across.scene()
    assert sd.height > sd.width and sa.width > sa.height
    assert len(sa.boxes) == len(sd.boxes) and len(sa.edges) == len(sd.edges)
    by_key = {b.key: b for b in sa.boxes}
    for e in sa.edges:
        assert e.across
        if not e.reversed:
            assert e.points[-1][0] > e.points[0][0]  # left to right
    leaves = [b for b in sa.boxes if not b.expanded]
    for i, a in enumerate(leaves):
        for b in leaves[i + 1:]:
            assert (a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y
                    or b.y + b.h <= a.y), (a.key, b.key)
    # Each box inside its group's frame.
    for b in sa.boxes:
        parent = across.parent_of.get(b.key)
        if parent and "g:" + parent in by_key:
            f = by_key["g:" + parent]
            assert f.x <= b.x and b.x + b.w <= f.x + f.w + 0.01
            assert f.y <= b.y and b.y + b.h <= f.y + f.h + 0.01


@pytest.mark.parametrize("across", [False, True])
def test_scene_columns_agree_with_the_boxes_and_edges(graph_exports: dict[str, Path],
                                                      across: bool) -> None:
    """The scene is kept as columns and a Box or Edge is made when asked for: both views of a
    fully expanded graph (blocks sharing one placement) say the same thing."""
    lay = GraphLayout(GraphModel.load(graph_exports["dynamic"]), left_to_right=across)
    lay.expand_all()
    sc = lay.scene()
    boxes, edges = sc.boxes, sc.edges
    assert len(sc.index) == len(boxes) == len(set(boxes.keys))
    for i, b in enumerate(boxes):
        assert sc.index[b.key] == i
        assert (b.x, b.y, b.w, b.h) == (boxes.x[i], boxes.y[i], boxes.w[i], boxes.h[i])
        assert b.expanded == (b.key.startswith("g:") and b.key[2:] in lay.expanded)
        assert b.depth == lay.groups[lay.parent_of[b.key]].depth + 1
        assert b.kind == ("node" if b.key.startswith("n") else lay.items[b.key].kind)
        assert b.sublabel == lay.items[b.key].sublabel
    assert boxes[-1] == boxes[len(boxes) - 1] and boxes[:2] == [boxes[0], boxes[1]]
    assert len(sc.edge_bounds) == len(edges) > 0
    entering = 0
    for e, (x0, y0, x1, y1) in zip(edges, sc.edge_bounds.tolist(), strict=True):
        assert edges[edges.index(e)] is e  # made once, then kept
        xs, ys = [p[0] for p in e.points], [p[1] for p in e.points]
        assert (x0, y0, x1, y1) == pytest.approx((min(xs), min(ys), max(xs), max(ys)))
        entering += e.entering
        assert e.tensors and e.across == across
    assert entering > 0  # the groups' entry edges, which reach their group's border
    with pytest.raises(IndexError):
        edges[len(edges)]


# ---------------------------------------------------------------- many inputs and outputs (25.3)

def test_core_stacks_rows_below_each_other() -> None:
    """`below` puts items in successive layers without an edge between them; their edges
    pass the rows below as dummies beside the stacked boxes."""
    # three sources (0, 1, 2) into one box (3): stacked in three rows
    core = LayeredLayout(4, [(0, 3), (1, 3), (2, 3)], [0.0, 1.0, 2.0, 3.0],
                         below=[(0, 1), (1, 2)])
    assert core.layer[:4] == [0, 1, 2, 3]
    pl = core.place([(100.0, 30.0)] * 4)
    assert [round(x) for x, _ in pl.pos[:3]] == [0, 0, 0], "one column, one left edge"
    ys = [y for _, y in pl.pos]
    assert ys == sorted(ys) and len(set(ys)) == 4
    assert pl.width < 3 * 100.0, "narrower than the row they made"
    for route, (u, v) in zip(pl.routes, core.edges, strict=True):
        assert route[0][1] == pl.pos[u][1] + 30.0 and route[-1][1] == pl.pos[v][1]


@pytest.fixture(scope="module")
def gpt2_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.engine.graph_files import graph_files

    return graph_files(tmp_path_factory)["gpt2"]


@pytest.mark.timeout(600)  # exports the tiny GPT-2 when no test did yet
def test_many_inputs_and_outputs_are_stacked_in_rows(gpt2_file: Path) -> None:
    """GPT-2 with its cache (7 inputs, 5 outputs) collapsed: one row of inputs was six
    times wider than the rest of the graph; stacked, the graph is about as wide as its
    widest box and the edges still reach every input and output."""
    graph = GraphModel.load(gpt2_file)
    lay = GraphLayout(graph)
    scene = lay.scene()
    _check_geometry(lay, scene)
    ins = [scene.boxes[scene.index["i:" + t]] for t in graph.inputs]
    outs = [scene.boxes[scene.index["o:" + t]] for t in graph.outputs]
    assert len(ins) == 7 and len(outs) == 5
    for stack in (ins, outs):
        assert [b.y for b in stack] == sorted({b.y for b in stack}), "a row each, in order"
        assert {b.x for b in stack} == {min(b.x for b in stack)}, "one left edge"
    widest = max(b.w for b in ins + outs)
    assert scene.width < 1.5 * widest < sum(b.w for b in ins)
    assert max(b.y for b in ins) < min(b.y for b in scene.boxes if b.key[0] == "g")
    pairs = lay._structure[""][2]
    assert {a for a, _ in pairs} >= {"i:" + t for t in graph.inputs}
    assert {b for _, b in pairs} >= {"o:" + t for t in graph.outputs}
    # expanded, the body is wide: the inputs share rows as far as its width allows
    lay.expand_all()
    scene = lay.scene()
    _check_geometry(lay, scene)
    ins = [scene.boxes[scene.index["i:" + t]] for t in graph.inputs]
    assert len({b.y for b in ins}) < len(ins) or scene.width < sum(b.w for b in ins)


def test_few_inputs_keep_one_row(graph_exports: dict[str, Path]) -> None:
    """Two inputs side by side stay in one row (nothing is stacked below three)."""
    from onnx_studio.engine.graph.layout import _io_rows

    keys = ["i:a", "i:b", "n0", "o:y"]
    assert _io_rows(keys, [(300.0, 36.0)] * 4, [0, 0, 1, 2]) == []
    keys = ["i:a", "i:b", "i:c", "n0"]
    assert _io_rows(keys, [(300.0, 36.0), (300.0, 36.0), (300.0, 36.0), (700.0, 36.0)],
                    [0, 0, 0, 1]) == [(0, 2), (1, 2)], "two fit the body's width, one below"
