"""The export worker: a long-lived process that runs jobs sent as JSON lines on stdin.

Run as `python -m engine.worker`. The GUI keeps one warm (torch imported once) and ends it to
cancel, so nothing here needs to be interruptible. SIGTERM (POSIX), the request
{"job": "abort"} (heard during a job too), or a protocol line nobody reads any more (the client
died) end the worker at once, together with every process its jobs started. {"job": "quit"}
and the end of stdin end it once the requests before them are answered, so a client may write
its requests and close stdin. With ONNX_STUDIO_WORKER_WARM_FIRST=1 (a spare, which nobody waits
for) the worker finishes its warm-up imports before it says `ready`. The protocol, one JSON
object per line:

request  {"id": 7, "job": "export", "recipe": "<TOML text>", "base_dir": "/dir",
          "validate": null | true | false}
         {"id": 12, "job": "validate", "recipe": "<TOML text>", "base_dir": "/dir",
          "onnx": "/dir/out/model.onnx"}           (onnx: default the recipe's output)
         {"id": 8, "job": "describe", "source": "net.py", "base_dir": "/dir"}
         {"id": 9, "job": "devices"}            {"id": 10, "job": "ping"}
events   {"type": "ready", "pid": 123, "torch": "2.13.0", "import_s": 2.1}   (once, no id)
         {"id": 7, "type": "progress", "fraction": 0.4, "stage": "export"}
         {"id": 7, "type": "log", "line": "..."}
         {"id": 7, "type": "warning", "category": "...", "message": "...", "source": "f.py:3"}
         {"id": 7, "type": "result", "report": {...}, "job_dir": "/cache/jobs/123-7"}
         {"id": 12, "type": "result", "validation": {...}, "onnx": "...", "job_dir": "..."}
         {"id": 7, "type": "error", "error": {"kind", "message", "hint", "unsupported_ops"},
          "details": "traceback"}

Every job ends with exactly one `result` or `error`. Large arrays never travel in a line: they
are written as .npz files into the job's folder (`job_dir`) under the platformdirs cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, NoReturn, cast

from engine import dirs

PROTOCOL_VERSION = 1
WARM_FIRST_ENV = "ONNX_STUDIO_WORKER_WARM_FIRST"  # "1": say ready only once warmed up
_JOB_FOLDER_MAX_AGE_S = 24 * 3600


def _jsonable(value: Any) -> Any:
    """json.dumps fallback: numpy scalars and arrays, paths, sets, anything else as text."""
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


class Channel:
    """Writes protocol lines to the pipe; safe to call from any thread."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, default=_jsonable, allow_nan=True)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


# ---------------------------------------------------------------------------- jobs


def _job_dir(job_id: Any) -> Path:
    path = dirs.cache_dir() / "jobs" / f"{os.getpid()}-{job_id}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _events(send: Callable[[dict[str, Any]], None]) -> Any:
    from engine.events import Events

    def progress(fraction: float, stage: str) -> None:
        send({"type": "progress", "fraction": float(fraction), "stage": str(stage)})

    def log(line: str) -> None:
        send({"type": "log", "line": str(line)})

    def warning(item: dict[str, Any]) -> None:
        send({"type": "warning", **item})

    return Events(progress=progress, log=log, warning=warning)


