"""A real multi-file Hugging Face export (a tiny T5: encoder, decoder, decoder with past) over a
previous one, through the CLI: SIGKILL or Ctrl+C at any moment leaves the previous set or the
new set, never a mix; a commit cut short is completed by the next CLI run before it reads the
folder; a cancel says exactly what was written (issue 23, 1). And the folder output is tried
before any work (issue 23, 7).

The previous set is written inline (external_data = "never"), the new one with a data file per
.onnx ("always"), so a mix of the two is visible file by file. The files are made by the
TorchScript exporter: what is tried here is the commit, which every exporter's files go through
alike, and TorchScript makes the three files in a fraction of dynamo's time on 2 cores (the
dynamo export of the same folder is tested in tests/engine/test_hf_export.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from onnx_studio.engine import file_set
from tests.conftest import REPO, wait_until
from tests.engine.hf_models import build

FILES = ["decoder_model.onnx", "decoder_with_past_model.onnx", "encoder_model.onnx"]
WAIT_S = 600  # a T5 export on a loaded 2-core machine


def environment(tmp: Path, stop_after: str = "") -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["HF_HUB_OFFLINE"] = "1"
    for name in ("CONFIG", "CACHE", "DATA"):
        env[f"ONNX_STUDIO_{name}_DIR"] = str(tmp / name.lower())
    env.pop(file_set.STOP_AFTER_ENV, None)
    if stop_after:
        env[file_set.STOP_AFTER_ENV] = stop_after
    return env


def recipe(folder: Path, model: Path, out: Path, external_data: str) -> Path:
    path = folder / f"t5_{external_data}.toml"
    path.write_text(f'version = 1\n\n[model]\nsource = "hf:{model}"\n\n[export]\n'
                    f'exporter = "torchscript"\noutput = "{out}"\n'
                    f'external_data = "{external_data}"\n', encoding="utf-8")
    return path


def cli(tmp: Path, *args: str, stop_after: str = "") -> subprocess.Popen[str]:
    """`onnx-studio ARGS --json` in a session of its own (a kill of its group ends the CLI
    and its worker together, as a kill -9 of a terminal's job does)."""
    return subprocess.Popen([sys.executable, "-m", "onnx_studio.engine.cli", *args, "--json"],
                            env=environment(tmp, stop_after), cwd=tmp, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def document(process: subprocess.Popen[str]) -> tuple[int, dict[str, object], str]:
    out, err = process.communicate(timeout=WAIT_S)
    lines = out.strip().splitlines()
    return process.returncode, json.loads(lines[-1]) if lines else {}, err


def wait_for_line(process: subprocess.Popen[str], text: str) -> None:
    assert process.stderr is not None
    deadline = time.monotonic() + WAIT_S
    for line in process.stderr:
        if text in line:
            return
        if time.monotonic() >= deadline:  # a hang guard
            pytest.fail(f"no {text!r} within {WAIT_S} s")
    raise AssertionError(f"the CLI ended without {text!r} (exit {process.wait()})")


def wait_for(condition: Callable[[], object], process: subprocess.Popen[str]) -> None:
    def reached() -> bool:
        if condition():
            return True
        assert process.poll() is None, process.communicate()[1][-3000:]
        return False

    wait_until(reached, "the CLI did not get there", WAIT_S)


def staged(out: Path, name: str) -> bool:
    return any((s / name).exists() for s in out.glob(".staging.onnx-studio.*.tmp"))


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def assert_new_set(out: Path, old: dict[str, bytes]) -> None:
    """The new set whole: every file with its data file, none of the old bytes, the user's
    file kept, nothing temporary left."""
    import onnx

    names = sorted(p.name for p in out.iterdir())
    data = [f"{f}.data" for f in FILES]
    assert names == sorted([file_set.MANIFEST, *FILES, *data, "notes.txt"]), names
    for name in FILES:
        assert (out / name).read_bytes() != old[name]
        onnx.checker.check_model(str(out / name))  # reads its data file beside it
    assert (out / "notes.txt").read_text() == "the user's own file"


@pytest.fixture(scope="module")
def t5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, dict[str, bytes]]]:
    """(model folder, the previous export's folder, its files' bytes), made once."""
    root = tmp_path_factory.mktemp("t5")
    model = build("t5", root)
    old = root / "old"
    code, doc, err = document(cli(root, "export", "--recipe",
                                  str(recipe(root, model, old, "never"))))
    assert code == 0, err[-3000:]
    assert sorted(f["name"] for f in doc["files"]) == FILES  # type: ignore[union-attr]
    (old / "notes.txt").write_text("the user's own file")
    yield model, old, snapshot(old)


def previous(tmp: Path, t5: tuple[Path, Path, dict[str, bytes]]) -> tuple[Path, Path]:
    """A fresh copy of the previous export in tmp/out, and the recipe of the new one."""
    model, old, _ = t5
    out = tmp / "out"
    shutil.copytree(old, out)
    return out, recipe(tmp, model, out, "always")


