"""One job in a worker process of its own: the CLI's plain-subprocess client of
onnx_studio.engine.worker.

The CLI's process stays light (no torch) and outlives whatever the job does: a crash,
`os._exit`, a signal or the out-of-memory killer inside the model or the exporter ends the
worker, not the CLI, which turns it into a `worker_crashed` error naming the exit status or
signal. SIGINT (Ctrl+C) and SIGTERM to the CLI end the job at once, a hung forward included:
the worker is asked to abort (it ends its own children, and lets a rename under way finish),
then killed with its process tree, its temporary files are removed, and the job ends in a
`cancelled` error with exit status 130 or 143.
"""

from __future__ import annotations

import collections
import contextlib
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import IO, Any

from onnx_studio.engine import dirs, process_tree, protocol
from onnx_studio.engine.errors import StudioError, plain
from onnx_studio.engine.file_set import written_text
from onnx_studio.engine.protocol import (
    AbortRequest,
    Committing,
    ErrorEvent,
    Event,
    Ready,
    Request,
    Result,
)
from onnx_studio.engine.worker_process import remove_abandoned_temps, spawn, take_early

_POLL_S = 0.2
_ABORT_GRACE_S = 2.0  # abort -> kill: the worker ends itself in milliseconds unless stuck
_COMMIT_GRACE_S = 60.0  # ... or once the rename under way is done (onnx_studio.engine.files.COMMIT)
_EXIT_WAIT_S = 10.0  # after the answer: the worker quits once stdin closes
_STDERR_TAIL = 40  # the worker's last stderr lines, kept for a crash's details
_STDERR_JOIN_S = 2.0  # a child of the model may hold the pipe open: wait no longer
# exit status of a process ended by a signal, as shells report it: 128 + the signal's number
CANCEL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


class CancelledAfterWrite(StudioError):
    """A cancel that came after the new file was renamed into place: the export finished, what
    followed it did not. `written` is the file, so the document can name it as its output."""

    def __init__(self, written: str, message: str, hint: str, exit_code: int) -> None:
        super().__init__("cancelled", message, hint, exit_code=exit_code)
        self.written = written


class _Interrupted(Exception):
    def __init__(self, signum: int, timed_out: bool = False) -> None:
        super().__init__(signum)
        self.signum = signum
        self.timed_out = timed_out


def run_job(request: Request, expected: str, on_event: Callable[[Event], None], *,
            folder: Path | None = None, timeout: float | None = None,
            stop: threading.Event | None = None, stderr_to: Any = None) -> Result:
    """Run `request` in a fresh worker and return its result (the job named `expected`).

    `on_event` hears the job's progress, log, warning and committing events as they come. A
    job that fails raises its StudioError (with its details and exit status); a worker that
    dies raises `worker_crashed`; a SIGINT or SIGTERM raises `cancelled`. `folder` is where
    the job writes its file: its temporary files are removed there when the job is ended.

    From another thread (onnx_studio.engine.batch runs several jobs at once): `stop`, once set, ends
    the job as a SIGINT would (`cancelled`); past `timeout` seconds the job is ended the same way
    and raises kind `timeout`. `stderr_to` (a stream, default sys.stderr) hears the worker's
    standard error.
    """
    early = take_early()  # started while the CLI was still getting ready (start_early)
    token = early[1] if early is not None else process_tree.new_family_token()
    worker = early[0] if early is not None else spawn(token)
    assert worker.stdin is not None and worker.stdout is not None and worker.stderr is not None
    lines: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    tail: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL)
    threading.Thread(target=_read_lines, args=(worker.stdout, lines), daemon=True,
                     name="worker-stdout").start()
    stderr = threading.Thread(target=_forward_stderr,
                              args=(worker.stderr, stderr_to or sys.stderr, tail),
                              daemon=True, name="worker-stderr")
    stderr.start()
    job = _Job(worker, expected, on_event, token)
    job.deadline = None if timeout is None else time.monotonic() + timeout
    job.stop = stop
    try:
        with _signals_interrupt():
            _send(worker, request)
            result = job.follow(lines)
    except _Interrupted as interrupt:
        job.cancel(interrupt.signum, lines)
        _clean_after(worker.pid, folder)
        stderr.join(_STDERR_JOIN_S)
        if interrupt.timed_out:
            raise _timed_out(timeout or 0.0, job.committed) from None
        raise job.cancelled_error(interrupt.signum) from None
    except BaseException:
        job.end()
        _clean_after(worker.pid, folder)
        stderr.join(_STDERR_JOIN_S)
        raise
    if result is None:  # the worker ended without its answer
        code = job.end()
        _clean_after(worker.pid, folder)  # completes a commit the crash cut short
        stderr.join(_STDERR_JOIN_S)
        crash = _crashed(code, tail)
        if job.committed is not None:  # its files were going into place: they are now
            crash.message += (f" The export had finished before: "
                              f"{written_text(job.committed, job.committed_files)}.")
        raise crash
    job.finish()
    stderr.join(_STDERR_JOIN_S)  # its last lines before the CLI's own
    return result


