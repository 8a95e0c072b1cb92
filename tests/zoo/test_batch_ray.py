"""`batch --executor ray` against a real local Ray instance (2 CPUs, started once for the
module): the same items as Ray tasks, each running its worker process on the node; pass, fail,
crash, timeout, resume, and Ctrl+C of a batch that started its own instance."""

from __future__ import annotations

import io
import json
import logging
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import onnx_studio
from onnx_studio.engine.batch.items import read_items
from onnx_studio.engine.batch.ray_executor import run_on_node, task_options
from tests.conftest import wait_until
from tests.zoo.zoo_models import batch_command, cli_env, hang_pids, write_recipe

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # a Ray instance (~20 s to start here) and real exports

TIMEOUT_S = 300
HANG_LIMIT_S = 12  # the worker's start counts (torch's import: 2-3 s idle, more when loaded); a
# limit reached before the model ran still ends the item and its worker (the tests allow it).
# Nothing else runs in this test while it waits: the limit is a core left idle.


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A local Ray instance for the module (its workers get this test's folders); a folder for
    the zoo."""
    folder = tmp_path_factory.mktemp("ray-zoo")
    with pytest.MonkeyPatch.context() as env:
        for name, value in cli_env(folder).items():
            env.setenv(name, value)
        ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 * 1024 * 1024,
                 log_to_driver=False, logging_level=logging.WARNING)
    try:
        yield folder
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def ray_zoo(cluster: Path) -> tuple[onnx_studio.BatchSummary, str]:
    """The zoo as Ray tasks: the summary and the progress lines."""
    write_recipe(cluster, "pass", validate=True)
    write_recipe(cluster, "fail", "Raises")
    write_recipe(cluster, "crash", "Exits")
    stream = io.StringIO()
    return onnx_studio.batch([cluster / f"{n}.toml" for n in ("pass", "fail", "crash")],
                             cluster / "report", executor="ray", stream=stream
                             ), stream.getvalue()


@pytest.mark.timeout(TIMEOUT_S)
def test_items_run_as_ray_tasks(ray_zoo: tuple[onnx_studio.BatchSummary, str], cluster: Path
                                ) -> None:
    summary, said = ray_zoo
    assert "pass: submitted as a Ray task" in said
    assert "pass: " in said and "% Exporting" in said  # the task's stages came back
    assert (summary.total, summary.passed, summary.failed) == (3, 1, 2), summary.error
    assert summary.exit_status() == 1
    kinds = [None if r.error is None else r.error.kind for r in summary.results]
    assert kinds == [None, "model", "worker_crashed"]
    assert summary.results[0].validation_ok is True
    assert (cluster / "out" / "pass.onnx").is_file()  # written where the recipe says
    for record in summary.records:
        assert record.executor == "ray" and record.node == socket.gethostname()
    lines = (cluster / "report" / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["recipe"] for line in lines) == sorted(
        r.recipe for r in summary.results)


@pytest.mark.timeout(TIMEOUT_S)
def test_resume_on_ray_runs_nothing_recorded(ray_zoo: tuple[onnx_studio.BatchSummary, str],
                                             cluster: Path) -> None:
    stream = io.StringIO()
    again = onnx_studio.batch([cluster / f"{n}.toml" for n in ("pass", "fail", "crash")],
                              cluster / "report", executor="ray", resume=True, stream=stream)
    assert again.skipped == 3 and again.passed == 1 and again.failed == 2
    assert "submitted" not in stream.getvalue()


@pytest.mark.timeout(TIMEOUT_S)
def test_a_hung_task_ends_at_its_time_limit(cluster: Path) -> None:
    write_recipe(cluster, "hang", "Hangs", marker="ray-hang")
    summary = onnx_studio.batch([cluster / "hang.toml"], cluster / "hang-report",
                                executor="ray", timeout=HANG_LIMIT_S, stream=io.StringIO())
    error = summary.results[0].error
    assert error is not None and error.kind == "timeout"
    pids = hang_pids(cluster, "ray-hang")  # none when the limit came before the model ran
    assert not _alive(pids, within=5)


def test_a_task_reserves_the_recipes_cpus_and_a_gpu_for_cuda(tmp_path: Path) -> None:
    """The GPU part can only be checked by what is asked of Ray: this machine has none."""
    plain = write_recipe(tmp_path, "plain")
    cuda = write_recipe(tmp_path, "cuda")
    cuda.write_text(cuda.read_text().replace('exporter = "torchscript"',
                                             'exporter = "torchscript"\ndevice = "cuda"\n'
                                             "cpus = 3"))
    jobs = read_items([str(plain), str(cuda)], None, tmp_path / "report")
    options = [task_options(job) for job in jobs]
    assert (options[0]["num_cpus"], options[0]["num_gpus"]) == (1, 0)
    assert (options[1]["num_cpus"], options[1]["num_gpus"]) == (3, 1)
    assert all(o["max_retries"] == 0 for o in options)
    for option in options:  # Ray takes them as they are
        ray.remote(run_on_node).options(**option)


@pytest.mark.timeout(TIMEOUT_S)
def test_ctrl_c_stops_the_tasks_and_the_local_instance_it_started(tmp_path: Path) -> None:
    write_recipe(tmp_path, "pass")
    write_recipe(tmp_path, "hang", "Hangs", marker="hang")
    batch = subprocess.Popen(batch_command("pass.toml", "hang.toml", "-o", "report",
                                           "--executor", "ray", "--json"),
                             cwd=tmp_path, env=cli_env(tmp_path), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    results = tmp_path / "report" / "results.jsonl"
    family: dict[int, str] = {}  # the batch's descendants: pid -> command line
    def going() -> bool:
        if results.is_file() and results.read_text().count("\n") == 1 \
                and hang_pids(tmp_path, "hang"):
            return True
        assert batch.poll() is None, batch.communicate()
        _look(batch.pid, family)
        return False

    try:
        wait_until(going, "the items never got going", TIMEOUT_S - 60, every=0.5)
        _look(batch.pid, family)
        batch.send_signal(signal.SIGINT)
        out, err = batch.communicate(timeout=90)
    finally:
        if batch.poll() is None:
            batch.kill()
    assert batch.returncode == 130, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["error"]["kind"] == "cancelled"
    assert [Path(r["recipe"]).stem for r in summary["results"]] == ["pass"]
    assert [Path(json.loads(line)["recipe"]).stem
            for line in results.read_text().splitlines()] == ["pass"]
    assert any("raylet" in c or "gcs_server" in c for c in family.values()), (
        "no local Ray instance was started")
    left = _alive([*family, *hang_pids(tmp_path, "hang")], within=20)
    assert not left, f"left running after Ctrl+C: {left}"


def _look(pid: int, family: dict[int, str]) -> None:
    for process in psutil.Process(pid).children(recursive=True):
        if process.pid not in family:
            try:
                family[process.pid] = " ".join(process.cmdline())
            except psutil.Error:
                continue


def _alive(pids: list[int], within: float) -> list[int]:
    deadline = time.monotonic() + within
    while True:
        left = [p for p in pids if _running(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