slow = pytest.mark.slow
generous = pytest.mark.timeout(1500)  # the module's T5 export comes first


@slow
@generous
def test_kill_9_in_the_middle_of_the_commit_is_completed_by_the_next_cli_run(
        tmp_path: Path, t5: tuple[Path, Path, dict[str, bytes]]) -> None:
    out, new = previous(tmp_path, t5)
    process = cli(tmp_path, "export", "--recipe", str(new), stop_after="2")
    wait_for_line(process, "commit stopped after 2 renames")
    os.killpg(process.pid, signal.SIGKILL)  # the CLI and its worker, at once
    process.wait(30)
    assert (out / file_set.JOURNAL).is_file()
    assert snapshot(out) != t5[2]  # two old files moved away: a mix until it is completed
    code, _, err = document(cli(tmp_path, "inspect", str(out / "encoder_model.onnx")))
    assert code == 0, err[-3000:]
    assert_new_set(out, t5[2])


@slow
@generous
def test_kill_9_of_the_worker_mid_commit_is_completed_by_its_cli(
        tmp_path: Path, t5: tuple[Path, Path, dict[str, bytes]]) -> None:
    out, new = previous(tmp_path, t5)
    process = cli(tmp_path, "export", "--recipe", str(new), stop_after="4")
    wait_for_line(process, "commit stopped after 4 renames")
    for child in psutil.Process(process.pid).children():  # the worker alone
        child.send_signal(signal.SIGKILL)
    code, doc, _ = document(process)
    error = doc["error"]
    assert code == 1 and error["kind"] == "worker_crashed"  # type: ignore[index]
    assert "The export had finished before" in error["message"]  # type: ignore[index]
    assert "encoder_model.onnx.data" in error["message"]  # type: ignore[index]
    assert_new_set(out, t5[2])


@slow
@generous
def test_kill_9_while_staging_leaves_the_previous_set(
        tmp_path: Path, t5: tuple[Path, Path, dict[str, bytes]]) -> None:
    out, new = previous(tmp_path, t5)
    process = cli(tmp_path, "export", "--recipe", str(new))
    wait_for(lambda: staged(out, "decoder_model.onnx"), process)  # the encoder is written
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)
    code, _, err = document(cli(tmp_path, "inspect", str(out / "encoder_model.onnx")))
    assert code == 0, err[-3000:]
    assert snapshot(out) == t5[2]
    assert not list(out.glob(".*.tmp"))  # the staging folder of the killed worker: removed


@slow
@generous
def test_ctrl_c_after_the_first_file_changes_nothing_and_says_so(
        tmp_path: Path, t5: tuple[Path, Path, dict[str, bytes]]) -> None:
    out, new = previous(tmp_path, t5)
    process = cli(tmp_path, "export", "--recipe", str(new))
    wait_for(lambda: staged(out, "decoder_model.onnx"), process)
    process.send_signal(signal.SIGINT)
    code, doc, _ = document(process)
    error = doc["error"]
    assert code == 130 and error["kind"] == "cancelled"  # type: ignore[index]
    assert "no file was written or changed" in error["message"]  # type: ignore[index]
    assert snapshot(out) == t5[2]
    assert not list(out.glob(".*.tmp"))


@slow
@generous
def test_ctrl_c_after_the_commit_names_every_file_written(
        tmp_path: Path, t5: tuple[Path, Path, dict[str, bytes]]) -> None:
    out, new = previous(tmp_path, t5)
    process = cli(tmp_path, "export", "--recipe", str(new), stop_after="end")
    wait_for_line(process, "stopped after the commit")
    process.send_signal(signal.SIGINT)
    code, doc, _ = document(process)
    error = doc["error"]
    assert code == 130 and error["kind"] == "cancelled"  # type: ignore[index]
    message = error["message"]  # type: ignore[index]
    assert "after the export had finished" in message and str(out) in message
    for name in FILES:
        assert name in message and f"{name}.data" in message
    assert doc["output"] == str(out)
    assert_new_set(out, t5[2])


def test_an_output_folder_that_cannot_be_written_is_a_write_error_before_any_work(
        tmp_path: Path) -> None:
    """/sys takes no new file even for root (whose permission bits pass every check)."""
    if not Path("/sys").is_dir():
        pytest.skip("needs Linux's /sys")
    code, doc, err = document(cli(tmp_path, "export", f"hf:{tmp_path}", "-o", "/sys/x"))
    assert code == 2, err
    assert doc["error"]["kind"] == "write"  # type: ignore[index]
    assert "/sys" in doc["error"]["message"]  # type: ignore[index]
    assert not (tmp_path / "cache" / "jobs").exists()  # no worker was started
