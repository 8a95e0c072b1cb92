"""Temporary files of killed runs are removed at the next start of the CLI or the app, whatever
target they were for, and only when their owner (the pid in their name) no longer runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from onnx_studio.engine import files, process_tree
from tests.conftest import REPO
from tests.reliability.models_h1 import write_process_models

WINDOW = '''
import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from onnx_studio.app import settings as settings_mod
from onnx_studio.app.window import MainWindow

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
    process's folder that must stay; and other programs' files named almost like ours."""
    folder.mkdir(parents=True, exist_ok=True)
    made = {
        "export": folder / f".model.onnx.onnx-studio.{owner}.k3x9_abc.tmp",
        "other": folder / f".another.onnx.onnx-studio.{owner}.zz.tmp",
        "file": folder / f".recipe.toml.onnx-studio.{owner}.0a1b2c3d.tmp",
        "live": folder / f".model.onnx.onnx-studio.{os.getpid()}.live.tmp",
        "user": folder / ".notes.tmp",  # not one of ours: never touched
        # other programs' temporary names, with a pid that no longer runs (issue 23, 5)
        "user_csv": folder / f".report.csv.{owner}.a1b2.tmp",
        "user_folder": folder / f".photos.{owner}.bak.tmp",
        # our name, but no marker file inside: not made by the studio, so never removed
        "unmarked": folder / f".model.onnx.onnx-studio.{owner}.unmarked.tmp",
    }
    for key, path in made.items():
        if key in ("export", "other", "live", "user_folder", "unmarked"):
            path.mkdir()
            (path / "model.onnx.data").write_bytes(b"\0" * 1024)
            if key in ("export", "other", "live"):
                (path / files.FOLDER_MARKER).write_text("onnx-studio")
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


def assert_only_ours_went(made: dict[str, Path]) -> None:
    assert not made["export"].exists() and not made["other"].exists()
    assert not made["file"].exists()
    assert made["live"].is_dir() and made["user"].is_file()
    assert made["user_csv"].read_text() == "x"
    for key in ("user_folder", "unmarked"):
        assert (made[key] / "model.onnx.data").stat().st_size == 1024


def test_temp_names_carry_their_owner() -> None:
    assert files.temp_owner(Path(".model.onnx.onnx-studio.1234.k3x9_abc.tmp")) == 1234
    assert files.temp_owner(Path(".a.b.c.onnx.onnx-studio.7.x.tmp")) == 7
    assert files.temp_owner(Path(files.temp_name("model.onnx"))) == os.getpid()
    assert files.temp_owner(Path(".model.onnx.1234.k3x9_abc.tmp")) is None  # no marker
    assert files.temp_owner(Path(".report.csv.4000000.a1b2.tmp")) is None
    assert files.temp_owner(Path(".notes.tmp")) is None
    assert files.temp_owner(Path("model.onnx")) is None


@pytest.mark.slow
def test_the_cli_removes_what_dead_runs_left_in_its_folders(tmp_path: Path) -> None:
    write_process_models(tmp_path)
    owner = dead_pid()
    out = leave_leftovers(tmp_path / "out", owner)
    here = leave_leftovers(tmp_path / "work", owner)
    done = subprocess.run(
        [sys.executable, "-m", "onnx_studio.engine.cli", "export",
         f"{tmp_path / 'process_models.py'}:Base", "-o", str(tmp_path / "out" / "new.onnx"),
         "--input", "x=2x4", "--json"],
        env=environment(tmp_path), cwd=tmp_path / "work", capture_output=True, text=True,
        timeout=100)
    assert done.returncode == 0, done.stderr[-2000:]
    for made in (out, here):
        assert_only_ours_went(made)
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
    assert_only_ours_went(made)
    assert not (record / "target-folder").exists()


@pytest.mark.slow
def test_a_profile_run_removes_only_what_the_studio_wrote(tmp_path: Path) -> None:
    """Issue 23, 5: other programs' `.NAME.N.TOKEN.tmp` files and folders in the working
    folder survive a run there; the studio's own leftovers go."""
    import onnx
    from onnx import TensorProto, helper

    folder = tmp_path / "work"
    made = leave_leftovers(folder, dead_pid())
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]),
              str(folder / "relu.onnx"))
    done = subprocess.run(
        [sys.executable, "-m", "onnx_studio.engine.cli", "profile", "relu.onnx", "--runs", "1",
         "--warmup", "0", "--json"],
        env=environment(tmp_path), cwd=folder, capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr[-2000:]
    assert_only_ours_went(made)
