"""Hugging Face folders in the window, derived from the model (issue 24 items 2 and 7, issue 23
item 2): the task picker lists the tasks the model's class supports (CLIP: zero-shot first, no
text generation); a folder with its own code says why it is refused, and once "Run this
folder's model code" is ticked its tasks are described and it exports; the Arguments field
writes model options the export applies.

Tiny random-weight models (tests/engine/hf_tiny.py), one live window per test on the module's
warm worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from onnx_studio.app.window import MainWindow
from tests.app.conftest import EXPORT_TIMEOUT_MS
from tests.engine.hf_tiny import build, custom_code_folder

pytestmark = pytest.mark.usefixtures("shared_runner")

HF_TIMEOUT_MS = 300_000  # an export on a loaded 2-core machine


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hf_window_derive")


def _tasks(window: MainWindow) -> list[str]:
    form = window.form.hf_task
    return [form.task.itemText(i) for i in range(form.task.count())]


def _export(window: MainWindow, qtbot) -> dict[str, Any]:
    button = window.form.export_bar.export_button
    assert button.isEnabled(), button.toolTip()
    with qtbot.waitSignal(window.session.exportFinished, timeout=HF_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    return blocker.args[0].final.to_dict()["report"]


@pytest.mark.timeout(600)
def test_the_task_picker_lists_what_the_class_supports(
        live_window: MainWindow, qtbot, models: Path) -> None:
    window = live_window
    assert window.open_hf_folder(build("clip", models))
    qtbot.waitUntil(lambda: window.form.hf_task.task.count() > 0, timeout=EXPORT_TIMEOUT_MS)
    tasks = _tasks(window)
    assert tasks[0] == "zero-shot-image-classification"  # CLIPModel's table comes first
    assert "feature-extraction" in tasks and "text-generation-with-past" not in tasks
    assert not window.form.model_form.trust_code.isChecked()
    assert window.form.model_form.trust_code.isVisibleTo(window)  # a Hugging Face folder: offered


@pytest.mark.timeout(900)
def test_a_folder_with_its_own_code_runs_only_once_trusted(
        live_window: MainWindow, qtbot, tmp_path: Path) -> None:
    window, session = live_window, live_window.session
    folder = custom_code_folder(tmp_path / "custom")
    assert window.open_hf_folder(folder)
    qtbot.waitUntil(lambda: session.description is not None
                    and session.description.kind == "hf", timeout=EXPORT_TIMEOUT_MS)
    description = session.description
    assert description is not None and description.error is not None
    assert "modeling_tiny.py" in description.error  # refused, named, no prompt
    assert window.form.hf_task.task.count() == 0

    box = window.form.model_form.trust_code
    assert box.isVisibleTo(window)
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton)
    assert session.recipe.model.trust_remote_code
    qtbot.waitUntil(lambda: window.form.hf_task.task.count() > 0, timeout=EXPORT_TIMEOUT_MS)
    assert _tasks(window) == ["feature-extraction"]  # from its auto_map's AutoModel
    with session.edit("options") as recipe:
        recipe.validate.enabled = True
    report = _export(window, qtbot)
    assert report["ok"], report.get("error")
    assert [i["name"] for i in report["files"][0]["graph"]["inputs"]] == ["input_ids",
                                                                         "attention_mask"]


@pytest.mark.timeout(900)
def test_the_arguments_field_applies_model_options(
        live_window: MainWindow, qtbot, models: Path) -> None:
    """`num_hidden_layers = 1` in Arguments: the config attribute the export applies (the
    cache inputs of one layer), written in the recipe's model.kwargs."""
    window, session = live_window, live_window.session
    assert window.open_hf_folder(build("llama", models))
    qtbot.waitUntil(lambda: window.form.hf_task.task.count() > 0, timeout=EXPORT_TIMEOUT_MS)
    field = window.form.model_form.kwargs
    field.setText('num_hidden_layers = 1, attn_implementation = "eager"')
    field.editingFinished.emit()
    assert session.recipe.model.kwargs == {"num_hidden_layers": 1,
                                           "attn_implementation": "eager"}
    report = _export(window, qtbot)
    assert report["ok"], report.get("error")
    inputs = [i["name"] for i in report["files"][0]["graph"]["inputs"]]
    assert [n for n in inputs if n.startswith("past_key_values")] == [
        "past_key_values.0.key", "past_key_values.0.value"]


@pytest.mark.timeout(600)
def test_fixed_sizes_export_a_dimension_at_one_size(
        live_window: MainWindow, qtbot, models: Path, tmp_path: Path) -> None:
    """The Hugging Face group's Fixed sizes (the CLI's --static-dim): a wrong entry keeps
    Export disabled saying why; `sequence_length=8` is written as [dims] and exports a file
    that takes 8 tokens at any batch size; the saved recipe shows it again when reopened."""
    window, session = live_window, live_window.session
    assert window.open_hf_folder(build("bert", models))
    qtbot.waitUntil(lambda: window.form.hf_task.task.count() > 0, timeout=EXPORT_TIMEOUT_MS)
    field = window.form.hf_task.fixed
    assert field.isVisibleTo(window) and field.text() == ""
    assert not window.form.dim_bounds.isVisibleTo(window)
    field.setText("sequence_length=0")
    field.editingFinished.emit()
    assert "Fixed sizes" in session.problems.get("dims", "")
    assert not window.form.export_bar.export_button.isEnabled()
    assert "sequence_length=0" in field.toolTip()

    field.setText("sequence_length = 8")
    field.editingFinished.emit()
    assert session.problems == {}, session.problems
    assert {n: d.size for n, d in session.recipe.dims.items()} == {"sequence_length": 8}
    with session.edit("options") as recipe:
        recipe.validate.enabled = True
    report = _export(window, qtbot)
    assert report["ok"], report.get("error")
    shapes = [i["shape"] for i in report["files"][0]["graph"]["inputs"]]
    assert shapes and all(shape == ["batch_size", 8] for shape in shapes), shapes

    saved = tmp_path / "fixed.toml"
    assert window.save_recipe_to(saved)
    field.setText("")
    field.editingFinished.emit()
    assert session.recipe.dims == {}
    assert session.open_recipe(saved)  # the edit let go
    assert window.form.hf_task.fixed.text() == "sequence_length=8"
