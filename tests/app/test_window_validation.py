"""The Validation tab with a real worker: after an export, one click on an existing file, a
failing validation, per-node errors on the graph, and cancel."""

from __future__ import annotations

import html
import math
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from onnx_studio.app.outcomes import ValidationOutcome
from onnx_studio.app.validation.common import texts
from onnx_studio.app.validation.plots import ParityPlots
from onnx_studio.app.window import MainWindow
from onnx_studio.engine import recipe as recipes
from tests.app.conftest import (
    EXPORT_TIMEOUT_MS,
    STOP_TIMEOUT_MS,
    export_and_wait,
    write_slow_model,
)

JOB_TIMEOUT_MS = EXPORT_TIMEOUT_MS
BAKED = ("import torch\n\n\nclass Baked(torch.nn.Module):\n    def forward(self, x):\n"
         "        return x * x.mean().item()\n")


@pytest.fixture
def window(live_window: MainWindow) -> MainWindow:
    return live_window


def drawn_items(plots: ParityPlots) -> dict[str, int]:
    """What is on the parity plots: points in the scatter, lines, bars in the histogram."""
    out = {"scatter_points": 0, "identity_lines": 0, "histogram_bins": 0}
    if plots.scatter is None:
        return out
    import pyqtgraph as pg

    for item in plots.scatter.getPlotItem().items:
        if isinstance(item, pg.ScatterPlotItem):
            out["scatter_points"] += len(item.data)
        elif isinstance(item, pg.PlotDataItem):
            out["identity_lines"] += 1
    for item in plots.histogram.getPlotItem().listDataItems():
        x, _ = item.getOriginalDataset()
        out["histogram_bins"] += max(0, len(x) - 1) if x is not None else 0
    return out


def set_check(box, on: bool) -> None:
    if box.isChecked() != on:
        box.click()


def set_text(edit, text: str) -> None:
    edit.setText(text)
    edit.editingFinished.emit()


def validate_and_wait(window: MainWindow, qtbot, how: str = "button") -> ValidationOutcome:
    button = window.form.export_bar.validate_button
    assert button.isEnabled(), button.toolTip()
    with qtbot.waitSignal(window.session.validationFinished, timeout=JOB_TIMEOUT_MS) as blocker:
        if how == "shortcut":
            window.activateWindow()
            qtbot.keyClick(window, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier
                           | Qt.KeyboardModifier.ShiftModifier)
        else:
            qtbot.mouseClick(window.tabs.validation.validate_button, Qt.MouseButton.LeftButton)
    return blocker.args[0]


