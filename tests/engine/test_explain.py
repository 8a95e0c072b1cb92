"""explain: the first node that diverges from PyTorch, its module and source line, and a repro
folder that needs numpy and onnxruntime only. Known divergences: a weight patched in a middle
layer of a real export (a tiny stack of blocks, a tiny BERT from its config class, a Hugging
Face folder); a correct file diverges nowhere."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.analysis.explain import explain, node_origin
from onnx_studio.engine.cli import main
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.validation.nodes import first_divergent
from tests.conftest import REPO
from tests.engine.explain_models import exported, linear_line, patched, scope_ending


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return exported(tmp_path_factory.mktemp("explain"), "Stack")


def _cli(*args: str) -> tuple[int, dict[str, Any]]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*args, "--json"])
    return code, json.loads(out.getvalue().strip().splitlines()[-1])


def _run_repro(folder: Path) -> subprocess.CompletedProcess[str]:
    """repro.py in a clean interpreter (-I: no PYTHONPATH, no user site), from another
    folder; it also reports which of torch and the studio it imported."""
    probe = ("import runpy, sys\n"
             "try:\n"
             f"    runpy.run_path({str(folder / 'repro.py')!r}, run_name='__main__')\n"
             "except SystemExit as end:\n"
             "    code = end.code\n"
             "print('IMPORTED', sorted(m for m in ('torch', 'engine', 'onnx') "
             "if m in sys.modules))\n"
             "sys.exit(code)\n")
    return subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True,
                          cwd=folder.parent.parent, timeout=60, check=False)


@pytest.mark.timeout(300)
def test_patched_weight_names_its_layer_and_the_repro_reproduces(
        stack: tuple[Path, Path], tmp_path: Path) -> None:
    source, recipe_path = stack
    bad = tmp_path / "patched.onnx"
    weight = patched(source, bad, "layers.2.lin")
    repro = tmp_path / "repro"
    code, doc = _cli("explain", str(bad), "--recipe", str(recipe_path), "-o", str(repro))
    assert code == 0, doc
    assert doc["ok"] is True and doc["diverges"] is True and doc["error"] is None
    first = doc["first_divergence"]
    assert first["module"] == "layers.2.lin"
    assert first["module_type"].endswith("Linear")
    assert first["source"] == f"explain_models.py:{linear_line()}"
    assert first["op_type"] in ("Gemm", "MatMul", "Add")
    assert first["tolerance_ratio"] > 1 and first["max_abs_diff"] > 0
    inputs = {i["name"]: i for i in first["inputs"]}
    assert inputs[weight]["kind"] == "initializer" and inputs[weight]["max_abs_diff"] > 0
    values = [i for i in first["inputs"] if i["kind"] == "value"]
    assert values and all(v["max_abs_diff"] is not None and v["max_abs_diff"] < 1e-4
                          for v in values)  # what feeds it still agrees
    # every node after it (two more blocks) is off too; the blocks before it are not
    assert doc["downstream"] >= 2
    assert list(doc)[:5] == ["ok", "diverges", "first_divergence", "downstream", "repro"]
    assert doc["repro"]["folder"] == str(repro)
    assert sorted(doc["repro"]["files"]) == ["expected.npz", "inputs.npz", "model.onnx",
                                             "repro.py"]
    assert "repro.py" in doc["repro"]["command"]

    small = onnx.load(str(repro / "model.onnx"))
    onnx.checker.check_model(small)
    assert first["node"] in [n.name for n in small.graph.node]
    assert len(small.graph.node) < len(onnx.load(str(bad)).graph.node)
    assert weight in {t.name for t in small.graph.initializer}
    with np.load(repro / "inputs.npz") as stored:
        assert sorted(stored.files) == sorted(i.name for i in small.graph.input)
    script = (repro / "repro.py").read_text()
    imported = {alias.name.split(".")[0] for node in ast.walk(ast.parse(script))
                if isinstance(node, ast.Import | ast.ImportFrom)
                for alias in (node.names if isinstance(node, ast.Import) else
                              [ast.alias(node.module or "")])}
    assert imported == {"sys", "pathlib", "numpy", "onnxruntime"}

    done = _run_repro(repro)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "max abs diff" in done.stdout and "reproduced" in done.stdout
    assert "IMPORTED []" in done.stdout  # numpy and onnxruntime only

    # PyTorch's own values at the outputs replaced by ONNX Runtime's: nothing to reproduce
    import onnxruntime as ort

    session = ort.InferenceSession(str(repro / "model.onnx"))
    with np.load(repro / "inputs.npz") as stored:
        got = session.run(None, {k: stored[k] for k in stored.files})
    np.savez(repro / "expected.npz", **{o.name: v for o, v in zip(session.get_outputs(), got,
                                                                  strict=True)})
    assert _run_repro(repro).returncode == 0


def test_a_correct_file_diverges_nowhere(stack: tuple[Path, Path], tmp_path: Path) -> None:
    source, recipe_path = stack
    before = sorted(p.name for p in source.parent.iterdir())
    doc = explain(recipes.load(recipe_path), source)
    assert doc["ok"] is True and doc["diverges"] is False
    assert doc["first_divergence"] is None and doc["repro"] is None
    assert doc["compared"] >= 8  # four blocks' values, the output included
    assert sorted(p.name for p in source.parent.iterdir()) == before  # no repro written


def test_the_first_divergence_is_the_earliest_not_the_worst(stack: tuple[Path, Path],
                                                           tmp_path: Path) -> None:
    """Two weights patched: the later one differs far more, the earlier one is named."""
    source, recipe_path = stack
    once = tmp_path / "once.onnx"
    patched(source, once, "layers.1.lin", scale=1.01)
    twice = tmp_path / "twice.onnx"
    patched(once, twice, "layers.3.lin", scale=50.0)
    doc = explain(recipes.load(recipe_path), twice, write_repro=False)
    assert doc["first_divergence"]["module"] == "layers.1.lin"
    assert doc["repro"] is None  # asked for the node only (the window's Why?)
    assert not twice.with_name("twice.repro").exists()


def test_first_divergent_judges_unnamed_values_by_what_they_come_from() -> None:
    """A value PyTorch has no name for is within tolerance when what it is computed from is;
    a node fed by a divergent value is not the first divergence even when it fails too."""
    from onnx import helper

    nodes = [helper.make_node("Neg", ["x"], ["a"], name="n0"),
             helper.make_node("Neg", ["a"], ["val_1"], name="n1"),  # no PyTorch value
             helper.make_node("Neg", ["val_1"], ["b"], name="n2"),
             helper.make_node("Neg", ["b"], ["c"], name="n3")]
    graph = helper.make_graph(nodes, "g", [], [])
    ok, bad = {"passed": True}, {"passed": False}
    assert first_divergent(graph, {"a": ok, "b": bad, "c": bad}) == 2
    assert first_divergent(graph, {"a": bad, "b": bad, "c": bad}) == 0
    assert first_divergent(graph, {"a": ok, "b": ok, "c": ok}) is None


def test_source_is_the_innermost_frame_of_the_models_code(tmp_path: Path) -> None:
    """explain names the frame the graph's properties name (onnx_studio.engine.graph.source_frame):
    the model's own line, not the studio's wrapper around it nor torch under it."""
    import onnx
    import torch

    engine_file = REPO / "onnx_studio" / "engine" / "source" / "hf" / "parts.py"
    torch_file = Path(torch.__file__).parent / "nn" / "modules" / "linear.py"
    stack = (f'File "{tmp_path / "net.py"}", line 13, in forward\n    x = l(x)\n'
             f'File "{engine_file}", line 40, in forward\n    return self.model(x)\n'
             f'File "{tmp_path / "net.py"}", line 6, in forward\n    y = self.lin(x)\n'
             f'File "{torch_file}", line 134, in forward\n    return F.linear(x)')

    def node(trace: str) -> onnx.NodeProto:
        made = onnx.helper.make_node("Gemm", ["x", "w"], ["y"])
        made.metadata_props.add(key="pkg.torch.onnx.stack_trace", value=trace)
        made.metadata_props.add(key="pkg.torch.onnx.name_scopes",
                                value="['', 'layers.2.lin', 'linear']")
        return made

    origin = node_origin(node(stack))
    assert origin["source"] == "net.py:6" and origin["source_path"] == str(tmp_path / "net.py")
    assert origin["module"] == "layers.2.lin"
    assert node_origin(node(f'File "{torch_file}", line 1, in f'))["source"] == ""


@pytest.mark.timeout(300)
def test_wrong_requests_exit_2_and_write_nothing(stack: tuple[Path, Path],
                                                 tmp_path: Path) -> None:
    source, recipe_path = stack
    code, doc = _cli("explain", str(tmp_path / "nope.onnx"), "--recipe", str(recipe_path))
    assert code == 2 and doc["ok"] is False and doc["error"]["kind"] == "source", doc
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    code, doc = _cli("explain", str(source), "--recipe", str(recipe_path), "-o", str(busy))
    assert code == 2 and doc["error"]["kind"] == "write", doc
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"]
    code, doc = _cli("explain", str(source))
    assert code == 2 and doc["error"]["kind"] == "recipe"


@pytest.mark.timeout(300)
def test_a_torchscript_export_is_refused_with_exit_2(tmp_path: Path) -> None:
    _, recipe_path = exported(tmp_path, "Stack")
    recipe = recipes.load(recipe_path)
    recipe.export.exporter = "torchscript"
    recipe.export.output = str(tmp_path / "ts.onnx")
    from onnx_studio.engine.pipeline import export

    assert export(recipe, validate=False).ok
    with pytest.raises(StudioError) as err:
        explain(recipe, tmp_path / "ts.onnx")
    assert err.value.exit_code == 2 and "dynamo" in err.value.message


@pytest.mark.timeout(300)
def test_a_transformers_architecture_names_its_layer(tmp_path: Path) -> None:
    """A tiny BERT (BertConfig, random weights): the intermediate dense layer of its second
    encoder layer patched; the module path and transformers' source line are named."""
    from tests.engine.analysis_models import BERT, export_recipe, write_recipe

    recipe_path = write_recipe(tmp_path, "bert.toml", BERT.format(output="bert.onnx"))
    source = export_recipe(recipe_path)
    bad = tmp_path / "bert_patched.onnx"
    patched(source, bad, "encoder.layer.1.intermediate.dense")
    doc = explain(recipes.load(recipe_path), bad, repro_dir=tmp_path / "repro")
    first = doc["first_divergence"]
    assert first["module"] == "encoder.layer.1.intermediate.dense"
    assert first["source"].startswith("modeling_bert.py:")
    assert doc["downstream"] >= 1
    assert _run_repro(tmp_path / "repro").returncode == 1
    assert explain(recipes.load(recipe_path), source)["diverges"] is False


@pytest.mark.timeout(300)
def test_a_hugging_face_folder_is_explained_file_by_file(tmp_path: Path) -> None:
    from onnx_studio.engine.pipeline import export
    from tests.engine.hf_models import build, write_recipe

    folder = build("bert", tmp_path / "models")
    out = tmp_path / "onnx"
    recipe_path = write_recipe(f"hf:{folder}", out, tmp_path / "hf.toml")
    recipe = recipes.load(recipe_path)
    assert export(recipe, validate=False).ok
    patched(out / "model.onnx", out / "model.onnx",
            scope_ending(out / "model.onnx", "encoder.layer.1.output.dense"))
    doc = explain(recipe, out, repro_dir=tmp_path / "repro")
    assert doc["diverges"] is True and [f["file"] for f in doc["files"]] == ["model.onnx"]
    assert doc["files"][0]["diverges"] is True
    assert "encoder.layer.1.output.dense" in doc["first_divergence"]["module"]
    assert doc["repro"]["folder"] == str(tmp_path / "repro" / "model")
    assert _run_repro(tmp_path / "repro" / "model").returncode == 1
