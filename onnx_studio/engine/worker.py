"""The export worker: a long-lived process that runs jobs sent as JSON lines on stdin.

Run as `python -m onnx_studio.engine.worker`. The GUI keeps one warm (torch imported once) and ends
it to cancel, so nothing here needs to be interruptible; the CLI runs each export or validate job in
a worker of its own. SIGTERM (POSIX), the request {"job": "abort"} (heard during a job too), a
protocol line nobody reads any more, or the death of its client (the process named by
ONNX_STUDIO_CLIENT_PID, else its parent; watched twice a second) end the worker at once, together
with every process its jobs started: no orphan outlives a killed window or CLI. A cancel never lands
half-way through renaming a new file into place (onnx_studio.engine.files.COMMIT): the `committing`
event comes first, and a worker ended after it ends once the renames are done. {"job": "quit"} and
the end of stdin end it once the requests before them are answered, so a client may write its
requests and close stdin. With ONNX_STUDIO_WORKER_WARM_FIRST=1 (a spare, which nobody waits for) the
worker finishes its warm-up imports before it says `ready`. The protocol, one JSON object per line,
each one a class of onnx_studio.engine.protocol (requests decoded with
`protocol.decode`, everything said encoded with `protocol.encode`):

request  {"id": 7, "job": "export", "recipe": "<TOML text>", "base_dir": "/dir",
          "validate": null | true | false}
         {"id": 12, "job": "validate", "recipe": "<TOML text>", "base_dir": "/dir",
          "onnx": "/dir/out/model.onnx"}           (onnx: default the recipe's output)
         {"id": 13, "job": "validate_file", "recipe": "...", "base_dir": "/dir",
          "onnx": "/dir/out/model.onnx"}           (the CLI's validate: answers with a report)
         export takes "plots_beside_onnx": true too (the CLI's: plot data beside the file)
         {"id": 8, "job": "describe", "source": "net.py", "base_dir": "/dir"}
         {"id": 9, "job": "devices"}            {"id": 10, "job": "ping"}
         {"job": "quit"}                        {"job": "abort"}
events   {"type": "ready", "protocol": 1, "pid": 123, "torch": "2.13.0", "import_s": 2.1,
          "torch_tested": true}                 (once, no id)
         {"id": 7, "type": "progress", "fraction": 0.4, "stage": "export"}
         {"id": 7, "type": "log", "line": "..."}
         {"id": 7, "type": "warning", "category": "...", "message": "...", "source": "f.py:3"}
         {"id": 7, "type": "committing", "output": "/dir/out/model.onnx"}  (renames follow)
         {"id": 7, "type": "result", "report": {...}, "job_dir": "/cache/jobs/123-7",
          "fills": [{"fill": "ones", "low": null, "high": null, "reason": "..."}]}
         {"id": 12, "type": "result", "validation": {...}, "onnx": "...", "job_dir": "..."}
         {"id": 7, "type": "error", "error": {"kind", "message", "hint", "unsupported_ops"},
          "details": "traceback"}

A line that is not a request (not JSON, an unknown job, a missing or mistyped field) is answered
by an `error` of kind "worker_protocol" naming the field, with the request's id when it has
one; the worker lives on.

Every job ends with exactly one `result` or `error`. Large arrays never travel in a line: they
are written as .npz files into the job's folder (`job_dir`) under the platformdirs cache.

A clean slate per job: a job never inherits state from the one before it. After every job the
modules imported from the user's files are removed from `sys.modules`
(onnx_studio.engine.source.load.forget_user_modules), so the next job imports them afresh: an edited
file is read again, and a `model.py` or `helper.py` in another folder is not mistaken for this one.
What extension files register (custom symbolics, torch.library ops) cannot be unregistered, so a
worker that has run a job with extensions (export.extensions, even one that failed) ends right after
that job's final line, with exit status 0 and nothing more read: the next job always runs in a fresh
worker, whatever its extensions. A request sent after such a job is never started and gets no
answer; the client sends it again to a fresh worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, NoReturn, cast

from onnx_studio.engine import dirs, files, process_tree, protocol, torch_private
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.plain_terminal import detach_stdin, quiet_libraries
from onnx_studio.engine.protocol import (
    PROTOCOL_VERSION,
    AbortRequest,
    Committing,
    DescribeRequest,
    DescribeResult,
    DevicesRequest,
    DevicesResult,
    ErrorEvent,
    Event,
    ExportRequest,
    ExportResult,
    FillChoice,
    LogLine,
    PingRequest,
    Pong,
    Progress,
    ProtocolError,
    QuitRequest,
    Ready,
    Request,
    Result,
    SourceDescription,
    ValidateFileRequest,
    ValidateFileResult,
    ValidateRequest,
    ValidateResult,
    Validation,
    WarningEvent,
    WarningItem,
)
from onnx_studio.engine.worker_process import (
    CLIENT_PID_ENV,
    QUIET_ENV,
    TARGET_FOLDER_FILE,
    WARM_FIRST_ENV,
    remove_abandoned_temps,
)

_JOB_FOLDER_MAX_AGE_S = 24 * 3600
_PARENT_POLL_S = 0.5
_COMMIT_WAIT_S = 60.0  # a cancel waits this long at most for renames under way


class Channel:
    """Writes protocol messages to the pipe, one encoded line each; safe from any thread."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, message: Event) -> None:
        line = protocol.encode(message)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


