"""The Graph tab driven like a user would: real exports, real widgets, offscreen."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QImage, QPalette

from onnx_studio.app.graph import GraphBrowser, time_first_paint


@pytest.fixture
def browser(qtbot) -> GraphBrowser:  # type: ignore[no-untyped-def]
    b = GraphBrowser()
    qtbot.addWidget(b)
    b.resize(1100, 700)
    b.show()
    qtbot.waitExposed(b)
    return b


def panel_text(b: GraphBrowser) -> str:
    """What the properties panel says, as plain text."""
    return b.properties.browser.toPlainText()


def _box_point(b: GraphBrowser, key: str):  # type: ignore[no-untyped-def]
    sc = b.canvas.scene_data
    assert sc is not None and key in sc.index, key
    box = sc.boxes[sc.index[key]]
    b.view.centerOn(QPointF(box.x + box.w / 2, box.y + box.h / 2))
    return b.view.mapFromScene(QPointF(box.x + box.w / 2, box.y + 8))


def test_load_shows_collapsed_modules(browser: GraphBrowser, graph_exports) -> None:
    assert browser.load_file(graph_exports["dynamo"])
    sc = browser.canvas.scene_data
    assert sc is not None
    assert {"g:embed", "g:blocks.0", "g:blocks.1", "g:head", "i:x", "o:y"} <= set(sc.index)
    assert not browser.crumbs.isVisible()
    text = panel_text(browser)
    assert f"{len(browser.model.nodes)} nodes" in text  # type: ignore[union-attr]
    assert "Inputs" in text and "x" in text


def test_search_by_op_type_and_name(browser: GraphBrowser, graph_exports, qtbot) -> None:
    browser.load_file(graph_exports["dynamo"])
    assert browser.find_nodes("Softmax") == 2
    model = browser.model
    assert model is not None
    sel = browser.canvas.scene_data.boxes[browser.canvas.selected]  # type: ignore[union-attr]
    assert sel.label == "Softmax"
    first = sel.key
    assert browser.hit_label.text() == "1 / 2"
    # Centred: the hit is inside the visible part of the view.
    visible = browser.view.mapToScene(browser.view.viewport().rect()).boundingRect()
    assert visible.contains(QPointF(sel.x + sel.w / 2, sel.y + sel.h / 2))
    browser.find_next()
    second = browser.canvas.scene_data.boxes[browser.canvas.selected]  # type: ignore[union-attr]
    assert second.label == "Softmax" and second.key != first
    browser.find_previous()
    assert browser.selected_key == first
    # By node name, typed in the search field and confirmed with Enter.
    target = next(n for n in model.nodes if n.op_type == "Gelu")
    browser.search.clear()
    qtbot.keyClicks(browser.search, target.name)
    qtbot.keyClick(browser.search, Qt.Key.Key_Return)
    assert browser.selected_key == f"n{target.index}"
    assert "Gelu" in panel_text(browser)
    assert browser.find_nodes("no-such-node-or-tensor") == 0
    assert browser.hit_label.text() == "no match"


def test_properties_show_attributes_shapes_source(browser: GraphBrowser, graph_exports) -> None:
    browser.load_file(graph_exports["dynamic"])
    model = browser.model
    assert model is not None
    sm = next(n for n in model.nodes if n.op_type == "Softmax")
    browser.select_node(sm.index)
    text = panel_text(browser)
    assert "Attributes" in text and "axis" in text and "-1" in text
    assert "float32[batch×seq×seq]" in text
    assert "models.py" in text  # the source line of the user's code (tests/engine/models.py)
    assert "blocks.0.attn" in text
    # A group: its class and op mix.
    browser.select_group("blocks.0/blocks.0.attn")
    text = panel_text(browser)
    assert "Attn" in text and "Softmax" in text
    # A weight: statistics and a histogram.
    weight = next(n for n, t in model.initializers.items() if len(t.dims) == 2)
    browser.properties.show_tensor(weight)
    text = panel_text(browser)
    assert "initializer" in text and "mean" in text and "std" in text
    assert browser.properties.hist_title.isVisible(), "a histogram is shown"
    browser.properties.show_node(sm.index)
    assert not browser.properties.hist_title.isVisible()


def test_double_click_expands_and_collapses(browser: GraphBrowser, graph_exports, qtbot) -> None:
    browser.load_file(graph_exports["dynamo"])
    n_before = len(browser.canvas.scene_data.boxes)  # type: ignore[union-attr]
    qtbot.mouseDClick(browser.view.viewport(), Qt.MouseButton.LeftButton,
                      pos=_box_point(browser, "g:blocks.0"))
    sc = browser.canvas.scene_data
    assert sc is not None and sc.boxes[sc.index["g:blocks.0"]].expanded
    assert len(sc.boxes) > n_before and "g:blocks.0/blocks.0.attn" in sc.index
    qtbot.mouseDClick(browser.view.viewport(), Qt.MouseButton.LeftButton,
                      pos=_box_point(browser, "g:blocks.0"))
    sc = browser.canvas.scene_data
    assert sc is not None and not sc.boxes[sc.index["g:blocks.0"]].expanded
    assert len(sc.boxes) == n_before
    browser.expand_all()
    assert len(browser.canvas.scene_data.boxes) > n_before  # type: ignore[union-attr]
    browser.collapse_to_depth(0)
    assert len(browser.canvas.scene_data.boxes) == n_before  # type: ignore[union-attr]


def test_click_selects_and_double_click_activates(browser: GraphBrowser, graph_exports,
                                                  qtbot) -> None:
    browser.load_file(graph_exports["torchscript"])
    browser.expand_all()
    model = browser.model
    assert model is not None
    sm = next(n for n in model.nodes if n.op_type == "Softmax")
    pos = _box_point(browser, f"n{sm.index}")
    qtbot.mouseClick(browser.view.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert browser.selected_key == f"n{sm.index}"
    with qtbot.waitSignal(browser.nodeActivated) as sig:
        qtbot.mouseDClick(browser.view.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert sig.args == [sm.name]


def test_loop_subgraph_opens_with_breadcrumb(browser: GraphBrowser, graph_exports, qtbot) -> None:
    browser.load_file(graph_exports["loop"])
    root = browser.model
    assert root is not None
    loop = next(n for n in root.nodes if n.op_type == "Loop")
    key = browser.layout_state.visible_key(f"n{loop.index}")  # type: ignore[union-attr]
    qtbot.mouseDClick(browser.view.viewport(), Qt.MouseButton.LeftButton,
                      pos=_box_point(browser, key))
    assert browser.model is not root and browser.model.parent is root  # type: ignore[union-attr]
    assert browser.breadcrumb() == [root.title, f"{loop.label}.body"]
    assert browser.crumbs.isVisible()
    assert any(b.label == "Add" for b in browser.canvas.scene_data.boxes)  # type: ignore[union-attr]
    # Back through the breadcrumb's first button.
    assert [b.text() for b in browser.crumb_buttons] == browser.breadcrumb()
    qtbot.mouseClick(browser.crumb_buttons[0], Qt.MouseButton.LeftButton)
    assert browser.model is root and not browser.crumbs.isVisible()
    # And through the properties panel's link.
    browser.select_node(loop.index)
    assert "open body" in panel_text(browser)
    browser._link(f"sub:{loop.index}:body")
    assert browser.model is not root


def test_export_png_and_svg(browser: GraphBrowser, graph_exports, tmp_path: Path) -> None:
    browser.load_file(graph_exports["dynamo"])
    browser.toggle_group("blocks.0")
    png, svg = tmp_path / "g.png", tmp_path / "g.svg"
    browser.export_png(png)
    img = QImage(str(png))
    assert not img.isNull() and img.width() > 100 and img.height() > 100
    # Not a blank picture: several colours were painted.
    colours = {img.pixel(x, y) for x in range(0, img.width(), 7) for y in range(0, img.height(), 7)}
    assert len(colours) > 5
    browser.export_svg(svg)
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    text = svg.read_text(encoding="utf-8")
    assert "Softmax" in text or "attn" in text
    assert "<path" in text or "<polyline" in text


def test_overlay_colours_nodes_and_shows_legend(browser: GraphBrowser, graph_exports) -> None:
    browser.load_file(graph_exports["dynamo"])
    browser.expand_all()
    model = browser.model
    assert model is not None
    sm = next(n for n in model.nodes if n.op_type == "Softmax")
    gelu = next(n for n in model.nodes if n.op_type == "Gelu")
    sc = browser.canvas.scene_data
    assert sc is not None
    i_sm, i_gelu = sc.index[f"n{sm.index}"], sc.index[f"n{gelu.index}"]
    default = QColor(browser.canvas._fills[i_sm])
    browser.set_overlay({sm.name: 1e-2, gelu.name: 1e-6}, "max abs diff")
    assert browser.view.legend.isVisible()
    hot, cold = browser.canvas._fills[i_sm], browser.canvas._fills[i_gelu]
    assert hot != cold and hot != default
    browser.select_node(sm.index)
    assert "max abs diff" in panel_text(browser)
    # A collapsed group takes its largest value.
    browser.collapse_to_depth(0)
    sc = browser.canvas.scene_data
    assert sc is not None
    assert browser.canvas._fills[sc.index["g:blocks.0"]] == hot
    browser.clear_overlay()
    assert not browser.view.legend.isVisible()


def test_overlay_on_absolute_scale_and_problem_marks(browser: GraphBrowser,
                                                     graph_exports) -> None:
    """The overlay API other tabs use: a fixed scale colours the same value the same way
    whatever else is shown (within tolerance stays at the cool end), and marks outline the
    nodes that have a problem, their groups too while collapsed."""
    from onnx_studio.app.graph.colors import Scale, ramp_color

    browser.load_file(graph_exports["dynamo"])
    browser.expand_all()
    model = browser.model
    assert model is not None
    sm = next(n for n in model.nodes if n.op_type == "Softmax")
    gelu = next(n for n in model.nodes if n.op_type == "Gelu")
    scale = Scale(0.01, 100.0, log=True, mark=1.0)
    sc = browser.canvas.scene_data
    assert sc is not None
    i_sm, i_gelu = sc.index[f"n{sm.index}"], sc.index[f"n{gelu.index}"]
    # Every node well within tolerance: nothing at the hot end (a relative scale would
    # paint the worst of them yellow).
    browser.set_overlay({sm.name: 0.02, gelu.name: 0.011}, "error / tolerance", scale=scale)
    assert browser.canvas._fills[i_sm].rgb() == ramp_color(scale(0.02)).rgb()
    assert browser.canvas._fills[i_gelu].rgb() == ramp_color(scale(0.011)).rgb()
    assert scale(0.02) < 0.2 and browser.view.legend.scale.mark == 1.0
    browser.set_overlay({sm.name: 0.02, gelu.name: 50.0}, "error / tolerance", scale=scale)
    assert browser.canvas._fills[i_sm].rgb() == ramp_color(scale(0.02)).rgb()  # unchanged
    assert scale(50.0) > 0.9 and scale(0.0) == 0.0 and scale(float("inf")) == 1.0
    # Marks: the node's box, then its collapsed group, and the sentence in the panel.
    browser.set_marks({sm.name: "Softmax output differs from PyTorch."})
    assert browser.canvas.marks == {i_sm}
    browser.select_node(sm.index)
    assert "Softmax output differs from PyTorch." in panel_text(browser)
    browser.collapse_to_depth(0)
    sc = browser.canvas.scene_data
    assert sc is not None
    group = browser.layout_state.visible_key(f"n{sm.index}")  # type: ignore[union-attr]
    assert group.startswith("g:") and browser.canvas.marks == {sc.index[group]}
    browser.clear_marks()
    assert browser.canvas.marks == set()


def test_bad_file_reports_why(browser: GraphBrowser, tmp_path: Path, qtbot) -> None:
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x00\x01 not onnx")
    with qtbot.waitSignal(browser.loadFailed) as sig:
        assert browser.load_file(bad) is False
    assert "broken.onnx" in sig.args[0]
    assert "Cannot show the graph" in panel_text(browser)
    with qtbot.waitSignal(browser.loadFailed):
        assert browser.load_file(tmp_path / "missing.onnx") is False


def test_time_first_paint_and_zoom_keys(browser: GraphBrowser, graph_exports, qtbot) -> None:
    seconds, nodes = time_first_paint(browser, graph_exports["dynamic"])
    assert nodes == len(browser.model.nodes) and seconds > 0  # type: ignore[union-attr]
    browser.view.setFocus()
    s0 = browser.view.scale_factor()
    qtbot.keyClick(browser.view, Qt.Key.Key_Plus)
    assert browser.view.scale_factor() > s0
    qtbot.keyClick(browser.view, Qt.Key.Key_Minus)
    qtbot.keyClick(browser.view, Qt.Key.Key_Minus)
    assert browser.view.scale_factor() < s0
    assert time_first_paint(browser, Path("nowhere.onnx"))[1] == 0
    # A hidden browser (a tab not on screen) is painted offscreen, not waited for.
    hidden = GraphBrowser()
    qtbot.addWidget(hidden)
    painted: list[bool] = []
    hidden.view.painted.connect(lambda: painted.append(True))
    seconds, nodes = time_first_paint(hidden, graph_exports["dynamo"])
    assert nodes > 0 and seconds > 0
    assert painted, "painted within the call, not left to a paint that never comes"


def test_follows_dark_palette(browser: GraphBrowser, graph_exports) -> None:
    browser.load_file(graph_exports["dynamo"])
    light = [QColor(c).lightness() for c in browser.canvas._fills]
    pal = QPalette(browser.palette())
    pal.setColor(QPalette.ColorRole.Window, QColor(30, 30, 30))
    pal.setColor(QPalette.ColorRole.Base, QColor(20, 20, 20))
    pal.setColor(QPalette.ColorRole.Text, QColor(230, 230, 230))
    browser.setPalette(pal)
    dark = [QColor(c).lightness() for c in browser.canvas._fills]
    assert sum(dark) < sum(light)
    img = browser.view.grab().toImage()
    assert QColor(img.pixel(5, 5)).lightness() < 60


def test_fold_toggle_shows_shape_nodes(browser: GraphBrowser, graph_exports) -> None:
    browser.load_file(graph_exports["dynamic"])
    model = browser.model
    assert model is not None
    shapes = [n.index for n in model.nodes if n.op_type == "Shape"]
    browser.expand_all()
    assert not any(f"n{i}" in browser.canvas.scene_data.index for i in shapes)  # type: ignore[union-attr]
    # Searching a folded node selects the node it feeds and shows the folded node's details.
    browser.find_nodes("Shape")
    assert browser.selected_key == browser.layout_state.node_key(shapes[0])  # type: ignore[union-attr]
    assert panel_text(browser).startswith("Shape")
    browser.fold_action.setChecked(False)
    browser.expand_all()
    assert all(f"n{i}" in browser.canvas.scene_data.index for i in shapes)  # type: ignore[union-attr]


def test_click_on_edge_and_tensor_search_show_tensor(browser: GraphBrowser, graph_exports,
                                                     qtbot) -> None:
    browser.load_file(graph_exports["dynamo"])
    sc = browser.canvas.scene_data
    assert sc is not None
    src = sc.boxes[sc.index["g:blocks.0"]]
    edge = next(e for e in sc.edges if abs(e.points[0][1] - (src.y + src.h)) < 0.5)
    (x0, y0), (x1, y1) = max(zip(edge.points, edge.points[1:], strict=False),
                             key=lambda s: abs(s[1][1] - s[0][1]))
    browser.view.centerOn(QPointF(x0, (y0 + y1) / 2))
    pos = browser.view.mapFromScene(QPointF((x0 + x1) / 2, (y0 + y1) / 2))
    qtbot.mouseClick(browser.view.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    text = panel_text(browser)
    assert text.startswith(edge.tensors[0]) and "Consumers" in text and "producer" in text
    # Far from every edge and box: back to the graph summary.
    qtbot.mouseClick(browser.view.viewport(), Qt.MouseButton.LeftButton,
                     pos=browser.view.mapFromScene(QPointF(src.x - 300, src.y)))
    assert "Most used ops" in panel_text(browser)
    # Searching a tensor's exact name selects its producer and shows the tensor.
    model = browser.model
    assert model is not None
    sm = next(n for n in model.nodes if n.op_type == "Softmax")
    browser.find_nodes(sm.outputs[0])
    assert panel_text(browser).startswith(sm.outputs[0])


# ---------------------------------------------------------------- the browser at scale (issue 13.6)

def _chain_model(path: Path, n: int) -> Path:
    """A real ONNX file of ``n`` nodes in one chain: a graph hundreds of times taller than
    wide once laid out."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu" if i % 2 else "Neg", [f"t{i}"], [f"t{i + 1}"],
                              name=f"/body/step_{i}") for i in range(n)]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info(f"t{n}", TensorProto.FLOAT, [4])])
    onnx.save(helper.make_model(graph), str(path))
    return path


