"""The worker transport (QProcess) and the job runner's bookkeeping, on small stand-in workers.

A stand-in worker is a few lines of Python that speak the protocol without importing torch: it
makes the runner's states (spare, cancel, crash, early deaths) quick and exact to reach. The
real worker is driven through the window in test_window_export.py.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from onnx_studio.app.jobs import JobRunner
from onnx_studio.app.worker_client import WorkerProcess, exit_description
from onnx_studio.engine.protocol import (
    DescribeRequest,
    DescribeResult,
    ErrorEvent,
    Event,
    LogLine,
    PingRequest,
    Pong,
    Ready,
    Request,
    Result,
)

# Speaks the protocol without torch: `ready`, a Pong (with its pid) for a ping, and for a
# describe of "sleep:SECONDS" or "exit:STATUS" a progress event, then a nap (then a result whose
# kind names its pid) or an exit mid-job. Records what it was sent in <folder>/<pid>.requests.
STAND_IN = r'''
import json, os, sys, time
from pathlib import Path

log = Path(sys.argv[1]) / f"{os.getpid()}.requests"
log.touch()
print(json.dumps({"type": "ready", "protocol": 1, "pid": os.getpid(), "torch": "none",
                  "import_s": 0.0}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:  # abort: SIGTERM ends this stand-in anyway
        continue
    with log.open("a") as f:
        f.write(line)
    if request["job"] == "ping":
        print(json.dumps({"id": request["id"], "type": "result", "pong": True,
                          "pid": os.getpid()}), flush=True)
        continue
    what, _, value = request["source"].partition(":")
    print(json.dumps({"id": request["id"], "type": "progress", "fraction": 0.5,
                      "stage": what}), flush=True)
    if what == "exit":  # mid-job, as a model that calls os._exit would
        os._exit(int(value))
    time.sleep(float(value))
    print(json.dumps({"id": request["id"], "type": "result",
                      "description": {"kind": f"slept in {os.getpid()}"}}), flush=True)
'''


def sleep(seconds: float) -> DescribeRequest:
    """A job the stand-in runs for `seconds` (a describe: not one of the long jobs)."""
    return DescribeRequest(source=f"sleep:{seconds}")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


@pytest.fixture
def runner(qtbot, tmp_path: Path):
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN, encoding="utf-8")
    r = JobRunner(command=[sys.executable, str(script), str(tmp_path)])
    yield r
    r.shutdown()


def requests_of(tmp_path: Path, pid: int | None) -> list[dict[str, Any]]:
    text = (tmp_path / f"{pid}.requests").read_text()
    return [json.loads(line) for line in text.splitlines()]


def wait_result(qtbot, runner: JobRunner, request: Request) -> list[Event]:
    events: list[Event] = []
    runner.submit(request, events.append)
    qtbot.waitUntil(lambda: _answered(events), timeout=10_000)
    return events


def pid_of(events: list[Event]) -> int:
    """The pid a ping's answer names."""
    assert isinstance(events[-1], Pong), events
    return events[-1].pid


def error_kind(events: list[Event]) -> str:
    assert isinstance(events[-1], ErrorEvent), events
    return events[-1].error.kind


# --------------------------------------------------------------------- exit_description


@pytest.mark.parametrize(("code", "crashed", "expected"), [
    (0, False, "exit status 0"),
    (3, False, "exit status 3"),
    (9, True, "signal 9 (SIGKILL: killed from outside, often because the machine ran out of "
              "memory)"),  # what QProcess reports on Linux for a SIGKILLed child
    (-9, False, "signal 9 (SIGKILL: killed from outside, often because the machine ran out of "
                "memory)"),  # subprocess's return code for the same
    (11, True, "signal 11 (SIGSEGV: a crash inside native code (segmentation fault))"),
    (15, True, "signal 15 (SIGTERM)"),
    (-1073741819, True, "exception 0xC0000005 (access violation: a crash inside native code)"),
    (0xC0000374, True, "exception 0xC0000374"),
])
def test_exit_description(code: int, crashed: bool, expected: str) -> None:
    assert exit_description(code, crashed) == expected


