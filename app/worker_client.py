"""WorkerProcess: one export worker process (engine.worker) driven through a QProcess.

The transport only, and portable (Linux, Windows, macOS): the worker's stdout carries the
protocol, one JSON object per line, read on `readyReadStandardOutput` with partial lines kept
until their newline; its stderr is read on `readyReadStandardError` and forwarded as log text;
requests go out with `QProcess.write`, which queues the bytes and returns at once. Everything
runs on the GUI thread's event loop: no reader thread and no blocking call outside `wait`.

Ending a worker is `terminate`: it is sent `abort`, its stdin is closed and it is asked to
terminate (SIGTERM on POSIX), then killed after a short grace. The worker ends its own children
on `abort` or SIGTERM (engine.worker.end_now), so ending needs no process group here. One
POSIX-only fallback is left, guarded: a worker killed from outside (the out-of-memory killer)
cannot end its children, so its process group is killed once it has exited.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, QTimer, Signal

from engine.worker import WARM_FIRST_ENV

REPO_ROOT = Path(__file__).resolve().parents[1]
TERMINATE_GRACE_MS = 500  # terminate -> kill; the worker needs milliseconds to end its group

_SIGNAL_CAUSES = {
    "SIGKILL": "killed from outside, often because the machine ran out of memory",
    "SIGSEGV": "a crash inside native code (segmentation fault)",
    "SIGABRT": "a native library aborted",
    "SIGBUS": "a crash inside native code (bus error)",
}
# Windows reports a crash as the exception's NTSTATUS code instead of a signal
_EXCEPTION_CAUSES = {
    0xC0000005: "access violation: a crash inside native code",
    0xC00000FD: "stack overflow: a crash inside native code",
    0xC0000409: "a native library aborted",
    0xC0000017: "the machine ran out of memory",
}


def exit_description(code: int, crashed: bool = False) -> str:
    """'exit status 3' or 'signal 9 (SIGKILL: ...)': how a worker ended, with the likely cause.

    `code` and `crashed` are QProcess's `exitCode()` and `exitStatus() == CrashExit`. On POSIX
    the code of a crash is the signal's number; on Windows it is the exception code
    (0xC0000005). A negative code is subprocess's way of saying "signal -code".
    """
    if not crashed and code >= 0:
        return f"exit status {code}"
    unsigned = code & 0xFFFFFFFF
    if crashed and unsigned > 255:
        cause = _EXCEPTION_CAUSES.get(unsigned)
        return f"exception 0x{unsigned:08X}" + (f" ({cause})" if cause else "")
    number = abs(code)
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "unknown signal"
    cause = _SIGNAL_CAUSES.get(name)
    return f"signal {number} ({name}" + (f": {cause})" if cause else ")")


def worker_command() -> list[str]:
    """The program and arguments that start a worker (a frozen build is its own worker)."""
    if getattr(sys, "frozen", False):  # a PyInstaller build: the binary is the worker too
        return [sys.executable, "--worker"]
    return [sys.executable, "-m", "engine.worker"]


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

    ready = Signal(object)  # (worker): torch is imported; `ready_info` holds the message
    message = Signal(object, object)  # (worker, dict): any other protocol line
    stderrText = Signal(object, str)  # (worker, lines joined by newlines)
    exited = Signal(object, int, bool)  # (worker, QProcess exit code, crashed)

    def __init__(self, parent: QObject | None = None, command: list[str] | None = None,
                 warm_first: bool = False) -> None:
        """`warm_first`: the worker says ready only after its warm-up imports (a spare)."""
        super().__init__(parent)
        program, *arguments = command or worker_command()
        self.ready_info: dict[str, Any] | None = None
        self.has_exited = False
        self._started_pid = 0
        self._ending = False
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

    def send(self, request: dict[str, Any]) -> None:
        """Queue one request line; dropped once the worker is gone (`exited` says so)."""
        if self.running() and not self._ending:
            self._process.write((json.dumps(request) + "\n").encode())

    def terminate(self, grace_ms: int = TERMINATE_GRACE_MS) -> None:
        """Ask the worker to end (it ends its children too), and kill it after `grace_ms`."""
        if not self.running():
            return
        self.send({"job": "abort"})  # the way to end it at once that Windows has
        self._ending = True
        self._process.closeWriteChannel()
        self._process.terminate()  # SIGTERM on POSIX; a console process on Windows ignores it
        if not self._kill_timer.isActive():
            self._kill_timer.start(grace_ms)

    def kill(self) -> None:
        """End the worker process now (its children are ended only by `terminate`)."""
        if self.running():
            self._process.kill()

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
        text = "\n".join(line for line in lines if line.strip())
        if text:
            self.stderrText.emit(self, text)

    def _dispatch(self, raw: bytes) -> None:
        text = _text(raw)
        if not text.strip():
            return
        try:
            message = json.loads(text)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            self._emit_stderr([text])  # not ours: show it rather than lose it
        elif message.get("type") == "ready" and "id" not in message:
            self.ready_info = message
            self.ready.emit(self)
        else:
            self.message.emit(self, message)

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
        """POSIX: kill what a worker that could not end itself left in its process group.

        The worker leads a group of its own (engine.worker), so the group's id is its pid, and
        the id is not given to another process while the group has members.
        """
        if self._started_pid and hasattr(os, "killpg") and hasattr(signal, "SIGKILL"):
            with contextlib.suppress(OSError):  # no such group: the worker ended it
                os.killpg(self._started_pid, signal.SIGKILL)

    def _error(self, error: QProcess.ProcessError) -> None:
        # A crash is reported by `finished`; a process that never started only here.
        if error == QProcess.ProcessError.FailedToStart and not self.has_exited:
            self.has_exited = True
            self.stderrText.emit(self, f"Could not start the worker: "
                                       f"{self._process.errorString()}")
            self.exited.emit(self, 127, False)
