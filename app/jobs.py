"""JobRunner: drives the export worker process (engine.worker) from the GUI.

The worker runs in its own process group so cancelling kills it and every child at once; its
pipes are read on a QThread (`WorkerProcess`), which parses the JSON lines and hands small dicts
to the GUI thread through queued signals, so the event loop never waits on the worker. When the
worker dies or is killed, the jobs it held fail with a sentence and a fresh worker starts.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal

REPO_ROOT = Path(__file__).resolve().parents[1]
JobCallback = Callable[[dict[str, Any]], None]
# Jobs that run for seconds or more (the user waits on them, Cancel ends them), by their names
LONG_JOBS = {"export": "export", "validate": "validation"}
_RUNNERS: weakref.WeakSet[JobRunner] = weakref.WeakSet()


@atexit.register
def _shutdown_all() -> None:
    # A QThread destroyed while running aborts the process; stop every worker before exit.
    for runner in list(_RUNNERS):
        runner.shutdown()


def exit_description(returncode: int) -> str:
    """'exit status 3' or 'signal 9 (SIGKILL)', with the likely cause for the usual signals."""
    if returncode >= 0:
        return f"exit status {returncode}"
    number = -returncode
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "unknown signal"
    cause = {
        "SIGKILL": "killed from outside, often because the machine ran out of memory",
        "SIGSEGV": "a crash inside native code (segmentation fault)",
        "SIGABRT": "a native library aborted",
        "SIGBUS": "a crash inside native code (bus error)",
    }.get(name)
    return f"signal {number} ({name}" + (f": {cause})" if cause else ")")


class WorkerProcess(QThread):
    """One worker process; the thread starts it and reads its stdout (protocol) and stderr."""

    # Each signal carries the WorkerProcess itself, so the runner can ignore retired workers.
    # Receivers are bound methods of GUI-thread QObjects, so delivery is queued to that thread.
    message = Signal(object, object)  # (worker, dict): a protocol line
    stderrLine = Signal(str)  # one or more lines, joined by newlines
    exited = Signal(object, int)  # (worker, return code; negative for a signal)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._proc: subprocess.Popen[bytes] | None = None
        self._pending: list[bytes] = []
        self._stderr_lines: list[str] = []
        self._lock = threading.Lock()
        self._killed = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def command(self) -> list[str]:
        if getattr(sys, "frozen", False):  # a PyInstaller build: the binary is the worker too
            return [sys.executable, "--worker"]
        return [sys.executable, "-m", "engine.worker"]

    def run(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])]
        )
        env["PYTHONUNBUFFERED"] = "1"
        try:
            proc = subprocess.Popen(
                self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=env, cwd=str(REPO_ROOT),
                start_new_session=True,  # own process group: cancel kills its children too
            )
        except OSError as exc:
            self.stderrLine.emit(f"Could not start the worker: {exc}")
            self.exited.emit(self, 127)
            return
        with self._lock:
            self._proc = proc
            pending, self._pending = self._pending, []
            killed = self._killed
        if killed:
            self._kill_group(proc)
        for data in pending:
            self._write(data)
        self._read_until_eof(proc)
        self.exited.emit(self, proc.wait())

    def _read_until_eof(self, proc: subprocess.Popen[bytes]) -> None:
        """Read both pipes until the worker has exited and its output is drained.

        Children the worker started may hold the pipes open after the worker died, so its
        exit is also polled, and then its process group is killed to release them.
        """
        assert proc.stdout is not None and proc.stderr is not None
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        selector = selectors.DefaultSelector()
        buffers = {out_fd: b"", err_fd: b""}
        for fd in buffers:
            selector.register(fd, selectors.EVENT_READ)
        open_fds = set(buffers)
        exited_at: float | None = None
        flushed = time.monotonic()
        while open_fds:
            ready = selector.select(timeout=0.1)
            if time.monotonic() - flushed > 0.05:
                self._flush_stderr()
                flushed = time.monotonic()
            for key, _ in ready:
                fd = int(key.fd)
                chunk = os.read(fd, 65536)
                if not chunk:
                    selector.unregister(fd)
                    open_fds.discard(fd)
                    lines = [buffers[fd]] if buffers[fd] else []
                    buffers[fd] = b""
                else:
                    *lines, buffers[fd] = (buffers[fd] + chunk).split(b"\n")
                for raw in lines:
                    self._dispatch(fd == out_fd, raw)
            if proc.poll() is not None:
                if exited_at is None:
                    exited_at = time.monotonic()
                    self._kill_group(proc)  # orphans holding the pipes
                elif not ready or time.monotonic() - exited_at > 1.0:
                    break  # drained what the dead worker wrote
        for fd, rest in buffers.items():
            if rest:
                self._dispatch(fd == out_fd, rest)
        self._flush_stderr()
        selector.close()

    def _flush_stderr(self) -> None:
        # Stderr lines go out in batches: a model that prints a lot costs the GUI one
        # append per 50 ms, not one per line.
        if self._stderr_lines:
            lines, self._stderr_lines = self._stderr_lines, []
            self.stderrLine.emit("\n".join(lines))

    def _dispatch(self, is_protocol: bool, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace").rstrip("\r")
        if not is_protocol:
            if text.strip():
                self._stderr_lines.append(text)
            return
        try:
            message = json.loads(text)
        except ValueError:
            self._stderr_lines.append(text)  # not ours: show it rather than lose it
            return
        if isinstance(message, dict):
            self.message.emit(self, message)

    def send(self, request: dict[str, Any]) -> None:
        """Queue a request line; safe before the process exists and after it died."""
        data = (json.dumps(request) + "\n").encode()
        with self._lock:
            if self._proc is None:
                self._pending.append(data)
                return
        self._write(data)

    def _write(self, data: bytes) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            return
        try:
            proc.stdin.write(data)
            proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the worker is gone; `exited` reports it

    def kill(self) -> None:
        """SIGKILL the worker's whole process group (its children too); returns at once."""
        with self._lock:
            self._killed = True
            proc = self._proc
        if proc is not None:
            self._kill_group(proc)

    @staticmethod
    def _kill_group(proc: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        if proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError, OSError):
                proc.stdin.close()


