"""An .onnx file and its external data are replaced as a pair: a writer killed at any step
leaves the old pair or the new pair, never an .onnx reading another export's weights."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.export.onnx_file import referenced_data
from onnx_studio.engine.pipeline import export
from tests.conftest import REPO

MODEL = '''
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(64, 64)

    def forward(self, x):
        return self.fc(x)
'''

# The child writes a finished export (the one in the folder argv[1]) into place through the real
# writer, with os.replace / Path.unlink patched to die (as kill -9 would: no clean-up runs)
# before or after their N-th call during the final write. It never imports torch: a writer
# killed at each step costs a fraction of a second, not a torch import.
CHILD = textwrap.dedent('''
    import os, shutil, sys
    from pathlib import Path
    from onnx_studio.engine.export.onnx_file import AtomicOnnxWrite, referenced_data

    source, step, when = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    calls = [0]

    def dying(real):
        def wrapper(*args, **kwargs):
            calls[0] += 1
            if calls[0] == step and when == "before":
                os._exit(137)
            result = real(*args, **kwargs)
            if calls[0] == step and when == "after":
                os._exit(137)
            return result
        return wrapper

    with AtomicOnnxWrite(Path("model.onnx").resolve()) as write:
        shutil.copy(source / "model.onnx", write.temp_path)
        for name in referenced_data(source / "model.onnx"):
            shutil.copy(source / name, write.temp_path.parent / name)
        os.replace = dying(os.replace)
        Path.unlink = dying(Path.unlink)
        write.finish("always")
    print("STEPS", calls[0])
''')


def _recipe(folder: Path, seed: int) -> Path:
    path = folder / f"seed{seed}.toml"
    path.write_text(f'version = 1\n[model]\nsource = "m.py:Net"\n[[inputs]]\nname = "x"\n'
                    f'shape = [2, 64]\n[export]\noutput = "model.onnx"\nexporter = '
                    f'"torchscript"\nexternal_data = "always"\nseed = {seed}\n')
    return path


def _outputs(path: Path) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": np.ones((2, 64), np.float32)})[0]


@pytest.mark.timeout(300)
def test_a_writer_killed_at_any_step_leaves_a_consistent_pair(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(MODEL)
    expected = {}
    for seed in (0, 1):  # the outputs each export computes, made in a folder of its own
        own = tmp_path / f"ref{seed}"
        own.mkdir()
        (own / "m.py").write_text(MODEL)
        report = export(recipes.load(_recipe(own, seed)))
        assert report.ok, report.error
        expected[seed] = _outputs(own / "model.onnx")
    assert not np.array_equal(expected[0], expected[1])

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    target = tmp_path / "model.onnx"
    killed = 0
    for round_ in range(2):  # the second round replaces data under the name the first used
        for when in ("before", "after"):
            step = 1
            while True:
                old_seed = round_ % 2
                assert export(recipes.load(_recipe(tmp_path, old_seed))).ok
                result = subprocess.run(
                    [sys.executable, "-c", CHILD, str(tmp_path / f"ref{1 - old_seed}"),
                     str(step), when], cwd=tmp_path, env=env, capture_output=True, text=True,
                    timeout=120)
                got = _outputs(target)  # loads the .onnx with whatever data it reads
                assert any(np.array_equal(got, expected[s]) for s in (0, 1)), (step, when)
                assert all((tmp_path / name).is_file() for name in referenced_data(target))
                if result.returncode == 0:
                    assert "STEPS" in result.stdout and np.array_equal(got, expected[1 - old_seed])
                    break
                assert result.returncode == 137, result.stderr[-2000:]
                killed += 1
                step += 1
    assert killed >= 8  # every rename and removal of the final write was interrupted
