"""Shared by every test: no test touches the real config folder, Qt runs offscreen, a read
from a child's pipe cannot hang, no worker process outlives its test module, and the graph
tests' exports are made once per session."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from onnx_studio.engine.source import torchvision_guard
from tests.engine.models import export_graph_examples

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
REPO = Path(__file__).resolve().parents[1]
# the tests build transformers and timm models in this process too: as the worker does, make
# a torchvision whose C++ library cannot load on this torch importable first
torchvision_guard.guard()


@pytest.fixture(autouse=True)
def _isolated_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Point platformdirs' config, cache and data folders at a temp dir for every test."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("ONNX_STUDIO_CONFIG_DIR", str(home / "config" / "onnx-studio"))
    monkeypatch.setenv("ONNX_STUDIO_CACHE_DIR", str(home / "cache" / "onnx-studio"))
    monkeypatch.setenv("ONNX_STUDIO_DATA_DIR", str(home / "data" / "onnx-studio"))


def pytest_configure(config: pytest.Config) -> None:
    """Compile the project's modules to bytecode once, before any test starts a process.

    The suite starts hundreds of Python processes (workers, CLIs, windows); where
    PYTHONDONTWRITEBYTECODE is set (as on this project's machines) none of them may write
    `__pycache__`, so each would compile every engine and app module again from source,
    about 0.6 s a process. Bytecode compiled here is read by all of them (and stays valid:
    Python checks each file's source against it)."""
    if hasattr(config, "workerinput"):  # pytest-xdist's workers: the controller did it
        return
    import compileall

    for package in ("onnx_studio",):
        compileall.compile_dir(REPO / package, quiet=1, workers=0)


MYPY = pytest.StashKey[tuple[subprocess.Popen[bytes], IO[bytes]]]()


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]
                                  ) -> Iterator[None]:
    """The tests are grouped and ordered (`_group`, `_longest_first`) before any other
    plugin sees them: pytest-xdist's own hook turns an xdist_group mark into the test's id
    (`test@group`), the unit its loadgroup scheduling sends whole to one process; a mark added
    after it is ignored, and each test went alone, its module's fixtures made again in both
    processes. Then, on the tests left to run (after -m and -k), mypy starts at once when its
    test is among them, and tests that run Qt's event loop time out by pytest-timeout's
    thread method.

    mypy checks a fresh checkout in about 50 s of one core, mostly while the suite waits on
    a child process or on the other core; its test (tests/test_quality.py) collects the result.

    The default (signal) method fails only the test that hung, but its SIGALRM handler is Python
    code, which never runs while Qt waits inside its C++ event loop (a qtbot wait for a signal
    that never comes). The thread method ends the run instead, after printing every thread's
    stack: a hung window test stops the suite with the place it hung, never stalls it.
    """
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))
    _longest_first(items)
    yield
    # (under xdist every worker collects every test: the test runs mypy itself there)
    if not hasattr(config, "workerinput") and any(
            item.name == "test_mypy_is_clean" for item in items):
        output = tempfile.TemporaryFile()  # noqa: SIM115 (read by the test, at the end)
        config.stash[MYPY] = (subprocess.Popen([sys.executable, "-m", "mypy"], cwd=REPO,
                                               stdout=output, stderr=subprocess.STDOUT), output)
    for item in items:
        if "qapp" not in getattr(item, "fixturenames", ()):  # qtbot and the windows need qapp
            continue
        marker = item.get_closest_marker("timeout")
        if marker is not None and ("method" in marker.kwargs or len(marker.args) > 1):
            continue  # the test chose its method
        seconds = None if marker is None else (
            marker.args[0] if marker.args else marker.kwargs.get("timeout"))
        item.add_marker(pytest.mark.timeout(seconds, method="thread"), append=False)


def _budget(item: pytest.Item) -> float:
    """The time a test allows itself (its timeout marker, else the default), in seconds."""
    marker = item.get_closest_marker("timeout")
    seconds = None if marker is None else (
        marker.args[0] if marker.args else marker.kwargs.get("timeout"))
    return float(seconds or 0) + (60.0 if item.get_closest_marker("slow") else 0.0)


def _longest_first(items: list[pytest.Item]) -> None:
    """Order the test groups by the longest time any of their tests allows, longest first,
    keeping the order inside each group: pytest-xdist hands out groups in the order it meets
    them, so the long ones start at once and the short ones fill in beside them, instead of
    one long group running alone at the end."""
    budget: dict[str, float] = {}
    for item in items:
        group = _group(item)
        budget[group] = max(budget.get(group, 0.0), _budget(item))
    first_seen = {group: i for i, group in enumerate(dict.fromkeys(map(_group, items)))}
    items.sort(key=lambda item: (-budget[_group(item)], first_seen[_group(item)]))