class JobRunner(QObject):
    """Submits jobs to a warm worker, routes its events to callbacks, replaces it when it dies.

    Signals: `workerReady(dict)` when a worker has imported torch; `workerLost(str)` with the
    sentence shown when a worker died; `log(str)` for every worker stderr line.
    """

    workerReady = Signal(object)
    workerLost = Signal(str)
    log = Signal(str)

    MAX_EARLY_DEATHS = 3  # a worker that dies before it is ready this often is not restarted

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        _RUNNERS.add(self)
        self._ids = itertools.count(1)
        self._jobs: dict[int, tuple[str, JobCallback]] = {}
        self._worker: WorkerProcess | None = None
        self._old: set[WorkerProcess] = set()
        self._ready: dict[str, Any] | None = None
        self._early_deaths = 0
        self._stopping = False

    # ----------------------------------------------------------------- lifecycle

    @property
    def ready_info(self) -> dict[str, Any] | None:
        return self._ready

    @property
    def worker_pid(self) -> int | None:
        return self._worker.pid if self._worker else None

    def start(self) -> None:
        """Start a worker in the background unless one is running."""
        if self._worker is not None or self._stopping:
            return
        worker = WorkerProcess(self)
        worker.message.connect(self._on_message)
        worker.stderrLine.connect(self.log)
        worker.exited.connect(self._on_exited)
        worker.finished.connect(self._forget)
        self._worker = worker
        self._ready = None
        worker.start()

    def shutdown(self, timeout_ms: int = 2000) -> None:
        """Kill the worker and wait for its reader thread (window close)."""
        self._stopping = True
        for worker in [w for w in (self._worker, *self._old) if w is not None]:
            worker.kill()
            worker.wait(timeout_ms)
        self._worker = None
        self._old.clear()

    def _forget(self) -> None:
        worker = self.sender()
        if isinstance(worker, WorkerProcess) and worker is not self._worker:
            self._old.discard(worker)
            worker.deleteLater()

    def _retire(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            self._old.add(worker)
            worker.kill()

    # ----------------------------------------------------------------- jobs

    def submit(self, request: dict[str, Any], callback: JobCallback) -> int:
        """Send a job; `callback` gets each of its events, the last one `result` or `error`."""
        if self._worker is None:
            self._early_deaths = 0
            self._stopping = False
            self.start()
        assert self._worker is not None
        job_id = next(self._ids)
        self._jobs[job_id] = (str(request.get("job")), callback)
        self._worker.send({**request, "id": job_id})
        return job_id

    def export(self, recipe_toml: str, base_dir: Path, callback: JobCallback) -> int:
        """Export (and validate, if the recipe says so) in the worker."""
        return self.submit({"job": "export", "recipe": recipe_toml, "base_dir": str(base_dir)},
                           callback)

    def validate(self, recipe_toml: str, base_dir: Path, onnx: Path, callback: JobCallback
                 ) -> int:
        """Validate an existing .onnx file against the recipe's model with its [validate]."""
        return self.submit({"job": "validate", "recipe": recipe_toml, "base_dir": str(base_dir),
                            "onnx": str(onnx)}, callback)

    def busy(self) -> bool:
        return any(kind in LONG_JOBS for kind, _ in self._jobs.values())

    def cancel(self) -> None:
        """End every running job now (the worker is killed) and start a fresh worker."""
        self._retire()
        self._fail_all("cancelled", "The {job} was cancelled; the form is unchanged.", "")
        self.start()

    def _fail_all(self, kind: str, message: str, hint: str) -> None:
        """Fail every pending job; `{job}` in `message` becomes the job's name."""
        jobs, self._jobs = self._jobs, {}
        for job_id, (job, callback) in jobs.items():
            text = message.replace("{job}", LONG_JOBS.get(job, "job"))
            callback({"id": job_id, "type": "error", "details": "", "error": {
                "kind": kind, "message": text, "hint": hint, "unsupported_ops": []}})

    def _on_message(self, worker: WorkerProcess, message: dict[str, Any]) -> None:
        if worker is not self._worker:
            return  # a retired worker's last words
        if message.get("type") == "ready":
            self._ready = message
            self._early_deaths = 0
            self.workerReady.emit(message)
            return
        job_id = message.get("id")
        entry = self._jobs.get(job_id) if isinstance(job_id, int) else None
        if entry is None:
            return
        if message.get("type") in ("result", "error"):
            del self._jobs[job_id]  # type: ignore[arg-type]
        entry[1](message)

    def _on_exited(self, worker: WorkerProcess, code: int) -> None:
        if worker is not self._worker:
            return  # killed on purpose (cancel) and already replaced
        was_ready = self._ready is not None
        self._worker = None
        self._old.add(worker)
        if self._stopping:
            return
        how = exit_description(code)
        sentence = f"The export worker stopped unexpectedly ({how})."
        self._fail_all(
            "worker_crashed", sentence,
            "A fresh worker has been started; try again, or lower the model size or input "
            "shapes if it ran out of memory.",
        )
        self.workerLost.emit(sentence)
        if not was_ready:
            self._early_deaths += 1
        if self._early_deaths < self.MAX_EARLY_DEATHS:
            self.start()
