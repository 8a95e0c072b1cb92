"""engine.export.exporter with real torch, onnx and onnxruntime on tiny models."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from engine import recipe as recipes
from engine.events import Events
from engine.pipeline import export
from engine.protocol import ExportReport
from tests.engine.models import TINY_NET, write_models


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    write_models(folder)
    return folder


def make_recipe(folder: Path, source: str = "tiny.py:TinyNet", **export: object) -> recipes.Recipe:
    recipe = recipes.Recipe(base_dir=folder)
    recipe.model.source = source
    recipe.inputs = [recipes.InputSpec(name="x", shape=[2, 4], dynamic={0: "batch"})]
    recipe.outputs = [recipes.OutputSpec(name="y", dynamic={0: "batch"})]
    recipe.export.output = "out/tiny.onnx"
    for key, value in export.items():
        setattr(recipe.export, key, value)
    return recipe


def run_ort(path: Path, **feeds: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.fixture(scope="session")
def dynamo_export(model_dir: Path) -> tuple[recipes.Recipe, ExportReport, list[tuple]]:
    recipe = make_recipe(model_dir, output="out/dynamo.onnx")
    progress: list[tuple] = []
    report = export(recipe, Events(progress=lambda f, s: progress.append((f, s))))
    return recipe, report, progress


def test_dynamo_export_writes_a_checked_file_with_named_dynamic_axes(dynamo_export) -> None:
    recipe, report, _ = dynamo_export
    assert report.ok, report.error and report.error.message
    path = recipe.output_path
    onnx.checker.check_model(str(path))
    doc = report.to_dict()
    assert doc["graph"]["inputs"] == [{"name": "x", "dtype": "float32", "shape": ["batch", 4]}]
    assert doc["graph"]["outputs"][0]["name"] == "y"
    assert doc["graph"]["outputs"][0]["shape"] == ["batch", 3]
    assert doc["exporter"] == "dynamo" and isinstance(doc["opset"], int)
    assert set(doc["seconds"]) >= {"load", "export"}
    # the file computes what the model computes (the same seeded weights), at another batch
    from engine.source.load import load_model

    module = load_model(recipe).module
    x = np.random.default_rng(0).standard_normal((5, 4), dtype=np.float32)
    (y,) = run_ort(path, x=x)
    np.testing.assert_allclose(y, module(torch.from_numpy(x)).detach().numpy(), atol=1e-5)
    assert not list(path.parent.glob(".*.tmp")), "temporary folder left behind"


def test_progress_follows_the_exporter_stages_and_ends_at_one(dynamo_export) -> None:
    _, _, progress = dynamo_export
    stages = [s for _, s in progress]
    assert "Translate the graph into ONNX" in stages
    fractions = [f for f, _ in progress]
    assert fractions == sorted(fractions)
    assert fractions[-1] == 1.0


def test_torchscript_export_with_options(model_dir: Path) -> None:
    recipe = make_recipe(model_dir, output="out/ts.onnx", exporter="torchscript", opset=17,
                         do_constant_folding=False, keep_initializers_as_inputs=True)
    report = export(recipe)
    assert report.ok, report.error and report.error.message
    model = onnx.load(str(recipe.output_path))
    assert report.opset == 17
    graph_inputs = [i.name for i in model.graph.input]
    assert graph_inputs[0] == "x" and len(graph_inputs) > 1  # initializers kept as inputs
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def test_external_data_always_writes_a_data_file_next_to_the_model(model_dir: Path) -> None:
    recipe = make_recipe(model_dir, output="out/ext.onnx", exporter="torchscript",
                         external_data="always")
    report = export(recipe)
    assert report.ok, report.error and report.error.message
    data = recipe.output_path.with_name("ext.onnx.data")
    assert data.is_file() and data.stat().st_size > 0
    x = np.ones((1, 4), np.float32)
    assert run_ort(recipe.output_path, x=x)[0].shape == (1, 3)


def test_kwargs_reach_the_factory(model_dir: Path) -> None:
    recipe = make_recipe(model_dir, source="tiny.py:make_net", output="out/factory.onnx",
                         exporter="torchscript")
    recipe.model.kwargs = {"hidden": 5}
    report = export(recipe)
    assert report.ok, report.error and report.error.message
    model = onnx.load(str(recipe.output_path))
    shapes = sorted(tuple(i.dims) for i in model.graph.initializer)
    assert (5, 4) in shapes or (4, 5) in shapes


def test_two_outputs_are_named(model_dir: Path) -> None:
    recipe = make_recipe(model_dir, source="tiny.py:TwoHeads", output="out/two.onnx",
                         exporter="torchscript")
    recipe.inputs.append(recipes.InputSpec(name="y", shape=[3]))
    recipe.outputs = [recipes.OutputSpec(name="probs"), recipes.OutputSpec(name="mean")]
    report = export(recipe)
    assert report.ok, report.error and report.error.message
    assert report.graph is not None
    assert [o.name for o in report.graph.outputs] == ["probs", "mean"]


def test_every_unsupported_operator_is_listed_torchscript(model_dir: Path) -> None:
    recipe = make_recipe(model_dir, source="tiny.py:Unconvertible", output="out/u.onnx",
                         exporter="torchscript")
    recipe.inputs = [recipes.InputSpec(name="x", shape=[4, 4])]
    recipe.outputs = []
    report = export(recipe)
    assert not report.ok and report.error is not None
    assert report.error.kind == "unsupported_operator"
    ops = report.error.unsupported_ops
    assert ops == ["aten::linalg_eigvals", "aten::linalg_qr", "aten::real"]
    assert "linalg_qr" in report.error.message and report.error.hint
    assert not recipe.output_path.exists()


def test_every_unsupported_operator_is_listed_dynamo(model_dir: Path) -> None:
    recipe = make_recipe(model_dir, source="tiny.py:Unconvertible", output="out/ud.onnx")
    recipe.inputs = [recipes.InputSpec(name="x", shape=[4, 4])]
    recipe.outputs = []
    report = export(recipe)
    assert report.error is not None and report.error.kind == "unsupported_operator"
    assert report.error.unsupported_ops == ["aten.linalg_eig.default", "aten.linalg_qr.default"]
    assert report.error.details  # the exporter's own message is one click away


def test_a_failed_export_leaves_the_previous_good_file_untouched(model_dir: Path) -> None:
    good = make_recipe(model_dir, output="out/keep.onnx", exporter="torchscript")
    assert export(good).ok
    before = good.output_path.read_bytes()
    bad = make_recipe(model_dir, source="tiny.py:Unconvertible", output="out/keep.onnx",
                      exporter="torchscript")
    bad.inputs = [recipes.InputSpec(name="x", shape=[4, 4])]
    bad.outputs = []
    assert not export(bad).ok
    assert good.output_path.read_bytes() == before
    assert sorted(p.name for p in good.output_path.parent.glob(".keep*")) == []


def test_wrong_input_rank_is_an_inputs_error(model_dir: Path) -> None:
    recipe = make_recipe(model_dir, output="out/rank.onnx")
    recipe.inputs = [recipes.InputSpec(name="x", shape=[2, 3, 4, 5])]
    recipe.outputs = []
    report = export(recipe)
    assert report.error is not None and report.error.kind == "inputs"
    assert "x[2, 3, 4, 5]" in report.error.message
    assert "Traceback" not in report.error.message


def test_output_under_a_regular_file_is_refused_before_work(model_dir: Path,
                                                           tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("not a folder")
    recipe = make_recipe(model_dir)
    recipe.export.output = str(tmp_path / "blocker" / "m.onnx")
    report = export(recipe)
    assert report.error is not None and report.error.kind == "write"
    assert report.error.exit_code == 2
    assert "blocker" in report.error.message and "not a folder" in report.error.message


def test_absent_cuda_is_an_inputs_error_before_any_work(model_dir: Path) -> None:
    if torch.cuda.is_available():  # pragma: no cover - this machine has no GPU
        pytest.skip("a GPU is present")
    recipe = make_recipe(model_dir, output="out/cuda.onnx", device="cuda")
    report = export(recipe)
    assert report.error is not None and report.error.kind == "inputs"
    assert "cpu" in report.error.message
    assert "load" not in report.seconds


def test_pitfalls_in_the_source_become_warnings_with_lines(model_dir: Path) -> None:
    recipe = make_recipe(model_dir, source="tiny.py:Pitfalls", output="out/pit.onnx",
                         exporter="torchscript")
    recipe.inputs = [recipes.InputSpec(name="x", shape=[2, 3])]
    recipe.outputs = []
    report = export(recipe)
    assert report.ok, report.error and report.error.message
    messages = {w.message.split(" ")[0] + "|" + w.source.rsplit("/", 1)[-1]
                for w in report.warnings if w.category == "ExportPitfall"}
    text = " ".join(w.message for w in report.warnings)
    assert "`.data`" in text and "`.item()`" in text and "real = real + ..." in text
    line = TINY_NET.splitlines().index("        real += 2") + 1
    assert any(m.endswith(f"tiny.py:{line}") for m in messages)
    tracer = [w for w in report.warnings if w.category == "TracerWarning"]
    assert tracer and all(w.source.endswith(".py:" + w.source.rsplit(":", 1)[1])
                          for w in tracer)
    assert any("tiny.py" in w.source for w in tracer)
    assert all(w.hint for w in tracer), tracer  # each says what to change


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_an_exported_program_file_exports_with_both_exporters(model_dir: Path, tmp_path: Path,
                                                              exporter: str) -> None:
    from engine.source.load import load_model

    module = load_model(make_recipe(model_dir)).module
    program = torch.export.export(module, (torch.randn(2, 4),))
    torch.export.save(program, tmp_path / "net.pt2")
    recipe = make_recipe(tmp_path, source="net.pt2", output=f"{exporter}.onnx",
                         exporter=exporter)
    recipe.inputs[0].dynamic = {}
    recipe.outputs[0].dynamic = {}
    report = export(recipe)
    assert report.ok, report.error and report.error.message
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(run_ort(recipe.output_path, x=x)[0],
                               module(torch.from_numpy(x)).detach().numpy(), atol=1e-5)


def test_a_temp_folder_left_by_a_killed_export_is_cleaned_up(model_dir: Path) -> None:
    import subprocess

    recipe = make_recipe(model_dir, output="out/killed.onnx", exporter="torchscript")
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs, like a worker killed by Cancel
    recipe.output_path.parent.mkdir(parents=True, exist_ok=True)
    abandoned = recipe.output_path.parent / f".killed.onnx.{dead.pid}.abc.tmp"
    abandoned.mkdir()
    (abandoned / "killed.onnx").write_bytes(b"half")
    live = recipe.output_path.parent / f".killed.onnx.{os.getpid()}.xyz.tmp"
    live.mkdir()
    assert export(recipe).ok
    assert not abandoned.exists()
    assert live.exists()  # a live process may still be writing it
    live.rmdir()


def test_pitfalls_of_classes_the_model_does_not_use_are_not_reported(model_dir: Path) -> None:
    recipe = make_recipe(model_dir, output="out/clean.onnx", exporter="torchscript")
    report = export(recipe)
    assert report.ok
    assert [w for w in report.warnings if w.category == "ExportPitfall"] == []


def test_dynamo_output_axes_get_the_recipe_names_or_a_warning(tmp_path: Path) -> None:
    from tests.engine.models import SHAPES_NET

    (tmp_path / "shapes.py").write_text(SHAPES_NET)
    recipe = make_recipe(tmp_path, source="shapes.py:Shapes", output="shapes.onnx")
    recipe.inputs = [recipes.InputSpec(name="x", shape=[3, 4], dynamic={0: "batch"})]
    recipe.outputs = [recipes.OutputSpec(name="flat", dynamic={0: "n"}),
                      recipes.OutputSpec(name="total", dynamic={0: "k"})]
    report = export(recipe)
    assert report.ok, report.error and report.error.message
    assert report.graph is not None
    assert [o.shape for o in report.graph.outputs] == [["n"], [4]]
    fixed = [w.message for w in report.warnings if w.category == "DynamicShape"]
    assert len(fixed) == 1 and "'total' axis 0" in fixed[0] and "fixed at 4" in fixed[0]
    (flat, _) = run_ort(recipe.output_path, x=np.ones((5, 4), np.float32))
    assert flat.shape == (20,)


@pytest.fixture(scope="session")
def train_mode_pickle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A whole module with BatchNorm and Dropout, saved while in train mode."""
    folder = tmp_path_factory.mktemp("train_mode")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3),
                                torch.nn.Dropout(0.5)).train()
    with torch.no_grad():
        model(torch.randn(8, 4))  # running statistics that are not the initial zeros
    torch.save(model, folder / "net.pt")
    return folder