# ---------------------------------------------------------------------------- jobs


Send = Callable[[Event], None]


def _job_dir(job_id: int | None) -> Path:
    path = dirs.cache_dir() / "jobs" / f"{os.getpid()}-{job_id}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _events(job_id: int | None, send: Send) -> Any:
    """onnx_studio.engine.events callbacks that send the job's progress, log and warning events."""
    from onnx_studio.engine.events import Events

    def progress(fraction: float, stage: str) -> None:
        send(Progress(id=job_id, fraction=float(fraction), stage=str(stage)))

    def log(line: str) -> None:
        send(LogLine(id=job_id, line=str(line)))

    def warning(item: dict[str, Any]) -> None:
        send(WarningEvent(id=job_id, warning=WarningItem.from_dict(item)))

    return Events(progress=progress, log=log, warning=warning)


def job_export(request: ExportRequest, send: Send) -> ExportResult:
    """Export the recipe (and validate it, if asked); a failed export is a result too."""
    from onnx_studio.engine import recipe as recipes
    from onnx_studio.engine.pipeline import export  # lazy: the lead's module, heavy imports inside

    base_dir = Path(request.base_dir or Path.cwd())
    recipe = recipes.loads(request.recipe, base_dir=base_dir, name="recipe")
    job_dir = _job_dir(request.id)
    # where this job's temporary files go, read back by `remove_abandoned_temps` if the
    # worker is killed before it removes them
    folders = [recipe.output_path.parent]
    if recipes.is_folder_source(recipe.model.source):  # the files are staged inside it
        folders.append(recipe.output_path)
    (job_dir / TARGET_FOLDER_FILE).write_text("\n".join(map(str, folders)), "utf-8")
    events = _events(request.id, send)
    events.progress(0.0, "Starting")
    fills: list[list[FillChoice]] = []  # one list, once the model has loaded
    files.COMMIT.announce = lambda target, names: send(
        Committing(id=request.id, output=str(target), files=list(names)))
    try:
        report = export(recipe, events, validate=request.validate,
                        plot_dir=None if request.plots_beside_onnx else job_dir,
                        on_fills=lambda found: fills.append(
                            [FillChoice(fill=f.fill, low=f.low, high=f.high, reason=f.reason)
                             for f in found]))
    finally:
        files.COMMIT.announce = None
    (job_dir / TARGET_FOLDER_FILE).unlink(missing_ok=True)
    return ExportResult.from_report(request.id, report, str(job_dir),
                                    fills[0] if fills else None)


