"""Fixtures for the window tests: an output folder per test, models that export slowly, and a
window with a real worker shared by a test module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app import settings as settings_mod
from app.window import MainWindow

SLOW_MODEL = '''
import subprocess
import time
from pathlib import Path

import torch


class Slow(torch.nn.Module):
    """Construction starts a child process and sleeps: a long job to cancel or kill."""

    def __init__(self, seconds: float = 60.0) -> None:
        super().__init__()
        child = subprocess.Popen(["sleep", str(seconds)])
        Path(__file__).with_suffix(".child").write_text(str(child.pid))
        time.sleep(seconds)
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
'''


@pytest.fixture(autouse=True)
def _output_dir(tmp_path_factory: pytest.TempPathFactory,
                monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Example recipes export into a temp folder, never into the user's home."""
    out = tmp_path_factory.mktemp("exports")
    monkeypatch.setenv("ONNX_STUDIO_OUTPUT_DIR", str(out))
    yield out


def write_slow_model(folder: Path) -> Path:
    path = folder / "slow_net.py"
    path.write_text(SLOW_MODEL, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def live_window(qapp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MainWindow]:
    """One shown window (and so one warm worker) for a whole test module."""
    root = tmp_path_factory.mktemp("window")
    patch = pytest.MonkeyPatch()
    # The worker inherits these at start, so its job folders stay in the temp tree.
    patch.setenv("ONNX_STUDIO_CACHE_DIR", str(root / "cache"))
    patch.setenv("ONNX_STUDIO_CONFIG_DIR", str(root / "config"))
    patch.setenv("ONNX_STUDIO_OUTPUT_DIR", str(root / "out"))
    w = MainWindow(settings_mod.Settings(), None, start_worker=True)
    w.load_initial(None)
    w.show()
    yield w
    w.close()
    patch.undo()
