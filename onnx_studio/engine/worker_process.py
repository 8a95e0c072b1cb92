"""A worker process seen from outside: how one is started, how it knows its client, and what
a killed one leaves behind (its temporary files), shared by the worker, the CLI and the window.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

from onnx_studio.engine import dirs, file_set, files, process_tree

WARM_FIRST_ENV = "ONNX_STUDIO_WORKER_WARM_FIRST"  # "1": say ready only once warmed up
CLIENT_PID_ENV = "ONNX_STUDIO_CLIENT_PID"  # the process whose death ends the worker
QUIET_ENV = "ONNX_STUDIO_WORKER_QUIET"  # "1": the client (the CLI) speaks for the worker
TARGET_FOLDER_FILE = "target-folder"  # in a job folder: where its export writes (a line each)
_REPO_ROOT = Path(__file__).resolve().parents[1]


def command() -> list[str]:
    """The program and arguments that start a worker (a frozen build is its own worker)."""
    if getattr(sys, "frozen", False):  # a PyInstaller build: the binary is the worker too
        return [sys.executable, "--worker"]
    return [sys.executable, "-m", "onnx_studio.engine.worker"]


def environment(token: str) -> dict[str, str]:
    """The environment of a worker started by this process for one job
    (onnx_studio.engine.job_client): this process is its client, `token` names its process family
    (onnx_studio.engine.process_tree)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env[CLIENT_PID_ENV] = str(os.getpid())
    env[process_tree.FAMILY_ENV] = token
    env[QUIET_ENV] = "1"  # the CLI itself says what the worker would (an untested torch)
    env.pop(WARM_FIRST_ENV, None)
    return env


def spawn(token: str) -> subprocess.Popen[bytes]:
    """A worker for one job of this process, its stdin, stdout and stderr pipes to it."""
    return subprocess.Popen(command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=environment(token))


class _Early:
    """The worker start_early started and no job has taken yet, with its family token."""

    worker: tuple[subprocess.Popen[bytes], str] | None = None


def start_early() -> None:
    """Start the worker the next job of this process takes (onnx_studio.engine.job_client.run_job),
    now: its start (torch's import, seconds) overlaps what this process does before it knows its job
    (the CLI's imports and argument checks). The caller ends it with `end_unclaimed` if no job took
    it; it ends itself if this process dies (CLIENT_PID_ENV)."""
    if _Early.worker is None:
        token = process_tree.new_family_token()
        _Early.worker = (spawn(token), token)


def take_early() -> tuple[subprocess.Popen[bytes], str] | None:
    """(the worker start_early started, its family token), once; None when there is none."""
    early, _Early.worker = _Early.worker, None
    return early


def end_unclaimed() -> None:
    """End the worker start_early started if no job took it (the command failed before)."""
    early = take_early()
    if early is not None:
        worker = early[0]
        with contextlib.suppress(OSError):
            worker.kill()
        worker.wait()
        for stream in (worker.stdin, worker.stdout, worker.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def remove_abandoned_temps(folders: list[Path] | None = None) -> list[Path]:
    """Remove the temporary files and folders that killed or cancelled runs left behind.

    Wherever an export of a worker that no longer runs was writing (the folders its job folder
    recorded), and in `folders` (the CLI's output folder and working folder): first a folder
    export's commit that a kill cut short is completed (onnx_studio.engine.file_set.recover), then
    every temporary file `.NAME.onnx-studio.PID.TOKEN.tmp` whose PID no longer runs is removed, and
    every such folder that carries the studio's marker file (onnx_studio.engine.files). Run when a
    worker starts (so when the window opens, and for every CLI job) and by the CLI after it ended a
    job's worker. The paths removed.
    """
    recorded: list[Path] = []
    root = dirs.cache_dir() / "jobs"
    with contextlib.suppress(OSError):
        for record in root.glob(f"*/{TARGET_FOLDER_FILE}"):
            pid_text = record.parent.name.split("-")[0]
            if not pid_text.isdigit() or process_tree.alive(int(pid_text)):
                continue
            with contextlib.suppress(OSError, UnicodeDecodeError):
                recorded += [Path(line) for line in record.read_text("utf-8").splitlines()
                             if line.strip()]
            with contextlib.suppress(OSError):
                record.unlink()
    where = [*recorded, *(folders or [])]
    file_set.recover_in(where)  # a commit a kill cut short: completed before anything reads
    return files.remove_abandoned_in(where, process_tree.alive)
