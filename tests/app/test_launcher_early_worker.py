"""`onnx-studio export` and `validate` start their worker first thing (onnx_studio.app.launcher,
onnx_studio.engine.worker_process.start_early): the job runs in that worker, no second one is
started, and a command that fails before its job ends the worker it started.

Each case runs the console script's code (onnx_studio.app.launcher.main) in a child process, with
worker_process.spawn wrapped to list the workers it starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

PROBE = """
import json, sys
from onnx_studio.engine import worker_process
spawned, before_cli = [], []
original = worker_process.spawn
def spawn(token):
    worker = original(token)
    spawned.append(worker)
    before_cli.append("onnx_studio.engine.cli" not in sys.modules)
    return worker
worker_process.spawn = spawn
from onnx_studio.app.launcher import main
try:
    status = main(sys.argv[1:])
except SystemExit as exc:
    status = exc.code
print(json.dumps({"status": status, "spawned": len(spawned), "before_cli": before_cli,
                  "ended": [worker.poll() is not None for worker in spawned]}))
"""

TINY = """
import torch
class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
    def forward(self, x):
        return self.fc(x)
"""


def launch(tmp_path: Path, *args: str) -> tuple[dict[str, Any], list[str]]:
    """(what the probe saw, the lines the command wrote to stdout before it)."""
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "ONNX_STUDIO_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=110, check=False)
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr
    return json.loads(lines[-1]), lines[:-1]


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.py"
    path.write_text(TINY, encoding="utf-8")
    return path


def test_the_export_runs_in_the_worker_started_first(tmp_path: Path, tiny: Path) -> None:
    probe, printed = launch(tmp_path, "export", f"{tiny}:TinyNet", "-o",
                            str(tmp_path / "tiny.onnx"), "--input", "x=2x4:float32",
                            "--exporter", "torchscript", "--json")
    assert probe["status"] == 0, printed
    assert json.loads(printed[-1])["ok"] is True
    assert (tmp_path / "tiny.onnx").is_file()
    # started before the command line was even imported, taken by the job, then ended
    assert probe["spawned"] == 1 and probe["before_cli"] == [True] and probe["ended"] == [True]


def test_a_command_that_fails_before_its_job_ends_the_early_worker(tmp_path: Path,
                                                                    tiny: Path) -> None:
    probe, printed = launch(tmp_path, "export", f"{tiny}:TinyNet", "-o",
                            str(tmp_path / "tiny.onnx"), "--input", "x=2x4:float32",
                            "--save-recipe", str(tmp_path / "recipe.json"), "--json")
    assert probe["status"] == 2
    assert "Cannot save the recipe" in json.loads(printed[-1])["error"]["message"]
    assert probe["spawned"] == 1 and probe["ended"] == [True]  # ended, not left running
    assert not (tmp_path / "tiny.onnx").exists()


def test_help_starts_no_worker(tmp_path: Path) -> None:
    probe, _ = launch(tmp_path, "export", "--help")
    assert probe["status"] == 0 and probe["spawned"] == 0
