"""Structured inputs through the form: a dict input, a kwargs-only model and a bool flag, each
set up in the window (source typed, rows edited, kinds and keywords from forward()'s
signature), exported and validated by the real worker."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from PySide6.QtCore import Qt

from onnx_studio.app.window import MainWindow
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.source.arguments import spec_for
from tests.app.conftest import export_and_wait
from tests.engine.test_structured_inputs import MODELS


@pytest.fixture
def window(live_window: MainWindow) -> MainWindow:
    return live_window


def open_model(window: MainWindow, qtbot, folder: Path, name: str) -> None:
    """Type models.py into the source field and pick class `name` from the file's list, as a
    user would; wait until the inputs are named after its forward()."""
    (folder / "models.py").write_text(MODELS)
    start = recipes.Recipe(base_dir=folder)  # no model yet: the user types it below
    start.export.output = "out.onnx"
    start.validate.enabled, start.validate.random_trials = True, 1
    window.session.set_recipe(start)
    qtbot.waitUntil(lambda: window.session.runner.ready_info is not None, timeout=60_000)
    form = window.form.model_form
    form.source.setText("models.py")
    form.source.editingFinished.emit()
    qtbot.waitUntil(lambda: len(form.candidates.findItems(f"{name}(", Qt.MatchFlag.MatchStartsWith))
                    > 0, timeout=30_000)
    item = form.candidates.findItems(f"{name}(", Qt.MatchFlag.MatchStartsWith)[0]
    form.candidates.itemClicked.emit(item)  # the user picks the class in the file's list
    def named() -> bool:  # described, and the inputs named after forward()
        description = window.session.description
        chosen = [c for c in description.candidates if c.name == name] if description else []
        return bool(chosen) and [s.name for s in window.session.recipe.inputs] == [
            p.name for p in chosen[0].signature if spec_for(p) is not None]

    qtbot.waitUntil(named, timeout=30_000)


def set_cell(window: MainWindow, row: int, col: int, text: str) -> None:
    item = window.form.inputs_table.table.item(row, col)
    assert item is not None
    item.setText(text)  # itemChanged: the table reads the row into the recipe


def select(window: MainWindow, row: int) -> None:
    window.form.inputs_table.table.selectRow(row)
    assert window.form.argument_editor.row() == row


def export_ok(window: MainWindow, qtbot) -> dict:
    assert not window.session.problems, window.session.problems
    message = export_and_wait(window, qtbot)
    report = message["report"]
    assert report["ok"], report["error"]
    assert report["validation"]["ok"], report["validation"]
    return report


def test_dict_input_from_the_form(window: MainWindow, qtbot, tmp_path: Path) -> None:
    open_model(window, qtbot, tmp_path, "DictInput")
    assert [s.name for s in window.session.recipe.inputs] == ["inputs"]
    set_cell(window, 0, 0, "inputs.features")
    set_cell(window, 0, 1, "2x4")
    set_cell(window, 0, 5, "0=batch")
    qtbot.mouseClick(window.form.inputs_table.add_button, Qt.MouseButton.LeftButton)
    set_cell(window, 1, 0, "inputs.scale")
    set_cell(window, 1, 1, "3")
    report = export_ok(window, qtbot)
    assert [i["name"] for i in report["graph"]["inputs"]] == ["inputs.features", "inputs.scale"]
    assert report["graph"]["inputs"][0]["shape"][0] == "batch"


def test_kwargs_only_model_from_the_form(window: MainWindow, qtbot, tmp_path: Path) -> None:
    open_model(window, qtbot, tmp_path, "KwargsOnly")
    editor = window.form.argument_editor
    for row, shape in ((0, "2x3x8"), (1, "2x5x8")):
        set_cell(window, row, 1, shape)
        select(window, row)
        assert editor.from_forward.isEnabled()
        qtbot.mouseClick(editor.from_forward, Qt.MouseButton.LeftButton)
        assert editor.keyword.isChecked()  # keyword-only in forward()
    assert [s.keyword for s in window.session.recipe.inputs] == [True, True]
    report = export_ok(window, qtbot)
    assert [i["name"] for i in report["graph"]["inputs"]] == ["query", "key"]


def test_bool_flag_and_bounds_from_the_form(window: MainWindow, qtbot, tmp_path: Path) -> None:
    open_model(window, qtbot, tmp_path, "Flagged")
    recipe = window.session.recipe
    # constants from forward()'s defaults; `mask=None` left out (forward() does without it)
    assert [(s.name, s.kind, s.const) for s in recipe.inputs] == [
        ("x", "tensor", None), ("use_relu", "bool", False), ("mode", "str", "sum"),
        ("eps", "float", 0.0)]
    set_cell(window, 0, 1, "4x4")
    set_cell(window, 0, 5, "0=batch")
    editor = window.form.argument_editor
    select(window, 2)
    editor.kind.setCurrentIndex(editor.kind.findData("int"))  # changed, then back to forward()'s
    assert (recipe.inputs[2].kind, recipe.inputs[2].const) == ("int", 0)
    qtbot.mouseClick(editor.from_forward, Qt.MouseButton.LeftButton)
    assert [(s.kind, s.const) for s in recipe.inputs[1:]] == [
        ("bool", False), ("str", "sum"), ("float", 0.0)]
    table = window.form.inputs_table.table
    shape_cell = table.item(1, 1)
    assert shape_cell is not None and not shape_cell.flags() & Qt.ItemFlag.ItemIsEditable
    dtype_combo = table.cellWidget(1, 2)
    assert dtype_combo is not None and not dtype_combo.isEnabled()  # a constant has no dtype
    select(window, 1)
    assert editor.values.currentWidget() is editor.bool_value
    editor.bool_value.click()  # the flag on
    assert recipe.inputs[1].const is True
    select(window, 3)
    editor.float_value.setValue(0.25)
    assert recipe.inputs[3].const == 0.25
    bounds = window.form.dim_bounds
    assert bounds.isVisible() and bounds.names() == ["batch"]
    bounds.spin(0, 1).setValue(2)
    bounds.spin(0, 2).setValue(5)
    assert recipe.dims["batch"] == recipes.DimSpec(2, 5)
    report = export_ok(window, qtbot)
    assert [i["name"] for i in report["graph"]["inputs"]] == ["x"]
    ops = {n.op_type for n in onnx.load(report["output"]).graph.node}
    assert "Relu" in ops  # the flag set in the form reached forward()
    validation = report["validation"]
    tried = sorted(t["sizes"]["batch"] for t in validation["trials"]
                   if t["kind"] == "dynamic-size")
    assert tried == [2, 5]
    assert [(n["dim"], n["size"]) for n in validation["not_tried"]] == [("batch", 6)]
    # a wrong bound is marked in the form and blocks the export
    bounds.spin(0, 1).setValue(6)
    assert "dims.batch" in window.session.problems
    assert not window.form.export_bar.export_button.isEnabled()