# --------------------------------------------------------------------- transport


def test_lines_are_whole_and_stderr_is_forwarded(qtbot) -> None:
    """Lines arrive whole and decoded once; a line that does not fit its job's result class
    ends the job with a worker_protocol error; stderr and stray stdout are log text."""
    script = (
        "import json, sys, time\n"
        "sys.stdout.write('{\"type\": \"ready\", \"protocol\": 1, \"pid\": 1'); "
        "sys.stdout.flush()\n"
        "time.sleep(0.3)\n"
        "sys.stdout.write(', \"torch\": \"none\", \"import_s\": 0.5}\\n"
        "not a protocol line\\n')\n"
        "sys.stdout.flush()\n"
        "sys.stderr.write('first warning\\nsecond'); sys.stderr.flush()\n"
        "line = sys.stdin.readline().strip()\n"
        "print(json.dumps({'id': 1, 'type': 'log', 'line': line}), flush=True)\n"
        "sys.stdout.write('{\"id\": 1, \"type\": \"result\"}')\n"  # no newline: the last line
        "raise SystemExit(3)\n"
    )
    worker = WorkerProcess(command=[sys.executable, "-c", script])
    events: list[Event] = []
    stderr: list[str] = []
    exits: list[tuple[int, bool]] = []
    worker.received.connect(lambda _, event: events.append(event))
    worker.stderrText.connect(lambda _, text: stderr.append(text))
    worker.exited.connect(lambda _, code, crashed: exits.append((code, crashed)))
    with qtbot.waitSignal(worker.ready, timeout=10_000):
        worker.start()
    assert worker.ready_info == Ready(protocol=1, pid=1, torch="none", import_s=0.5), \
        "the split line arrives whole"
    worker.send(PingRequest(id=1))
    qtbot.waitUntil(lambda: bool(exits), timeout=10_000)
    assert events[0] == LogLine(id=1, line='{"id": 1, "job": "ping"}')
    final = events[1]
    assert len(events) == 2 and isinstance(final, ErrorEvent) and final.id == 1
    assert final.error.kind == "worker_protocol" and "'pid' is missing" in final.error.message
    assert final.details == '{"id": 1, "type": "result"}', "the line itself, for Details"
    assert "\n".join(stderr).splitlines() == ["not a protocol line", "first warning", "second"]
    assert exits == [(3, False)]
    assert worker.pid is None and not worker.running()
    worker.send(PingRequest(id=2))  # dropped without a Qt warning


def test_a_worker_that_cannot_start_says_so(qtbot, tmp_path: Path) -> None:
    worker = WorkerProcess(command=[str(tmp_path / "no-such-program")])
    stderr: list[str] = []
    worker.stderrText.connect(lambda _, text: stderr.append(text))
    with qtbot.waitSignal(worker.exited, timeout=10_000) as blocker:
        worker.start()
    assert blocker.args[1:] == [127, False]
    assert stderr and stderr[0].startswith("Could not start the worker")


# --------------------------------------------------------------------- runner


def test_spare_takes_over_after_cancel_and_never_inherits_a_job(qtbot, runner: JobRunner,
                                                                tmp_path: Path) -> None:
    with qtbot.waitSignal(runner.workerReady, timeout=10_000):
        runner.start()
    qtbot.waitUntil(lambda: runner.spare_ready, timeout=10_000)
    first, spare = runner.worker_pid, runner.spare_pid
    assert first and spare and first != spare
    assert pid_of(wait_result(qtbot, runner, PingRequest())) == first

    events: list[Event] = []
    runner.submit(sleep(600), events.append)  # longer than any guard
    qtbot.waitUntil(lambda: bool(events), timeout=10_000)  # inside the job
    assert runner.busy() is False, "a sleep job is not one of the long jobs"
    readies: list[object] = []
    runner.workerReady.connect(readies.append)
    runner.cancel()
    # the spare had imported torch already: it said so within cancel(), no wait for it
    assert readies == [runner.ready_info] and readies[0] is not None
    assert error_kind(events) == "cancelled"
    assert runner.worker_pid == spare
    qtbot.waitUntil(lambda: not pid_alive(first), timeout=30_000)  # a hang guard

    assert pid_of(wait_result(qtbot, runner, PingRequest())) == spare
    assert [r["job"] for r in requests_of(tmp_path, spare)] == ["ping"], \
        "the spare got nothing before it took over, and not the cancelled job"
    qtbot.waitUntil(lambda: runner.spare_ready, timeout=10_000)  # a new spare is warming
    assert runner.spare_pid not in (None, first, spare)
    assert len(events) == 2, "the cancelled job heard nothing after its error"


