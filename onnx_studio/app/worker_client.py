"""WorkerProcess: one export worker process (onnx_studio.engine.worker) driven through a QProcess.

The transport only, and portable (Linux, Windows, macOS): the worker's stdout carries the protocol,
one JSON object per line, read on `readyReadStandardOutput` with partial lines kept until their
newline and each decoded once into its typed event (onnx_studio.engine.protocol; a result by the job
its id was sent as); its stderr is read on `readyReadStandardError` and forwarded as log text;
requests (protocol classes) go out with `QProcess.write`, which queues the bytes and returns at
once. Everything runs on the GUI thread's event loop: no reader thread and no blocking call outside
`wait`.

Ending a worker is `terminate`: it is sent `abort`, its stdin is closed and it is asked to terminate
(SIGTERM on POSIX), then killed after a short grace, which is extended while the worker renames a
file into place (its `committing` event; it ends once the renames are done). The worker ends its own
children on `abort` or SIGTERM (onnx_studio.engine.worker.end_now); its descendants are also looked
up (onnx_studio.engine.process_tree, portable) before it is ended and killed once it has exited, and
so is every process carrying the worker's family token in its environment: a worker killed from
outside (the out-of-memory killer) leaves none, grandchildren whose parent already exited included.
The worker watches this process (ONNX_STUDIO_CLIENT_PID) and ends itself when the window dies.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, QTimer, Signal

from onnx_studio.engine import process_tree
from onnx_studio.engine.errors import plain
from onnx_studio.engine.process_tree import exit_description
from onnx_studio.engine.protocol import (
    AbortRequest,
    Committing,
    Error,
    ErrorEvent,
    Event,
    ProtocolError,
    Ready,
    Request,
    Result,
    decode_reply,
    encode,
)
from onnx_studio.engine.worker_process import CLIENT_PID_ENV, WARM_FIRST_ENV
from onnx_studio.engine.worker_process import command as worker_command

__all__ = ["TERMINATE_GRACE_MS", "WorkerProcess", "exit_description", "worker_command"]

REPO_ROOT = Path(__file__).resolve().parents[1]
TERMINATE_GRACE_MS = 500  # terminate -> kill; the worker needs milliseconds to end its children
COMMIT_GRACE_S = 60.0  # how long a kill waits for a worker renaming a file into place


def _split_lines(buffer: bytearray, chunk: bytes) -> list[bytes]:
    """Append `chunk` to `buffer`; return the lines it completed, leaving the rest buffered."""
    if b"\n" not in chunk:
        buffer += chunk
        return []
    *lines, rest = chunk.split(b"\n")
    lines[0] = bytes(buffer) + lines[0]
    buffer[:] = rest
    return lines


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").rstrip("\r")


class WorkerProcess(QObject):
    """One worker process: start it, send it requests, hear its messages, end it.

    Every signal carries the WorkerProcess first, so a holder of several (the job runner's
    current, spare and retired workers) knows whose words it hears.
    """

    ready = Signal(object)  # (worker): torch is imported; `ready_info` holds the Ready event
    received = Signal(object, object)  # (worker, Event): any other protocol line, decoded
    stderrText = Signal(object, str)  # (worker, lines joined by newlines)
    exited = Signal(object, int, bool)  # (worker, QProcess exit code, crashed)

    def __init__(self, parent: QObject | None = None, command: list[str] | None = None,
                 warm_first: bool = False) -> None:
        """`warm_first`: the worker says ready only after its warm-up imports (a spare)."""
        super().__init__(parent)
        program, *arguments = command or worker_command()
        self.ready_info: Ready | None = None
        self._sent: dict[int, str] = {}  # job id -> the request's `job`, until it is answered
        self.has_exited = False
        self._started_pid = 0
        self._ending = False
        self._family: list[Any] = []  # the worker's descendants, looked up as it is ended
        # inherited by everything the worker starts: what a worker killed from outside (OOM
        # killer, kill -9) leaves is still found (onnx_studio.engine.process_tree.family)
        self._family_token = process_tree.new_family_token()
        self._committing_since: float | None = None  # a `committing` heard, no answer yet
        self._stdout = bytearray()
        self._stderr = bytearray()
        self._process = QProcess(self)
        self._process.setProgram(program)
        self._process.setArguments(arguments)
        self._process.setWorkingDirectory(str(REPO_ROOT))
        env = QProcessEnvironment.systemEnvironment()
        env.insert("PYTHONPATH", os.pathsep.join(
            [str(REPO_ROOT), *filter(None, [env.value("PYTHONPATH")])]))
        env.insert("PYTHONUNBUFFERED", "1")
        env.insert(CLIENT_PID_ENV, str(os.getpid()))  # it ends itself when this process dies
        env.insert(process_tree.FAMILY_ENV, self._family_token)
        if warm_first:
            env.insert(WARM_FIRST_ENV, "1")
        else:
            env.remove(WARM_FIRST_ENV)
        self._process.setProcessEnvironment(env)
        self._process.readyReadStandardOutput.connect(self._read_stdout)
        self._process.readyReadStandardError.connect(self._read_stderr)
        self._process.started.connect(self._started)
        self._process.finished.connect(self._finished)
        self._process.errorOccurred.connect(self._error)
        self._kill_timer = QTimer(self)
        self._kill_timer.setSingleShot(True)
        self._kill_timer.timeout.connect(self.kill)

    # ----------------------------------------------------------------- state

    @property
    def pid(self) -> int | None:
        """The worker's process id while it runs."""
        pid = int(self._process.processId())
        return pid or None

    def running(self) -> bool:
        return self._process.state() != QProcess.ProcessState.NotRunning

    # ----------------------------------------------------------------- control

    def start(self) -> None:
        """Start the process; returns at once (torch is imported in the background)."""
        self._process.start()

    def send(self, request: Request) -> None:
        """Queue one request line; dropped once the worker is gone (`exited` says so)."""
        if self.running() and not self._ending:
            job_id = getattr(request, "id", None)
            if isinstance(job_id, int):
                self._sent[job_id] = request.TAG  # its result is read as this job's
            self._process.write((encode(request) + "\n").encode())

    def terminate(self, grace_ms: int = TERMINATE_GRACE_MS) -> None:
        """Ask the worker to end (it ends its children too), and kill it after `grace_ms`."""
        if not self.running():
            return
        self._look_up_family()
        self.send(AbortRequest())  # the way to end it at once that Windows has
        self._ending = True
        self._process.closeWriteChannel()
        self._process.terminate()  # SIGTERM on POSIX; a console process on Windows ignores it
        if not self._kill_timer.isActive():
            self._kill_timer.start(grace_ms)

    def kill(self) -> None:
        """End the worker process now; its children go once it has exited (`_end_orphans`).

        Not while it renames a file into place (its `committing` event, up to COMMIT_GRACE_S):
        it ends by itself once the renames are done, so the file is either in place and the
        client was told, or untouched.
        """
        if not self.running():
            return
        self._read_stdout()
        since = self._committing_since
        if since is not None and time.monotonic() - since < COMMIT_GRACE_S:
            self._kill_timer.start(TERMINATE_GRACE_MS)
            return
        self._look_up_family()
        self._process.kill()

    def _look_up_family(self) -> None:
        if self._started_pid:
            self._family = process_tree.descendants(self._started_pid) or self._family

    def wait(self, timeout_ms: int) -> bool:
        """Block until the worker has exited (at most `timeout_ms`); True when it has."""
        if self.running():
            self._process.waitForFinished(timeout_ms)
        return not self.running()

    # ----------------------------------------------------------------- reading

    def _read_stdout(self) -> None:
        chunk = bytes(self._process.readAllStandardOutput().data())
        for raw in _split_lines(self._stdout, chunk):
            self._dispatch(raw)

    def _read_stderr(self) -> None:
        chunk = bytes(self._process.readAllStandardError().data())
        self._emit_stderr([_text(raw) for raw in _split_lines(self._stderr, chunk)])

    def _emit_stderr(self, lines: list[str]) -> None:
        # one signal per chunk read, not per line: a chatty model costs the log a few appends
        text = plain("\n".join(line for line in lines if line.strip()))  # no colour codes
        if text:
            self.stderrText.emit(self, text)

    def _dispatch(self, raw: bytes) -> None:
        text = _text(raw)
        if not text.strip():
            return
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            self._emit_stderr([text])  # not ours: show it rather than lose it
            return
        event = self._decode(data, text)
        if isinstance(event, Ready) and self.ready_info is None:
            self.ready_info = event
            self.ready.emit(self)
            return
        if isinstance(event, Committing):
            self._committing_since = time.monotonic()
        elif isinstance(event, Result | ErrorEvent):
            self._committing_since = None
            if event.id is not None:
                self._sent.pop(event.id, None)
        self.received.emit(self, event)

    def _decode(self, data: dict[str, Any], text: str) -> Event:
        """The line's typed event; one that does not fit the protocol is an ErrorEvent of
        kind "worker_protocol" (for the job it names, if it names one)."""
        try:
            return decode_reply(data, self._sent)
        except ProtocolError as exc:
            return ErrorEvent(id=exc.message_id, error=Error.from_exception(
                exc, with_details=False), details=text)

    def _drain(self) -> None:
        """Read what the process left in the pipes, then its unfinished last lines."""
        self._read_stdout()
        self._read_stderr()
        stdout, stderr = bytes(self._stdout), bytes(self._stderr)
        self._stdout.clear()
        self._stderr.clear()
        if stdout:
            self._dispatch(stdout)
        if stderr:
            self._emit_stderr([_text(stderr)])

    # ----------------------------------------------------------------- ending

    def _started(self) -> None:
        self._started_pid = int(self._process.processId())

    def _finished(self, code: int, status: QProcess.ExitStatus) -> None:
        self._kill_timer.stop()
        self._end_orphans()
        self._drain()
        self.has_exited = True
        self.exited.emit(self, int(code), status == QProcess.ExitStatus.CrashExit)

    def _end_orphans(self) -> None:
        """Kill what a worker that could not end itself left: its descendants looked up as it
        was ended, and every process carrying its family token (children re-parented once the
        worker was killed from outside). Portable: psutil, no process groups."""
        process_tree.kill_processes(self._family + process_tree.family(self._family_token))
        self._family = []

    def _error(self, error: QProcess.ProcessError) -> None:
        # A crash is reported by `finished`; a process that never started only here.
        if error == QProcess.ProcessError.FailedToStart and not self.has_exited:
            self.has_exited = True
            self.stderrText.emit(self, f"Could not start the worker: "
                                       f"{self._process.errorString()}")
            self.exited.emit(self, 127, False)