@pytest.mark.slow
def test_export_with_validation_fills_the_tab_and_the_graph(window: MainWindow, qtbot) -> None:
    window.load_default_recipe()
    form = window.form.options_form
    set_check(form.validate, True)
    set_check(form.intermediates, True)
    assert window.session.recipe.validate.enabled and window.session.recipe.validate.intermediates
    message = export_and_wait(window, qtbot)
    report = message["report"]
    assert report["ok"], report
    validation = report["validation"]
    tab = window.tabs.validation

    assert "Validation passed" in tab.verdict.text()
    assert f"rtol {validation['rtol']}, atol {validation['atol']}" in tab.facts.text()
    (row,) = texts(tab.outputs)
    worst = validation["outputs"][0]
    assert row[:2] == ["logits", "float32"] and row[-1] == "✔ pass"
    assert row[2] == f"{worst['max_abs_diff']:.2e}", "max abs diff, as computed"
    assert row[5].startswith(("0.99999", "1.00000")) and row[7] == "agree"

    trials = texts(tab.trials.table)
    assert len(trials) == len(validation["trials"]) == 6
    assert [r[0] for r in trials][:2] == ["export inputs", "random draw"]
    assert any(r[0].startswith("other size (batch=") and "batch=" in r[2] for r in trials)
    assert all(r[3] == "✔ pass" for r in trials)
    tab.trials.select(5)
    assert texts(tab.trials.outputs)[0][0] == "logits", "a trial's own numbers"

    window.tabs.setCurrentWidget(tab)
    tab.sections.setCurrentWidget(tab.plots)
    qtbot.waitUntil(lambda: drawn_items(tab.plots)["scatter_points"] > 0, timeout=10_000)
    from onnx_studio.engine.validation.metrics import load_plots

    data = load_plots(Path(validation["plots"]))["logits"]
    drawn = drawn_items(tab.plots)
    assert drawn == {"scatter_points": data["index"].size, "identity_lines": 1,
                     "histogram_bins": data["hist_counts"].size}
    assert data["trial"] in tab.plots.note.text()
    # the plots follow a light/dark switch
    light = tab.plots.scatter.backgroundBrush().color().lightness()
    window.set_theme("dark")
    qtbot.waitUntil(lambda: tab.plots.scatter.backgroundBrush().color().lightness() < 128,
                    timeout=5000)
    assert light >= 128 or window.dark
    window.set_theme("light")
    qtbot.waitUntil(lambda: tab.plots.scatter.backgroundBrush().color().lightness() >= 128,
                    timeout=5000)
    assert drawn_items(tab.plots) == drawn

    nodes = validation["intermediates"]["nodes"]
    assert nodes and tab.sections.tabText(tab.sections.indexOf(tab.nodes)) == \
        f"Nodes ({len(nodes)})"
    names = [row[0] for row in texts(tab.nodes.table)]
    assert set(names) == set(nodes)
    errors = [nodes[n]["max_abs_diff"] for n in names]
    assert errors == sorted(errors, reverse=True), "worst node first"

    tab.sections.setCurrentWidget(tab.nodes)
    tab.nodes.table.setCurrentItem(tab.nodes.table.topLevelItem(0))
    qtbot.mouseClick(tab.nodes.show_button, Qt.MouseButton.LeftButton)
    assert window.tabs.currentWidget() is window.tabs.graph
    browser = window.tabs.graph.browser
    assert browser is not None and browser.overlay_label == "error ÷ tolerance"
    # an absolute scale: every node of this passing export is within its tolerance (<= 1),
    # and 1.0 is the legend's mark whatever the worst node is
    assert browser.overlay == {n: e["tolerance_ratio"] for n, e in nodes.items()}
    assert all(0 <= v <= 1 for v in browser.overlay.values())
    assert browser.overlay_scale is not None and browser.overlay_scale.mark == 1.0
    assert (browser.overlay_scale.lo, browser.overlay_scale.hi) == (0.01, 100.0)
    index = browser.model.node_by_name(names[0])
    assert index is not None and browser.selected_key is not None, "the node is centred"
    qtbot.mouseClick(tab.nodes.clear_button, Qt.MouseButton.LeftButton)
    assert browser.overlay is None


def test_one_click_validate_an_existing_export(window: MainWindow, qtbot) -> None:
    window.load_default_recipe()
    set_check(window.form.options_form.validate, False)
    set_check(window.form.options_form.intermediates, False)
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"] and message["report"]["validation"] is None
    tab = window.tabs.validation
    assert "Not validated yet" in tab.verdict.text()

    result = validate_and_wait(window, qtbot, how="shortcut")
    assert result.validation is not None, result.error
    assert result.onnx == window.session.recipe.output_path
    validation = result.validation.to_dict()
    assert validation["ok"], validation
    assert window.tabs.currentWidget() is tab
    assert "Validation passed" in tab.verdict.text()
    bar = window.form.export_bar
    assert bar.progress.format() == "Validated" and "passed" in bar.stage.text()
    assert len(texts(tab.trials.table)) == len(validation["trials"])
    assert "Per node" in tab.nodes.summary.text(), "says how to get per-node numbers"
    assert bar.export_button.isEnabled() and not bar.cancel_button.isEnabled()

    # the form's [validate] settings go with the job: no tolerance at all fails
    set_text(window.form.options_form.rtol, "0")
    set_text(window.form.options_form.atol, "0")
    assert (window.session.recipe.validate.rtol, window.session.recipe.validate.atol) == (0.0, 0.0)
    result = validate_and_wait(window, qtbot)
    assert result.validation is not None, result.error
    validation = result.validation.to_dict()
    assert validation["ok"] is False and validation["atol"] == 0
    assert "Validation failed" in tab.verdict.text()
    assert tab.message.text() == validation["message"] and "trials failed" in tab.message.text()
    assert "rtol" in tab.hint.text(), "numbers that differ: the one case for a tolerance"
    (row,) = texts(tab.outputs)
    assert row[-1] == "✘ fail" and row[6] != "0", "mismatched elements are counted"
    assert all(r[3] == "✘ fail" for r in texts(tab.trials.table))
    assert tab.sections.currentWidget() is tab.trials, "a failure opens on its trials"
    first = validation["trials"][0]["message"]
    assert first.startswith("export inputs: ")
    detail = tab.trials.detail.text()
    assert "Export inputs" in detail and html.escape(first.split(": ", 1)[1]) in detail
    assert texts(tab.trials.table)[0][5] == first.split(": ", 1)[1], "label not repeated"
    assert window.form.export_bar.progress.format() == "Validation failed"


