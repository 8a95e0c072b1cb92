"""The CLI's job runs in a worker process: every death inside it still ends in the JSON line.

Real processes throughout: `python -m onnx_studio.engine.cli` as a user runs it, a real worker, real
signals. Each case asserts the exit status, the JSON document and the files left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from onnx_studio.engine import process_tree
from tests.conftest import REPO, wait_until
from tests.reliability.models_h1 import write_process_models

pytestmark = pytest.mark.slow  # real worker processes: torch imports, exports

TIMEOUT_S = 100


def cli(*argv: str) -> list[str]:
    return [sys.executable, "-m", "onnx_studio.engine.cli", *argv]


def env(tmp: Path) -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), out.get("PYTHONPATH")]))
    out["ONNX_STUDIO_CACHE_DIR"] = str(tmp / "cache")
    return out


def last_json(stdout: str) -> dict:
    lines = stdout.strip().splitlines()
    assert lines, "nothing on standard output"
    return json.loads(lines[-1])


def temp_leftovers(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.startswith(".") and
                  p.name.endswith(".tmp"))


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("process_models")
    write_process_models(folder)
    return folder


@pytest.fixture(scope="module")
def previous(models: Path) -> bytes:
    """A good export of Base: the file every failed run must leave byte for byte."""
    out = models / "good.onnx"
    done = subprocess.run(cli("export", f"{models / 'process_models.py'}:Base", "-o", str(out),
                              "--input", "x=2x4", "--json"), env=env(models), cwd=models,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return out.read_bytes()


def export_over(models: Path, tmp_path: Path, previous: bytes, name: str) -> tuple[list[str],
                                                                                      Path]:
    target = tmp_path / "out" / "model.onnx"
    target.parent.mkdir()
    target.write_bytes(previous)
    return cli("export", f"{models / 'process_models.py'}:{name}", "-o", str(target),
               "--input", "x=2x4", "--json"), target


@pytest.mark.parametrize(("model", "how"), [
    ("ExitsHard", "exit status 3"),
    ("KillsItself", "signal 9 (SIGKILL"),
])
def test_a_process_death_in_forward_is_worker_crashed(
        models: Path, previous: bytes, tmp_path: Path, model: str, how: str) -> None:
    argv, target = export_over(models, tmp_path, previous, model)
    done = subprocess.run(argv, env=env(tmp_path), cwd=tmp_path, capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert done.returncode == 1, done.stderr
    doc = last_json(done.stdout)
    assert doc["ok"] is False
    assert doc["error"]["kind"] == "worker_crashed", doc
    assert how in doc["error"]["message"], doc["error"]["message"]
    assert doc["error"]["message"].count("\n") == 0
    assert f"error: {doc['error']['message']}" in done.stderr
    assert target.read_bytes() == previous
    assert temp_leftovers(target.parent) == []


def wait_for(path: Path, process: subprocess.Popen[str], seconds: float = 90) -> str:
    def written() -> bool:
        if process.poll() is not None:
            _, err = process.communicate()
            pytest.fail(f"the CLI ended first ({process.returncode}): {err[-2000:]}")
        return path.exists()

    wait_until(written, f"{path.name} never appeared", seconds, every=0.1)
    time.sleep(0.2)  # written, not half-written
    return path.read_text()


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_to_the_cli_cancels_a_hung_export_at_once(
        models: Path, previous: bytes, tmp_path: Path, signum: int, status: int) -> None:
    (models / "hang.pid").unlink(missing_ok=True)
    argv, target = export_over(models, tmp_path, previous, "HangsInExport")
    process = subprocess.Popen(argv, env=env(tmp_path), cwd=tmp_path, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        worker_pid, child_pid = map(int, wait_for(models / "hang.pid", process).split())
        assert temp_leftovers(target.parent), "the export's temporary folder should exist now"
        process.send_signal(signum)
        # a hang guard: the export hangs forever, so ending at all is the signal's doing (how
        # fast: tests/benchmarks/bench_stop.py)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == status, err
    doc = last_json(out)
    assert doc["ok"] is False and doc["error"]["kind"] == "cancelled", doc
    assert signal.Signals(signum).name in doc["error"]["message"]
    assert "no file was written" in doc["error"]["message"]
    assert target.read_bytes() == previous, "the previous file changed"
    assert temp_leftovers(target.parent) == [], "temporary files left behind"
    deadline = time.monotonic() + 30  # a hang guard: the child sleeps 300 s
    while (process_tree.alive(worker_pid) or process_tree.alive(child_pid)) and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process_tree.alive(worker_pid), "the worker outlived the CLI"
    assert not process_tree.alive(child_pid), "the model's child outlived the CLI"
    assert not list((tmp_path / "cache" / "jobs").glob(f"{worker_pid}-*"))


def test_a_signal_after_the_rename_says_the_export_had_finished(
        models: Path, tmp_path: Path) -> None:
    """Honest cancel: the file was already in place when the signal came, and the document
    says so instead of claiming nothing changed."""
    target = models / "after" / "model.onnx"
    (models / "validating").unlink(missing_ok=True)
    argv = cli("export", f"{models / 'process_models.py'}:HangsInValidation", "-o",
               str(target), "--input", "x=2x4", "--validate", "--json")
    process = subprocess.Popen(argv, env=env(tmp_path), cwd=tmp_path, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(models / "validating", process)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    doc = last_json(out)
    assert doc["error"]["kind"] == "cancelled"
    assert "after the export had finished" in doc["error"]["message"]
    assert str(target) in doc["error"]["message"]
    assert doc["output"] == str(target)  # the document names the file that is now there
    assert target.is_file() and target.stat().st_size > 0
    assert temp_leftovers(target.parent) == []


def test_the_cli_process_never_imports_torch(models: Path, previous: bytes) -> None:
    """The parent stays light: torch, onnx and onnxruntime load in the worker only."""
    code = (
        "import sys, json\n"
        "from onnx_studio.engine.cli import main\n"
        f"rc = main(['export', {str(models / 'process_models.py')!r} + ':Base', '-o', "
        f"{str(models / 'light.onnx')!r}, '--input', 'x=2x4', '--validate'])\n"
        "print(json.dumps({'rc': rc, 'loaded': [m for m in ('torch', 'onnxruntime') "
        "if m in sys.modules]}), file=sys.__stderr__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env(models), cwd=models,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    facts = json.loads(done.stderr.strip().splitlines()[-1])
    assert facts == {"rc": 0, "loaded": []}, done.stderr[-2000:]


@pytest.mark.parametrize("command", ["compare", "profile"])
def test_a_model_that_dies_in_an_analysis_is_worker_crashed(
        models: Path, previous: bytes, tmp_path: Path, command: str) -> None:
    """compare and profile run the recipe's eager model in a worker too: its death is the
    command's document with `worker_crashed`, not a CLI that vanished without its JSON line."""
    good = tmp_path / "good.onnx"
    good.write_bytes(previous)
    recipe = tmp_path / "dies.toml"
    recipe.write_text(f'''version = 1
[model]
source = "{(models / 'process_models.py').as_posix()}:ExitsHard"
[[inputs]]
name = "x"
shape = [2, 4]
[export]
output = "unused.onnx"
''', encoding="utf-8")
    files = [str(good), str(good)] if command == "compare" else [str(good)]
    done = subprocess.run(cli(command, *files, "--recipe", str(recipe), "--runs", "1", "--json"),
                          env=env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert done.returncode == 1, done.stderr
    doc = last_json(done.stdout)
    assert doc["ok"] is False
    assert doc["error"]["kind"] == "worker_crashed", doc
    assert "exit status 3" in doc["error"]["message"]
    assert f"error: {doc['error']['message']}" in done.stderr
    assert good.read_bytes() == previous
