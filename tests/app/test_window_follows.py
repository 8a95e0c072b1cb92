"""The form follows the model, and the results say what made them (issue 13, items 1 and 2).

A user opens a file with two models, exports the first, picks the second: the form follows
(inputs, output names, output file), the results are marked stale in place, Export again
writes the second model's own file. An .onnx opened from the File menu becomes the session's
file: Summary, Graph, and Validate check it with the form's inputs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QListWidget

from onnx_studio.app.window import MainWindow
from tests.app.conftest import EXPORT_TIMEOUT_MS, export_and_wait

pytestmark = pytest.mark.usefixtures("shared_runner")

TWO_MODELS = '''
import torch


class Alpha(torch.nn.Module):
    """Three features out of four."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


class Beta(torch.nn.Module):
    """Two tensors mixed."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, a, b):
        return self.fc(a * b + 1)
'''


@pytest.fixture
def window(live_window: MainWindow) -> MainWindow:
    return live_window


def click_candidate(window: MainWindow, qtbot, name: str) -> None:
    candidates: QListWidget = window.form.model_form.candidates
    row = next(i for i in range(candidates.count())
               if candidates.item(i).text().startswith(f"{name}("))
    rect = candidates.visualItemRect(candidates.item(row))
    qtbot.mouseClick(candidates.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def set_shape(window: MainWindow, row: int, text: str) -> None:
    item = window.form.inputs_table.table.item(row, 1)
    assert item is not None
    item.setText(text)


def two_models(folder: Path) -> Path:
    path = folder / "two_models.py"
    path.write_text(TWO_MODELS, encoding="utf-8")
    return path


def test_picking_another_model_rebuilds_the_form_and_marks_results_stale(
        window: MainWindow, qtbot, tmp_path: Path) -> None:
    session, bar = window.session, window.provenance
    assert window.open_path(two_models(tmp_path))
    qtbot.waitUntil(lambda: window.form.model_form.candidates.count() == 2,
                    timeout=EXPORT_TIMEOUT_MS)
    # another file: the previous model's inputs (image) and output names (logits) are gone;
    # the inputs are named after the first class's forward() until one is picked, the
    # shape guessed from its first layer, Linear(4, 3)
    assert [(s.name, s.shape) for s in session.recipe.inputs] == [("x", [1, 4])]
    assert session.recipe.outputs == []

    click_candidate(window, qtbot, "Alpha")
    assert session.recipe.model.source.endswith("two_models.py:Alpha")
    assert [s.name for s in session.recipe.inputs] == ["x"]
    assert window.form.model_form.forward_label.text() == "forward(x)"
    assert Path(window.form.export_bar.output.text()).name == "alpha.onnx"
    set_shape(window, 0, "2, 4")
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message["report"]["error"]
    alpha = session.recipe.output_path
    assert alpha.is_file()
    window.tabs.setCurrentWidget(window.tabs.summary)
    assert not bar.stale and "alpha.onnx" in bar.origin.text()
    assert "two_models.py:Alpha" in bar.origin.text(), "names the recipe that made it"
    assert window.minimumSizeHint().width() <= 1024, "a long path never widens the window"

    click_candidate(window, qtbot, "Beta")
    assert session.recipe.model.source.endswith("two_models.py:Beta")
    assert [s.name for s in session.recipe.inputs] == ["a", "b"]
    assert session.recipe.inputs[0].shape == [2, 4], "the tensor in that place keeps its shape"
    assert window.form.model_form.forward_label.text() == "forward(a, b)"
    assert Path(window.form.export_bar.output.text()).name == "beta.onnx", \
        "the output file follows the model: Alpha's file is not overwritten"
    set_shape(window, 1, "2, 4")
    # the Summary still shows Alpha's export, marked stale in place
    assert bar.stale and "form has changed" in bar.stale_text.text()
    assert "alpha.onnx" in bar.origin.text()
    assert bar.again.text() == "Export again"
    export_bar = window.form.export_bar  # says the same as the header, not the last job's words
    assert export_bar.progress.format() == "Out of date"
    assert "form has changed" in export_bar.stage.text()
    alpha_bytes = alpha.read_bytes()

    with qtbot.waitSignal(session.exportFinished, timeout=EXPORT_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(bar.again, Qt.MouseButton.LeftButton)
    assert blocker.args[0].ok, blocker.args[0].message
    beta = session.recipe.output_path
    assert beta.name == "beta.onnx" and beta.is_file()
    assert alpha.read_bytes() == alpha_bytes, "the first model's file is untouched"
    assert beta.read_bytes() != alpha_bytes
    assert not bar.stale and "beta.onnx" in bar.origin.text()
    assert export_bar.progress.format() != "Out of date"

    # a file name the user typed stays when the model changes
    output = window.form.export_bar.output
    output.setText("mine.onnx")
    output.editingFinished.emit()
    click_candidate(window, qtbot, "Alpha")
    assert window.form.export_bar.output.text() == "mine.onnx"
    assert [s.name for s in session.recipe.inputs] == ["x"]


def test_an_opened_onnx_is_the_session_s_file(window: MainWindow, qtbot,
                                              tmp_path: Path) -> None:
    session, bar = window.session, window.provenance
    assert window.open_path(two_models(tmp_path))
    qtbot.waitUntil(lambda: window.form.model_form.candidates.count() == 2,
                    timeout=EXPORT_TIMEOUT_MS)
    click_candidate(window, qtbot, "Alpha")
    set_shape(window, 0, "2, 4")
    export_and_wait(window, qtbot)
    alpha = session.recipe.output_path.resolve()
    kept = tmp_path / "kept.onnx"
    kept.write_bytes(alpha.read_bytes())
    click_candidate(window, qtbot, "Beta")
    set_shape(window, 1, "2, 4")

    assert window.open_path(kept)
    summary = window.tabs.summary
    assert window.tabs.currentWidget() is summary
    assert "Opened kept.onnx" in summary.status.text()
    assert "x float32 [2, 4]" in summary.facts.toPlainText(), "what the file holds (inspect)"
    assert "kept.onnx" in bar.origin.text() and "opened" in bar.origin.text()
    assert window.tabs.graph.loaded_path == kept.resolve()
    assert session.validate_target == kept.resolve()
    assert "kept.onnx" in window.menus.validate.toolTip()

    # the form holds Beta (inputs a, b): the file wants x; the worker's answer is shown
    with qtbot.waitSignal(session.validationFinished, timeout=EXPORT_TIMEOUT_MS) as blocker:
        window.menus.validate.trigger()
    outcome = blocker.args[0]
    assert outcome.onnx == kept.resolve()
    assert not (outcome.validation is not None and outcome.validation.ok)
    tab = window.tabs.validation
    assert window.tabs.currentWidget() is tab
    shown = tab.verdict.text() + tab.message.text()
    assert "fail" in shown.lower() or "not" in shown.lower(), shown

    # with Alpha in the form, the same file validates
    click_candidate(window, qtbot, "Alpha")
    set_shape(window, 0, "2, 4")
    assert session.validate_target == kept.resolve()
    with qtbot.waitSignal(session.validationFinished, timeout=EXPORT_TIMEOUT_MS) as blocker:
        window.menus.validate.trigger()
    outcome = blocker.args[0]
    assert outcome.validation is not None and outcome.validation.ok, outcome.error
    assert "Validation passed" in tab.verdict.text()
    assert "kept.onnx" in bar.origin.text() and not bar.stale


PICKLED_NET = '''
import torch


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
'''


def test_a_working_folder_loads_a_pickled_module_beside_its_py(
        window: MainWindow, qtbot, tmp_path: Path) -> None:
    import subprocess
    import sys

    from onnx_studio.engine import recipe as recipes

    project = tmp_path / "project"
    project.mkdir()
    (project / "net.py").write_text(PICKLED_NET, encoding="utf-8")
    subprocess.run([sys.executable, "-c", "import torch, net; torch.save(net.Net(), 'whole.pt')"],
                   cwd=project, check=True, timeout=120)
    recipe_file = tmp_path / "recipes" / "whole.toml"
    recipe_file.parent.mkdir()
    recipe_file.write_text('version = 1\n[model]\nsource = "../project/whole.pt"\n'
                           'trust_pickle = true\n[[inputs]]\nname = "x"\nshape = [2, 4]\n'
                           '[export]\noutput = "whole.onnx"\n', encoding="utf-8")
    assert window.open_path(recipe_file)
    message = export_and_wait(window, qtbot)
    error = message["report"]["error"]
    assert error is not None and "net" in error["message"], error

    field = window.form.model_form.workdir
    field.setText("../project")
    field.editingFinished.emit()
    assert window.session.recipe.model.workdir == "../project"
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message["report"]["error"]
    assert (recipe_file.parent / "whole.onnx").is_file()
    # saved with the recipe; a recipe without the field reads as before
    assert window.save_recipe_to(recipe_file)
    assert recipes.load(recipe_file).model.workdir == "../project"
    field.setText("missing")
    field.editingFinished.emit()
    assert "model.workdir" in window.session.problems
    assert not window.form.export_bar.export_button.isEnabled()


def test_a_typed_class_name_names_the_inputs_after_that_class(
        window: MainWindow, qtbot, tmp_path: Path) -> None:
    """Typing `file.py:Beta` (not picking it from the list) names the inputs after Beta's
    forward(a, b), not after the file's first class."""
    path = two_models(tmp_path)
    field = window.form.model_form.source
    field.setFocus()
    field.setText(f"{path}:Beta")
    field.editingFinished.emit()
    qtbot.waitUntil(lambda: [s.name for s in window.session.recipe.inputs] == ["a", "b"],
                    timeout=EXPORT_TIMEOUT_MS)
    assert window.session.recipe.model.source.endswith(":Beta")