def test_fit_at_full_expansion_fills_the_view(browser: GraphBrowser, graph_exports,
                                              qtbot) -> None:
    """Fit shows the whole expanded graph as large as it goes, and stays fitted when the
    view's size changes under it (scroll bars leaving, the splitter moving)."""
    browser.load_file(graph_exports["dynamic"])
    browser.expand_all()
    qtbot.wait(10)
    browser.fit()
    qtbot.wait(10)
    vp = browser.view.viewport().rect()
    on_screen = browser.view.mapFromScene(browser.canvas.boundingRect()).boundingRect()
    assert vp.adjusted(-2, -2, 2, 2).contains(on_screen)
    fill = max(on_screen.width() / vp.width(), on_screen.height() / vp.height())
    assert fill > 0.9, (on_screen, vp)
    browser.splitter.setSizes([500, 500])
    qtbot.wait(10)
    vp = browser.view.viewport().rect()
    on_screen = browser.view.mapFromScene(browser.canvas.boundingRect()).boundingRect()
    assert vp.adjusted(-2, -2, 2, 2).contains(on_screen)
    assert max(on_screen.width() / vp.width(), on_screen.height() / vp.height()) > 0.9


def test_minimap_not_blank_for_a_tall_graph(browser: GraphBrowser, tmp_path: Path) -> None:
    browser.load_file(_chain_model(tmp_path / "chain.onnx", 400))
    browser.expand_all()
    browser.view.set_zoom(1.0)
    rect = browser.canvas.boundingRect()
    assert rect.height() > 50 * rect.width()  # tall indeed
    mm = browser.view.minimap
    assert mm.isVisible() and mm._pix is not None
    img = mm._pix.toImage()
    painted_cols = {x for x in range(img.width()) for y in range(0, img.height(), 4)
                    if img.pixelColor(x, y).alpha() > 0}
    painted_rows = {y for y in range(img.height()) if img.pixelColor(img.width() // 2, y).alpha()}
    assert len(painted_cols) > img.width() * 0.5, "the boxes span the minimap's width"
    assert len(painted_rows) > img.height() * 0.8, "and its height"


def test_labels_drawn_wherever_they_fit(browser: GraphBrowser, graph_exports) -> None:
    from onnx_studio.app.graph.canvas import TEXT_LOD

    browser.load_file(graph_exports["dynamo"])
    browser.expand_all()
    sc = browser.canvas.scene_data
    assert sc is not None
    vp = browser.view.viewport()
    browser.view.set_zoom(1.0)
    vp.repaint()
    assert any(not browser.canvas.container[i] for i in browser.canvas.labelled)
    # Zoomed out below the node text size: module frames keep their names, tiny boxes not.
    browser.view.set_zoom(TEXT_LOD * 0.5)
    browser.view.centerOn(browser.canvas.boundingRect().center())
    vp.repaint()
    labelled = browser.canvas.labelled
    assert any(browser.canvas.container[i] for i in labelled), "module names stay"
    k = 10.0 / (TEXT_LOD * 0.5) / 12.0
    for i in labelled:  # each drawn label fits its box at that size
        assert browser.fonts.text_width(sc.boxes[i].label) * k <= sc.boxes[i].w


def test_expand_to_depth_control(browser: GraphBrowser, graph_exports) -> None:
    browser.load_file(graph_exports["dynamo"])
    lay = browser.layout_state
    assert lay is not None
    combo = browser.depth_combo
    deepest = lay.max_depth()
    assert deepest >= 2 and combo.count() == deepest + 1
    assert "level" in combo.toolTip() and combo.itemText(0) == "Modules closed"
    combo.setCurrentIndex(1)
    combo.activated.emit(1)
    assert lay.expanded == {g for g in lay.groups if len(lay._lineage(g)) <= 1}
    sc = browser.canvas.scene_data
    assert sc is not None and sc.boxes[sc.index["g:blocks.0"]].expanded
    combo.activated.emit(deepest)
    assert lay.expanded == set(lay.groups)
    browser.collapse_to_depth(0)
    assert combo.currentText() == "Modules closed"
    browser.expand_all()
    assert combo.currentIndex() == deepest  # the choice shown says what is on screen


def test_a_file_opened_expanded_is_laid_out_as_expanding_it_would(browser: GraphBrowser,
                                                                   graph_exports, qtbot) -> None:
    """`load_file(expand_all=True)` (`gui --expand-all`) lays the graph out once, expanded:
    the same boxes and edges as opening it and pressing Expand all, and the depth control
    says every level is open."""
    browser.load_file(graph_exports["dynamo"])
    browser.expand_all()
    sc = browser.canvas.scene_data
    assert sc is not None
    expanded = ([(b.key, b.x, b.y, b.w, b.h) for b in sc.boxes], len(sc.edges))
    other = GraphBrowser()
    qtbot.addWidget(other)
    assert other.load_file(graph_exports["dynamo"], expand_all=True)
    lay, sc = other.layout_state, other.canvas.scene_data
    assert lay is not None and sc is not None
    assert lay.expanded == set(lay.groups) and len(lay.groups) > 2
    assert ([(b.key, b.x, b.y, b.w, b.h) for b in sc.boxes], len(sc.edges)) == expanded
    assert other.depth_combo.currentIndex() == lay.max_depth()
    assert other.depth_combo.currentText().startswith("All")


def test_properties_model_metadata_and_op_docs(browser: GraphBrowser, graph_exports,
                                               tmp_path: Path) -> None:
    import onnx

    proto = onnx.load(str(graph_exports["dynamic"]))
    onnx.helper.set_model_props(proto, {"exported_by": "studio test", "license": "MIT"})
    path = tmp_path / "with_props.onnx"
    onnx.save(proto, str(path))
    browser.load_file(path)
    model = browser.model
    assert model is not None
    text = panel_text(browser)
    assert "producer" in text and "pytorch" in text.lower()
    assert "opset import" in text and f"ai.onnx {model.opset_imports['ai.onnx']}" in text
    assert "exported_by" in text and "studio test" in text and "license" in text
    sm = next(n for n in model.nodes if n.op_type == "Softmax")
    browser.select_node(sm.index)
    text = panel_text(browser)
    assert "Operator Softmax (since opset 13)" in text
    assert "normalized exponential" in text.lower()  # onnx.defs' own words


def test_initializer_values_table_beside_histogram(browser: GraphBrowser, graph_exports) -> None:
    import numpy as np
    import onnx
    from onnx import numpy_helper

    path = graph_exports["dynamic"]
    browser.load_file(path)
    model = browser.model
    assert model is not None
    name = max(model.initializers, key=lambda k: len(model.initializers[k].dims))
    expected = numpy_helper.to_array(
        next(t for t in onnx.load(str(path)).graph.initializer if t.name == name))
    browser.show_tensor(name)
    panel = browser.properties
    assert panel.values_row.isVisible() and panel._plot.isVisible()
    table = panel.values_table.model()
    assert table.rowCount() == expected.shape[0]
    assert table.columnCount() == (expected.shape[1] if expected.ndim == 2 else 1)
    got = float(table.data(table.index(1, 0)))
    assert np.isclose(got, float(expected.reshape(table.rowCount(), -1)[1, 0]), rtol=1e-5)


def test_external_data_opens_without_reading_weights(browser: GraphBrowser, graph_exports,
                                                     tmp_path: Path) -> None:
    """Opening reads shapes and attributes only: the graph opens with the weights file gone;
    asking for a tensor's values maps that tensor from the file (a memmap, no copy)."""
    import shutil

    import numpy as np
    import onnx
    from onnx import numpy_helper

    src = graph_exports["dynamo"]
    data = [p for p in src.parent.iterdir() if p.name.startswith(src.name) and p != src]
    assert data, "the fixture exports with external data"
    shutil.copy(src, tmp_path / src.name)
    assert browser.load_file(tmp_path / src.name)  # no data file beside it at all
    model = browser.model
    assert model is not None
    name = next(n for n, t in model.initializers.items() if t.data_location == 1)
    assert "×" in panel_text(browser) or model.tensor(name).shape
    browser.show_tensor(name)
    assert "Values unavailable" in panel_text(browser)
    for p in data:
        shutil.copy(p, tmp_path / p.name)
    values = model.initializer_array(name)
    assert isinstance(values, np.memmap)
    full = onnx.load(str(tmp_path / src.name))
    expected = numpy_helper.to_array(next(t for t in full.graph.initializer if t.name == name))
    assert np.array_equal(np.asarray(values), expected)


def test_left_to_right_option(browser: GraphBrowser, graph_exports) -> None:
    browser.load_file(graph_exports["dynamo"])
    browser.expand_all()
    tall = browser.canvas.boundingRect()
    browser.direction_action.trigger()  # the toolbar's "Left to right"
    assert browser.state.left_to_right and browser.layout_state.left_to_right  # type: ignore[union-attr]
    browser.expand_all()
    wide = browser.canvas.boundingRect()
    assert tall.height() > tall.width() and wide.width() > wide.height()
    browser.view.set_zoom(1.0)
    browser.view.viewport().repaint()  # curves, arrows and labels drawn across
    browser.direction_action.trigger()
    assert not browser.layout_state.left_to_right  # type: ignore[union-attr]


def test_shown_graph_is_frozen_out_of_gc_yet_freed(browser: GraphBrowser, graph_exports,
                                                     tmp_path: Path, qtbot) -> None:
    """A shown graph is kept out of the garbage collector's walks (gc.freeze: no
    multi-second collection mid-zoom at 100k nodes), so it must be freed by reference
    counting alone when another file replaces it; its search index is built once it is on
    screen and the window is idle."""
    import gc
    import weakref

    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    assert browser.load_file(graph_exports["dynamo"])
    browser.expand_all()
    browser.find_nodes("Softmax")
    assert browser.root is not None and gc.get_freeze_count() > 0
    gone = weakref.ref(browser.root)
    gone_layout = weakref.ref(browser.layout_state)
    qtbot.waitUntil(lambda: gone()._search_ops is not None, timeout=5000)  # type: ignore[union-attr]
    assert browser.load_file(_chain_model(tmp_path / "chain.onnx", 20))
    qtbot.wait(10)
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete.value)
    assert gone() is None and gone_layout() is None, "a cycle keeps the old graph alive"
