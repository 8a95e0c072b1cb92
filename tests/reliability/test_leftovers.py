"""Temporary files of killed runs are removed at the next start of the CLI or the app, whatever
target they were for, and only when their owner (the pid in their name) no longer runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine import files, process_tree
from tests.conftest import REPO
from tests.reliability.models_h1 import write_process_models

WINDOW = '''
import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app import settings as settings_mod
from app.window import MainWindow

app = QApplication(sys.argv[:1])
window = MainWindow(settings_mod.Settings(), None, start_worker=True)
window.load_initial(None)
window.show()
QTimer.singleShot(60_000, app.quit)
app.exec()
'''


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert done.returncode == 0
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    assert not process_tree.alive(process.pid)
    return process.pid


def leave_leftovers(folder: Path, owner: int) -> dict[str, Path]:
    """What killed runs leave: an exporter's folder, an atomic write's file, and a live
    process's folder that must stay."""
    folder.mkdir(parents=True, exist_ok=True)
    made = {
        "export": folder / f".model.onnx.{owner}.k3x9_abc.tmp",
        "other": folder / f".another.onnx.{owner}.zz.tmp",
        "file": folder / f".recipe.toml.{owner}.0a1b2c3d.tmp",
        "live": folder / f".model.onnx.{os.getpid()}.live.tmp",
        "user": folder / ".notes.tmp",  # not one of ours: never touched
    }
    for key, path in made.items():
        if key in ("export", "other", "live"):
            path.mkdir()
            (path / "model.onnx.data").write_bytes(b"\0" * 1024)
        else:
            path.write_text("x")
    return made


def environment(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["QT_QPA_PLATFORM"] = "offscreen"
    for name in ("CONFIG", "CACHE", "DATA"):
        env[f"ONNX_STUDIO_{name}_DIR"] = str(tmp / name.lower())
    return env


def test_temp_names_carry_their_owner() -> None:
    assert files.temp_owner(Path(".model.onnx.1234.k3x9_abc.tmp")) == 1234
    assert files.temp_owner(Path(".a.b.c.onnx.7.x.tmp")) == 7
    assert files.temp_owner(Path(".notes.tmp")) is None
    assert files.temp_owner(Path("model.onnx")) is None


@pytest.mark.slow
def test_the_cli_removes_what_dead_runs_left_in_its_folders(tmp_path: Path) -> None:
    write_process_models(tmp_path)
    owner = dead_pid()
    out = leave_leftovers(tmp_path / "out", owner)
    here = leave_leftovers(tmp_path / "work", owner)
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli", "export",
         f"{tmp_path / 'process_models.py'}:Base", "-o", str(tmp_path / "out" / "new.onnx"),
         "--input", "x=2x4", "--json"],
        env=environment(tmp_path), cwd=tmp_path / "work", capture_output=True, text=True,
        timeout=100)
    assert done.returncode == 0, done.stderr[-2000:]
    for made in (out, here):
        assert not made["export"].exists() and not made["other"].exists()
        assert not made["file"].exists()
        assert made["live"].is_dir() and made["user"].is_file()
    assert (tmp_path / "out" / "new.onnx").is_file()


@pytest.mark.slow
def test_the_app_start_removes_what_a_killed_worker_left(tmp_path: Path) -> None:
    """A worker that was killed recorded where it was writing (its job folder); the next
    start of the app (its first worker) removes the leftovers there, for any target name."""
    owner = dead_pid()
    made = leave_leftovers(tmp_path / "exports", owner)
    record = tmp_path / "cache" / "jobs" / f"{owner}-3"
    record.mkdir(parents=True)
    (record / "target-folder").write_text(str(tmp_path / "exports"), encoding="utf-8")
    script = tmp_path / "window.py"
    script.write_text(WINDOW, encoding="utf-8")
    window = subprocess.Popen([sys.executable, str(script)], env=environment(tmp_path),
                              cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while made["export"].exists() and time.monotonic() < deadline:
            assert window.poll() is None, "the window ended"
            time.sleep(0.2)
    finally:
        window.terminate()
        try:
            window.wait(15)
        except subprocess.TimeoutExpired:
            window.kill()
            window.wait(10)
    assert not made["export"].exists() and not made["other"].exists()
    assert not made["file"].exists()
    assert made["live"].is_dir() and made["user"].is_file()
    assert not (record / "target-folder").exists()