def test_baked_value_fails_the_export_validation(window: MainWindow, qtbot,
                                                 tmp_path: Path) -> None:
    (tmp_path / "baked.py").write_text(BAKED, encoding="utf-8")
    window.session.set_recipe(recipes.loads(
        'version = 1\n[model]\nsource = "baked.py:Baked"\n[[inputs]]\nname = "x"\n'
        'shape = [3, 4]\n[export]\noutput = "baked.onnx"\nexporter = "torchscript"\n'
        '[validate]\nenabled = true\nrandom_trials = 2\n', base_dir=tmp_path))
    message = export_and_wait(window, qtbot)
    report = message["report"]
    assert report["ok"] is False and report["error"]["kind"] == "validation"
    assert (tmp_path / "baked.onnx").is_file(), "exported; it computes something else"
    tab = window.tabs.validation
    assert window.tabs.currentWidget() is tab
    assert "Validation failed" in tab.verdict.text()
    assert tab.message.text().startswith("2 of 3 trials failed; first: random draw")
    results = [r[3] for r in texts(tab.trials.table)]
    assert results == ["✔ pass", "✘ fail", "✘ fail"]
    assert "Random draw</b>, seed 1" in tab.trials.detail.text(), "the first failed trial"
    # the one-click Validate now checks this file again, with the same outcome
    result = validate_and_wait(window, qtbot)
    assert result.onnx == tmp_path / "baked.onnx"
    assert result.validation is not None and result.validation.ok is False


def test_validate_needs_a_file_and_says_so(window: MainWindow, tmp_path: Path) -> None:
    (tmp_path / "baked.py").write_text(BAKED, encoding="utf-8")
    window.session.set_recipe(recipes.loads(
        'version = 1\n[model]\nsource = "baked.py:Baked"\n[[inputs]]\nname = "x"\n'
        'shape = [3, 4]\n[export]\noutput = "never.onnx"\n', base_dir=tmp_path))
    assert not window.form.export_bar.validate_button.isEnabled()
    assert not window.menus.validate.isEnabled()
    assert "export first" in window.form.export_bar.validate_button.toolTip()
    assert window.session.start_validation() is None
    set_text(window.form.options_form.rtol, "tight")
    assert "validate.rtol" in window.session.problems
    assert "number" in window.form.options_form.rtol.toolTip()
    set_text(window.form.options_form.rtol, "1e-4")
    assert window.session.recipe.validate.rtol == 1e-4
    assert "validate.rtol" not in window.session.problems


