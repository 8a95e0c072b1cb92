"""Killing the window (kill -9) during an export leaves no process behind: the worker watches
the window's process and ends itself with every process its job started (the model's child
here), the spare worker too. (The next start's clean-up of what a killed export left beside
its target: test_leftovers.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from onnx_studio.engine import process_tree
from tests.conftest import REPO, wait_until
from tests.reliability.models_h1 import write_process_models

pytestmark = pytest.mark.slow  # real worker processes: torch imports, exports

WINDOW = '''
import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from onnx_studio.app import settings as settings_mod
from onnx_studio.app.window import MainWindow

recipe, mode = Path(sys.argv[1]), sys.argv[2]
app = QApplication(sys.argv[:1])
window = MainWindow(settings_mod.Settings(), None, start_worker=True)
window.load_initial(recipe)
window.show()


def go():
    if window.session.runner.ready_info is None:
        QTimer.singleShot(100, go)
        return
    if mode == "export":
        assert window.session.start_export() is not None
    print("started", flush=True)


QTimer.singleShot(0, go)
app.exec()
'''

RECIPE = '''
version = 1
[model]
source = "process_models.py:HangsAtLoad"
[[inputs]]
name = "x"
shape = [2, 4]
[export]
output = "out/model.onnx"
'''


def environment(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["QT_QPA_PLATFORM"] = "offscreen"
    for name in ("CONFIG", "CACHE", "DATA"):
        env[f"ONNX_STUDIO_{name}_DIR"] = str(tmp / name.lower())
    return env


def start_window(tmp: Path, mode: str) -> subprocess.Popen[str]:
    script = tmp / "window.py"
    script.write_text(WINDOW, encoding="utf-8")
    return subprocess.Popen([sys.executable, str(script), str(tmp / "r.toml"), mode],
                            env=environment(tmp), cwd=tmp, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def test_kill_9_of_the_window_leaves_no_worker_and_no_child_of_the_model(
        tmp_path: Path) -> None:
    write_process_models(tmp_path)
    (tmp_path / "r.toml").write_text(RECIPE, encoding="utf-8")
    window = start_window(tmp_path, "export")
    try:
        wait_until(lambda: (tmp_path / "hang.pid").exists() or window.poll() is not None,
                   "the export never reached the model", 100, every=0.1)
        assert window.poll() is None, "the window ended by itself"
        time.sleep(0.2)
        worker_pid, child_pid = map(int, (tmp_path / "hang.pid").read_text().split())
        family = [p.pid for p in psutil.Process(window.pid).children(recursive=True)]
        assert worker_pid in family and child_pid in family
        os.kill(window.pid, signal.SIGKILL)
        window.wait(10)
        # every process the window started: the export's worker, its spare, the model's child
        # a hang guard, not a time limit: each would live for good on its own
        wait_until(lambda: not any(process_tree.alive(pid) for pid in family),
                   "a process the window started outlived it", 30, every=0.1)
    finally:
        if window.poll() is None:
            window.kill()
            window.wait(10)