def job_validate(request: ValidateRequest, send: Send) -> ValidateResult:
    """Validate an existing .onnx file against the recipe's model; plot data in the job folder.

    A validation that disagrees is a result with `validation.ok` false; a request that cannot
    be run at all (no file, unreadable recipe, missing provider) is a StudioError -> `error`.
    """
    from onnx_studio.engine import recipe as recipes
    from onnx_studio.engine.pipeline import (
        validate_existing,  # lazy: imports torch and onnxruntime inside
    )

    base_dir = Path(request.base_dir or Path.cwd())
    recipe = recipes.loads(request.recipe, base_dir=base_dir, name="recipe")
    onnx = recipe.resolve(request.onnx) if request.onnx else recipe.output_path
    job_dir = _job_dir(request.id)
    events = _events(request.id, send)
    events.progress(0.0, "Starting")
    result = validate_existing(recipe, onnx, events, plot_dir=job_dir)  # hf: a folder
    return ValidateResult(id=request.id, validation=Validation.from_dict(result), onnx=str(onnx),
                          job_dir=str(job_dir))


def job_validate_file(request: ValidateFileRequest, send: Send) -> ValidateFileResult:
    """The CLI's `validate`: the export document of validating the file (plots beside it)."""
    from onnx_studio.engine import recipe as recipes
    from onnx_studio.engine.pipeline import validate_file

    base_dir = Path(request.base_dir or Path.cwd())
    recipe = recipes.loads(request.recipe, base_dir=base_dir, name="recipe")
    report = validate_file(recipe, Path(request.onnx), _events(request.id, send))
    return ValidateFileResult.from_report(request.id, report, "")


def job_describe(request: DescribeRequest, send: Send) -> DescribeResult:
    """What a model source offers, read without running it."""
    import dataclasses

    from onnx_studio.engine.source.describe import describe

    base_dir = Path(request.base_dir or Path.cwd())
    description = describe(request.source, base_dir,
                           trust_remote_code=request.trust_remote_code)
    return DescribeResult(id=request.id, description=SourceDescription.from_dict(
        dataclasses.asdict(description)))


def job_devices(request: DevicesRequest, send: Send) -> DevicesResult:
    """The devices, the exporters' opsets and the versions this worker offers."""
    import torch

    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")
    from onnx_studio.engine.export import exporter_opsets, torchscript_default_opset
    from onnx_studio.engine.validation.ort_session import ort_max_opset

    return DevicesResult(
        id=request.id,
        devices=devices,
        opsets={name: list(span) for name, span in exporter_opsets().items()},
        default_opset={"dynamo": torch_private.onnx_default_opset(),
                       "torchscript": torchscript_default_opset()},
        ort_max_opset=ort_max_opset(),
        torch=torch.__version__,
    )


def job_ping(request: PingRequest, send: Send) -> Pong:
    """Alive: the worker's process id."""
    return Pong(id=request.id, pid=os.getpid())


def _analysis_job(name: str) -> Callable[[Any, Send], Result]:
    """The compare, profile or variant job: onnx_studio.engine.analysis.jobs with this job's
    events."""

    def run(request: Any, send: Send) -> Result:
        from onnx_studio.engine.analysis import (
            jobs,  # lazy: onnxruntime and the model's imports inside
        )

        result: Result = getattr(jobs, name)(request, _events(request.id, send))
        return result

    return run


# by the request's `job`; quit and abort are no jobs: the request reader and main() act on them
JOBS: dict[str, Callable[[Any, Send], Result]] = {
    ExportRequest.TAG: job_export,
    ValidateRequest.TAG: job_validate,
    ValidateFileRequest.TAG: job_validate_file,
    DescribeRequest.TAG: job_describe,
    DevicesRequest.TAG: job_devices,
    PingRequest.TAG: job_ping,
    "compare": _analysis_job("compare"),
    "profile": _analysis_job("profile"),
    "variant": _analysis_job("variant"),
    "explain": _analysis_job("explain"),
}


# light jobs the client waits for while the worker warms up (the form's description, the
# devices, a ping); they import none of what the warm-up imports
_ANSWERED_DURING_WARM_UP = (DescribeRequest, DevicesRequest, PingRequest)


