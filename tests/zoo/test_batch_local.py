"""`onnx-studio batch` with the local executor, as a user runs it: a real batch process, real
workers, real exports, real signals. One zoo run is shared: an item that passes, one whose
model raises, one that calls os._exit and one that segfaults; beside it a hung item past its
time limit. Then --resume, Ctrl+C, a wrong request and report.html."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import psutil
import pytest

from onnx_studio.engine import cli
from onnx_studio.engine.batch.items import ItemJob, fingerprint, read_items
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import Recipe, load, loads
from tests.conftest import wait_until
from tests.zoo.zoo_models import batch_command, cli_env, hang_pids, write_recipe

TIMEOUT_S = 200
HANG_LIMIT_S = 15  # the worker's start counts (torch's import: 2-3 s idle, more when loaded); a
# limit reached before the model ran still ends the item and its worker (the tests allow it)
ITEMS = {"pass": ("Net", True), "fail": ("Raises", False), "crash": ("Exits", False),
         "segfault": ("Segfaults", False)}


def last_json(stdout: str) -> dict[str, Any]:
    lines = stdout.strip().splitlines()
    assert lines, "nothing on standard output"
    return json.loads(lines[-1])


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def gone(pids: list[int], within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
              for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The zoo run (2 at a time) and, at the same time, a batch of a hung item with
    --timeout HANG_LIMIT_S: both processes' outcomes."""
    folder = tmp_path_factory.mktemp("zoo")
    for name, (model, validate) in ITEMS.items():
        write_recipe(folder, name, model, validate)
    write_recipe(folder, "hang", "Hangs", marker="hang")
    env = cli_env(folder)
    runs = {
        "zoo": subprocess.Popen(batch_command(*(f"{n}.toml" for n in ITEMS), "-o", "report",
                                              "--workers", "2", "--json"),
                                cwd=folder, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True),
        "hang": subprocess.Popen(batch_command("hang.toml", "-o", "hang-report", "--timeout",
                                               str(HANG_LIMIT_S), "--json"),
                                 cwd=folder, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True),
    }
    hang_family: set[int] = set()  # what the hung item's batch started, seen while it ran
    deadline = time.monotonic() + TIMEOUT_S
    while runs["hang"].poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            hang_family |= {p.pid for p in
                            psutil.Process(runs["hang"].pid).children(recursive=True)}
        time.sleep(0.2)
    done = {name: run.communicate(timeout=TIMEOUT_S) for name, run in runs.items()}
    return {"folder": folder, "hang_family": hang_family,
            **{name: (runs[name].returncode, last_json(out), err)
               for name, (out, err) in done.items()}}


@pytest.mark.timeout(TIMEOUT_S + 60)
def test_every_item_ends_in_its_own_verdict(zoo: dict[str, Any]) -> None:
    status, summary, stderr = zoo["zoo"]
    assert status == 1, stderr
    assert (summary["ok"], summary["total"], summary["passed"], summary["failed"]) == (
        False, 4, 1, 3)
    rows = {Path(r["recipe"]).stem: r for r in summary["results"]}
    assert list(rows) == list(ITEMS)  # the items' order, whatever order they finished in
    assert set(rows["pass"]) >= {"recipe", "ok", "output", "seconds", "validation_ok", "error"}
    assert rows["pass"]["ok"] and rows["pass"]["validation_ok"] is True
    assert rows["pass"]["error"] is None and Path(rows["pass"]["output"]).is_file()
    assert rows["fail"]["error"]["kind"] == "model"
    assert "cannot run" in rows["fail"]["error"]["message"]
    assert rows["crash"]["error"]["kind"] == "worker_crashed"
    assert "exit status 3" in rows["crash"]["error"]["message"]
    assert "SIGSEGV" in rows["segfault"]["error"]["message"]
    assert set(rows["crash"]["error"]) == {"kind", "message", "hint"}
    # progress per item and overall on standard error
    assert "pass: started" in stderr and "[4/4]" in stderr and "FAILED" in stderr


def test_results_jsonl_holds_each_items_full_document(zoo: dict[str, Any]) -> None:
    lines = jsonl(zoo["folder"] / "report" / "results.jsonl")
    assert sorted(Path(line["recipe"]).stem for line in lines) == sorted(ITEMS)
    by_name = {Path(line["recipe"]).stem: line for line in lines}
    document = by_name["pass"]["report"]
    assert document["ok"] and document["graph"]["nodes"] >= 1
    assert document["validation"]["outputs"][0]["passed"]
    assert by_name["crash"]["report"]["error"]["details"]  # the full cause is kept
    for line in lines:
        assert line["fingerprint"].startswith("sha256:") and line["executor"] == "local"


