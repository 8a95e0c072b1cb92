"""The graph browser's state without Qt (issue 25 item 3): BrowserModel driven on real
exports — its events, the search brought into view, a new file's clean slate, overlays that
stay with the file they were computed on — and a node's source chosen by rules on a GPT-2
exported through the `hf:` source and on a user's .py file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from onnx_studio.engine.graph.browser_model import BrowserModel, Search, Selection
from onnx_studio.engine.graph.model import GraphModel
from onnx_studio.engine.graph.overlay import Overlay, Scale
from onnx_studio.engine.graph.source_frame import (
    LIBRARY,
    MODEL_FILE,
    STUDIO,
    TORCH,
    USER,
    frames,
    kind_of,
)
from tests.conftest import REPO
from tests.engine.graph_files import graph_files


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return graph_files(tmp_path_factory)


def recorder(model: BrowserModel) -> list[tuple[str, Any]]:
    """Every event the model sends, in order: (event name, value)."""
    seen: list[tuple[str, Any]] = []
    for name in ("graph", "layout", "selection", "focus", "search", "overlay", "marks"):
        getattr(model.events, name).connect(lambda value, name=name: seen.append((name, value)))
    return seen


def test_the_state_imports_without_qt() -> None:
    """The model and what it uses import with Qt made unimportable (napari's headless run)."""
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('PySide6', 'shiboken6', 'pyqtgraph', 'app'):\n"
            "            raise ImportError('blocked: ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import onnx_studio.engine.graph.browser_model, onnx_studio.engine.graph.overlay\n"
            "import onnx_studio.engine.graph.source_frame\n"
            "print('ok')\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr


def test_search_reveals_selects_and_brings_the_hit_into_view(graph_exports) -> None:
    model = BrowserModel()
    model.load_file(graph_exports["dynamo"])
    lay = model.layout
    assert lay is not None and lay.expanded == {""}, "opened collapsed"
    seen = recorder(model)
    assert model.find("Softmax") == 2
    assert seen == [("search", Search("Softmax", model.search.hits))]
    assert model.search.status == "0 / 2" and model.selection == Selection()
    seen.clear()
    model.find_next()
    hit = model.search.hits[0]
    key = lay.node_key(hit)
    # its modules opened, then it is selected, then brought into view, then the counter
    assert [name for name, _ in seen] == ["layout", "selection", "focus", "search"]
    assert lay.visible_key(key) == key
    assert seen[1][1] == Selection(key, hit) and seen[2][1] == key
    assert model.search.status == "1 / 2"
    model.find_next()
    model.find_next()
    assert model.search.status == "1 / 2", "wraps around"
    model.find_previous()
    assert model.search.hit == model.search.hits[1]
    # a tensor's exact name: its producer is shown, with the tensor's own details
    graph = model.graph
    assert graph is not None
    softmax = graph.nodes[hit]
    model.find(softmax.outputs[0])
    model.find_next()
    assert model.selection.tensor == softmax.outputs[0]


def test_a_new_file_clears_search_selection_and_marks(graph_exports) -> None:
    model = BrowserModel()
    model.load_file(graph_exports["dynamo"])
    model.find("Softmax")
    model.find_next()
    model.set_marks({"anything": "a problem"})
    seen = recorder(model)
    model.load_file(graph_exports["torchscript"])
    assert seen == [("graph", model.root)]
    assert model.search == Search() and model.search.status == ""
    assert model.selection == Selection() and model.marks == {}
    # a subgraph of the same file keeps the search and runs it there
    model.load_file(graph_exports["loop"])
    model.find("Add")
    graph = model.graph
    assert graph is not None
    loop = next(n for n in graph.nodes if n.op_type == "Loop")
    model.open_subgraph(loop.index, "body")
    assert model.search.text == "Add" and model.search.hits and model.graph is not graph


def test_an_overlay_stays_with_the_file_it_was_computed_on(graph_exports,
                                                           tmp_path: Path) -> None:
    """Finding 2: the CNN's profile overlay (and its legend) stayed on GPT-2's graph."""
    a, b = graph_exports["dynamo"], graph_exports["torchscript"]
    model = BrowserModel()
    model.load_file(a)
    graph = model.graph
    assert graph is not None
    values = {n.name: float(i) for i, n in enumerate(graph.nodes)}
    seen = recorder(model)
    profile = Overlay.on(a, values, "ms per run", source="profile")
    model.set_overlay(profile)
    assert seen == [("overlay", profile)] and model.overlay is profile
    model.load_file(b)
    assert model.overlay is None, "another file shows none of it"
    model.set_overlay(Overlay.on(b, {}, "error ÷ tolerance", source="validation",
                                 scale=Scale(0.01, 100.0, log=True, mark=1.0)))
    assert model.overlay is not None and model.overlay.label == "error ÷ tolerance"
    model.load_file(a)
    assert model.overlay is profile, "back with its file"
    newer = Overlay.on(a, {}, "ms per run", source="profile")
    model.set_overlay(newer)
    assert model.overlay is newer and len(model.overlays) == 2, "one profile at a time"
    model.clear_overlay("profile")
    assert model.overlay is None and [o.source for o in model.overlays] == ["validation"]
    # the same path written anew (another export): the values were of the file before
    copy = tmp_path / "model.onnx"
    copy.write_bytes(Path(b).read_bytes())
    model.set_overlay(Overlay.on(copy, values, "ms per run", source="profile"))
    model.load_file(copy)
    assert model.overlay is not None
    copy.write_bytes(Path(a).read_bytes())
    model.load_file(copy)
    assert model.overlay is None, "computed on the file this path held before"


def test_expansion_and_options_announce_a_new_layout(graph_exports) -> None:
    model = BrowserModel()
    model.load_file(graph_exports["dynamo"])
    lay = model.layout
    assert lay is not None
    seen = recorder(model)
    model.toggle("blocks.0")
    assert seen == [("layout", "g:blocks.0")] and "blocks.0" in lay.expanded
    model.collapse_to_depth(1)
    assert model.depth == 1
    model.expand_all()
    assert model.depth == lay.max_depth() and lay.expanded == set(lay.groups)
    seen.clear()
    model.set_left_to_right(True)
    assert [name for name, _ in seen] == ["graph"] and model.layout is not lay
    assert model.layout is not None and model.layout.left_to_right


def test_source_frame_kinds() -> None:
    here = str(REPO / "onnx_studio" / "engine" / "source" / "hf" / "wrappers.py")
    assert kind_of(here) == STUDIO
    assert kind_of("/opt/studio/engine/source/hf/wrappers.py") == STUDIO  # another checkout
    assert kind_of("/x/engine/source/examples/alexnet.py") == USER  # a shipped model's code
    assert kind_of("/home/me/net.py") == USER
    assert kind_of("torch/fx/passes/runtime_assert.py") == TORCH
    site = "/usr/lib/python3.11/site-packages/"
    assert kind_of(site + "torch/nn/modules/linear.py") == TORCH
    assert kind_of(site + "transformers/models/gpt2/modeling_gpt2.py") == MODEL_FILE
    assert kind_of(site + "transformers/pytorch_utils.py") == LIBRARY
    assert kind_of("/usr/lib/python3.11/contextlib.py") == LIBRARY


@pytest.mark.timeout(600)  # the first test to ask exports GPT-2 and the user's models
def test_gpt2_from_hf_nodes_come_from_its_modeling_file(files: dict[str, Path]) -> None:
    """Finding 7: a node's source was the studio's own engine/source/hf/wrappers.py:71."""
    graph = GraphModel.load(files["gpt2"])
    assert len(graph.inputs) == 7 and len(graph.outputs) == 5
    traced = [n for n in graph.nodes if n.stack_trace]
    assert traced
    for node in traced:
        kinds = {f.kind for f in frames(node.stack_trace)}
        assert STUDIO in kinds or kinds <= {TORCH}, "the hf wrapper is in every model stack"
        model_file = [f for f in frames(node.stack_trace) if "modeling_gpt2.py" in f.path]
        if model_file:
            assert node.source == f"transformers/models/gpt2/modeling_gpt2.py:" \
                                  f"{model_file[-1].line}", node.name
        else:  # made by torch's own passes: no line of the model made it
            assert node.source is None, node.name


@pytest.mark.timeout(600)
def test_a_user_file_is_the_source_and_a_library_model_its_model_file(
        files: dict[str, Path]) -> None:
    cnn = GraphModel.load(files["cnn"])
    lines = files["py"].read_text(encoding="utf-8").splitlines()
    for node in cnn.nodes:
        assert node.source is not None and node.source.startswith(f"{files['py']}:")
        line = int(node.source.rsplit(":", 1)[1])
        assert "self." in lines[line - 1] or "h." in lines[line - 1], lines[line - 1]
    factory = GraphModel.load(files["factory"])
    sources = {n.source.rsplit(":", 1)[0] for n in factory.nodes if n.source}
    assert sources == {"transformers/models/gpt2/modeling_gpt2.py"}, sources