def test_cancel_a_validation(window: MainWindow, qtbot, tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    write_slow_model(tmp_path)
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what every onnxruntime reads
    onnx.save(model, str(tmp_path / "slow.onnx"))
    window.session.set_recipe(recipes.loads(
        'version = 1\n[model]\nsource = "slow_net.py:Slow"\n[[inputs]]\nname = "x"\n'
        'shape = [1, 4]\n[export]\noutput = "slow.onnx"\n', base_dir=tmp_path))
    qtbot.waitUntil(lambda: window.session.runner.ready_info is not None, timeout=60_000)
    assert window.session.start_validation() is not None
    bar = window.form.export_bar
    assert bar.cancel_button.isEnabled() and not bar.export_button.isEnabled()
    # inside the model's constructor (it sleeps): the reference model is being built
    child = tmp_path / "slow_net.child"
    qtbot.waitUntil(lambda: child.exists() or window.session.validate_job is None, timeout=60_000)
    assert window.session.validate_job is not None, window.tabs.validation.message.text()
    # a hang guard (the model sleeps 60 s); how fast a Cancel ends a job: bench_stop.py
    with qtbot.waitSignal(window.session.validationFinished, timeout=STOP_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(window.form.export_bar.cancel_button, Qt.MouseButton.LeftButton)
    error = blocker.args[0].error.to_dict()
    assert error["kind"] == "cancelled" and "validation was cancelled" in error["message"]
    assert "Validation cancelled" in window.tabs.validation.verdict.text()
    assert bar.export_button.isEnabled() and bar.validate_button.isEnabled()


def test_first_divergent_node_is_marked_and_missing_plots_said(qtbot, tmp_path: Path) -> None:
    """The tab alone, drawing a session's validation object as the engine writes it (no
    worker needed)."""
    from onnx_studio.app.outcomes import Stamp, ValidationOutcome
    from onnx_studio.app.session import ExportSession
    from onnx_studio.app.validation import ValidationTab
    from onnx_studio.engine.protocol import Error, Validation

    session = ExportSession(use_worker=False)
    tab = ValidationTab(session)
    stamp = Stamp(recipe="", export="", run="", onnx=None, label="a recipe")
    qtbot.addWidget(tab)
    node = {"passed": True, "mismatched": 0, "value": "v"}
    validation = {
        "ok": False, "message": "1 of 1 trials failed; first: export inputs: output 'y': ...",
        "rtol": 0.001, "atol": 1e-05, "warnings": [],
        "outputs": [{"name": "y", "passed": False, "max_abs_diff": 0.5, "max_rel_diff": 0.4,
                     "dtype": "float32",
                     "nan_mismatch": 2, "inf_mismatch": 0, "mismatched": 3,
                     "mismatched_fraction": 0.75, "cosine_similarity": 0.9}],
        "trials": [{"kind": "export-inputs", "seed": 0, "sizes": {}, "ok": False,
                    "message": "export inputs: output 'y': 3 of 4 elements differ",
                    "outputs": [], "seconds": 0.01}],
        "intermediates": {"first_divergent": "node_b", "compared": 3, "nodes": {
            "node_a": {**node, "max_abs_diff": 1e-7, "max_rel_diff": 1e-6,
                       "tolerance_ratio": 0.01},
            "node_b": {**node, "passed": False, "max_abs_diff": 0.25, "max_rel_diff": 0.1,
                       "tolerance_ratio": 250.0},
            "node_c": {"passed": False, "max_abs_diff": None, "max_rel_diff": None, "value": "c",
                       "message": "shape [2] in ONNX, [3] in PyTorch"}}},
        "plots": str(tmp_path / "gone.npz"),
    }
    session.results.set_validation(ValidationOutcome(
        1, tmp_path / "m.onnx", Validation.from_dict(validation), None, "", None, stamp, 0.1,
        from_export=False))
    (row,) = texts(tab.outputs)
    assert row[6] == "3 (75.0%)" and row[7] == "differ: NaN ×2" and row[-1] == "✘ fail"
    assert "First divergent node: node_b" in tab.nodes.summary.text()
    names = [row[0] for row in texts(tab.nodes.table)]
    assert names == ["node_c", "node_b", "node_a"], "worst (no shape) first"
    item = tab.nodes.table.topLevelItem(1)
    assert item.text(5) == "✘ first divergent" and item.font(0).bold()
    assert item.background(0).color().name() != tab.nodes.table.topLevelItem(2).background(
        0).color().name(), "the first divergent row is tinted"
    # error against tolerance; the node whose shapes differ is off the scale
    assert tab.nodes.overlay_values() == {"node_a": 0.01, "node_b": 250.0, "node_c": math.inf}
    with qtbot.waitSignal(tab.showOnGraph) as blocker:
        tab.nodes.show_button.click()
    assert blocker.args[1:] == ["error ÷ tolerance", "node_b"], "no pick: the first divergent"
    assert "gone.npz is missing" in tab.plots.message.text()

    session.results.set_validation(ValidationOutcome(
        2, tmp_path / "m.onnx", None, Error(kind="validation", message="ONNX Runtime cannot "
                                            "load m.onnx", hint="Check the opset."),
        "traceback text", None, stamp, 0.1, from_export=False))
    assert "could not run" in tab.verdict.text()
    assert "Check the opset." in tab.message.text()
    assert not tab.body.isVisibleTo(tab) and tab.details_button.isVisibleTo(tab)
