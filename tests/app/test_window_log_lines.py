"""The Log tab (issue 36, path 9): a torch log line and a Python warning from the interpreter's
folders read as what they say, and a long line wraps instead of being cut at the right edge."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from onnx_studio.app.window import MainWindow
from onnx_studio.engine.recipe import InputSpec
from tests.app.conftest import export_and_wait

pytestmark = pytest.mark.usefixtures("shared_runner")

LONG = "segment_" * 60  # 480 characters, no space to break at
# a model whose loading prints what torch and Python print while exporting
NOISY_MODEL = f'''
import sys

import torch


class Noisy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        print("W1207 15:00:19.143000 11883 torch/onnx/_internal/exporter/_registration.py:123] "
              "Registering a function for aten::silu", file=sys.stderr, flush=True)
        print(sys.base_prefix + "/lib/python3.11/copyreg.py:105: FutureWarning: the old way",
              file=sys.stderr, flush=True)
        print("{LONG}", file=sys.stderr, flush=True)
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
'''


def test_the_log_reads_as_what_it_says_and_wraps(live_window: MainWindow, qtbot,
                                                 tmp_path: Path) -> None:
    window, session = live_window, live_window.session
    (tmp_path / "noisy.py").write_text(NOISY_MODEL, encoding="utf-8")
    session.set_source(str(tmp_path / "noisy.py") + ":Noisy")
    with session.edit("inputs") as recipe:
        recipe.inputs = [InputSpec(name="x", shape=[2, 4])]
    session.set_output(str(tmp_path / "noisy.onnx"))
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message["report"]["error"]
    log = window.tabs.log
    window.tabs.setCurrentWidget(log)
    window.resize(1024, 768)
    qtbot.waitUntil(lambda: LONG in log.toPlainText().replace("\n", ""), timeout=10_000)
    text = log.toPlainText()

    assert "W1207" not in text and "11883" not in text
    assert ("warning: Registering a function for aten::silu "
            "(torch/onnx/_internal/exporter/_registration.py:123, 15:00:19)") in text
    assert "FutureWarning: the old way (copyreg.py:105)" in text
    assert sys.base_prefix + "/lib" not in text, "no interpreter path"
    # the long line wraps: nothing to scroll sideways to, nothing cut
    assert log.lineWrapMode() == log.LineWrapMode.WidgetWidth
    assert log.horizontalScrollBar().maximum() == 0
    assert log.viewport().width() < log.fontMetrics().horizontalAdvance(LONG)
    qtbot.keyClick(log, Qt.Key.Key_End, Qt.KeyboardModifier.ControlModifier)
