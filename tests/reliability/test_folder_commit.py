"""A folder export is one commit (onnx_studio.engine.file_set): a real SIGKILL at every moment of
it, in a process of its own, leaves the previous set or the new set once the next start has run its
sweep (onnx_studio.engine.worker_process.remove_abandoned_temps, what the CLI and the window run
first); the user's other files are never touched. Plain files stand in for the .onnx files here (the
commit does not read them); tests/reliability/test_hf_commit.py runs a real T5 export."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from onnx_studio.engine import file_set
from onnx_studio.engine.worker_process import remove_abandoned_temps
from tests.conftest import REPO

WRITER = '''
import sys, time
from pathlib import Path
from onnx_studio.engine.file_set import FolderWrite

folder, tag, names, stop = Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(","), sys.argv[4]
with FolderWrite(folder, output="export") as write:
    for name in names:
        (write.staging / name).write_text(f"{tag} {name}")
        if stop == "staging":  # a kill while the files are still being written
            print("staging", flush=True)
            time.sleep(600)
    write.commit()
print("committed", flush=True)
'''

OLD = ["decoder_model.onnx", "encoder_model.onnx", "old_only.onnx"]
NEW = ["decoder_model.onnx", "decoder_model.onnx.data", "encoder_model.onnx"]
# the new set in (each file over its namesake), then the old files the new set has not away
RENAMES = len(NEW) + len(set(OLD) - set(NEW))


def environment(tmp: Path, stop_after: str = "") -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    for name in ("CONFIG", "CACHE", "DATA"):
        env[f"ONNX_STUDIO_{name}_DIR"] = str(tmp / name.lower())
    env.pop(file_set.STOP_AFTER_ENV, None)
    if stop_after:
        env[file_set.STOP_AFTER_ENV] = stop_after
    return env


def write_set(tmp: Path, folder: Path, tag: str, names: list[str], *, stop: str = "",
              stop_after: str = "") -> None:
    """Commit `names` (each file holding "TAG NAME") into `folder` in a process of its own;
    with `stop` or `stop_after`, SIGKILL it at that moment instead of letting it finish."""
    script = tmp / "writer.py"
    script.write_text(WRITER, encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, str(script), str(folder), tag, ",".join(names), stop or "-"],
        env=environment(tmp, stop_after), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        if not (stop or stop_after):
            out, err = process.communicate(timeout=60)
            assert process.returncode == 0 and "committed" in out, err
            return
        assert process.stdout is not None and process.stderr is not None
        stream = process.stdout if stop else process.stderr
        line = stream.readline()  # the moment reached: the writer waits there
        assert ("staging" if stop else "commit stopped") in line, process.stderr.read()
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        assert process.returncode == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def contents(folder: Path) -> dict[str, str]:
    """The folder's files (the commit's own manifest left out), name -> text; a folder
    (staging, previous) as "<folder>"."""
    return {p.name: "<folder>" if p.is_dir() else p.read_text()
            for p in sorted(folder.iterdir()) if p.name != file_set.MANIFEST}


def old_folder(tmp: Path) -> Path:
    folder = tmp / "out"
    write_set(tmp, folder, "old", OLD)
    (folder / "notes.txt").write_text("the user's own file")
    (folder / ".notes.onnx-studio.tmp").write_text("not ours either: no pid, no token")
    return folder


def expected(tag: str, names: list[str]) -> dict[str, str]:
    return {**{n: f"{tag} {n}" for n in names}, "notes.txt": "the user's own file",
            ".notes.onnx-studio.tmp": "not ours either: no pid, no token"}


@pytest.mark.parametrize("moment", range(1, RENAMES + 1))
def test_a_kill_in_the_middle_of_the_commit_is_completed_at_the_next_start(
        tmp_path: Path, moment: int) -> None:
    folder = old_folder(tmp_path)
    write_set(tmp_path, folder, "new", NEW, stop_after=str(moment))
    assert (folder / file_set.JOURNAL).is_file()
    on_disk = contents(folder)
    assert on_disk != expected("old", OLD) and on_disk != expected("new", NEW)  # mid-way
    remove_abandoned_temps([folder])  # the next start of the CLI or the window
    assert contents(folder) == expected("new", NEW)
    assert sorted(file_set.previous_set(folder, "export")) == sorted(NEW)


def test_a_kill_while_staging_leaves_the_previous_set(tmp_path: Path) -> None:
    folder = old_folder(tmp_path)
    write_set(tmp_path, folder, "new", NEW, stop="staging")
    remove_abandoned_temps([folder])
    assert contents(folder) == expected("old", OLD)


def test_the_next_commit_replaces_the_whole_previous_set(tmp_path: Path) -> None:
    folder = old_folder(tmp_path)
    write_set(tmp_path, folder, "new", NEW)
    assert contents(folder) == expected("new", NEW)  # old_only.onnx went with its set


def test_a_journal_cut_short_is_dropped_and_the_old_set_stays(tmp_path: Path) -> None:
    """Killed while the journal itself was being written: no rename had been made."""
    folder = old_folder(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    staging = folder / f".staging.onnx-studio.{dead.pid}.ab12.tmp"
    staging.mkdir()
    (staging / ".onnx-studio-temp").write_text("marker")
    (staging / "encoder_model.onnx").write_text("new encoder_model.onnx")
    (folder / file_set.JOURNAL).write_text('{"pid": ')
    remove_abandoned_temps([folder])
    assert contents(folder) == expected("old", OLD)


def test_a_live_commit_is_left_alone(tmp_path: Path) -> None:
    folder = old_folder(tmp_path)
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        journal = json.dumps({"pid": owner.pid, "staging": ".s.onnx-studio.1.a.tmp",
                              "previous": ".p.onnx-studio.1.a.tmp", "old": OLD, "new": NEW})
        (folder / file_set.JOURNAL).write_text(journal)
        assert file_set.recover(folder) is True  # its owner runs: nothing is done
        assert contents(folder) == {**expected("old", OLD), file_set.JOURNAL: journal}
    finally:
        owner.kill()
        owner.wait()
