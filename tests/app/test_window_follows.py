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

from app.window import MainWindow
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
    window.form.inputs_table.table.item(row, 1).setText(text)


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
    # the inputs are named after the first class's forward() until one is picked
    assert [(s.name, s.shape) for s in session.recipe.inputs] == [("x", [1])]
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
    alpha_bytes = alpha.read_bytes()

    with qtbot.waitSignal(session.exportFinished, timeout=EXPORT_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(bar.again, Qt.MouseButton.LeftButton)
    assert blocker.args[0].ok, blocker.args[0].message
    beta = session.recipe.output_path
    assert beta.name == "beta.onnx" and beta.is_file()
    assert alpha.read_bytes() == alpha_bytes, "the first model's file is untouched"
    assert beta.read_bytes() != alpha_bytes
    assert not bar.stale and "beta.onnx" in bar.origin.text()

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
    assert "kept.onnx" in window.validate_action.toolTip()

    # the form holds Beta (inputs a, b): the file wants x; the worker's answer is shown
    with qtbot.waitSignal(session.validationFinished, timeout=EXPORT_TIMEOUT_MS) as blocker:
        window.validate_action.trigger()
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
        window.validate_action.trigger()
    outcome = blocker.args[0]
    assert outcome.validation is not None and outcome.validation.ok, outcome.message
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

    from engine import recipe as recipes

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
