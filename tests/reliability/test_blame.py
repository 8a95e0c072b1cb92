"""A failure of the model's own code is named by what it is, never blamed on the inputs.

sys.exit() in forward (before the export and inside the exporter's tracing), an allocation
no machine has, a shape error, and a plain exception of the model: each through the real CLI
(its worker process included), asserting the exit status, the JSON error and the file left
behind (none: a failed export writes nothing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from onnx_studio.engine.cli import main
from onnx_studio.engine.export.blame import human_bytes, memory_asked
from tests.conftest import REPO

MODELS = '''
import sys

import torch
from torch import nn


class Exits(nn.Module):
    def forward(self, x):
        sys.exit(3)


class ExitsWhenTraced(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        if torch.jit.is_tracing():
            sys.exit(4)
        return self.fc(x)


class Huge(nn.Module):
    def forward(self, x):
        return torch.empty(2**42, dtype=torch.uint8).sum() + x


class Shapes(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


class Raises(nn.Module):
    def forward(self, x):
        raise ValueError("the model refuses this")


class OnlyBatchTwo(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        if x.shape[0] != 2:
            raise KeyError("batch must be 2")
        return self.fc(x)
'''


def line_of(text: str) -> int:
    """The 1-based line of MODELS holding `text`."""
    return next(i for i, line in enumerate(MODELS.splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("blame")
    (folder / "blame_models.py").write_text(MODELS, encoding="utf-8")
    return folder


def export(capsys: pytest.CaptureFixture[str], models: Path, name: str, *extra: str
           ) -> tuple[int, dict, Path]:
    out = models / f"{name}.onnx"
    code = main(["export", f"{models / 'blame_models.py'}:{name}", "-o", str(out),
                 "--input", "x=2x3", *extra, "--json"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines, "no JSON line printed"
    return code, json.loads(lines[-1]), out


def test_sys_exit_in_forward_names_the_call_through_the_real_cli(models: Path) -> None:
    """The console entry point as a user runs it: exit 1, kind model, the line of the call."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = models / "exits.onnx"
    done = subprocess.run(
        [sys.executable, "-m", "onnx_studio.engine.cli", "export",
         f"{models / 'blame_models.py'}:Exits",
         "-o", str(out), "--input", "x=2x3", "--json"],
        capture_output=True, text=True, env=env, cwd=models, timeout=110)
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stdout.strip().splitlines()[-1])["error"]
    assert error["kind"] == "model"
    assert error["message"].startswith(
        f"forward() called sys.exit(3) at blame_models.py:{line_of('sys.exit(3)')}"), error
    assert "inputs" not in error["message"] and "shapes" not in error["hint"]
    assert "sys.exit" in error["hint"]
    assert "SystemExit: 3" in error["details"]
    assert not out.exists()


def test_sys_exit_inside_the_exporters_tracing_is_the_models(
        capsys: pytest.CaptureFixture[str], models: Path) -> None:
    """The check run passes (no tracing then); the TorchScript tracer's run ends in sys.exit."""
    code, doc, out = export(capsys, models, "ExitsWhenTraced", "--exporter", "torchscript")
    assert code == 1, doc
    error = doc["error"]
    assert error["kind"] == "model"
    assert f"called sys.exit(4) at blame_models.py:{line_of('sys.exit(4)')}" in \
        error["message"], error
    assert not out.exists()


def test_a_huge_allocation_says_out_of_memory_with_the_size(
        capsys: pytest.CaptureFixture[str], models: Path) -> None:
    code, doc, out = export(capsys, models, "Huge")
    assert code == 1, doc
    error = doc["error"]
    assert error["kind"] == "out_of_memory"
    assert "ran out of memory" in error["message"] and "4.0 TiB" in error["message"], error
    assert f"blame_models.py:{line_of('2**42')}" in error["message"]
    assert "example inputs" not in error["message"]
    assert "4398046511104 bytes" in error["details"]  # torch's own words behind the toggle
    assert not out.exists()


def test_a_shape_error_is_the_inputs(capsys: pytest.CaptureFixture[str], models: Path) -> None:
    code, doc, out = export(capsys, models, "Shapes")
    assert code == 2, doc
    error = doc["error"]
    assert error["kind"] == "inputs"
    assert "fails on the example inputs (x[2, 3])" in error["message"]
    assert "mat1 and mat2 shapes cannot be multiplied" in error["message"]
    assert "shapes" in error["hint"]
    assert not out.exists()


def test_the_models_own_exception_names_its_type_message_and_line(
        capsys: pytest.CaptureFixture[str], models: Path) -> None:
    code, doc, out = export(capsys, models, "Raises")
    assert code == 1, doc
    error = doc["error"]
    assert error["kind"] == "model"
    where = f"blame_models.py:{line_of('raise ValueError')}"
    assert error["message"] == (f"The model's forward() raised ValueError at {where}: "
                                "the model refuses this."), error
    assert 'raise ValueError("the model refuses this")' in error["hint"]
    assert "ValueError: the model refuses this" in error["details"]
    assert not out.exists()


def test_memory_sizes_read_from_torch_messages() -> None:
    """The CPU allocator's byte count and the CUDA allocator's own size text (no GPU here to
    make one; the message is torch's as it prints it)."""
    cpu = RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: "
                       "can't allocate memory: you tried to allocate 1073741824 bytes.")
    gpu = RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; 15.78 GiB "
                       "total capacity)")
    assert memory_asked(cpu) == 2**30 and human_bytes(2**30) == "1.0 GiB"
    assert memory_asked(gpu) == "20.00 GiB"
    assert memory_asked(MemoryError()) == 0
    assert memory_asked(ValueError("no")) is None
    assert human_bytes(512) == "512 bytes" and human_bytes(3 * 2**40) == "3.0 TiB"


def test_the_models_error_in_a_validation_trial_names_its_type_and_line(
        capsys: pytest.CaptureFixture[str], models: Path) -> None:
    """Exported at batch 2 (TorchScript, no tracing of the branch's other side); the trial at
    another batch size fails with the model's own exception, named, not a tolerance."""
    code, doc, out = export(capsys, models, "OnlyBatchTwo", "--exporter", "torchscript",
                            "--dynamic", "x:0=batch", "--validate")
    assert code == 1, doc
    assert doc["error"]["kind"] == "validation" and out.is_file()  # the export stands
    failed = [t for t in doc["validation"]["trials"] if not t["ok"]]
    assert failed and all(t["kind"] == "dynamic-size" for t in failed), failed
    where = f"blame_models.py:{line_of('raise KeyError')}"
    assert all(f"raised KeyError at {where}: 'batch must be 2'" in t["message"]
               for t in failed), failed
    assert "rtol" not in doc["error"]["hint"]