def handle(request: Request, channel: Channel) -> None:
    """Run one request, sending its events and exactly one final result or error."""
    job_id = cast(int | None, getattr(request, "id", None))
    job = JOBS.get(request.TAG)
    if not isinstance(request, _ANSWERED_DURING_WARM_UP) and _WARM_UP.ident is not None:
        # Let the warm-up's imports finish first (when `main` started them): a job importing
        # the same engine modules on this thread meanwhile could meet one of them
        # half-initialised (an ImportError of a name that is there), and
        # warnings.catch_warnings() is process-wide.
        _WARM_UP.join()
    try:
        if job is None:
            raise StudioError("worker_protocol", f"The request {request.TAG!r} is not a job; "
                              f"the worker runs {', '.join(JOBS)}.", ProtocolError.hint)
        channel.send(job(request, channel.send))
    except Exception as exc:
        channel.send(ErrorEvent.from_exception(job_id, exc, traceback.format_exc()))
    _forget_user_modules()  # clean slate: the next job imports the user's files afresh


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
    for name in ("onnx_studio.engine.pipeline", "onnx", "onnxscript",
                 "torch.export"):
        try:
            __import__(name)
        except Exception:  # a missing piece is reported by the job that needs it
            continue


_WARM_UP = threading.Thread(target=_warm_up_imports, name="warm-up", daemon=True)


# ---------------------------------------------------------------------------- process


class _Process:
    """What `main` set up for ending the worker: its pid."""

    pid = 0  # a process forked by a job (multiprocessing) is not the worker


def end_now() -> NoReturn:
    """End the worker and every process its jobs started, at once (cancelled, or orphaned).

    A rename into place under way finishes first (onnx_studio.engine.files.COMMIT; its `committing`
    event has told the client). Then every descendant is killed (onnx_studio.engine.process_tree:
    portable), and the worker itself.
    """
    if os.getpid() != _Process.pid:
        os._exit(1)  # a forked copy of the worker: end only itself
    files.COMMIT.close(_COMMIT_WAIT_S)
    process_tree.kill_tree(os.getpid(), include_self=False)
    os._exit(1)


def _watch_client() -> None:
    """End the worker (`end_now`) as soon as its client process is gone: the window or the CLI
    was killed, and nobody will read the answer; polled, so a job stuck in native code ends
    too. The client is ONNX_STUDIO_CLIENT_PID when set (a frozen build's launcher sits between
    them), else the parent."""
    import psutil

    text = os.environ.get(CLIENT_PID_ENV, "")
    pid = int(text) if text.isdigit() else os.getppid()
    try:
        client = psutil.Process(pid)
    except psutil.Error:
        end_now()
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(_PARENT_POLL_S)
            # re-parented (POSIX), or the client's pid is gone or now someone else's
            try:
                gone = (pid == parent and os.getppid() != parent) or not client.is_running() \
                    or client.status() == psutil.STATUS_ZOMBIE
            except psutil.Error:
                gone = True
            if gone:
                end_now()

    threading.Thread(target=watch, name="client-watch", daemon=True).start()


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

    def handler(signum: int, frame: Any) -> None:
        # on the thread doing a commit, ending here would wait for itself: the wake-up thread
        # below ends the worker once the commit is done
        if not files.COMMIT.held_here():
            end_now()

    signal.signal(signal.SIGTERM, handler)
    signal.set_wakeup_fd(sender.fileno(), warn_on_full_buffer=False)
    threading.Thread(target=wait_for_sigterm, args=(receiver, sender), name="sigterm",
                     daemon=True).start()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_default_sigterm)


def _default_sigterm() -> None:
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def read_request(line: str) -> Request | ErrorEvent:
    """The request on one line, or the error event that answers a line that is none.

    The error names what does not fit (`protocol.decode`'s ProtocolError) and carries the
    line's id when the line is a JSON object with an integer id, so the client can match it.
    """
    try:
        return protocol.decode(line, Request)
    except ProtocolError as exc:
        try:
            data = json.loads(line)
        except ValueError:
            data = None
        data = data if isinstance(data, dict) else {}
        job_id = data.get("id") if type(data.get("id")) is int else None
        unknown_job = exc.message_type == "request" and exc.field == "job" and "job" in data
        what = "Unknown job" if unknown_job else "Unreadable request"
        error = StudioError("worker_protocol", f"{what}: {exc.message}.", exc.hint,
                            details=line.strip()[:500])
        return ErrorEvent.from_exception(job_id, error)


