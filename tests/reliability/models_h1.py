"""Tiny models that end, hang or spawn inside forward(), written into a test's folder."""

from __future__ import annotations

from pathlib import Path

PROCESS_MODELS = '''
import os
import signal
import subprocess
import time
from pathlib import Path

import torch

HERE = Path(__file__).parent
CALLS = [0]


class Base(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x).relu()


class ExitsHard(Base):
    """os._exit(3) in forward: no exception, no traceback, the process is just gone."""

    def forward(self, x):
        os._exit(3)


class KillsItself(Base):
    """SIGKILL to its own process: what the out-of-memory killer does."""

    def forward(self, x):
        os.kill(os.getpid(), signal.SIGKILL)
        return x


class HangsInExport(Base):
    """The check run passes; the exporter's own call of forward (its temporary folder exists
    by then) hangs for good, after starting a child process."""

    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] >= 2:
            child = subprocess.Popen(["sleep", "300"])
            (HERE / "hang.pid").write_text(f"{os.getpid()} {child.pid}")
            while True:
                time.sleep(0.05)
        return self.fc(x).relu()


class HangsAtLoad(Base):
    """Building the model starts a child process and never returns: the earliest hang."""

    def __init__(self):
        super().__init__()
        child = subprocess.Popen(["sleep", "300"])
        (HERE / "hang.pid").write_text(f"{os.getpid()} {child.pid}")
        while True:
            time.sleep(0.05)


class HangsInValidation(Base):
    """Exports normally; hangs once its file is in place (the validation's eager run)."""

    OUTPUT = HERE / "after" / "model.onnx"

    def forward(self, x):
        if self.OUTPUT.exists():
            (HERE / "validating").write_text(str(os.getpid()))
            while True:
                time.sleep(0.05)
        return self.fc(x).relu()
'''


def write_process_models(folder: Path) -> Path:
    path = folder / "process_models.py"
    path.write_text(PROCESS_MODELS, encoding="utf-8")
    return path
