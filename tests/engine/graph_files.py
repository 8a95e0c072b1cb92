"""The exports the graph browser's tests open (issue 25): a tiny GPT-2 through the `hf:`
source (with its cache: 7 inputs and 5 outputs), and a user's .py file holding a small CNN
and a factory of a transformers model. Each is exported by the studio's own CLI in a child
process, once per test run (`graph_files`: the engine's and the window's tests, in every test
process, share them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.hf_models import ROOT, build, shared_export

USER_MODELS = '''
import torch
from torch import nn


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 4):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                      nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1))
        self.head = nn.Linear(8, classes)

    def forward(self, image):
        h = torch.relu(self.features(image))
        h = h.mean(dim=(2, 3))
        return self.head(h)


def gpt2():
    """A transformers model built here: its forward is all library code."""
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=99, n_embd=16, n_layer=1, n_head=2,
                                     n_positions=32, use_cache=False)
    return transformers.GPT2Model(config).eval()
'''


def studio_export(source: str, out: Path, *args: str) -> Path:
    """`onnx-studio export SOURCE -o OUT ARGS --json` in a child process; `out` once written."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "onnx_studio.engine.cli", "export", source, "-o",
                           str(out),
                           *args, "--json"], capture_output=True, text=True, env=env,
                          cwd=str(out.parent), check=False, timeout=600)
    lines = done.stdout.strip().splitlines()
    report = json.loads(lines[-1]) if lines else {}
    assert done.returncode == 0 and report.get("ok"), done.stderr[-3000:]
    return out


def user_models(base: Path) -> dict[str, Path]:
    """The user's file and its two exports: "py" (the file), "cnn" (SmallCNN, its own code)
    and "factory" (gpt2(), a transformers model the file only builds)."""
    base.mkdir(parents=True, exist_ok=True)
    py = base / "user_models.py"
    if not py.exists():
        py.write_text(USER_MODELS, encoding="utf-8")
    found = {"py": py, "cnn": base / "cnn.onnx", "factory": base / "gpt2_factory.onnx"}
    if not found["cnn"].exists():
        studio_export("user_models.py:SmallCNN", found["cnn"], "--input", "image=1x3x16x16")
    if not found["factory"].exists():
        studio_export("user_models.py:gpt2", found["factory"], "--input", "input_ids=1x8:int64")
    return found


def graph_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny GPT-2's model.onnx ("gpt2": tests/engine/test_hf_export.py's export of it) and
    the user's file and exports (`user_models`), made once per test run for every test process
    (tests.conftest.shared_folder)."""
    from tests.conftest import shared_folder

    gpt2 = shared_export(tmp_path_factory, build, "gpt2")
    assert gpt2.run[0] == 0, gpt2.run[2][-3000:]
    found = user_models(shared_folder(tmp_path_factory, "graph_files", user_models))
    return {"gpt2": gpt2.output / "model.onnx", **found}
