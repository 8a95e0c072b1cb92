"""Issue 11 in the window, with the real worker: each verdict the CLI's JSON gives (tests/engine/
test_verdict_messages.py, test_weight_check.py, test_request_honoured.py) is shown where a user
looks — the exporter "auto" chose and why, the fill "auto" draws, warnings with their hint and a
count the Summary and the tab agree on, failures with their cause and the full chain, metrics
never computed as "—", sys.exit() in forward as a failed validation, and an output path that
cannot be written refused before the export starts.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QComboBox

from onnx_studio.app.validation.common import texts
from onnx_studio.app.window import MainWindow
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.recipe import to_toml
from tests.app.conftest import EXPORT_TIMEOUT_MS, export_and_wait
from tests.conftest import REPO

TOLERANCE_WORDS = ("rtol", "atol", "loosen", "tolerance")

MODELS = '''
import sys

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


class IgnoresMask(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, mask):
        return self.fc(x)


class FixedBatch(nn.Module):
    """Reshapes to a constant: the batch axis declared dynamic is fixed in the file."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(x).reshape(2, 3)


class Baked(nn.Module):
    def forward(self, x):
        return torch.ones(int(x.shape[0]), 3) * x.mean()


class Quits(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        if x.shape[0] != 2:
            sys.exit(3)
        return self.fc(x)


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > 0:
            return y * 2
        return y


class ConvBN(nn.Module):
    """Conv + BatchNorm with statistics far from the defaults: the exporter folds them."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 4)
        generator = torch.Generator().manual_seed(1)
        with torch.no_grad():
            self.bn.running_mean.copy_(torch.rand(8, generator=generator) * 2 - 1)
            self.bn.running_var.copy_(torch.rand(8, generator=generator) * 2 + 0.05)
            self.bn.weight.copy_(torch.rand(8, generator=generator) + 0.5)
            self.bn.bias.copy_(torch.rand(8, generator=generator) * 2 - 1)

    def forward(self, x):
        return self.head(torch.relu(self.bn(self.conv(x))).mean((2, 3)))

'''
TOKENS = '''
import torch
from torch import nn


class Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 8)

    def forward(self, input_ids, attention_mask):
        mask = attention_mask.unsqueeze(-1).to(torch.float32)
        return (self.embed(input_ids) * mask).sum(1) / mask.sum(1)
'''
QUITS_LINE = MODELS.splitlines().index("            sys.exit(3)") + 1
BRANCH_LINE = MODELS.splitlines().index("        if y.sum() > 0:") + 1


@pytest.fixture
def window(live_window: MainWindow) -> MainWindow:
    return live_window


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "nets.py").write_text(MODELS, encoding="utf-8")
    return tmp_path


def load(window: MainWindow, folder: Path, body: str) -> None:
    """Set a recipe (TOML after `version = 1`) relative to `folder`, as opening one would."""
    window.session.set_recipe(recipes.loads("version = 1\n" + body, base_dir=folder))


def summary_warnings(window: MainWindow) -> int:
    """The Summary's Warnings row as a number ("none" is 0)."""
    text = window.tabs.summary.facts.toPlainText()
    match = re.search(r"Warnings\s+(none|\d+)", text)
    assert match, text
    return 0 if match[1] == "none" else int(match[1])


def warning_rows(window: MainWindow) -> list[list[str]]:
    tree = window.tabs.warnings.tree
    return [[tree.topLevelItem(i).text(c) for c in range(3)]
            for i in range(tree.topLevelItemCount())]


def no_tolerance(text: str) -> None:
    for word in TOLERANCE_WORDS:
        assert word not in text.lower(), text


def validate_and_wait(window: MainWindow, qtbot) -> dict[str, Any]:
    """Click Validate and wait; the validation as the worker wrote it (typed, encoded again)."""
    button = window.tabs.validation.validate_button
    assert button.isEnabled(), button.toolTip()
    with qtbot.waitSignal(window.session.validationFinished, timeout=EXPORT_TIMEOUT_MS) as blocker:
        button.click()
    outcome = blocker.args[0]
    assert outcome.validation is not None, outcome.error
    return {"onnx": str(outcome.onnx), "validation": outcome.validation.to_dict()}


# ---------------------------------------------------------------------------- exporter "auto"


def test_a_torchscript_archive_exports_with_torchscript_and_the_summary_says_why(
        window: MainWindow, qtbot, folder: Path) -> None:
    archive = folder / "scripted.pt"
    # torch stays out of the window's process: a child writes the archive
    subprocess.run([sys.executable, "-c",
                    "import sys, torch; sys.path.insert(0, sys.argv[1]); import nets; "
                    "torch.jit.script(nets.Net()).save(sys.argv[2])", str(folder), str(archive)],
                   check=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    load(window, folder, '[model]\nsource = "scripted.pt"\n[[inputs]]\nname = "x"\n'
                         'shape = [2, 4]\n[export]\noutput = "scripted.onnx"\n')
    assert window.session.recipe.export.exporter == "auto", "the default"
    options = window.form.options_form
    assert options.exporter.currentText() == "auto (follows the source)"
    assert "torchscript" in options.exporter.toolTip()
    # the opset list is the TorchScript exporter's (it writes opsets below dynamo's 18)
    opsets = [options.opset.itemData(i) for i in range(options.opset.count())]
    assert min(v for v in opsets if v) < 18

    message = export_and_wait(window, qtbot)
    report = message["report"]
    assert report["ok"], report
    assert report["exporter"] == "torchscript"
    facts = window.tabs.summary.facts.toPlainText()
    assert ("Exporter\ttorchscript — a TorchScript archive exports with the TorchScript "
            "exporter") in facts.replace("\n", "\t"), facts


# ---------------------------------------------------------------------------- fill "auto"


def test_the_fill_column_shows_what_auto_draws_and_an_edit_is_written(
        window: MainWindow, qtbot, folder: Path) -> None:
    (folder / "tokens.py").write_text(TOKENS, encoding="utf-8")
    window.session.set_recipe(recipes.Recipe(base_dir=folder))  # a new recipe, then the model
    window.open_path(folder / "tokens.py")  # one class: chosen, inputs named after forward()
    qtbot.waitUntil(lambda: [s.name for s in window.session.recipe.inputs]
                    == ["input_ids", "attention_mask"], timeout=60_000)
    table = window.form.inputs_table
    for row in range(2):
        dtype = table.table.cellWidget(row, 2)
        assert isinstance(dtype, QComboBox)
        dtype.setCurrentText("int64")
    window.form.inputs_table.table.item(0, 1).setText("2x5")
    window.form.inputs_table.table.item(1, 1).setText("2x5")
    assert [(s.dtype, s.fill) for s in window.session.recipe.inputs] == [("int64", "auto")] * 2

    def fill(row: int) -> QComboBox:
        combo = table.table.cellWidget(row, 3)
        assert isinstance(combo, QComboBox)
        return combo

    assert fill(0).currentText() == "auto → randint"
    assert "randint(0,10)" in fill(0).toolTip() and "token ids" in fill(0).toolTip()
    assert fill(1).currentText() == "auto → ones"
    assert "mask" in fill(1).toolTip()
    assert "arange" in [fill(0).itemText(i) for i in range(fill(0).count())]

    fill(1).setCurrentIndex(fill(1).findData("ones"))
    assert window.session.recipe.inputs[1].fill == "ones"
    assert 'fill = "ones"' in to_toml(window.session.recipe)
    assert "fill" not in to_toml(window.session.recipe).split("[[inputs]]")[1], \
        "auto stays unwritten"
    assert fill(1).currentText() == "ones" and fill(1).itemText(0) == "auto → ones"

    window.form.options_form.validate.setChecked(True)
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"] and message["report"]["validation"]["ok"], message
    # once loaded, the model's embedding bounds the token ids; the Log says what was drawn
    assert "input input_ids: fill randint(0,16)" in window.tabs.log.toPlainText()


# ---------------------------------------------------------------------------- warnings


def test_batchnorm_validates_without_a_weight_warning_and_the_counts_agree(
        window: MainWindow, qtbot, folder: Path) -> None:
    load(window, folder, '[model]\nsource = "nets.py:ConvBN"\n[[inputs]]\nname = "x"\n'
                         'shape = [2, 3, 12, 12]\n[export]\noutput = "cnn.onnx"\n'
                         '[validate]\nenabled = true\nrandom_trials = 1\n')
    message = export_and_wait(window, qtbot)
    report = message["report"]
    assert report["ok"] and report["validation"]["ok"], report
    assert "Validation passed" in window.tabs.validation.verdict.text()
    rows = warning_rows(window)
    assert not [r for r in rows if "weight" in r[1].lower()], rows
    count = window.tabs.warnings.count()
    assert summary_warnings(window) == count == len(window.session.warnings)
    assert window.tabs.tabText(1) == (f"Warnings ({count})" if count else "Warnings")


def test_the_summary_counts_the_validation_s_warnings_too(window: MainWindow, qtbot,
                                                         folder: Path) -> None:
    """A warning only the validation gives (the engine sends it once, in the validation):
    the Summary said "none" while the tab said 1."""
    load(window, folder, '[model]\nsource = "nets.py:Net"\n[[inputs]]\nname = "x"\n'
                         'shape = [2, 4]\n[export]\noutput = "train.onnx"\ntraining = "train"\n'
                         '[validate]\nenabled = true\nrandom_trials = 1\n')
    message = export_and_wait(window, qtbot)
    report = message["report"]
    assert report["ok"] and report["warnings"] == [], report
    assert [w["category"] for w in report["validation"]["warnings"]] == ["ValidationWarning"]
    assert [r[0] for r in warning_rows(window)] == ["ValidationWarning"]
    assert summary_warnings(window) == window.tabs.warnings.count() == 1
    assert window.tabs.tabText(1) == "Warnings (1)"


def test_a_validate_job_s_warnings_reach_the_tab_and_the_summary(window: MainWindow, qtbot,
                                                                  folder: Path) -> None:
    """A Validate job's warnings come in its result only: the tab lists them, and the
    Summary (not the tab shown then) counts them too. Here a weight changed after export."""
    import onnx

    load(window, folder, '[model]\nsource = "nets.py:Net"\n[[inputs]]\nname = "x"\n'
                         'shape = [2, 4]\n[export]\noutput = "patched.onnx"\n'
                         '[validate]\nrandom_trials = 1\n')
    assert export_and_wait(window, qtbot)["report"]["ok"]
    assert summary_warnings(window) == window.tabs.warnings.count() == 0
    path = folder / "patched.onnx"
    model = onnx.load(str(path))
    weight = next(i for i in model.graph.initializer if i.name.endswith("weight"))
    values = onnx.numpy_helper.to_array(weight).copy()
    values[0, 0] += 0.25
    weight.CopyFrom(onnx.numpy_helper.from_array(values, weight.name))
    onnx.save(model, str(path))
    message = validate_and_wait(window, qtbot)
    assert [w["category"] for w in message["validation"]["warnings"]] == ["ValidationWarning"]
    assert window.tabs.currentWidget() is window.tabs.validation
    (row,) = warning_rows(window)
    assert "'fc.weight' differs" in row[1] and "\n→ Give the recipe the checkpoint" in row[1]
    assert summary_warnings(window) == window.tabs.warnings.count() == 1
    assert window.tabs.tabText(1) == "Warnings (1)"


def test_a_baked_dynamic_axis_is_a_warning_with_its_hint(window: MainWindow, qtbot,
                                                         folder: Path) -> None:
    load(window, folder, '[model]\nsource = "nets.py:FixedBatch"\n[[inputs]]\nname = "x"\n'
                         'shape = [2, 8]\ndynamic = { 0 = "batch" }\n'
                         '[export]\noutput = "fixed.onnx"\n')
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message
    rows = warning_rows(window)
    baked = [r for r in rows if r[0] == "DynamicShape"
             and "was asked to be dynamic but the file fixes it" in r[1]]
    assert len(baked) == 1, rows
    assert "'x' axis 0 ('batch')" in baked[0][1]
    assert "\n→ The exporter found a size baked into the model" in baked[0][1], "the hint"
    assert summary_warnings(window) == window.tabs.warnings.count() == len(rows)


def test_a_dropped_input_is_a_warning_with_its_hint(window: MainWindow, qtbot,
                                                    folder: Path) -> None:
    load(window, folder, '[model]\nsource = "nets.py:IgnoresMask"\n'
                         '[[inputs]]\nname = "x"\nshape = [2, 4]\n'
                         '[[inputs]]\nname = "mask"\nshape = [2, 4]\n'
                         '[export]\noutput = "mask.onnx"\nexporter = "torchscript"\n')
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message
    rows = warning_rows(window)
    dropped = [r for r in rows if r[0] == "DroppedInput"]
    assert len(dropped) == 1 and "'mask'" in dropped[0][1], rows
    assert "\n→ Check that forward() uses 'mask'" in dropped[0][1]
    assert summary_warnings(window) == window.tabs.warnings.count() == len(rows)
    window.tabs.warnings.tree.setCurrentItem(window.tabs.warnings.tree.topLevelItem(
        rows.index(dropped[0])))
    assert window.tabs.warnings.current_warning().category == "DroppedInput"


# ---------------------------------------------------------------------------- failures


def test_a_failure_shows_its_cause_hint_and_the_whole_chain(window: MainWindow, qtbot,
                                                            folder: Path) -> None:
    load(window, folder, '[model]\nsource = "nets.py:Branchy"\n[[inputs]]\nname = "x"\n'
                         'shape = [2, 4]\n[export]\noutput = "branchy.onnx"\n')
    message = export_and_wait(window, qtbot)
    error = message["report"]["error"]
    summary = window.tabs.summary
    status = summary.status.text()
    assert "Export failed" in status
    assert html.escape(f"nets.py:{BRANCH_LINE}") in status, status
    assert "\x1b" not in status
    assert summary.hint.isVisible() and "torch.cond" in summary.hint.text()
    assert summary.details_button.isVisible() and not summary.details.isVisible()
    summary.details_button.click()
    details = summary.details.toPlainText()
    assert summary.details.isVisible() and details == message["details"]
    assert details.startswith("Traceback") and f'nets.py", line {BRANCH_LINE}' in details
    assert "\x1b[" not in details
    assert error["kind"] == "export"


def test_a_shape_mismatch_in_validate_says_shape_and_never_tolerance(
        window: MainWindow, qtbot, folder: Path) -> None:
    load(window, folder, '[model]\nsource = "nets.py:Baked"\n[[inputs]]\nname = "x"\n'
                         'shape = [4, 3]\ndynamic = { 0 = "batch" }\n'
                         '[export]\noutput = "baked.onnx"\nexporter = "torchscript"\n')
    assert export_and_wait(window, qtbot)["report"]["ok"]
    message = validate_and_wait(window, qtbot)
    assert message["validation"]["ok"] is False
    tab = window.tabs.validation
    assert "Validation failed" in tab.verdict.text()
    text, hint = tab.message.text(), tab.hint.text()
    assert tab.hint.isVisible() and hint.startswith("→ ")
    assert "shape [4, 3] from ONNX Runtime" in text
    assert "no tolerance changes a shape" in hint and "dynamic axis" in hint
    no_tolerance(hint.replace("no tolerance changes a shape", ""))


def test_metrics_never_computed_show_a_dash(window: MainWindow, qtbot, folder: Path) -> None:
    load(window, folder, '[model]\nsource = "nets.py:Baked"\n[[inputs]]\nname = "x"\n'
                         'shape = [4, 3]\ndynamic = { 0 = "batch" }\n'
                         '[export]\noutput = "baked2.onnx"\nexporter = "torchscript"\n'
                         '[validate]\nenabled = true\nrandom_trials = 1\n')
    message = export_and_wait(window, qtbot)
    error = message["report"]["error"]
    assert error["kind"] == "validation"
    summary = window.tabs.summary
    assert "Validation failed" in summary.status.text() and "shape" in summary.status.text()
    no_tolerance(summary.hint.text().replace("no tolerance changes a shape", ""))
    tab = window.tabs.validation
    assert window.tabs.currentWidget() is tab
    trials = texts(tab.trials.table)
    failed = [i for i, r in enumerate(trials) if r[3] == "✘ fail"]
    assert failed and all(trials[i][0].startswith("other size") for i in failed)
    tab.trials.select(failed[0])
    (row,) = texts(tab.trials.outputs)
    # the JSON has null for metrics of outputs whose shapes differ: never computed, never 0
    assert row[2:8] == ["—"] * 6, row
    assert row[-1] == "✘ fail"


def test_sys_exit_in_forward_is_a_failed_validation_and_the_window_carries_on(
        window: MainWindow, qtbot, folder: Path) -> None:
    load(window, folder, '[model]\nsource = "nets.py:Quits"\n[[inputs]]\nname = "x"\n'
                         'shape = [2, 4]\ndynamic = { 0 = "batch" }\n'
                         '[export]\noutput = "quits.onnx"\nexporter = "torchscript"\n'
                         '[validate]\nenabled = true\nrandom_trials = 1\n')
    qtbot.waitUntil(lambda: window.session.runner.ready_info is not None, timeout=60_000)
    pid = window.session.runner.worker_pid
    message = export_and_wait(window, qtbot)
    assert message["type"] == "result", message
    error = message["report"]["error"]
    assert error["kind"] == "validation"
    said = f"forward() called sys.exit(3) at nets.py:{QUITS_LINE}"
    assert said in window.tabs.summary.status.text()
    assert "Validation failed" in window.tabs.summary.status.text()
    tab = window.tabs.validation
    assert "Validation failed" in tab.verdict.text()
    assert any(said in r[5] for r in texts(tab.trials.table))
    assert (folder / "quits.onnx").is_file(), "the export itself stands"
    # the worker lived on (sys.exit was the model's, not the worker's); the next job runs
    assert window.session.runner.worker_pid == pid
    assert window.form.export_bar.export_button.isEnabled()
    window.form.options_form.validate.setChecked(False)
    assert export_and_wait(window, qtbot)["report"]["ok"]
    assert window.session.runner.worker_pid == pid


# ---------------------------------------------------------------------------- output


def test_an_output_that_cannot_be_written_disables_export_with_the_reason(
        window: MainWindow, folder: Path) -> None:
    (folder / "a_file").write_text("x")
    (folder / "taken.onnx").mkdir()
    load(window, folder, '[model]\nsource = "nets.py:Net"\n[[inputs]]\nname = "x"\n'
                         'shape = [2, 4]\n[export]\noutput = "a_file/out.onnx"\n')
    bar = window.form.export_bar
    assert not bar.export_button.isEnabled()
    reason = bar.export_button.toolTip()
    assert "export.output" in reason and "a_file is a file" in reason, reason
    assert bar.problem_label.isVisible() and "a_file is a file" in bar.problem_label.text()
    assert "a_file is a file" in bar.output.toolTip(), "marked on the Output field"

    bar.output.setText("taken.onnx")
    bar.output.editingFinished.emit()
    assert not bar.export_button.isEnabled()
    assert "is a folder" in bar.export_button.toolTip()

    bar.output.setText("out/fine.onnx")
    bar.output.editingFinished.emit()
    assert bar.export_button.isEnabled(), bar.export_button.toolTip()


def test_fewer_trials_replace_more_with_a_late_row_selected(qtbot) -> None:
    """A validation with 6 trials (the 5th selected, as a failure is), then one with 2: the
    rows removed never index the new, shorter list."""
    from onnx_studio.app.validation.tab import TrialsPanel
    from onnx_studio.engine.protocol import Trial

    panel = TrialsPanel()
    qtbot.addWidget(panel)
    trials = [Trial(kind="random", ok=i != 4, seed=i, message="", outputs=[]) for i in range(6)]
    panel.set_trials(trials, dark=False)
    assert panel.table.currentIndex().row() == 4
    panel.set_trials(trials[:2], dark=False)
    assert [r[1] for r in texts(panel.table)] == ["0", "1"]
    assert panel.table.currentIndex().row() == 0 and "seed 0" in panel.detail.text()
