"""The form side of the window without a worker: validation marks, options, recipes, settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QMessageBox

from onnx_studio.app import settings as settings_mod
from onnx_studio.app.form.options_form import FALLBACK_CAPABILITIES
from onnx_studio.app.window import MainWindow
from onnx_studio.engine import dirs, shipped
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.protocol import DevicesResult, WarningItem
from onnx_studio.engine.recipe import to_toml
from tests.app.conftest import example_index
from tests.conftest import REPO


@pytest.fixture
def window(qtbot):
    w = MainWindow(settings_mod.Settings(), None, start_worker=False)
    qtbot.addWidget(w)
    w.load_initial(None)
    w.show()
    return w


def set_cell(window: MainWindow, row: int, col: int, text: str) -> None:
    window.form.inputs_table.table.item(row, col).setText(text)


def export_enabled(window: MainWindow) -> bool:
    return window.form.export_bar.export_button.isEnabled()


def test_opens_with_an_example_that_can_be_exported(window: MainWindow) -> None:
    assert window.windowTitle().endswith("ONNX Export Studio")
    assert window.session.recipe.model.source, "an example recipe is loaded"
    assert window.session.problems == {}
    assert window.form.export_bar.export_button.isEnabled()
    assert window.form.inputs_table.table.rowCount() == len(window.session.recipe.inputs) >= 1


def test_bad_shape_disables_export_with_the_reason(window: MainWindow) -> None:
    set_cell(window, 0, 1, "2x-3")
    assert window.session.recipe.inputs[0].shape == [2, -3]
    assert not window.form.export_bar.export_button.isEnabled()
    reason = window.form.export_bar.export_button.toolTip()
    assert "inputs[0].shape" in reason and "negative" in reason
    label = window.form.export_bar.problem_label
    assert "negative" in label.text() and label.isVisible()
    assert "negative" in window.form.inputs_table.table.item(0, 1).toolTip()

    set_cell(window, 0, 1, "2xabc")
    assert not window.form.export_bar.export_button.isEnabled()
    assert "is not a shape" in window.form.export_bar.export_button.toolTip()

    set_cell(window, 0, 1, "1x3x16x16")
    assert window.session.recipe.inputs[0].shape == [1, 3, 16, 16]
    assert export_enabled(window), window.form.export_bar.export_button.toolTip()
    assert window.form.inputs_table.table.item(0, 1).toolTip() != ""  # the plain hint is back


def test_duplicate_names_and_dynamic_axis_beyond_rank(window: MainWindow) -> None:
    window.form.inputs_table.add_row()
    set_cell(window, 1, 0, window.session.recipe.inputs[0].name)
    assert not window.form.export_bar.export_button.isEnabled()
    assert "used twice" in window.form.export_bar.export_button.toolTip()
    window.form.inputs_table.table.selectRow(1)
    window.form.inputs_table.remove_row()
    assert window.form.export_bar.export_button.isEnabled()

    set_cell(window, 0, 5, "0=batch, 9=width")
    assert "beyond the input's rank" in window.form.export_bar.export_button.toolTip()
    set_cell(window, 0, 5, "0=batch, x")
    assert "axis=name" in window.form.export_bar.export_button.toolTip()
    set_cell(window, 0, 5, "0=batch")
    assert window.form.export_bar.export_button.isEnabled()


def test_missing_model_file_is_marked(window: MainWindow, tmp_path: Path) -> None:
    window.form.model_form.set_source(str(tmp_path / "nope.py") + ":Net")
    assert not window.form.export_bar.export_button.isEnabled()
    assert "does not exist" in window.form.export_bar.export_button.toolTip()
    assert "does not exist" in window.form.model_form.source.toolTip()
    assert window.form.model_form.source.styleSheet(), "the field is tinted"


def test_shared_dynamic_names_are_visible(window: MainWindow) -> None:
    window.form.inputs_table.add_row()
    set_cell(window, 1, 5, "0=batch")
    set_cell(window, 0, 5, "0=batch")
    text = window.form.inputs_table.shared.text()
    assert "batch" in text and window.session.recipe.inputs[1].name in text
    assert "shared" in window.form.inputs_table.table.item(1, 5).toolTip()


def test_operator_export_type_only_for_torchscript(window: MainWindow) -> None:
    options = window.form.options_form
    options.exporter.setCurrentText("dynamo")
    assert not options.export_type.isEnabled()
    options.exporter.setCurrentText("torchscript")
    assert options.export_type.isEnabled()
    assert window.session.recipe.export.exporter == "torchscript"
    # the opset list follows the exporter: the torchscript exporter writes up to 20
    values = [options.opset.itemData(i) for i in range(options.opset.count())]
    assert max(v for v in values if v) == 20
    options.export_type.setCurrentText("ONNX_ATEN_FALLBACK")
    assert window.session.recipe.export.operator_export_type == "ONNX_ATEN_FALLBACK"
    assert window.form.export_bar.export_button.isEnabled()


def test_opset_above_onnxruntime_warns(window: MainWindow) -> None:
    options = window.form.options_form
    window.session.set_capabilities(DevicesResult(  # what a worker with a GPU would say
        id=None, devices=["cpu", "cuda:0"], opsets=FALLBACK_CAPABILITIES.opsets,
        default_opset=FALLBACK_CAPABILITIES.default_opset, ort_max_opset=21, torch=""))
    assert [options.device.itemText(i) for i in range(options.device.count())] == ["cpu",
                                                                                   "cuda:0"]
    options.opset.setCurrentIndex(options.opset.findData(23))
    assert window.session.recipe.export.opset == 23
    assert options.opset_warning.isVisible()
    assert "above 21" in options.opset_warning.text()
    options.opset.setCurrentIndex(options.opset.findData(21))
    assert not options.opset_warning.isVisible()


def test_save_and_open_round_trip(window: MainWindow, tmp_path: Path, qtbot) -> None:
    set_cell(window, 0, 1, "3x3x20x20")
    window.form.inputs_table.add_row()
    set_cell(window, 1, 4, "value=5")
    combo = window.form.inputs_table.table.cellWidget(1, 3)
    assert isinstance(combo, QComboBox)
    combo.setCurrentText("full")
    window.form.options_form.opset.setCurrentIndex(window.form.options_form.opset.findData(19))
    window.form.model_form.kwargs.setText("num_classes = 7")
    window.form.model_form.kwargs.editingFinished.emit()
    assert window.session.problems == {}, window.session.problems
    path = tmp_path / "sub" / "saved.toml"
    path.parent.mkdir()
    assert window.save_recipe_to(path)
    assert path.read_text(encoding="utf-8") == to_toml(window.session.recipe)

    other = MainWindow(settings_mod.Settings(), None, start_worker=False)
    qtbot.addWidget(other)
    assert other.open_path(path)
    assert other.session.recipe == window.session.recipe
    assert to_toml(other.session.recipe) == path.read_text(encoding="utf-8")
    opened = other.session.recipe
    assert opened.inputs[1].fill == "full" and opened.inputs[1].value == 5
    assert opened.export.opset == 19 and opened.model.kwargs == {"num_classes": 7}
    assert other.form.inputs_table.table.item(0, 1).text() == "3x3x20x20"
    # relative paths in the saved file still reach the model
    assert recipes.load(path).resolve(opened.model.source.rpartition(":")[0]).is_file()
    assert other.session.recipe_path == path.resolve()
    assert str(path.resolve()) in other.settings.recent_recipes


def test_broken_recipe_is_reported_and_the_form_kept(window: MainWindow, tmp_path: Path) -> None:
    before = to_toml(window.session.recipe)
    bad = tmp_path / "bad.toml"
    bad.write_text("version = 1\n[model\n", encoding="utf-8")
    assert not window.open_path(bad)
    assert window.form.banner.isVisible() and "not valid TOML" in window.form.banner.label.text()
    assert to_toml(window.session.recipe) == before


def test_corrupt_settings_are_backed_up_and_reported_once(qtbot) -> None:
    path = settings_mod.settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{ not toml", encoding="utf-8")
    settings, notice = settings_mod.load()
    assert notice and "damaged" in notice
    assert settings == settings_mod.Settings()
    (backup,) = path.parent.glob(path.name + ".*.bak")  # timestamped; earlier ones are kept
    assert backup.read_text(encoding="utf-8") == "{ not toml"
    window = MainWindow(settings, notice, start_worker=False)
    qtbot.addWidget(window)
    window.show()
    assert window.form.banner.isVisible() and "damaged" in window.form.banner.label.text()
    settings_mod.save(settings)
    assert settings_mod.load() == (settings, None), "told once: the next start is clean"

    path.write_text("version = 99\n", encoding="utf-8")
    assert "version" in (settings_mod.load()[1] or "")
    path.write_text('version = 1\nrecent_recipes = "nope"\n', encoding="utf-8")
    assert settings_mod.load()[1] is not None


def test_settings_round_trip_and_recent_list() -> None:
    settings = settings_mod.Settings(theme="dark")
    for i in range(15):
        settings.add_recent("recipe", f"/tmp/r{i}.toml")
    settings.add_recent("recipe", "/tmp/r3.toml")
    assert settings.recent_recipes[0] == "/tmp/r3.toml"
    assert len(settings.recent_recipes) == settings_mod.MAX_RECENT
    settings_mod.save(settings)
    assert settings_mod.load() == (settings, None)
    leftovers = [p for p in dirs.config_dir().iterdir()
                 if p != settings_mod.settings_path()]
    assert leftovers == [], "the atomic write leaves no temp file"


def test_settings_of_an_earlier_release_are_read_once() -> None:
    """Before the TOML file, the settings were JSON: read when no TOML file exists, kept."""
    legacy = dirs.config_dir() / "settings.json"
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_text(json.dumps({"version": 1, "recent_recipes": ["/tmp/a.toml"],
                                  "theme": "dark"}), encoding="utf-8")
    settings, notice = settings_mod.load()
    assert notice is None and settings.recent_recipes == ["/tmp/a.toml"]
    settings.theme = "light"
    settings_mod.save(settings)
    assert settings_mod.load() == (settings, None), "the TOML file wins from now on"
    assert settings_mod.settings_path().name == "settings.toml" and legacy.is_file()


def test_warning_source_opens_at_its_line(window: MainWindow, tmp_path: Path) -> None:
    model = tmp_path / "net.py"
    model.write_text("a = 1\nb = 2\nc = x.item()\n", encoding="utf-8")
    with window.session.edit("model") as recipe:
        recipe.base_dir = tmp_path
    window.session.add_warnings([WarningItem(category="TracerWarning", message="converting",
                                             source="net.py:3")])
    assert window.tabs.warnings.count() == 1
    window.tabs.warnings.tree.setCurrentItem(window.tabs.warnings.tree.topLevelItem(0))
    assert window.tabs.warnings.open_button.isEnabled()
    viewer = window.tabs.warnings.open_source("net.py:3")
    assert viewer is not None and viewer.text.textCursor().blockNumber() + 1 == 3
    viewer.close()
    assert window.tabs.warnings.open_source("missing.py:1") is None


def test_python_tab_shows_a_script(window: MainWindow) -> None:
    window.tabs.setCurrentWidget(window.tabs.python)
    code = window.tabs.python.text.toPlainText()
    assert "torch.onnx.export(" in code and window.session.recipe.inputs[0].name in code
    window.form.options_form.exporter.setCurrentText("torchscript")
    assert "dynamo=False" in window.tabs.python.text.toPlainText()
    window.tabs.python.copy()
    from PySide6.QtGui import QGuiApplication

    assert QGuiApplication.clipboard().text() == window.tabs.python.text.toPlainText()


def test_keyboard_shortcut_switches_tabs(window: MainWindow, qtbot) -> None:
    window.activateWindow()
    qtbot.keyClick(window, Qt.Key.Key_6, Qt.KeyboardModifier.ControlModifier)
    assert window.tabs.currentWidget() is window.tabs.log


def _run_gui_process(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(REPO),
           "ONNX_STUDIO_OUTPUT_DIR": str(tmp_path)}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_gui_process_never_imports_torch(tmp_path: Path) -> None:
    """A whole session in a fresh process: window, worker, an export, the Python tab."""
    code = (
        "import sys\n"
        "from PySide6.QtCore import QEventLoop, QTimer\n"
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication([])\n"
        "from onnx_studio.app.window import MainWindow\n"
        "w = MainWindow()\n"
        "w.load_initial(None)\n"
        "w.show(); app.processEvents()\n"
        "loop = QEventLoop()\n"
        "w.session.exportFinished.connect(\n"
        "    lambda o: (print(o.final.TAG, o.ok), loop.quit()))\n"
        "QTimer.singleShot(120_000, loop.quit)\n"
        "w.session.start_export(); loop.exec()\n"
        "w.tabs.setCurrentWidget(w.tabs.python); app.processEvents()\n"
        "assert 'torch.onnx.export' in w.tabs.python.text.toPlainText()\n"
        "w.close()\n"
        "print('torch' in sys.modules, 'torch.onnx' in sys.modules)\n"
    )
    result = _run_gui_process(code, tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-2:] == ["result True", "False False"], result.stdout + result.stderr


def test_exit_after_paint_prints_timings(tmp_path: Path) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(REPO),
           "ONNX_STUDIO_OUTPUT_DIR": str(tmp_path)}
    recipe = shipped.recipes_dir() / "default.toml"
    result = subprocess.run([sys.executable, "-m", "onnx_studio.app", str(recipe),
                             "--exit-after-paint"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(data) == {"window_s", "graph_s", "nodes"}
    assert data["window_s"] > 0  # the time itself: tests/benchmarks/bench_window.py


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_pickled_module_needs_explicit_trust(window: MainWindow, tmp_path: Path) -> None:
    import torch

    torch.save(torch.nn.Linear(4, 2), tmp_path / "whole.pt")  # a pickled whole module
    torch.jit.save(torch.jit.script(torch.nn.Linear(4, 2)), tmp_path / "scripted.pt")
    window.form.model_form.set_source(str(tmp_path / "whole.pt"))
    assert not window.form.export_bar.export_button.isEnabled()
    assert "model.trust_pickle" in window.form.export_bar.export_button.toolTip()
    assert "runs code" in window.form.model_form.trust.toolTip()
    window.form.model_form.trust.setChecked(True)
    assert window.session.recipe.model.trust_pickle is True
    assert "trust_pickle" not in window.form.export_bar.export_button.toolTip()
    window.form.model_form.trust.setChecked(False)
    window.form.model_form.set_source(str(tmp_path / "scripted.pt"))
    assert "trust_pickle" not in window.form.export_bar.export_button.toolTip(), \
        "TorchScript runs no pickle"


def _drop(window: MainWindow, path: Path) -> bool:
    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDragEnterEvent, QDropEvent

    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    enter = QDragEnterEvent(window.rect().center(), Qt.DropAction.CopyAction, mime,
                            Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    window.dragEnterEvent(enter)
    if not enter.isAccepted():
        return False
    drop = QDropEvent(QPointF(window.rect().center()), Qt.DropAction.CopyAction, mime,
                      Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    window.dropEvent(drop)
    return True


@pytest.mark.filterwarnings("ignore:Function.*QDragEnterEvent:DeprecationWarning")
def test_drag_and_drop_opens_recipes_and_models(window: MainWindow, tmp_path: Path) -> None:
    model = tmp_path / "pair.py"
    model.write_text("import torch\n\n\nclass Pair(torch.nn.Module):\n"
                     "    def forward(self, left, right):\n        return left + right\n",
                     encoding="utf-8")
    assert _drop(window, model)
    # describe runs in-process here (no worker): one class, so it is picked and the inputs
    # are named after forward()
    assert window.session.recipe.model.source.endswith("pair.py:Pair")
    assert [s.name for s in window.session.recipe.inputs][:2] == ["left", "right"]
    recipe_file = tmp_path / "r.toml"
    recipe_file.write_text('version = 1\n[model]\nsource = "pair.py:Pair"\n'
                           '[export]\noutput = "dropped.onnx"\n', encoding="utf-8")
    assert _drop(window, recipe_file)
    # the dropped model is an unsaved edit: the window asks before the recipe replaces it
    prompt = window.unsaved_prompt
    assert prompt is not None and "before opening r.toml" in prompt.text()
    prompt.button(QMessageBox.StandardButton.Discard).click()
    assert window.session.recipe_path == recipe_file.resolve()
    assert window.form.export_bar.output.text() == "dropped.onnx"
    notes = tmp_path / "notes.txt"
    notes.write_text("hi", encoding="utf-8")
    assert not _drop(window, notes), "other files are refused at drag-enter"


def test_examples_gallery_replaces_the_recipe(window: MainWindow, qtbot) -> None:
    combo = window.form.model_form.examples
    index = example_index(window, qtbot, "lstm")
    titles = [combo.itemText(i) for i in range(combo.count())]
    assert len(titles) > 2 and titles[0].startswith("Choose")
    combo.activated.emit(index)
    assert window.session.recipe.model.source == "example:lstm"
    assert combo.currentIndex() == 0
    assert export_enabled(window), window.form.export_bar.export_button.toolTip()
    # it runs from a copy in the data folder, and exports beside that copy
    assert window.session.recipe.base_dir == shipped.examples_dir() / "lstm"
    assert window.session.recipe.base_dir in window.session.recipe.output_path.parents


def test_theme_switch_is_saved(window: MainWindow) -> None:
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QApplication

    def link_colour() -> str:
        return window.tabs.summary.facts.document().defaultStyleSheet()

    window.set_theme("dark")
    assert QApplication.palette().color(QPalette.ColorRole.Window).lightness() < 100
    assert window.dark and window.form.options_form.dark
    dark_link = QApplication.palette().color(QPalette.ColorRole.Link).name()
    assert dark_link in link_colour(), "the Summary's links in the dark palette's colour"
    assert settings_mod.load()[0].theme == "dark"
    window.set_theme("light")
    assert QApplication.palette().color(QPalette.ColorRole.Window).lightness() > 150
    assert dark_link not in link_colour()
    assert QApplication.palette().color(QPalette.ColorRole.Link).name() in link_colour()
    window.set_theme("system")


def test_dynamic_axis_toggles_share_a_name(window: MainWindow) -> None:
    window.form.inputs_table.add_row()
    set_cell(window, 1, 1, "2x7")
    dialog = window.form.inputs_table.edit_dynamic_axes(1)
    assert dialog is not None and len(dialog.toggles) == 2
    assert not dialog.names[0].isEnabled()
    offered = [dialog.names[0].itemText(i) for i in range(dialog.names[0].count())]
    assert offered[0] == "batch", "names already in the recipe come first"
    dialog.toggles[0].setChecked(True)
    dialog.toggles[1].setChecked(True)
    dialog.names[1].setCurrentText("bad name")
    dialog.buttons.button(dialog.buttons.StandardButton.Ok).click()
    assert dialog.isVisible() and "letters" in dialog.error.text()
    dialog.names[1].setCurrentText("tokens")
    dialog.buttons.button(dialog.buttons.StandardButton.Ok).click()
    assert not dialog.isVisible()
    assert window.session.recipe.inputs[1].dynamic == {0: "batch", 1: "tokens"}
    assert window.form.inputs_table.table.item(1, 5).text() == "0=batch, 1=tokens"
    assert window.session.recipe.inputs[1].name in window.form.inputs_table.shared.text()
    assert export_enabled(window), window.form.export_bar.export_button.toolTip()


def test_window_geometry_is_restored(qtbot) -> None:
    first = MainWindow(settings_mod.Settings(), None, start_worker=False)
    qtbot.addWidget(first)
    first.show()
    first.resize(first.width(), 517)  # the offscreen screen is narrow: check the height
    assert first.height() == 517
    first.close()
    saved, _ = settings_mod.load()
    assert saved.geometry
    second = MainWindow(saved, None, start_worker=False)
    qtbot.addWidget(second)
    assert second.height() == 517


def test_onnx_studio_gui_exit_after_paint_reports_the_graph(tmp_path) -> None:
    """`onnx-studio gui FILE.onnx --exit-after-paint`, through the real console entry point."""
    import json
    import os
    import subprocess
    import sys

    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    path = tmp_path / "two.onnx"
    onnx.save(helper.make_model(graph), str(path))
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run(
        [sys.executable, "-c",
         "import sys; from onnx_studio.app.launcher import main; sys.exit(main())",
         "gui", str(path), "--exit-after-paint"],
        capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    timings = json.loads(result.stdout.strip().splitlines()[-1])
    assert timings["nodes"] == 2
    assert timings["window_s"] > 0 and timings["graph_s"] > 0  # how long: bench_graph.py


@pytest.mark.parametrize(("field", "text", "words"), [
    ("rtol", "nan", "rtol must be a number"),
    ("atol", "inf", "atol must be a number"),
    ("rtol", "-1e-3", "validate.rtol"),
    ("atol", "-1", "validate.atol"),
])
def test_a_tolerance_that_is_not_a_finite_number_disables_export(
        window: MainWindow, field: str, text: str, words: str) -> None:
    edit = getattr(window.form.options_form, field)
    edit.setText(text)
    edit.editingFinished.emit()
    assert not window.form.export_bar.export_button.isEnabled()
    button = window.form.export_bar.export_button
    assert words in button.toolTip(), button.toolTip()
    edit.setText("1e-3")
    edit.editingFinished.emit()
    assert export_enabled(window), window.form.export_bar.export_button.toolTip()


def _zip(path: Path, names: list[str]) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(name, b"")
    return path


@pytest.mark.parametrize(("source", "changes", "expected"), [
    ("net.py:Net", {}, "dynamo"),
    ("net.pt2", {}, "dynamo"),
    ("scripted.pt", {}, "torchscript"),
    ("whole.pt", {}, "dynamo"),
    ("net.py:Net", {"script": True}, "torchscript"),
    ("net.py:Net", {"operator_export_type": "ONNX_ATEN"}, "torchscript"),
    ("scripted.pt", {"exporter": "dynamo"}, "dynamo"),
    ("missing.pt", {}, "dynamo"),
])
def test_the_window_s_exporter_rule_is_the_engine_s(tmp_path: Path, source: str,
                                                     changes: dict, expected: str) -> None:
    """The window's exporter rule is the engine's choose_exporter, which reads the source
    without loading it, so the window's process stays free of torch."""
    from onnx_studio.app.recipes import implied_exporter
    from onnx_studio.engine.export.exporter import choose_exporter

    _zip(tmp_path / "scripted.pt", ["scripted/code/__torch__.py", "scripted/constants.pkl"])
    _zip(tmp_path / "whole.pt", ["whole/data.pkl"])
    recipe = recipes.Recipe(base_dir=tmp_path)
    recipe.model.source = source
    recipe.model.script = bool(changes.get("script"))
    recipe.export.exporter = changes.get("exporter", "auto")
    recipe.export.operator_export_type = changes.get("operator_export_type", "ONNX")
    assert implied_exporter(recipe) == choose_exporter(recipe)
    assert implied_exporter(recipe)[0] == expected


def test_auto_exporter_opsets_follow_the_source(window: MainWindow) -> None:
    options = window.form.options_form
    options.exporter.setCurrentIndex(options.exporter.findData("auto"))
    assert window.session.recipe.export.exporter == "auto"
    assert options.exporter.currentText() == "auto (follows the source)"

    def lowest() -> int:
        return min(v for v in (options.opset.itemData(i) for i in range(options.opset.count()))
                   if v)

    assert lowest() == 18, "a Python module: the dynamo exporter's opsets"
    assert options.export_type.isEnabled(), "auto may take an export type"
    assert "here dynamo" in options.exporter.toolTip()
    window.form.model_form.script.setChecked(True)
    assert window.session.recipe.model.script
    assert lowest() < 18, "scripted first: the TorchScript exporter's opsets"
    assert "here torchscript" in options.exporter.toolTip()
    window.form.model_form.script.setChecked(False)
    assert lowest() == 18
    options.export_type.setCurrentText("ONNX_ATEN_FALLBACK")
    assert lowest() < 18 and window.form.export_bar.export_button.isEnabled()