def test_a_hung_item_ends_at_its_time_limit_with_its_processes(zoo: dict[str, Any]) -> None:
    status, summary, stderr = zoo["hang"]
    assert status == 1, stderr
    error = summary["results"][0]["error"]
    assert error["kind"] == "timeout" and f"{HANG_LIMIT_S} s" in error["message"]
    # the worker (and the model's child, when the model was reached within the limit: the
    # worker's start counts, and a loaded machine may take most of it importing torch)
    pids = hang_pids(zoo["folder"], "hang")
    assert zoo["hang_family"] and set(pids[:1]) <= zoo["hang_family"]
    assert gone([*zoo["hang_family"], *pids]), "the hung worker or a child outlived the limit"


def test_report_html_is_a_sortable_table_of_every_item(zoo: dict[str, Any]) -> None:
    page = (zoo["folder"] / "report" / "report.html").read_text()
    table = _Table()
    table.feed(page)
    assert table.header[:3] == ["#", "item", "verdict"] and table.header[-2:] == [
        "error", "files"]
    assert [row[2] for row in table.rows] == ["passed", "failed", "failed", "failed"]
    error = table.rows[2][table.header.index("error")]
    assert error.startswith("worker_crashed: ") and len(error) > len("worker_crashed: ")
    assert "1 passed" in page.replace("<b>", "").replace("</b>", "")
    assert "Failures by cause" in page and "worker_crashed" in page
    assert table.links and Path(zoo["folder"] / "report" / table.links[0]).resolve().is_file()
    assert "addEventListener(\"click\"" in page  # sorting, in the page itself
    assert "http://" not in page and "https://" not in page and "src=" not in page


@pytest.mark.timeout(TIMEOUT_S)
def test_resume_runs_only_what_changed(zoo: dict[str, Any], tmp_path: Path) -> None:
    folder = zoo["folder"]
    report = tmp_path / "report"
    shutil.copytree(folder / "report", report)
    items = [f"{n}.toml" for n in ITEMS]
    again = subprocess.run(batch_command(*items, "-o", str(report), "--resume", "--json"),
                           cwd=folder, env=cli_env(folder), capture_output=True, text=True,
                           timeout=TIMEOUT_S)
    summary = last_json(again.stdout)
    assert again.returncode == 1 and summary["skipped"] == 4, again.stderr
    assert all(r["resumed"] for r in summary["results"]) and summary["passed"] == 1
    assert "started" not in again.stderr  # nothing ran
    assert len(jsonl(report / "results.jsonl")) == 4

    recipe = folder / "fail.toml"  # its model fixed: a new fingerprint
    recipe.write_text(recipe.read_text().replace("zoo.py:Raises", "zoo.py:Net"))
    changed = subprocess.run(batch_command(*items, "-o", str(report), "--resume", "--json"),
                             cwd=folder, env=cli_env(folder), capture_output=True, text=True,
                             timeout=TIMEOUT_S)
    summary = last_json(changed.stdout)
    assert summary["skipped"] == 3 and summary["passed"] == 2, changed.stderr
    row = next(r for r in summary["results"] if r["recipe"].endswith("fail.toml"))
    assert row["ok"] and "resumed" not in row
    assert len(jsonl(report / "results.jsonl")) == 5  # appended; the old line stays


def test_the_fingerprint_is_the_recipes_values_and_its_files(tmp_path: Path) -> None:
    path = write_recipe(tmp_path, "net")
    first = fingerprint(load(path))
    path.write_text("# comments and spacing do not count\n\n" + path.read_text())
    assert fingerprint(load(path)) == first
    recipe = load(path)
    recipe.export.seed = 1
    assert fingerprint(recipe) != first
    (tmp_path / "zoo.py").write_text((tmp_path / "zoo.py").read_text() + "\n# edited\n")
    assert fingerprint(load(path)) != first  # the model file it names
    assert fingerprint(load(path), validate=True) != fingerprint(load(path))


