"""A tiny zoo for the batch tests: one model file whose classes pass, fail, crash, segfault or
hang, and a recipe per item (TorchScript exports of a 4->3 linear layer: seconds each)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.conftest import REPO

MODELS = '''
import ctypes
import os
import subprocess
import time
from pathlib import Path

import torch

HERE = Path(__file__).parent


class Net(torch.nn.Module):
    def __init__(self, marker=""):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x).relu()


class Raises(Net):
    """The model's own error: the item fails (kind model), the others go on."""

    def forward(self, x):
        raise ValueError("this model cannot run")


class Exits(Net):
    """os._exit(3) in forward: the worker is just gone."""

    def forward(self, x):
        os._exit(3)


class Segfaults(Net):
    """A read of address 0: a segmentation fault in native code."""

    def forward(self, x):
        return ctypes.string_at(0)


class Hangs(Net):
    """Starts a child process, records its pid and the worker's, then never returns."""

    def __init__(self, marker=""):
        super().__init__()
        child = subprocess.Popen(["sleep", "300"])
        (HERE / f"{marker}.pids").write_text(f"{os.getpid()} {child.pid}")
        while True:
            time.sleep(0.05)
'''


def write_recipe(folder: Path, name: str, model: str = "Net", validate: bool = False,
                 **kwargs: str) -> Path:
    """`folder/NAME.toml`: the class `model` of zoo.py on a 2x4 input, exported to
    out/NAME.onnx with TorchScript."""
    (folder / "zoo.py").write_text(MODELS, encoding="utf-8")
    items = ", ".join(f'{k} = "{v}"' for k, v in kwargs.items())
    path = folder / f"{name}.toml"
    path.write_text(
        f'version = 1\n\n[model]\nsource = "zoo.py:{model}"\nkwargs = {{ {items} }}\n\n'
        '[[inputs]]\nname = "x"\nshape = [2, 4]\n\n'
        f'[export]\noutput = "out/{name}.onnx"\nexporter = "torchscript"\n\n'
        f'[validate]\nenabled = {"true" if validate else "false"}\n', encoding="utf-8")
    return path


def cli_env(tmp: Path) -> dict[str, str]:
    """The environment of an `onnx-studio` child: this checkout first, its own folders."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    for name in ("CONFIG", "CACHE", "DATA"):
        env[f"ONNX_STUDIO_{name}_DIR"] = str(tmp / name.lower())
    return env


def batch_command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "onnx_studio.engine.cli", "batch", *argv]


def hang_pids(folder: Path, marker: str) -> list[int]:
    """The pids a Hangs model recorded (its worker's, its child's); [] before it ran."""
    path = folder / f"{marker}.pids"
    return [int(p) for p in path.read_text().split()] if path.is_file() else []