def _ready_with_spare(qtbot, runner: JobRunner) -> tuple[int, int]:
    with qtbot.waitSignal(runner.workerReady, timeout=10_000):
        runner.start()
    qtbot.waitUntil(lambda: runner.spare_ready, timeout=10_000)
    first, spare = runner.worker_pid, runner.spare_pid
    assert first and spare
    return first, spare


def _answered(events: list[Event]) -> bool:
    return bool(events) and isinstance(events[-1], Result | ErrorEvent)


def test_cancelling_the_running_job_sends_the_waiting_one_to_the_spare(
        qtbot, runner: JobRunner, tmp_path: Path) -> None:
    """An export cancelled while a compare waits behind it: the compare runs, on the spare."""
    first, spare = _ready_with_spare(qtbot, runner)
    assert first != spare
    running: list[Event] = []
    waiting: list[Event] = []
    job = runner.submit(sleep(30), running.append)
    runner.submit(PingRequest(), waiting.append)
    qtbot.waitUntil(lambda: bool(running), timeout=10_000)  # inside the first job
    runner.cancel([job])
    assert error_kind(running) == "cancelled"
    qtbot.waitUntil(lambda: _answered(waiting), timeout=10_000)
    assert waiting == [Pong(id=job + 1, pid=spare)]
    assert [r["job"] for r in requests_of(tmp_path, spare)] == ["ping"]
    assert len(running) == 2, "the cancelled job heard nothing after its error"


def test_a_job_sent_from_a_cancelled_jobs_callback_runs_once(qtbot, runner: JobRunner,
                                                             tmp_path: Path) -> None:
    """A callback that sends a job when told its own was cancelled (a chain of jobs ending):
    that job and the one that waited are each sent to the spare once."""
    first, spare = _ready_with_spare(qtbot, runner)
    assert first != spare
    again: list[Event] = []

    def on_event(event: Event) -> None:
        if isinstance(event, ErrorEvent):
            runner.submit(PingRequest(), again.append)

    job = runner.submit(sleep(30), on_event)
    waiting: list[Event] = []
    runner.submit(PingRequest(), waiting.append)
    qtbot.waitUntil(lambda: runner.worker_pid == first and bool(
        requests_of(tmp_path, first)), timeout=10_000)
    qtbot.wait(200)  # inside the sleep
    runner.cancel([job])
    qtbot.waitUntil(lambda: _answered(again) and _answered(waiting), timeout=10_000)
    assert sorted(r["id"] for r in requests_of(tmp_path, spare)) == [job + 1, job + 2]