@pytest.mark.timeout(TIMEOUT_S)
def test_ctrl_c_ends_every_worker_and_keeps_what_finished(tmp_path: Path) -> None:
    write_recipe(tmp_path, "pass")
    write_recipe(tmp_path, "hang1", "Hangs", marker="hang1")
    write_recipe(tmp_path, "hang2", "Hangs", marker="hang2")
    batch = subprocess.Popen(batch_command("pass.toml", "hang1.toml", "hang2.toml", "-o",
                                           "report", "--workers", "3", "--json"),
                             cwd=tmp_path, env=cli_env(tmp_path), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    results = tmp_path / "report" / "results.jsonl"
    family: set[psutil.Process] = set()
    def going() -> bool:
        if results.is_file() and results.read_text().count("\n") == 1 \
                and hang_pids(tmp_path, "hang1") and hang_pids(tmp_path, "hang2"):
            return True
        assert batch.poll() is None, batch.communicate()
        family.update(psutil.Process(batch.pid).children(recursive=True))
        return False

    try:
        wait_until(going, "the items never got going", TIMEOUT_S - 60, every=0.2)
        family |= set(psutil.Process(batch.pid).children(recursive=True))
        batch.send_signal(signal.SIGINT)
        out, err = batch.communicate(timeout=60)
    finally:
        if batch.poll() is None:
            batch.kill()
    assert batch.returncode == 130, err
    summary = last_json(out)
    assert summary["error"]["kind"] == "cancelled" and "--resume" in summary["error"]["hint"]
    assert [Path(r["recipe"]).stem for r in summary["results"]] == ["pass"]
    assert [Path(line["recipe"]).stem for line in jsonl(results)] == ["pass"]
    assert (tmp_path / "report" / "report.html").is_file()
    hung = hang_pids(tmp_path, "hang1") + hang_pids(tmp_path, "hang2")  # worker, child each
    seen = {p.pid for p in family}
    assert {hung[0], hung[2]} <= seen  # the hung items' workers ran under the batch
    assert gone([*seen, *hung]), "a worker or a child of one outlived the Ctrl+C"


def test_a_wrong_request_runs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    good = str(write_recipe(tmp_path, "pass"))
    report = str(tmp_path / "report")
    for argv, says in (([good, "missing.toml"], "missing.toml"),
                       ([], "No items"),
                       ([good, "--workers", "0"], "--workers 0"),
                       ([good, "--ray-address", "1.2.3.4:6379"], "--executor ray"),
                       ([good, "--timeout", "0"], "--timeout")):
        status = cli.main(["batch", *argv, "-o", report, "--json"])
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert status == 2 and summary["error"]["kind"] == "recipe", argv
        assert says in summary["error"]["message"], summary["error"]
        assert summary["results"] == [] and not Path(report).exists()


class _Table(HTMLParser):
    """The header cells, each row's cells as text, and the links of report.html."""

    def __init__(self) -> None:
        super().__init__()
        self.header: list[str] = []
        self.rows: list[list[str]] = []
        self.links: list[str] = []
        self._cell: list[str] | None = None
        self._in_small = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr" and any(k == "data-verdict" for k, _ in attrs):
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "a":
            self.links += [v for k, v in attrs if k == "href" and v]
        elif tag == "small":
            self._in_small = True

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            text = "".join(self._cell).strip()
            (self.rows[-1] if tag == "td" else self.header).append(text)
            self._cell = None
        elif tag == "small":
            self._in_small = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None and not self._in_small:
            self._cell.append(data)


def test_items_come_from_the_command_line_and_a_list(tmp_path: Path) -> None:
    """Named items first, then the list's (comments skipped, paths against the list's folder),
    each once; two items writing one file are a wrong request."""
    zoo_dir = tmp_path / "zoo"
    zoo_dir.mkdir()
    first, second = write_recipe(zoo_dir, "a"), write_recipe(zoo_dir, "b")
    bert = tmp_path / "models" / "bert"
    bert.mkdir(parents=True)
    (bert / "config.json").write_text('{"model_type": "bert"}')
    listing = zoo_dir / "zoo.txt"
    listing.write_text("# the zoo\nb.toml  # a comment\na.toml\nhf:../models/bert\n\n")
    jobs = read_items([str(first)], str(listing), tmp_path / "report")
    assert [j.key for j in jobs] == [str(first), str(second), f"hf:{bert}"]
    folder_item = load_job_recipe(jobs[2])
    assert folder_item.output_path == tmp_path / "report" / "onnx" / "bert"
    assert folder_item.validate.enabled and jobs[2].validate

    clash = write_recipe(tmp_path, "a")  # another folder, but the same output once moved
    clash.write_text(clash.read_text().replace('"out/a.onnx"', f'"{zoo_dir}/out/a.onnx"'))
    with pytest.raises(StudioError) as raised:
        read_items([str(first), str(clash)], None, tmp_path / "report")
    assert raised.value.exit_code == 2 and "writes" in raised.value.message


def load_job_recipe(job: ItemJob) -> Recipe:
    return loads(job.recipe, Path(job.base_dir))
