"""How fast things stop and take over: the times the tests no longer assert (issue 23, item 9).

The tests check order and outcome (the spare took over, the job never finished, nothing was
left); this prints how long it took, medians of several runs, each beside an anchor measured
in the same invocation:

- a worker ended during a job (SIGTERM, the `abort` request; in Python and inside one long
  native call) and on the end of its standard input, to the worker gone and the job's child
  gone; anchor: a bare Python process that imported torch, sent SIGTERM (no handler) and
  reaped (the floor of ending such a process);
- `onnx-studio export` stopped by SIGINT while its export hangs, to the CLI's exit; same anchor;
- the window's job runner (a real worker and its spare): `cancel()` returning, Cancel -> the
  next export's first progress on the spare, against a cold start's first progress (a new
  worker importing torch), and `shutdown()` of a worker and its spare.

    cd /work/main && QT_QPA_PLATFORM=offscreen python tests/benchmarks/bench_stop.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

TINY = ("import torch\n\n\nclass Tiny(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = torch.nn.Linear(4, 2)\n\n"
        "    def forward(self, x):\n        return self.fc(x)\n")


def env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "ONNX_STUDIO_CACHE_DIR": str(tmp / "cache")}


def gone(pid: int) -> bool:
    from onnx_studio.engine import process_tree

    return not process_tree.alive(pid)


def until(condition: Callable[[], bool], seconds: float = 300) -> float:
    """Poll `condition` every millisecond; the perf_counter() at which it held."""
    deadline = time.perf_counter() + seconds
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("a benchmark step did not finish")
        time.sleep(0.001)
    return time.perf_counter()


def bare_process_end() -> float:
    """The anchor: SIGTERM (its default action, no handler) to a Python process that has
    imported torch, as a worker has, until it is reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "import time, torch; print(1, flush=True); "
                             "time.sleep(300)"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "1"
    started = time.perf_counter()
    proc.terminate()
    proc.wait()
    return time.perf_counter() - started


# --------------------------------------------------------------------------- the worker


def worker_end(tmp: Path, how: str, native: bool) -> float:
    """Seconds from the signal (or request, or closed stdin) to the worker and the job's
    child both gone, the job a Sleeper inside its constructor."""
    from tests.engine.test_worker import sleeper_request

    (tmp / "sleeper.child").unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "onnx_studio.engine.worker"], cwd=REPO,
                            env=env(tmp),
                            text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    assert json.loads(proc.stdout.readline())["type"] == "ready"
    child = 0
    if how != "stdin":
        proc.stdin.write(sleeper_request(tmp, native=native) + "\n")
        proc.stdin.flush()
        child_file = tmp / "sleeper.child"
        until(lambda: child_file.exists() and bool(child_file.read_text()))
        child = int(child_file.read_text())
    started = time.perf_counter()
    if how == "sigterm":
        proc.terminate()
    elif how == "abort":
        proc.stdin.write(json.dumps({"job": "abort"}) + "\n")
        proc.stdin.flush()
    else:
        proc.stdin.close()
    proc.wait(timeout=120)
    ended = until(lambda: not child or gone(child))
    return ended - started


def cli_sigint(tmp: Path) -> float:
    """Seconds from SIGINT to the exit of `onnx-studio export` whose export hangs for good."""
    from tests.reliability.models_h1 import write_process_models

    models = write_process_models(tmp)
    (tmp / "hang.pid").unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "onnx_studio.engine.cli", "export", f"{models}:HangsInExport", "-o",
         str(tmp / "out.onnx"), "--input", "x=2x4", "--json"], cwd=tmp, env=env(tmp),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    until(lambda: (tmp / "hang.pid").exists(), 300)
    time.sleep(0.1)
    started = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    return time.perf_counter() - started


# --------------------------------------------------------------------------- the job runner


