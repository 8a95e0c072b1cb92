"""An inconclusive validation is its own verdict in the window too (issue 35): a model whose
outputs are zero whatever the input (a zero-initialised head) validates, and the Validation
tab, the Summary and the export bar all say "inconclusive" with what would make it conclusive,
never "passed"."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from onnx_studio.app.window import MainWindow
from onnx_studio.engine import recipe as recipes
from tests.app.conftest import EXPORT_TIMEOUT_MS, export_and_wait

ZERO_HEAD = '''
import torch
from torch import nn


class ZeroHead(nn.Module):
    """A classifier whose head starts at zero, as a freshly initialised one may."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 3)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))
'''


@pytest.mark.timeout(300)
def test_a_zero_head_is_inconclusive_in_every_view(live_window: MainWindow, qtbot,
                                                     tmp_path: Path) -> None:
    window = live_window
    (tmp_path / "zero.py").write_text(ZERO_HEAD, encoding="utf-8")
    window.session.set_recipe(recipes.loads(
        'version = 1\n[model]\nsource = "zero.py:ZeroHead"\n[[inputs]]\nname = "x"\n'
        'shape = [2, 4]\n[export]\noutput = "out/zero.onnx"\n', base_dir=tmp_path))
    assert export_and_wait(window, qtbot)["report"]["ok"]
    bar = window.form.export_bar
    with qtbot.waitSignal(window.session.validationFinished,
                          timeout=EXPORT_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(bar.validate_button, Qt.MouseButton.LeftButton)
    outcome = blocker.args[0]
    assert outcome.validation is not None and outcome.validation.verdict == "inconclusive"

    tab = window.tabs.validation
    window.tabs.setCurrentWidget(tab)
    assert "inconclusive" in tab.verdict.text() and "passed" not in tab.verdict.text()
    assert tab.hint.isVisible() and outcome.validation.hint in tab.hint.text()
    window.tabs.setCurrentWidget(window.tabs.summary)
    summary = window.tabs.summary.facts.toPlainText()
    assert "inconclusive" in summary, summary
    assert "inconclusive" in bar.stage.text().lower(), bar.stage.text()
