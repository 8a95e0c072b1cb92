"""onnx_studio.engine.process_tree ends whole trees portably, and onnx_studio.engine.files' commit
gate lets a rename under way finish before the process ends: real processes and threads, no
mocks."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from onnx_studio.engine import files, process_tree
from tests.conftest import wait_until

SPAWNER = '''
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import subprocess, time; "
                          "subprocess.Popen(['sleep', '300']); time.sleep(300)"])
print(child.pid, flush=True)
time.sleep(300)
'''


def wait_gone(pids: list[int], seconds: float = 30) -> list[int]:
    """The pids still alive after `seconds` (a hang guard: the processes here sleep 300 s)."""
    deadline = time.monotonic() + seconds
    while (alive := [p for p in pids if process_tree.alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def test_kill_tree_ends_a_process_and_every_descendant() -> None:
    top = subprocess.Popen([sys.executable, "-c", SPAWNER], stdout=subprocess.PIPE, text=True)
    try:
        assert top.stdout is not None
        int(top.stdout.readline())
        wait_until(lambda: len(process_tree.descendants(top.pid)) >= 2,  # child and its sleep
                   "the grandchild never started", 20)
        family = [p.pid for p in process_tree.descendants(top.pid)]
        process_tree.kill_tree(top.pid, include_self=False)
        assert wait_gone(family) == []
        assert top.poll() is None, "include_self=False leaves the process itself"
        process_tree.kill_tree(top.pid)
        top.wait(5)
        assert not process_tree.alive(top.pid)
    finally:
        if top.poll() is None:
            top.kill()
            top.wait()


def test_a_snapshot_is_killed_after_its_parent_is_gone() -> None:
    """What the window's client and the CLI do: look the descendants up, end the worker, end
    the snapshot (they are re-parented by then; the walk would no longer find them)."""
    top = subprocess.Popen([sys.executable, "-c", SPAWNER], stdout=subprocess.PIPE, text=True)
    assert top.stdout is not None
    int(top.stdout.readline())
    snapshot: list = []

    def both_started() -> bool:  # the child and its sleep
        snapshot[:] = process_tree.descendants(top.pid)
        return len(snapshot) >= 2

    wait_until(both_started, "the grandchild never started", 20)
    top.kill()
    top.wait()
    assert all(process_tree.alive(p.pid) for p in snapshot), "orphans, as the OOM killer leaves"
    process_tree.kill_processes(snapshot)
    assert wait_gone([p.pid for p in snapshot]) == []


def test_exit_descriptions_of_subprocess_codes() -> None:
    assert process_tree.exit_description(3) == "exit status 3"
    assert process_tree.exit_description(-9).startswith("signal 9 (SIGKILL: killed from outside")
    assert process_tree.exit_description(-15) == "signal 15 (SIGTERM)"
    assert process_tree.exit_description(0xC0000005).startswith("exception 0xC0000005")


def test_the_commit_gate_lets_a_rename_finish_before_the_end(tmp_path: Path) -> None:
    gate = files._CommitGate()
    heard: list[Path] = []
    gate.announce = lambda target, names: heard.append(target)
    target = tmp_path / "model.onnx"
    renamed = threading.Event()
    inside = threading.Event()

    def commit() -> None:
        with gate.committing(target):
            assert gate.held_here()
            inside.set()
            time.sleep(0.5)  # a slow fsync
            renamed.set()

    writer = threading.Thread(target=commit)
    writer.start()
    inside.wait(5)
    assert not gate.held_here()  # another thread's commit
    assert gate.close(timeout=10)  # what end_now does: wait for the renames, start no other
    assert renamed.is_set(), "close() returned before the rename under way was done"
    assert heard == [target]  # announced before any rename
    writer.join()
    done: list[bool] = []
    later = threading.Thread(target=lambda: done.append(gate.close(timeout=0.2)))
    later.start()
    later.join()
    assert done == [False], "a closed gate lets no later commit start"


def test_remove_abandoned_keeps_live_owners_and_other_files(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone = files.new_temp_folder(tmp_path, "m.onnx").rename(
        tmp_path / f".m.onnx.onnx-studio.{dead.pid}.abc.tmp")
    other = tmp_path / f".n.onnx.onnx-studio.{dead.pid}.abc.tmp"
    other.write_text("x")
    mine = files.new_temp_folder(tmp_path, "m.onnx")
    plain = tmp_path / "m.onnx.tmp"
    plain.write_text("x")
    theirs = tmp_path / f".m.onnx.{dead.pid}.abc.tmp"  # the old form: not ours to tell
    theirs.write_text("x")
    assert files.remove_abandoned(tmp_path, process_tree.alive, name="m.onnx") == [gone]
    assert other.exists()
    assert files.remove_abandoned(tmp_path, process_tree.alive) == [other]
    assert mine.is_dir() and plain.is_file() and theirs.is_file()


def test_family_finds_a_grandchild_whose_parent_is_gone(tmp_path: Path) -> None:
    """What a walk of the tree cannot reach: a child re-parented because the process that
    started it was killed. The family token in its environment still names it."""
    token = process_tree.new_family_token()
    env = {**os.environ, process_tree.FAMILY_ENV: token}
    pid_file = tmp_path / "orphan.pid"
    starter = subprocess.run(
        [sys.executable, "-c",
         "import subprocess, sys; "
         "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
         f"open({str(pid_file)!r}, 'w').write(str(p.pid))"],
        env=env, timeout=30)
    assert starter.returncode == 0  # the starter has exited: its child is an orphan now
    orphan = int(pid_file.read_text())
    try:
        assert orphan not in [p.pid for p in process_tree.descendants(os.getpid())]
        found = process_tree.family(token)
        assert [p.pid for p in found] == [orphan]
        process_tree.kill_processes(found)
        assert wait_gone([orphan]) == []
    finally:
        if process_tree.alive(orphan):
            os.kill(orphan, 9)