def _read_requests(stream: IO[str]) -> queue.SimpleQueue[Request | ErrorEvent | None]:
    """Requests (or the errors answering unreadable lines), read on a thread so that `abort` is
    heard during a job; None at the end.

    `abort` ends the worker here and now (`end_now`). After `quit`, or at the end of input,
    nothing more is read and the main loop ends once the requests before are answered.
    """
    requests: queue.SimpleQueue[Request | ErrorEvent | None] = queue.SimpleQueue()

    def read() -> None:
        for line in stream:
            if not line.strip():
                continue
            request = read_request(line)
            if isinstance(request, AbortRequest):
                end_now()
            requests.put(request)
            if isinstance(request, QuitRequest):
                return
        requests.put(None)

    threading.Thread(target=read, name="stdin", daemon=True).start()
    return requests


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


# ---------------------------------------------------------------------------- clean slate
# A job never inherits state from the one before it (user modules, registered extensions).


def _forget_user_modules() -> None:
    """Remove the modules the job imported from the user's files (never ends the worker)."""
    try:
        from onnx_studio.engine.source.load import forget_user_modules

        forget_user_modules()
    except Exception:
        traceback.print_exc()  # stderr, which the GUI logs; the next job still runs


def _ran_extensions() -> bool:
    """True once a job has run extension files here: the worker then ends (see the docstring)."""
    exporter = sys.modules.get("onnx_studio.engine.export.exporter")  # never imported: nothing ran
    # still being imported by the warm-up thread (a ping answered meanwhile): nothing ran
    extensions_run = getattr(exporter, "extensions_run", None)
    if extensions_run is None or not extensions_run():
        return False
    if os.environ.get(QUIET_ENV) == "1":
        return True
    sys.stderr.write("The worker ran extension files, which cannot be unregistered; it ends "
                     "so that the next job starts in a fresh worker.\n")
    sys.stderr.flush()
    return True


def main() -> int:
    _Process.pid = os.getpid()
    _end_on_sigterm()
    _watch_client()
    # The protocol owns the original stdout; everything else (prints from user models,
    # torch's own messages, C-level writes to fd 1) goes to stderr, which the GUI logs.
    protocol_out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    quiet_libraries()  # no colours, no progress bars (onnx_studio.engine.plain_terminal)
    sys.stdout = sys.stderr
    channel = Channel(cast(IO[str], _ClientStream(protocol_out)))
    # stdin is the protocol's alone: a library's prompt reads end-of-file, never waits
    requests = _read_requests(detach_stdin())

    started = time.perf_counter()
    import torch  # warm: every job after this one reuses the import

    from onnx_studio.engine.source.torchvision_guard import guard

    guard()  # before any model loads: transformers and timm import torchvision

    ready = Ready(protocol=PROTOCOL_VERSION, pid=os.getpid(), torch=torch.__version__,
                  import_s=round(time.perf_counter() - started, 3),
                  torch_tested=torch_private.torch_is_tested(torch.__version__))
    untested = torch_private.untested_torch_sentence(torch.__version__)
    if untested is not None and os.environ.get(QUIET_ENV) != "1":
        sys.stderr.write(untested + "\n")  # the client logs stderr; `ready` says it too
    # Warm up on a thread so a describe or devices job is answered at once meanwhile; a spare
    # says ready once warm, so that it takes an export at once. A job already waiting (the
    # CLI's, written as the worker started) gains nothing from it: it imports what it needs
    # itself, and only that (no onnxscript for a TorchScript export).
    if os.environ.get(WARM_FIRST_ENV) == "1":
        _WARM_UP.start()
        _WARM_UP.join()
    elif requests.empty():
        _WARM_UP.start()
    channel.send(ready)
    _clean_old_job_folders()
    remove_abandoned_temps()
    while (request := requests.get()) is not None:
        if isinstance(request, ErrorEvent):  # a line that is no request: answered, in order
            channel.send(request)
            continue
        if isinstance(request, QuitRequest):
            break
        handle(request, channel)
        if _ran_extensions():  # clean slate: never reused once extensions ran (docstring)
            break
    return 0


if __name__ == "__main__":
    status = main()
    # Every answer is written and every file renamed into place: skip the interpreter's
    # teardown, which with torch loaded takes about a second and which the client would
    # otherwise wait for (the answer is already out; a warm worker's state is discarded).
    sys.stderr.flush()
    os._exit(status)