def _group(item: pytest.Item) -> str:
    """The tests that share an expensive fixture run in one test process (pytest-xdist's
    loadgroup): the graph tests' session exports, one corpus architecture's exports, and
    otherwise a module's tests (their module fixtures)."""
    if "graph_exports" in getattr(item, "fixturenames", ()):
        return "graph_exports"
    module = item.nodeid.split("::")[0]
    callspec = getattr(item, "callspec", None)
    if item.get_closest_marker("corpus") is not None and callspec is not None:
        return f"{module}[{callspec.id}]"
    return module


@pytest.fixture(scope="session")
def graph_exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The graph tests' files (engine and window alike), exported once per session."""
    return export_graph_examples(tmp_path_factory.mktemp("graph_exports"))


# ------------------------------------------------------------------- reading a child's pipe

_LINES: weakref.WeakKeyDictionary[subprocess.Popen[str], queue.SimpleQueue[str | None]] = (
    weakref.WeakKeyDictionary())


def read_json_line(proc: subprocess.Popen[str], timeout: float) -> Any:
    """The next line `proc` writes on its stdout, parsed as JSON; waits at most `timeout` s.

    A process that stays silent that long is killed and the test fails saying so, instead of
    the suite hanging in a readline. The pipe is read on a thread of its own (one per process),
    so every read of that stdout must go through here.
    """
    lines = _LINES.get(proc)
    if lines is None:
        assert proc.stdout is not None, "start the process with stdout=subprocess.PIPE"
        lines = _LINES[proc] = queue.SimpleQueue()
        threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True,
                         name=f"stdout of pid {proc.pid}").start()
    try:
        line = lines.get(timeout=timeout)
    except queue.Empty:
        proc.kill()
        proc.wait(timeout=10)
        raise AssertionError(f"{_named(proc)} wrote no line within {timeout:g} s; "
                             "it was killed") from None
    if line is None:
        lines.put(None)  # every later read hears the end too
        raise AssertionError(f"{_named(proc)} closed its stdout (exit status {proc.poll()})")
    return json.loads(line)


def _pump(stream: IO[str], lines: queue.SimpleQueue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _named(proc: subprocess.Popen[str]) -> str:
    args = proc.args if isinstance(proc.args, list | tuple) else [proc.args]
    return f"pid {proc.pid} ({' '.join(map(str, args))})"


# ------------------------------------------------------------------- waiting for a process


def wait_until(condition: Callable[[], object], what: str, seconds: float = 60,
               every: float = 0.05) -> None:
    """Poll `condition` until it holds. A hang guard, never a timing check: after `seconds`
    (generous: a loaded machine takes its time) the test fails saying `what` did not happen."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= deadline:
            pytest.fail(f"{what} (waited {seconds:g} s)")
        time.sleep(every)


# ------------------------------------------------------------------- no worker left behind


def worker_children() -> dict[int, str]:
    """Running children of this process whose command line runs onnx_studio.engine.worker (Linux:
    /proc; elsewhere always empty)."""
    found: dict[int, str] = {}
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid = stat.read_text().rsplit(")", 1)[1].split()[:2]
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, ValueError):
            continue  # it ended while we looked
        if ppid == me and state != "Z" and b"onnx_studio.engine.worker" in command:
            found[int(stat.parent.name)] = command.decode(errors="replace").strip()
    return found


@pytest.fixture(scope="module", autouse=True)
def _no_worker_left_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test module that leaves a worker process running once its fixtures have ended
    (a window not closed, a runner not shut down); the leftovers are killed."""
    before = set(worker_children())
    yield
    deadline = time.monotonic() + 5.0  # a worker that was told to end may take a moment
    while True:
        left = {pid: cmd for pid, cmd in worker_children().items() if pid not in before}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) == pid:  # it leads its own group: its job's children go too
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
    assert not left, (f"{request.module.__name__} left {len(left)} worker process(es) running "
                      f"(now killed): " + "; ".join(f"pid {p}: {c}" for p, c in left.items()))


# ------------------------------------------------------- one export for every test process

def shared_folder(tmp_path_factory: pytest.TempPathFactory, key: str,
                  make: Callable[[Path], object]) -> Path:
    """The folder `key` of this test run, filled by `make(folder)` once, by whichever test
    process asks first; the others wait on its lock and get the same folder (pytest-xdist's
    documented pattern: a file lock in the run's temp folder, the parent of each process's
    own). For exports a test takes as its input: tests read what it holds, and one that
    changes a file copies it first. A folder a process left unfinished is emptied and made
    again."""
    from filelock import FileLock  # torch's own dependency

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # without xdist the parent holds earlier runs: not shared
    folder = root / "shared" / key
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{folder}.lock"):
        made = folder.with_name(f"{key}.made")
        if not made.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            made.touch()
    return folder