def test_cancelling_a_waiting_job_leaves_the_running_one_alone(
        qtbot, runner: JobRunner, tmp_path: Path) -> None:
    """A compare cancelled while it waits behind an export: the export finishes in its
    worker; the compare is answered at once and never runs (its worker is replaced when it
    comes to it), and a job sent after it runs on the spare."""
    first, spare = _ready_with_spare(qtbot, runner)
    running: list[Event] = []
    waiting: list[Event] = []
    after: list[Event] = []
    runner.submit(sleep(1), running.append)
    job = runner.submit(PingRequest(), waiting.append)
    runner.submit(PingRequest(), after.append)
    qtbot.waitUntil(lambda: bool(running), timeout=10_000)
    runner.cancel([job])
    assert error_kind(waiting) == "cancelled" and not _answered(running)
    qtbot.waitUntil(lambda: _answered(running) and _answered(after), timeout=10_000)
    final = running[-1]
    assert isinstance(final, DescribeResult) and final.id == job - 1
    assert final.description.kind == f"slept in {first}", "it finished in its own worker"
    assert after == [Pong(id=job + 1, pid=spare)]
    assert len(waiting) == 1, "the cancelled job heard nothing after its error"
    assert [r["job"] for r in requests_of(tmp_path, spare)] == ["ping"]
    assert [r["id"] for r in requests_of(tmp_path, spare)] == [job + 1]


def test_killed_worker_fails_its_jobs_with_the_signal(qtbot, runner: JobRunner) -> None:
    with qtbot.waitSignal(runner.workerReady, timeout=10_000):
        runner.start()
    qtbot.waitUntil(lambda: runner.spare_ready, timeout=10_000)
    pid, spare = runner.worker_pid, runner.spare_pid
    assert pid is not None
    events: list[Event] = []
    runner.submit(sleep(30), events.append)
    qtbot.waitUntil(lambda: bool(events), timeout=10_000)
    with qtbot.waitSignal(runner.workerLost, timeout=30_000) as lost:
        os.kill(pid, signal.SIGKILL)
    assert "signal 9 (SIGKILL: killed from outside" in lost.args[0]
    assert error_kind(events) == "worker_crashed"
    assert isinstance(events[-1], ErrorEvent) and events[-1].error.message == lost.args[0]
    assert runner.worker_pid == spare and runner.ready_info is not None
    assert pid_of(wait_result(qtbot, runner, PingRequest())) == spare


def test_an_exit_during_a_job_is_reported_even_with_status_0(qtbot, runner: JobRunner) -> None:
    """Status 0 is a quiet retirement only once every started job has answered (the real
    worker's retirement is tested in test_session.py)."""
    with qtbot.waitSignal(runner.workerReady, timeout=10_000):
        runner.start()
    qtbot.waitUntil(lambda: runner.spare_ready, timeout=10_000)
    spare = runner.spare_pid
    events: list[Event] = []
    with qtbot.waitSignal(runner.workerLost, timeout=30_000) as lost:
        runner.submit(DescribeRequest(source="exit:0"), events.append)
    assert "exit status 0" in lost.args[0]
    assert error_kind(events) == "worker_crashed"
    assert runner.worker_pid == spare and runner.ready_info is not None


def test_a_worker_that_keeps_dying_early_is_not_restarted(qtbot) -> None:
    runner = JobRunner(command=[sys.executable, "-c", "raise SystemExit(4)"])
    lost: list[str] = []
    runner.workerLost.connect(lost.append)
    events: list[Event] = []
    runner.submit(PingRequest(), events.append)
    qtbot.waitUntil(lambda: len(lost) == JobRunner.MAX_EARLY_DEATHS, timeout=10_000)
    qtbot.wait(200)
    assert len(lost) == JobRunner.MAX_EARLY_DEATHS
    assert all("exit status 4" in sentence for sentence in lost)
    assert runner.worker_pid is None and error_kind(events) == "worker_crashed"


def test_shutdown_ends_the_worker_and_the_spare(qtbot, runner: JobRunner) -> None:
    with qtbot.waitSignal(runner.workerReady, timeout=10_000):
        runner.start()
    qtbot.waitUntil(lambda: runner.spare_ready, timeout=10_000)
    pids = [runner.worker_pid, runner.spare_pid]
    runner.shutdown()  # returns once both have ended (how long that takes: bench_stop.py)
    assert runner.worker_pid is None and runner.spare_pid is None
    assert not any(pid_alive(pid) for pid in pids if pid)
    runner.deleteLater()  # no "QProcess: Destroyed while process is still running"
    qtbot.wait(50)