def runner_times(tmp: Path) -> dict[str, float]:
    """One round with the window's JobRunner: a cold first export, a cancel of a slow export,
    the spare's first progress of the next one, and the shutdown."""
    from PySide6.QtCore import QEventLoop
    from PySide6.QtWidgets import QApplication

    from onnx_studio.app.jobs import JobRunner
    from onnx_studio.engine.protocol import ErrorEvent, Event, ExportRequest, Progress, Result
    from tests.app.conftest import write_slow_model

    app = QApplication.instance() or QApplication([])

    def pump(condition: Callable[[], bool]) -> float:
        deadline = time.perf_counter() + 300
        while not condition():
            if time.perf_counter() > deadline:
                raise TimeoutError("a benchmark step did not finish")
            app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 1)
        return time.perf_counter()

    (tmp / "tiny.py").write_text(TINY, encoding="utf-8")
    tiny = ('version = 1\n[model]\nsource = "tiny.py:Tiny"\n[[inputs]]\nname = "x"\n'
            'shape = [2, 4]\n[export]\noutput = "tiny.onnx"\n')
    write_slow_model(tmp)
    slow = ('version = 1\n[model]\nsource = "slow_net.py:Slow"\n[[inputs]]\nname = "x"\n'
            'shape = [1, 4]\n[export]\noutput = "slow.onnx"\n')
    progress: dict[str, float] = {}

    def first_progress(key: str) -> Callable[[Event], None]:
        def heard(event: Event) -> None:
            if isinstance(event, Progress | Result | ErrorEvent):
                progress.setdefault(key, time.perf_counter())
            if isinstance(event, Result | ErrorEvent):
                progress[key + " done"] = time.perf_counter()
        return heard

    def export(recipe: str, heard: Callable[[Event], None]) -> None:
        runner.submit(ExportRequest(recipe=recipe, base_dir=str(tmp)), heard)

    runner = JobRunner()
    started = time.perf_counter()
    export(tiny, first_progress("cold"))
    pump(lambda: "cold done" in progress)
    pump(lambda: runner.spare_ready)
    times = {"cold start -> first progress": progress["cold"] - started}

    (tmp / "slow_net.child").unlink(missing_ok=True)
    export(slow, lambda _event: None)
    pump(lambda: (tmp / "slow_net.child").exists())
    clicked = time.perf_counter()
    runner.cancel()
    times["cancel() returns"] = time.perf_counter() - clicked
    export(tiny, first_progress("spare"))
    pump(lambda: "spare done" in progress)
    times["Cancel -> next export's first progress (spare)"] = progress["spare"] - clicked

    pump(lambda: runner.spare_ready)
    started = time.perf_counter()
    runner.shutdown()
    times["shutdown() of a worker and its spare"] = time.perf_counter() - started
    runner.deleteLater()
    app.processEvents()
    return times


# --------------------------------------------------------------------------- the table


def median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:9.1f}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    root = Path(tempfile.mkdtemp(prefix="bench_stop_"))
    for name in ("CONFIG", "CACHE", "DATA", "OUTPUT"):
        os.environ[f"ONNX_STUDIO_{name}_DIR"] = str(root / name.lower())

    floor: list[float] = []
    rows: dict[str, list[float]] = {}
    cases = [("sigterm", False), ("sigterm", True), ("abort", False), ("abort", True),
             ("stdin", False)]
    for run in range(args.runs):
        for how, native in cases:
            label = {"sigterm": "worker: SIGTERM during a job", "abort":
                     "worker: abort request during a job", "stdin":
                     "worker: its stdin closed, idle"}[how] + (" (native call)" if native else "")
            folder = root / f"worker-{how}-{native}-{run}"
            folder.mkdir()
            rows.setdefault(label, []).append(worker_end(folder, how, native))
        floor.append(bare_process_end())
        folder = root / f"cli-{run}"
        folder.mkdir()
        rows.setdefault("CLI: SIGINT during a hung export -> exit", []).append(cli_sigint(folder))
        floor.append(bare_process_end())
        folder = root / f"runner-{run}"
        folder.mkdir()
        for label, seconds in runner_times(folder).items():
            rows.setdefault(f"runner: {label}", []).append(seconds)

    anchor = statistics.median(floor)
    cold = statistics.median(rows["runner: cold start -> first progress"])
    print(f"\nbench_stop ({args.runs} runs each; medians in ms; anchor: a bare Python process "
          f"with torch imported, SIGTERMed and reaped: {anchor * 1000:.1f} ms, {len(floor)} "
          "runs)\n")
    print(f"| {'what ends or takes over':<58} | {'median':>9} | {'x anchor':>9} |")
    print(f"|{'-' * 60}|{'-' * 11}|{'-' * 11}|")
    for label, values in rows.items():
        if label.startswith("runner:"):
            continue
        print(f"| {label:<58} | {median_ms(values)} | "
              f"{statistics.median(values) / anchor:9.1f} |")
    print(f"\n| {'the job runner (anchor: a cold start)':<58} | {'median':>9} | "
          f"{'x cold':>9} |")
    print(f"|{'-' * 60}|{'-' * 11}|{'-' * 11}|")
    for label, values in rows.items():
        if label.startswith("runner:"):
            print(f"| {label.removeprefix('runner: '):<58} | {median_ms(values)} | "
                  f"{statistics.median(values) / cold:9.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
