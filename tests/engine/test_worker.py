"""The worker's JSON-lines protocol, driven over real pipes without Qt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, read_json_line

LINE_TIMEOUT_S = 60  # the longest a job here may stay silent, on a loaded machine

NET = '''
import torch


class Net(torch.nn.Module):
    def __init__(self, features: int = 3) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, features)

    def forward(self, x):
        print("hello from forward")  # must not corrupt the protocol on stdout
        return torch.relu(self.fc(x))
'''


class Worker:
    """A worker process driven over its pipes, the way the GUI's client drives it."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self.ids = iter(range(1, 10_000))
        self.start()

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO), "ONNX_STUDIO_CACHE_DIR": str(self.cache)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "onnx_studio.engine.worker"], cwd=REPO, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.ready = self.read()

    def read(self, timeout: float = LINE_TIMEOUT_S) -> dict[str, Any]:
        return read_json_line(self.proc, timeout)  # every stdout line is one JSON object

    def send_raw(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def run(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """Send a job, return all its events; the last is its result or error."""
        job_id = next(self.ids)
        self.send_raw(json.dumps({**request, "id": job_id}))
        events = []
        while True:
            event = self.read()
            assert event["id"] == job_id
            events.append(event)
            if event["type"] in ("result", "error"):
                return events

    def settle(self) -> None:
        """Leave the worker idle for the next test: drain what a test that stopped midway left
        unread; a worker it left dead or stuck is replaced by a fresh one."""
        job_id = next(self.ids)
        try:
            self.send_raw(json.dumps({"job": "ping", "id": job_id}))
            while self.read().get("id") != job_id:
                pass  # an earlier job's events
            return
        except (AssertionError, OSError):  # read_json_line killed a silent worker
            pass
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.start()

    def quit(self) -> None:
        self.send_raw(json.dumps({"job": "quit"}))
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError("the worker did not quit within 30 s; it was killed") from None
        assert code == 0


@pytest.fixture(scope="module")
def shared_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    """One warm worker for the module's protocol tests: torch is imported once."""
    w = Worker(tmp_path_factory.mktemp("cache"))
    yield w
    w.quit()


@pytest.fixture
def worker(shared_worker: Worker) -> Iterator[Worker]:
    """The module's worker; each test leaves it idle, even one that failed midway."""
    yield shared_worker
    shared_worker.settle()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("model")
    (folder / "net.py").write_text(NET, encoding="utf-8")
    return folder


def test_ready_message_says_torch_is_loaded(worker: Worker) -> None:
    assert worker.ready["type"] == "ready"
    assert worker.ready["pid"] == worker.proc.pid
    assert worker.ready["torch"].startswith("2.")


def test_ping_and_devices(worker: Worker) -> None:
    (pong,) = worker.run({"job": "ping"})
    assert pong == {"id": pong["id"], "type": "result", "pong": True, "pid": worker.proc.pid}
    (devices,) = worker.run({"job": "devices"})
    assert devices["devices"][0] == "cpu"
    assert all(d == "mps" or d.startswith("cuda:") for d in devices["devices"][1:])
    low, high = devices["opsets"]["torchscript"]
    assert low <= 9 < 17 <= high
    assert devices["opsets"]["dynamo"][0] == 18
    assert isinstance(devices["ort_max_opset"], int) and devices["ort_max_opset"] >= 17


def test_bad_requests_get_an_error_and_the_worker_lives_on(worker: Worker) -> None:
    (error,) = worker.run({"job": "fly"})
    assert error["type"] == "error" and "Unknown job" in error["error"]["message"]
    worker.send_raw("this is not json")
    event = worker.read()
    assert event["type"] == "error" and "Unreadable request" in event["error"]["message"]
    assert worker.run({"job": "ping"})[-1]["pong"] is True


def test_a_request_that_does_not_fit_is_an_error_naming_the_field(worker: Worker) -> None:
    for request, words in (({"job": "export"}, "field 'recipe' is missing"),
                           ({"job": "describe", "source": 5}, "field 'source' must be a string"),
                           ({"job": "ping", "id": "seven"}, None)):
        if words is None:  # an id that is not the client's integer: answered without one
            worker.send_raw(json.dumps(request))
            error = worker.read()
            assert "id" not in error and "'id' must be an integer" in error["error"]["message"]
            continue
        (error,) = worker.run(request)  # with the request's id, so the client can match it
        assert error["type"] == "error" and error["error"]["kind"] == "worker_protocol"
        assert words in error["error"]["message"] and error["error"]["hint"], error
    assert worker.run({"job": "ping"})[-1]["pong"] is True


def test_ready_says_the_torch_is_a_tested_one(worker: Worker) -> None:
    assert worker.ready["torch_tested"] is True  # the test command installs a tested torch


def test_describe_lists_classes_and_forward_params(worker: Worker, model_dir: Path) -> None:
    (result,) = worker.run({"job": "describe", "source": "net.py", "base_dir": str(model_dir)})
    desc = result["description"]
    assert [c["name"] for c in desc["candidates"]] == ["Net"]
    assert desc["candidates"][0]["params"] == ["x"]


def test_export_streams_events_then_one_result(worker: Worker, model_dir: Path) -> None:
    recipe = ('version = 1\n[model]\nsource = "net.py:Net"\nkwargs = { features = 5 }\n'
              '[[inputs]]\nname = "x"\nshape = [2, 4]\ndynamic = { 0 = "batch" }\n'
              '[[outputs]]\nname = "y"\n[export]\noutput = "out/net.onnx"\n')
    events = worker.run({"job": "export", "recipe": recipe, "base_dir": str(model_dir)})
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "result" and kinds.count("result") == 1
    assert "progress" in kinds
    fractions = [e["fraction"] for e in events if e["type"] == "progress"]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    report = events[-1]["report"]
    assert report["ok"], report
    assert Path(report["output"]) == model_dir / "out" / "net.onnx"
    assert (model_dir / "out" / "net.onnx").is_file()
    assert report["graph"]["inputs"][0]["shape"][0] == "batch"
    assert report["graph"]["outputs"][0]["shape"][-1] == 5
    # the model's print() never lands on the protocol as a raw line (read() parses every
    # line as JSON); at most it comes back as a log event
    assert all(e["type"] == "log" for e in events if "hello from forward" in json.dumps(e))


def test_job_folders_live_under_the_cache_dir(worker: Worker, model_dir: Path) -> None:
    recipe = ('version = 1\n[model]\nsource = "net.py:Net"\n'
              '[[inputs]]\nname = "x"\nshape = [1, 4]\n[export]\noutput = "b.onnx"\n')
    result = worker.run({"job": "export", "recipe": recipe, "base_dir": str(model_dir)})[-1]
    job_dir = Path(result["job_dir"])
    assert job_dir.is_dir()
    assert job_dir.parent == worker.cache / "jobs", "ONNX_STUDIO_CACHE_DIR is honoured"
    assert job_dir.name == f"{worker.proc.pid}-{result['id']}"


def test_failed_export_is_a_result_with_the_error(worker: Worker, model_dir: Path) -> None:
    recipe = ('version = 1\n[model]\nsource = "net.py:Nope"\n'
              '[[inputs]]\nname = "x"\nshape = [1, 4]\n[export]\noutput = "never.onnx"\n')
    result = worker.run({"job": "export", "recipe": recipe, "base_dir": str(model_dir)})[-1]
    assert result["type"] == "result"
    assert result["report"]["ok"] is False
    assert result["report"]["error"]["kind"] == "source"
    assert "Nope" in result["report"]["error"]["message"]
    assert not (model_dir / "never.onnx").exists()


def test_unreadable_recipe_is_an_error_event(worker: Worker, model_dir: Path) -> None:
    (error,) = worker.run({"job": "export", "recipe": "version = 1\n[model\n",
                           "base_dir": str(model_dir)})
    assert error["type"] == "error"
    assert error["error"]["kind"] == "recipe"
    assert "TOML" in error["error"]["message"]


VALIDATE_RECIPE = ('version = 1\n[model]\nsource = "net.py:Net"\n'
                   '[[inputs]]\nname = "x"\nshape = [2, 4]\ndynamic = { 0 = "batch" }\n'
                   '[[outputs]]\nname = "y"\ndynamic = { 0 = "batch" }\n'
                   '[export]\noutput = "v/net.onnx"\n[validate]\nrandom_trials = 1\n')


def test_validate_job_checks_an_existing_file(worker: Worker, model_dir: Path) -> None:
    exported = worker.run({"job": "export", "recipe": VALIDATE_RECIPE,
                           "base_dir": str(model_dir)})[-1]
    assert exported["report"]["ok"] and exported["report"]["validation"] is None
    events = worker.run({"job": "validate", "recipe": VALIDATE_RECIPE,
                         "base_dir": str(model_dir), "onnx": "v/net.onnx"})
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "result" and kinds.count("result") == 1 and "progress" in kinds
    result = events[-1]
    assert Path(result["onnx"]) == model_dir / "v" / "net.onnx", "relative to base_dir"
    validation = result["validation"]
    assert validation["ok"], validation
    assert [o["name"] for o in validation["outputs"]] == ["y"]
    assert [t["kind"] for t in validation["trials"]] == [
        "export-inputs", "random", "dynamic-size", "dynamic-size"]
    # the plot data is in the job's folder, not beside the user's file
    job_dir = Path(result["job_dir"])
    assert job_dir.parent == worker.cache / "jobs"
    assert Path(validation["plots"]) == job_dir / "validation.npz"
    assert (job_dir / "validation.npz").is_file()
    assert not list((model_dir / "v").glob("*.npz"))


def test_validate_job_reports_disagreement_as_a_result(worker: Worker, model_dir: Path) -> None:
    # traced, x.mean().item() is baked into the file: right only for the export inputs
    (model_dir / "baked.py").write_text(
        "import torch\n\n\nclass Baked(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x * x.mean().item()\n", encoding="utf-8")
    recipe = ('version = 1\n[model]\nsource = "baked.py:Baked"\n[[inputs]]\nname = "x"\n'
              'shape = [3, 4]\n[export]\noutput = "v/baked.onnx"\nexporter = "torchscript"\n'
              '[validate]\nrandom_trials = 1\n')
    assert worker.run({"job": "export", "recipe": recipe,
                       "base_dir": str(model_dir)})[-1]["report"]["ok"]
    result = worker.run({"job": "validate", "recipe": recipe,  # onnx: the recipe's output
                         "base_dir": str(model_dir)})[-1]
    assert result["type"] == "result"
    validation = result["validation"]
    assert validation["ok"] is False
    assert [t["ok"] for t in validation["trials"]] == [True, False]
    assert validation["outputs"][0]["max_abs_diff"] > 0
    assert validation["message"].startswith("1 of 2 trials failed; first: random draw")


def test_validate_job_without_a_file_is_an_error_event(worker: Worker,
                                                       model_dir: Path) -> None:
    (error,) = [e for e in worker.run({"job": "validate", "recipe": VALIDATE_RECIPE,
                                       "base_dir": str(model_dir), "onnx": "missing.onnx"})
                if e["type"] in ("result", "error")]
    assert error["type"] == "error"
    assert error["error"]["kind"] == "validation"
    assert "missing.onnx" in error["error"]["message"] and error["error"]["hint"]
    (bad,) = worker.run({"job": "validate", "recipe": "[model\n", "base_dir": str(model_dir)})
    assert bad["type"] == "error" and bad["error"]["kind"] == "recipe"
    assert worker.run({"job": "ping"})[-1]["pong"] is True


# ---------------------------------------------------------------------------- ending

SLEEPER = '''
import subprocess
import sys
import time
from pathlib import Path

import torch


class Sleeper(torch.nn.Module):
    """Starts a child process, then waits in the constructor for `seconds`.

    native: wait in one long native call (matrix products on one thread) instead, during which
    Python cannot run a signal handler on the main thread.
    """

    def __init__(self, native: bool = False, seconds: float = 120) -> None:
        super().__init__()
        torch.set_num_threads(1)
        a = torch.randn(4000, 4000)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        Path(__file__).with_suffix(".child").write_text(str(child.pid))
        if native:  # minutes on one thread, in one call: longer than any guard below
            torch.linalg.multi_dot([a] * 64)
        else:
            time.sleep(seconds)
        self.fc = torch.nn.Linear(1, 1)

    def forward(self, x):
        return self.fc(x)
'''


def pid_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, waiting for a reaper, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


# A hang guard for what a cancel ends, never a time limit: shorter than the Sleeper's sleeps,
# so an end within it is the cancel's doing.
STOP_GUARD_S = 30


def wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def sleeper_request(folder: Path, **kwargs: Any) -> str:
    """An export request of the Sleeper model (written into `folder`), as a JSON line."""
    (folder / "sleeper.py").write_text(SLEEPER, encoding="utf-8")
    options = ", ".join(f"{k} = {json.dumps(v)}" for k, v in kwargs.items())
    recipe = (f'version = 1\n[model]\nsource = "sleeper.py:Sleeper"\nkwargs = {{ {options} }}\n'
              '[[inputs]]\nname = "x"\nshape = [1]\n[export]\noutput = "never.onnx"\n')
    return json.dumps({"id": 1, "job": "export", "recipe": recipe, "base_dir": str(folder)})


def wait_for_child(folder: Path, proc: subprocess.Popen[str]) -> int:
    """The pid of the child the Sleeper started, once it runs."""
    child_file = folder / "sleeper.child"
    while not child_file.exists() or not child_file.read_text():  # a hang: the test's timeout
        assert proc.poll() is None, "the worker ended before the Sleeper's child started"
        time.sleep(0.05)
    child = int(child_file.read_text())
    assert pid_alive(child)
    return child


def test_worker_exits_when_its_stdin_closes(tmp_path: Path) -> None:
    w = Worker(tmp_path)  # ready: torch imported, idle
    assert w.proc.stdin is not None
    w.proc.stdin.close()
    assert w.proc.wait(timeout=STOP_GUARD_S) == 0


def test_requests_sent_before_the_end_of_stdin_are_answered(tmp_path: Path) -> None:
    """A client may write its requests and close stdin (installer/smoke_test.py does)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "ONNX_STUDIO_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "onnx_studio.engine.worker"], cwd=REPO, env=env, text=True,
        timeout=120,
        input='{"id": 1, "job": "ping"}\n{"id": 2, "job": "devices"}\n', capture_output=True)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(m.get("id"), m["type"]) for m in lines] == [(None, "ready"), (1, "result"),
                                                          (2, "result")]
    assert done.returncode == 0


@pytest.mark.parametrize(("how", "native"), [
    ("sigterm", False), ("sigterm", True), ("abort", False), ("abort", True)])
def test_ending_a_busy_worker_ends_the_processes_its_job_started(tmp_path: Path, how: str,
                                                                 native: bool) -> None:
    """Cancel (SIGTERM, or the `abort` request where there are no signals) ends the worker
    and the job's children while the job still runs, even inside one long native call: the
    job (a 120 s sleep, or minutes of one matrix product) and its child (a 120 s sleep) would
    outlast the guard on their own. How fast they end: tests/benchmarks/bench_stop.py."""
    w = Worker(tmp_path / "cache")
    w.send_raw(sleeper_request(tmp_path, native=native))
    child = wait_for_child(tmp_path, w.proc)
    if how == "sigterm":
        w.proc.terminate()
    else:
        w.send_raw(json.dumps({"job": "abort"}))
    w.proc.wait(timeout=STOP_GUARD_S)
    assert wait_gone(child, STOP_GUARD_S), "the job's child outlived the worker"
    assert not (tmp_path / "never.onnx").exists()


def test_a_worker_whose_client_died_ends_with_its_children(tmp_path: Path) -> None:
    """Nobody reads the answers any more: the next protocol line ends the worker and the job."""
    read_end, write_end = os.pipe()
    env = {**os.environ, "PYTHONPATH": str(REPO), "ONNX_STUDIO_CACHE_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "onnx_studio.engine.worker"], cwd=REPO, env=env,
                            text=True, stdin=subprocess.PIPE, stdout=write_end,
                            stderr=subprocess.DEVNULL)
    os.close(write_end)
    try:
        assert proc.stdin is not None
        proc.stdin.write(sleeper_request(tmp_path, seconds=1.0) + "\n")
        proc.stdin.flush()
        child = wait_for_child(tmp_path, proc)
        os.close(read_end)  # the client is gone: its end of both pipes closes
        proc.stdin.close()
        proc.wait(timeout=30)
        assert wait_gone(child, STOP_GUARD_S), "the job's child outlived the worker"
        assert not (tmp_path / "never.onnx").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_every_job_but_the_light_ones_waits_for_the_warm_up(monkeypatch) -> None:
    """A job importing the engine while the warm-up thread imports it too could find a module
    half-initialised (an ImportError of a name that is there: seen with `variant` on a busy
    machine); only the light jobs the form waits for are answered during the warm-up."""
    import io

    from onnx_studio.engine import worker
    from onnx_studio.engine.errors import StudioError
    from onnx_studio.engine.protocol import messages as m

    joined: list[str] = []

    class WarmUp:
        ident = 1  # started

        def join(self) -> None:
            joined.append(tag)

    def refuse(request: object, send: object) -> None:
        raise StudioError("recipe", "not run here")

    monkeypatch.setattr(worker, "_WARM_UP", WarmUp())
    monkeypatch.setattr(worker, "JOBS", {name: refuse for name in worker.JOBS})
    requests = [m.ExportRequest(recipe="r"), m.ValidateRequest(recipe="r"),
                m.ValidateFileRequest(recipe="r", onnx="x.onnx"),
                m.CompareRequest(a="a", b="b"), m.ProfileRequest(onnx="x.onnx"),
                m.VariantRequest(onnx="x.onnx", recipe="r", kind="fp16", output="y.onnx"),
                m.ExplainRequest(onnx="x.onnx", recipe="r"),
                m.DescribeRequest(source="m.py"), m.DevicesRequest(), m.PingRequest()]
    assert {r.TAG for r in requests} == set(worker.JOBS)  # every job is looked at
    out = io.StringIO()
    for request in requests:
        tag = request.TAG
        worker.handle(request, worker.Channel(out))
    assert joined == ["export", "validate", "validate_file", "compare", "profile", "variant",
                      "explain"]
    assert out.getvalue().count('"message": "not run here"') == len(requests)  # all ran