def _training_ops(path: Path) -> tuple[bool, bool]:
    """(a Dropout node, a BatchNormalization node with training_mode=1) in the file."""
    graph = onnx.load(str(path)).graph
    dropout = any(n.op_type == "Dropout" for n in graph.node)
    batch_stats = any(n.op_type == "BatchNormalization" and any(
        a.name == "training_mode" and a.i == 1 for a in n.attribute) for n in graph.node)
    return dropout, batch_stats


def test_preserve_keeps_the_train_mode_a_module_was_saved_in(train_mode_pickle: Path) -> None:
    stats = {}
    for training, expected in (("preserve", (True, True)), ("eval", (False, False)),
                               ("train", (True, True))):
        recipe = make_recipe(train_mode_pickle, source="net.pt", output=f"{training}.onnx",
                             exporter="torchscript", training=training)
        recipe.model.trust_pickle = True
        report = export(recipe, validate=False)
        assert report.ok, report.error and report.error.message
        assert _training_ops(recipe.output_path) == expected, training
        stats[training] = {i.name: onnx.numpy_helper.to_array(i)
                           for i in onnx.load(str(recipe.output_path)).graph.initializer}
    # Tracing in train mode updates BatchNorm statistics once, as with "train"; the check run
    # before the export must not add an update of its own (it runs in eval mode).
    np.testing.assert_array_equal(stats["preserve"]["1.running_mean"],
                                  stats["train"]["1.running_mean"])