# ---------------------------------------------------------------------------- inputs from forward()

SIGNATURE_MODEL = '''
import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self, channels: int = 3) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, 4, 3, padding=1)

    def forward(self, image: torch.Tensor, scale: float = 0.5, flip: bool = False,
                mask: torch.Tensor | None = None, *, steps: int = 2) -> torch.Tensor:
        out = self.conv(image) * scale
        if flip:
            out = out.flip(-1)
        return out * steps
'''

# a .pt2 with a dynamic batch shared by two inputs, and a scripted TorchScript archive
ARCHIVES = '''
import sys
import torch


class Mixer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, scale: float = 2.0) -> torch.Tensor:
        return self.fc(x) * scale + mask.sum(1, keepdim=True)


batch = torch.export.Dim("batch")
program = torch.export.export(Mixer(), (torch.randn(2, 4), torch.ones(2, 5, dtype=torch.int64)),
                              dynamic_shapes=({0: batch}, {0: batch}))
torch.export.save(program, sys.argv[1] + "/mixer.pt2")


class Scripted(Mixer):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + mask.sum(1, keepdim=True)


torch.jit.script(Scripted()).save(sys.argv[1] + "/mixer_scripted.pt")
'''


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mixer.pt2 and mixer_scripted.pt, written by torch in a child process."""
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("archives")
    script = folder / "make_archives.py"  # torch.jit.script reads the class's source file
    script.write_text(ARCHIVES, encoding="utf-8")
    subprocess.run([sys.executable, str(script), str(folder)], check=True, timeout=120)
    return folder


def rows(window: MainWindow) -> list[tuple]:
    return [(s.name, s.kind, s.shape if s.is_tensor else s.const, s.dtype if s.is_tensor else "",
             s.keyword) for s in window.session.recipe.inputs]


def test_a_py_class_s_inputs_come_from_forward_s_annotations_and_defaults(
        window: MainWindow, qtbot, tmp_path: Path) -> None:
    """A Tensor parameter is a tensor shaped for the first layer (Conv2d(3, ...)); float,
    bool and int parameters with defaults are constants (a keyword-only one by keyword);
    `Optional[Tensor] = None` is left out; the export runs with them."""
    path = tmp_path / "gate.py"
    path.write_text(SIGNATURE_MODEL, encoding="utf-8")
    assert window.open_path(path)
    qtbot.waitUntil(lambda: bool(window.session.recipe.inputs), timeout=EXPORT_TIMEOUT_MS)
    assert window.session.recipe.model.source.endswith("gate.py:Gate")
    assert rows(window) == [("image", "tensor", [1, 3, 32, 32], "float32", False),
                            ("scale", "float", 0.5, "", False),
                            ("flip", "bool", False, "", False),
                            ("steps", "int", 2, "", True)]
    table = window.form.inputs_table.table
    shape = table.item(0, 1)
    assert table.rowCount() == 4 and shape is not None and shape.text() == "1x3x32x32"
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message["report"]["error"]
    inputs = message["report"]["graph"]["inputs"]
    assert [(i["name"], i["shape"]) for i in inputs] == [("image", [1, 3, 32, 32])]


def test_a_pt2_fills_shapes_dtypes_and_dynamic_axes_from_its_program(
        window: MainWindow, qtbot, archives: Path) -> None:
    """Read from the archive's JSON, never by loading it: each input's shape, dtype and
    dynamic axes (the same symbol on both: one dimension, "batch"); the export keeps it."""
    assert window.open_path(archives / "mixer.pt2")
    qtbot.waitUntil(lambda: [s.name for s in window.session.recipe.inputs] == ["x", "mask"],
                    timeout=EXPORT_TIMEOUT_MS)
    assert rows(window) == [("x", "tensor", [2, 4], "float32", False),
                            ("mask", "tensor", [2, 5], "int64", False)]
    assert [s.dynamic for s in window.session.recipe.inputs] == [{0: "batch"}, {0: "batch"}]
    assert window.form.model_form.forward_label.text() == "forward(x, mask)"
    assert Path(window.form.export_bar.output.text()).name == "mixer.onnx"
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message["report"]["error"]
    shapes = [i["shape"] for i in message["report"]["graph"]["inputs"]]
    assert shapes == [["batch", 4], ["batch", 5]]


def test_a_torchscript_archive_fills_its_recorded_types_and_drops_dynamo_choices(
        window: MainWindow, qtbot, archives: Path) -> None:
    """A scripted module records forward()'s types (and Linear's in_features): two tensors
    shaped for Linear(4, 3). It forces the TorchScript exporter, so an
    explicit dynamo and the per-node comparison (dynamo only) are let go; the export runs."""
    options = window.form.options_form
    options.exporter.setCurrentIndex(options.exporter.findData("dynamo"))
    options.intermediates.setChecked(True)
    assert window.session.recipe.export.exporter == "dynamo"
    assert window.session.recipe.validate.intermediates

    assert window.open_path(archives / "mixer_scripted.pt")
    qtbot.waitUntil(lambda: [s.name for s in window.session.recipe.inputs] == ["x", "mask"],
                    timeout=EXPORT_TIMEOUT_MS)
    assert rows(window) == [("x", "tensor", [1, 4], "float32", False),
                            ("mask", "tensor", [1, 4], "float32", False)]
    recipe = window.session.recipe
    assert recipe.export.exporter == "auto" and not recipe.validate.intermediates
    assert options.exporter.currentData() == "auto" and not options.intermediates.isChecked()
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message["report"]["error"]
    assert message["report"]["exporter"] == "torchscript"