def job_export(request: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    from engine import recipe as recipes
    from engine.pipeline import export  # lazy: the lead's module, heavy imports inside

    base_dir = Path(request.get("base_dir") or Path.cwd())
    recipe = recipes.loads(request["recipe"], base_dir=base_dir, name="recipe")
    job_dir = _job_dir(request.get("id"))
    events = _events(send)
    events.progress(0.0, "Starting")
    report = export(recipe, events, validate=request.get("validate"), plot_dir=job_dir)
    data = report.to_json()
    return {
        "type": "result",
        "report": data,
        "details": report.error.details if report.error else "",
        "extra": report.extra,
        "job_dir": str(job_dir),
    }


def job_validate(request: dict[str, Any], send: Callable[[dict[str, Any]], None]
                 ) -> dict[str, Any]:
    """Validate an existing .onnx file against the recipe's model; plot data in the job folder.

    A validation that disagrees is a result with `validation.ok` false; a request that cannot
    be run at all (no file, unreadable recipe, missing provider) is a StudioError -> `error`.
    """
    from engine import recipe as recipes
    from engine.validation.validator import validate  # lazy: imports torch and onnxruntime inside

    base_dir = Path(request.get("base_dir") or Path.cwd())
    recipe = recipes.loads(request["recipe"], base_dir=base_dir, name="recipe")
    onnx = recipe.resolve(request["onnx"]) if request.get("onnx") else recipe.output_path
    job_dir = _job_dir(request.get("id"))
    events = _events(send)
    events.progress(0.0, "Starting")
    result = validate(recipe, onnx, events, plot_dir=job_dir)
    return {"type": "result", "validation": result, "onnx": str(onnx), "job_dir": str(job_dir)}


def job_describe(request: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    import dataclasses

    from engine.source.describe import describe

    base_dir = Path(request.get("base_dir") or Path.cwd())
    description = describe(request["source"], base_dir)
    return {"type": "result", "description": dataclasses.asdict(description)}


def job_devices(request: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    import torch

    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")
    from torch.onnx import _constants

    from engine.export import exporter_opsets, torchscript_default_opset
    from engine.validation.ort_session import ort_max_opset

    return {
        "type": "result",
        "devices": devices,
        "opsets": {name: list(span) for name, span in exporter_opsets().items()},
        "default_opset": {"dynamo": int(_constants.ONNX_DEFAULT_OPSET),
                          "torchscript": torchscript_default_opset()},
        "ort_max_opset": ort_max_opset(),
        "torch": torch.__version__,
    }


def job_ping(request: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    return {"type": "result", "pong": True, "pid": os.getpid()}


JOBS: dict[str, Callable[[dict[str, Any], Callable[[dict[str, Any]], None]], dict[str, Any]]] = {
    "export": job_export,
    "validate": job_validate,
    "describe": job_describe,
    "devices": job_devices,
    "ping": job_ping,
}


def handle(request: dict[str, Any], channel: Channel) -> None:
    """Run one request, sending its events and exactly one final result or error."""
    job_id = request.get("id")

    def send(message: dict[str, Any]) -> None:
        channel.send({"id": job_id, **message})

    job = JOBS.get(str(request.get("job")))
    if request.get("job") in ("export", "validate"):
        # their warnings.catch_warnings() is process-wide: let the warm-up's imports finish
        _WARM_UP.join()
    if job is None:
        send({"type": "error", "error": {
            "kind": "recipe", "message": f"Unknown job {request.get('job')!r}; the worker runs "
            f"{', '.join(JOBS)}.", "hint": "", "unsupported_ops": []}, "details": ""})
        return
    try:
        send(job(request, send))
    except Exception as exc:
        from engine.errors import StudioError

        details = traceback.format_exc()
        if isinstance(exc, StudioError):
            error = exc.to_json()
            details = exc.details or details
        else:
            error = {"kind": "export", "message": f"The worker failed: {exc}",
                     "hint": "Open Details for the traceback.", "unsupported_ops": []}
        send({"type": "error", "error": error, "details": details})


def _clean_old_job_folders() -> None:
    root = dirs.cache_dir() / "jobs"
    if not root.is_dir():
        return
    now = time.time()
    for folder in root.iterdir():
        try:
            if now - folder.stat().st_mtime > _JOB_FOLDER_MAX_AGE_S:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue


def _warm_up_imports() -> None:
    """Import what every export needs now, while the user is still filling in the form."""
    for name in ("engine.pipeline", "onnx", "onnxscript",
                 "torch.export"):
        try:
            __import__(name)
        except Exception:  # a missing piece is reported by the job that needs it
            continue


_WARM_UP = threading.Thread(target=_warm_up_imports, name="warm-up", daemon=True)


# ---------------------------------------------------------------------------- process


class _Process:
    """What `main` set up for ending the worker: its pid and whether it leads its group."""

    pid = 0  # a process forked by a job (multiprocessing) is not the worker
    leads_group = False


def end_now() -> NoReturn:
    """End the worker and every process its jobs started, at once (cancelled, or orphaned).

    POSIX: SIGKILL to the worker's own process group, set up by `main`. A group rather than a
    walk of the process tree (psutil): one call, no extra dependency, no window in which a
    child is started behind the walk, and it reaches grandchildren whose parent has already
    exited, which a tree walk no longer finds. Windows has no process groups: `taskkill /T`
    ends the worker's process tree.
    """
    if os.getpid() != _Process.pid:
        os._exit(1)  # a forked copy of the worker: end only itself
    if _Process.leads_group and hasattr(os, "killpg"):
        os.killpg(os.getpgrp(), signal.SIGKILL)
    elif sys.platform == "win32":
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["taskkill", "/F", "/T", "/PID", str(os.getpid())],
                           capture_output=True, timeout=5, check=False,
                           creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
    os._exit(1)


def _lead_process_group() -> bool:
    """POSIX: give the worker a process group of its own, which the jobs' children inherit."""
    if hasattr(os, "setpgid"):
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        return os.getpgrp() == os.getpid()
    return False


def _end_on_sigterm() -> None:
    """SIGTERM (the GUI's Cancel) ends the worker and its children at once (`end_now`).

    Python runs a signal handler on the main thread between two bytecodes, which may be seconds
    away while a job sits in one native call (a large convolution, an ONNX Runtime session). So
    besides the handler, the C-level handler's wake-up byte reaches a thread that ends the
    worker right away. A process forked by a job gets the default SIGTERM back.
    """
    receiver, sender = socket.socketpair()
    sender.setblocking(False)

    def wait_for_sigterm(receiver: socket.socket, sender: socket.socket) -> None:
        # `sender` is only held: the wake-up fd must stay open while this thread lives
        while data := receiver.recv(64):
            if int(signal.SIGTERM) in data:
                end_now()

    signal.signal(signal.SIGTERM, lambda signum, frame: end_now())
    signal.set_wakeup_fd(sender.fileno(), warn_on_full_buffer=False)
    threading.Thread(target=wait_for_sigterm, args=(receiver, sender), name="sigterm",
                     daemon=True).start()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_default_sigterm)


def _default_sigterm() -> None:
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _job_of(line: str) -> Any:
    try:
        return json.loads(line).get("job")
    except (ValueError, AttributeError):
        return None


def _read_requests(stream: IO[str]) -> queue.SimpleQueue[str | None]:
    """Request lines, read on a thread so that `abort` is heard during a job; None at the end.

    `abort` ends the worker here and now (`end_now`). After `quit`, or at the end of input,
    nothing more is read and the main loop ends once the requests before are answered.
    """
    lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def read() -> None:
        for line in stream:
            job = _job_of(line)
            if job == "abort":
                end_now()
            lines.put(line)
            if job == "quit":
                return
        lines.put(None)

    threading.Thread(target=read, name="stdin", daemon=True).start()
    return lines


class _ClientStream:
    """The protocol's stream: a line that the client can no longer read ends the worker.

    The client died (the GUI crashed or was killed): nobody will read the answers, so the job
    and every process it started end at once rather than when the job is done.
    """

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:  # BrokenPipeError on POSIX; EINVAL on Windows
            end_now()

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError:
            end_now()


def main() -> int:
    _Process.pid = os.getpid()
    _Process.leads_group = _lead_process_group()
    _end_on_sigterm()
    # The protocol owns the original stdout; everything else (prints from user models,
    # torch's own messages, C-level writes to fd 1) goes to stderr, which the GUI logs.
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    channel = Channel(cast(IO[str], _ClientStream(protocol)))
    requests = _read_requests(sys.stdin)

    started = time.perf_counter()
    import torch  # warm: every job after this one reuses the import

    ready = {"type": "ready", "protocol": PROTOCOL_VERSION, "pid": os.getpid(),
             "torch": torch.__version__, "import_s": round(time.perf_counter() - started, 3)}
    # Warm up on a thread so a describe or devices job is answered at once meanwhile; a spare
    # says ready once warm, so that it takes an export at once.
    _WARM_UP.start()
    if os.environ.get(WARM_FIRST_ENV) == "1":
        _WARM_UP.join()
    channel.send(ready)
    _clean_old_job_folders()
    while (line := requests.get()) is not None:
        raw = line.strip()
        if not raw:
            continue
        try:
            request = json.loads(raw)
            if not isinstance(request, dict):
                raise ValueError("a request is a JSON object")
        except ValueError as exc:
            channel.send({"type": "error", "error": {
                "kind": "recipe", "message": f"Unreadable request: {exc}", "hint": "",
                "unsupported_ops": []}, "details": raw[:500]})
            continue
        if request.get("job") == "quit":
            break
        handle(request, channel)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