class _Job:
    """The worker running one job, and what it has said so far."""

    def __init__(self, worker: subprocess.Popen[bytes], expected: str,
                 on_event: Callable[[Event], None], token: str) -> None:
        self.worker = worker
        self.token = token  # in the worker's environment: onnx_studio.engine.process_tree.family
        self.expected = expected
        self.on_event = on_event
        self.committed: str | None = None  # the file renamed into place, once announced
        self.committed_files: list[str] = []  # ... or the files a folder export put there
        self.family: list[Any] = []  # the worker's descendants, last seen
        self.deadline: float | None = None  # time.monotonic() past which the job is ended
        self.stop: threading.Event | None = None  # set from another thread: end the job

    def follow(self, lines: queue.SimpleQueue[bytes | None]) -> Result | None:
        """Hear the job's events until its answer (returned; an error is raised) or until the
        worker ends without one (None)."""
        last_look = 0.0
        while True:
            if self.stop is not None and self.stop.is_set():
                raise _Interrupted(signal.SIGINT)
            if self.deadline is not None and time.monotonic() > self.deadline:
                raise _Interrupted(signal.SIGTERM, timed_out=True)
            try:
                line = lines.get(timeout=_POLL_S)
            except queue.Empty:
                if time.monotonic() - last_look > 1.0:  # who to end if the worker dies
                    self.family = process_tree.descendants(self.worker.pid) or self.family
                    last_look = time.monotonic()
                if self.worker.poll() is None:
                    continue
                line = _next_or_none(lines)  # a forked child may hold the pipe: stop reading
            if line is None:
                return None
            answer = self.hear(line)
            if answer is not None:
                return answer

    def hear(self, line: bytes) -> Result | None:
        if not line.strip():
            return None
        message = protocol.decode(line, self.expected)
        if isinstance(message, ErrorEvent):
            raise message.to_exception()
        if isinstance(message, Result):
            return message
        if isinstance(message, Committing):
            self.committed, self.committed_files = message.output, list(message.files)
        if isinstance(message, Event) and not isinstance(message, Ready):
            self.on_event(message)
        return None

    def cancel(self, signum: int, lines: queue.SimpleQueue[bytes | None]) -> None:
        """Ask the worker to abort, kill it and its children if it has not ended soon, and
        read what it said meanwhile (a `committing` decides what the cancel did)."""
        with _ignoring_signals():
            with contextlib.suppress(OSError, ValueError):
                _send(self.worker, AbortRequest())
            started = time.monotonic()
            while self.worker.poll() is None:
                # a worker renaming its file into place ends once the renames are done
                grace = _COMMIT_GRACE_S if self.committed is not None else _ABORT_GRACE_S
                if time.monotonic() - started > grace:
                    break
                self._hear_pending(lines, wait=0.02)
            self.end()
            while (line := _next_or_none(lines)) is not None:
                self._hear_quietly(line)

    def _hear_pending(self, lines: queue.SimpleQueue[bytes | None], wait: float) -> None:
        try:
            line = lines.get(timeout=wait)
        except queue.Empty:
            return
        if line is not None:
            self._hear_quietly(line)

    def _hear_quietly(self, line: bytes) -> None:
        """Hear a line of a job being cancelled: its answer or error no longer matters."""
        with contextlib.suppress(StudioError, protocol.ProtocolError):
            self.hear(line)

    def cancelled_error(self, signum: int) -> StudioError:
        how = signal.Signals(signum).name
        exit_code = CANCEL_EXIT.get(signal.Signals(signum), 1)
        if self.committed is not None:
            return CancelledAfterWrite(
                self.committed,
                f"Stopped by {how} after the export had finished: "
                f"{written_text(self.committed, self.committed_files)}; only what came after "
                "it (the validation) was cancelled.",
                "Run `onnx-studio validate` on the "
                f"{'folder' if self.committed_files else 'file'} to finish the check.",
                exit_code=exit_code)
        return StudioError("cancelled", f"The job was cancelled by {how}; no file was written "
                           "or changed.", "Run the command again to finish the job.",
                           exit_code=exit_code)

    def end(self) -> int:
        """Make sure the worker and every process it started are gone; its exit status."""
        if self.worker.poll() is None:
            self.family = process_tree.descendants(self.worker.pid) or self.family
            process_tree.kill_tree(self.worker.pid)
        code = self.worker.wait()
        process_tree.kill_processes(self.family + process_tree.family(self.token))
        for stream in (self.worker.stdin, self.worker.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        return code

    def finish(self) -> None:
        """The answer is in: let the worker quit (end of stdin), or end it."""
        with contextlib.suppress(OSError):
            assert self.worker.stdin is not None
            self.worker.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.worker.wait(_EXIT_WAIT_S)
        self.end()


def _send(worker: subprocess.Popen[bytes], request: Request) -> None:
    assert worker.stdin is not None
    worker.stdin.write((protocol.encode(request) + "\n").encode("utf-8"))
    worker.stdin.flush()


def _read_lines(stream: IO[bytes], lines: queue.SimpleQueue[bytes | None]) -> None:
    with contextlib.suppress(OSError, ValueError):
        for line in stream:
            lines.put(line)
    lines.put(None)


def _next_or_none(lines: queue.SimpleQueue[bytes | None]) -> bytes | None:
    """The next line already read, waiting briefly for the last ones; None when there is none."""
    try:
        return lines.get(timeout=_POLL_S)
    except queue.Empty:
        return None


def _forward_stderr(stream: IO[bytes], out: Any, tail: collections.deque[str]) -> None:
    """The worker's standard error, line by line, to the CLI's (a model's prints, the
    exporter's messages), keeping the last lines for a crash's details."""
    with contextlib.suppress(OSError, ValueError):
        for raw in stream:
            text = plain(raw.decode("utf-8", errors="replace"))  # no colour codes relayed
            tail.append(text.rstrip("\n"))
            with contextlib.suppress(OSError, ValueError):
                out.write(text)
                out.flush()


def _crashed(code: int, tail: collections.deque[str]) -> StudioError:
    how = process_tree.exit_description(code)
    return StudioError(
        "worker_crashed", f"The worker process running the job stopped unexpectedly ({how}).",
        "The model or the exporter ended the process (os._exit, a crash in native code, or "
        "the machine ran out of memory): see the details; lower the input shapes if it ran "
        "out of memory.",
        details="The worker's last lines on standard error:\n" + "\n".join(tail)
        if tail else f"The worker ended with {how} and wrote nothing on standard error.")


def _timed_out(seconds: float, written: str | None) -> StudioError:
    done = (f"{written} had been written; what came after it (the validation) was not done"
            if written else "no file was written or changed")
    return StudioError(
        "timeout", f"The job ran past its time limit of {seconds:g} s and was ended; {done}.",
        "Raise the limit (--timeout) if the model is just slow, or look at what it waits for "
        "(run it alone with --verbose).")


def _clean_after(pid: int, folder: Path | None) -> None:
    """Remove what an ended worker leaves: its temporary files beside the target, its job
    folders in the cache."""
    remove_abandoned_temps([folder] if folder is not None else [])
    with contextlib.suppress(OSError):
        for job_dir in (dirs.cache_dir() / "jobs").glob(f"{pid}-*"):
            shutil.rmtree(job_dir, ignore_errors=True)


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM raise `_Interrupted` in the main thread while the job runs (the
    handlers are only installed there; elsewhere the defaults stay)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise _Interrupted(signum)

    previous = {s: signal.signal(s, interrupt) for s in CANCEL_EXIT}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def _ignoring_signals() -> Iterator[None]:
    """A second Ctrl+C while the job is being ended changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in CANCEL_EXIT}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def remove_job_folder(job_dir: str) -> None:
    """Remove a job's cache folder once its answer has been read (the CLI keeps no plots
    there)."""
    if job_dir:
        shutil.rmtree(job_dir, ignore_errors=True)
