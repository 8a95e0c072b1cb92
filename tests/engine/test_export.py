"""onnx_studio.engine.export.exporter with real torch, onnx and onnxruntime on tiny models."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.events import Events
from onnx_studio.engine.files import FOLDER_MARKER, MARKER
from onnx_studio.engine.pipeline import export
from onnx_studio.engine.protocol import ExportReport
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
    from onnx_studio.engine.source.load import load_model

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
    from onnx_studio.engine.source.load import load_model

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
    abandoned = recipe.output_path.parent / f".killed.onnx.{MARKER}.{dead.pid}.abc.tmp"
    abandoned.mkdir()
    (abandoned / FOLDER_MARKER).write_text("onnx-studio temporary folder\n")
    (abandoned / "killed.onnx").write_bytes(b"half")
    live = recipe.output_path.parent / f".killed.onnx.{MARKER}.{os.getpid()}.xyz.tmp"
    live.mkdir()
    (live / FOLDER_MARKER).write_text("onnx-studio temporary folder\n")
    assert export(recipe).ok
    assert not abandoned.exists()
    assert live.exists()  # a live process may still be writing it
    shutil.rmtree(live)


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


# ---------------------------------------------------------------------------- causes, exporter

CAUSES_NET = '''
import torch


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > 0:
            return y * 2
        return y - 1


class Boxed:
    def __init__(self, t):
        self.t = t


class ReturnsBox(torch.nn.Module):
    def forward(self, x):
        return x * 2, Boxed(x)
'''


@pytest.fixture(scope="session")
def causes_dir(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Path:
    """causes.py, and scripted.pt: TinyNet through torch.jit.script, as torch.jit.save writes it."""
    import warnings

    from onnx_studio.engine.source.load import load_model

    folder = tmp_path_factory.mktemp("causes")
    (folder / "causes.py").write_text(CAUSES_NET)
    module = load_model(make_recipe(model_dir)).module
    with warnings.catch_warnings():  # torch 2.9+ calls torch.jit deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(module).save(str(folder / "scripted.pt"))
    return folder


def cli_json(folder: Path, *args: str) -> tuple[int, dict, str]:
    """`onnx-studio ARGS --json -v` in process: (status, document, the JSON line), after checking
    that no colour code reached the user: not in the JSON, not on standard error (progress,
    warnings, logs and the details that -v prints)."""
    import contextlib
    import io
    import json

    from onnx_studio.engine import cli

    out, err = io.StringIO(), io.StringIO()
    cwd = Path.cwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli.main([*args, "--json", "-v"])
    finally:
        os.chdir(cwd)
    line = out.getvalue().strip().splitlines()[-1]
    assert "\x1b" not in line and "\\u001b" not in line, line
    assert "\x1b" not in err.getvalue(), err.getvalue()[-2000:]
    return status, json.loads(line), line


def test_a_branch_on_a_tensor_value_names_the_line_and_the_fix_that_works(
        causes_dir: Path) -> None:
    status, doc, _ = cli_json(causes_dir, "export", "causes.py:Branchy", "-o", "branchy.onnx",
                              "--input", "x=2x4")
    error = doc["error"]
    assert status == 1 and error["kind"] == "export"
    line = CAUSES_NET.splitlines().index("        if y.sum() > 0:") + 1
    assert f"branches on a tensor's value at causes.py:{line}" in error["message"]
    assert "`if y.sum() > 0:`" in error["message"] and "This is step" not in error["message"]
    assert "torch.cond" in error["hint"] and "model.script = true" in error["hint"]
    assert "GuardOnDataDependentSymNode" in error["details"]  # the whole chain
    assert doc["exporter"] == "dynamo" and "default" in doc["exporter_reason"]
    # the hint applied: scripted, the TorchScript exporter keeps the `if` as an ONNX If
    recipe = make_recipe(causes_dir, source="causes.py:Branchy", output="branchy.onnx")
    recipe.inputs[0].dynamic, recipe.outputs = {}, []
    recipe.model.script = True
    report = export(recipe, validate=True)
    assert report.ok, report.error and report.error.message
    assert report.exporter == "torchscript" and "model.script = true" in (
        report.exporter_reason or "")
    assert report.validation is not None and report.validation.ok
    assert "If" in {n.op_type for n in onnx.load(str(recipe.output_path)).graph.node}


def test_an_output_the_exporter_cannot_flatten_is_named_with_the_fix(causes_dir: Path) -> None:
    status, doc, _ = cli_json(causes_dir, "export", "causes.py:ReturnsBox", "-o", "box.onnx",
                              "--input", "x=2x4")
    error = doc["error"]
    assert status == 1 and error["kind"] == "export"
    assert "forward() returns a Boxed" in error["message"]
    assert "return tensors" in error["hint"] and "register_pytree_node" in error["hint"]


def test_a_torchscript_archive_exports_with_the_torchscript_exporter_by_default(
        causes_dir: Path) -> None:
    status, doc, _ = cli_json(causes_dir, "export", "scripted.pt", "-o", "scripted.onnx",
                              "--input", "x=2x4", "--validate")
    assert status == 0, doc["error"]
    assert doc["exporter"] == "torchscript"
    assert doc["exporter_reason"] == "a TorchScript archive exports with the TorchScript exporter"
    assert list(doc)[:4] == ["ok", "output", "exporter", "exporter_reason"]
    assert doc["validation"]["ok"] and doc["warnings"] == []  # no notice of the tool's own
    # named, the recipe's exporter runs: dynamo cannot take a ScriptModule, and says what to do
    status, doc, _ = cli_json(causes_dir, "export", "scripted.pt", "-o", "scripted_d.onnx",
                              "--input", "x=2x4", "--exporter", "dynamo")
    assert status == 1 and doc["exporter"] == "dynamo"
    assert doc["exporter_reason"] == 'the recipe asks for it (exporter = "dynamo")'
    assert "cannot export a TorchScript module" in doc["error"]["message"]
    assert 'exporter = "torchscript"' in doc["error"]["hint"]


def test_the_exporter_follows_the_source_unless_the_recipe_names_one(causes_dir: Path) -> None:
    from onnx_studio.engine.export.exporter import choose_exporter

    def chosen(source: str, **options: object) -> tuple[str, str]:
        recipe = make_recipe(causes_dir, source=source)
        for key, value in options.items():
            target = recipe.model if key == "script" else recipe.export
            setattr(target, key, value)
        return choose_exporter(recipe)

    assert recipes.ExportOptions().exporter == "auto"
    assert chosen("causes.py:Branchy")[0] == "dynamo"
    assert chosen("scripted.pt")[0] == "torchscript"
    assert chosen("net.pt2") == ("dynamo", "a .pt2 ExportedProgram exports with the dynamo "
                                 "exporter")
    assert chosen("causes.py:Branchy", script=True)[0] == "torchscript"
    assert chosen("causes.py:Branchy", operator_export_type="ONNX_ATEN")[0] == "torchscript"
    assert chosen("scripted.pt", exporter="dynamo")[0] == "dynamo"
    assert chosen("causes.py:Branchy", exporter="torchscript")[0] == "torchscript"


def test_the_opset_is_checked_against_the_exporter_that_runs(causes_dir: Path) -> None:
    # opset 17 is below dynamo's lowest: refused for a Python module before any work ...
    recipe = make_recipe(causes_dir, source="causes.py:Branchy", output="o17.onnx", opset=17)
    report = export(recipe)
    assert report.error is not None and report.error.kind == "recipe"
    assert "dynamo exporter writes opset 18" in report.error.message
    assert "load" not in report.seconds
    # ... and written for a TorchScript archive, which "auto" exports with TorchScript
    recipe = make_recipe(causes_dir, source="scripted.pt", output="s17.onnx", opset=17)
    report = export(recipe)
    assert report.ok, report.error and report.error.message
    assert report.exporter == "torchscript" and report.opset == 17


def test_unsupported_operators_reach_the_json_without_colour(model_dir: Path) -> None:
    status, doc, _ = cli_json(model_dir, "export", "tiny.py:Unconvertible", "-o", "u.onnx",
                              "--input", "x=4x4")
    assert status == 1 and doc["error"]["kind"] == "unsupported_operator"
    assert doc["error"]["unsupported_ops"] and doc["error"]["details"]


def test_a_dynamic_shape_conflict_passes_on_torchs_suggested_fix() -> None:
    """torch.onnx usually refines such axes itself; when it cannot, torch's own error is what
    reaches the classifier (here raised by torch.export directly)."""
    from onnx_studio.engine.export import causes

    class AddsFixed(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.ones(2, 3)

    with pytest.raises(Exception) as caught:
        torch.export.export(AddsFixed(), (torch.randn(2, 3),),
                            dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    cause = causes.classify(caught.value, "dynamo")
    assert cause.kind == "export"
    assert "dynamic axes do not fit the model" in cause.message
    assert "specialized it to be a constant (2)" in cause.message
    assert "batch = 2" in cause.hint and "remove 'batch' from the dynamic axes" in cause.hint


def test_colour_codes_are_stripped_and_the_wrapper_is_not_the_message() -> None:
    from onnx_studio.engine.errors import StudioError, plain
    from onnx_studio.engine.export import causes

    coloured = "Failed. \x1b[96mThis is step 1/3\x1b[0m of \x1b[1;31mexporting\x1b[m"
    assert plain(coloured) == "Failed. This is step 1/3 of exporting"
    err = StudioError("export", coloured, coloured, details=coloured)
    assert "\x1b" not in err.message + err.hint + err.details
    try:
        try:
            raise KeyError("weight")
        except KeyError as inner:
            raise RuntimeError("Failed to export the model with torch.export. "
                               "\x1b[96mThis is step 1/3\x1b[0m of exporting") from inner
    except RuntimeError as outer:
        assert causes.real_message(outer) == "KeyError: 'weight'"
        wrapped = StudioError("export", "m")
        wrapped.__cause__ = outer
        assert "KeyError" in wrapped.details and "\x1b" not in wrapped.details


def test_exporter_warnings_carry_where_they_were_raised(model_dir: Path) -> None:
    recipe = make_recipe(model_dir, source="tiny.py:Pitfalls", output="out/pitd.onnx",
                         exporter="torchscript")
    recipe.inputs = [recipes.InputSpec(name="x", shape=[2, 3])]
    recipe.outputs = []
    report = export(recipe)
    assert report.ok, report.error and report.error.message
    tracer = [w for w in report.warnings if w.category == "TracerWarning"]
    assert tracer and all(w.details and "Raised at" in w.details for w in tracer)
    assert any("tiny.py" in (w.details or "") for w in tracer)
    assert all("\x1b" not in w.message + (w.details or "") for w in report.warnings)


def test_the_tracers_unsupported_type_names_the_cache_and_its_fix() -> None:
    """The TorchScript tracer's wording ("received an input of unsupported type", said of
    outputs too) gets the same diagnosis as dynamo's."""
    from onnx_studio.engine.export import causes

    exc = RuntimeError("Only tuples, lists and Variables are supported as JIT inputs/outputs. "
                       "Dictionaries and strings are also accepted, but their usage is not "
                       "recommended. Here, received an input of unsupported type: DynamicCache")
    cause = causes.classify(exc, "torchscript")
    assert "takes or returns a DynamicCache" in cause.message
    assert "return tensors" in cause.hint.lower()
    wrapped = RuntimeError("Failed to export the model with torch.export. This is step 1/3")
    wrapped.__cause__ = RuntimeError("Found <class 'transformers.cache_utils.DynamicCache'> in "
                                     "output, which is not a known type.")
    cause = causes.classify(wrapped, "dynamo")
    assert cause.message.startswith("forward() returns a DynamicCache")
    assert "use_cache=False" in cause.hint
