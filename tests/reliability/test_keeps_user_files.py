"""Every command keeps the user's files (issue 33): the one output primitive
(onnx_studio.engine.file_set) under explain, variant, export and batch, and the one record log
(onnx_studio.engine.batch.records), each tried as a careless or hostile user would: folders of
look-alike names, outputs pointed at inputs through `..`, symlinks and hard links, two batches on
one report folder, a damaged results.jsonl, an output deleted since it was recorded."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import onnx_studio
from onnx_studio.engine.batch import records
from onnx_studio.engine.cli import main
from tests.conftest import REPO, wait_until
from tests.engine.explain_models import exported, patched

NET = '''import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)
'''


def recipe_text(output: str, source: str = "net.py:Net") -> str:
    return (f'version = 1\n[model]\nsource = "{source}"\n[[inputs]]\nname = "x"\n'
            f'shape = [2, 4]\n[export]\noutput = "{output}"\nexporter = "torchscript"\n')


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` (symlinks as their target), path -> content hash."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(folder))] = "-> " + os.readlink(path)
        elif path.is_file():
            found[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def cli(*args: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*args, "--json"])
    return code, json.loads(out.getvalue().strip().splitlines()[-1])


def assert_refused(code: int, doc: dict[str, Any], *named: str) -> None:
    assert code == 2, doc
    error = doc["error"]
    assert error["kind"] == "write", error
    assert error["hint"], error
    for text in named:
        assert text in error["message"], (text, error["message"])


# ---------------------------------------------------------------------------- explain


@pytest.fixture(scope="module")
def diverging(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A real dynamo export of a tiny stack with one weight patched: (the file, its recipe)."""
    folder = tmp_path_factory.mktemp("explain")
    source, recipe = exported(folder, "Stack")
    bad = folder / "patched.onnx"
    patched(source, bad, "layers.2.lin")
    return bad, recipe


@pytest.mark.timeout(300)
def test_explain_never_removes_a_folder_of_look_alike_names(
        diverging: tuple[Path, Path], tmp_path: Path) -> None:
    """Case 1: every file of the folder tree has a repro file's name; none is a repro."""
    bad, recipe = diverging
    zoo = tmp_path / "zoo"
    for name in ("bert", "gpt"):
        (zoo / name).mkdir(parents=True)
        (zoo / name / "model.onnx").write_bytes(bad.read_bytes())
        (zoo / name / "repro.py").write_text("print('mine')\n")
    (zoo / "inputs.npz").write_bytes(b"my inputs")
    before = snapshot(tmp_path)
    code, doc = cli("explain", str(bad), "--recipe", str(recipe), "-o", str(zoo))
    assert_refused(code, doc, str(zoo), "did not write")
    assert snapshot(tmp_path) == before


@pytest.mark.timeout(300)
def test_explain_never_writes_over_the_file_it_explains(
        diverging: tuple[Path, Path], tmp_path: Path) -> None:
    """Case 2, through the folder itself, `..` and a symlink to it; then a folder a repro was
    written into before, holding the explained file under a repro's name."""
    bad, recipe = diverging
    mine = tmp_path / "mymodel"
    mine.mkdir()
    (mine / "model.onnx").write_bytes(bad.read_bytes())
    (tmp_path / "link").symlink_to(mine, target_is_directory=True)
    before = snapshot(tmp_path)
    for out in (mine, tmp_path / "other" / ".." / "mymodel", tmp_path / "link"):
        code, doc = cli("explain", str(mine / "model.onnx"), "--recipe", str(recipe),
                        "-o", str(out))
        assert_refused(code, doc)
        assert snapshot(tmp_path) == before

    # a repro folder of ours; then its own model.onnx explained with the repro into it
    repro = tmp_path / "repro"
    code, doc = cli("explain", str(bad), "--recipe", str(recipe), "-o", str(repro))
    assert code == 0 and doc["diverges"], doc
    assert (repro / "model.onnx").is_file()
    hard = tmp_path / "hard.onnx"
    os.link(repro / "model.onnx", hard)  # the same file under another name
    kept = snapshot(tmp_path)
    for explained in (repro / "model.onnx", hard):
        code, doc = cli("explain", str(explained), "--recipe", str(recipe), "-o", str(repro))
        assert code != 0 or not doc["diverges"], doc
        if code == 2:
            assert doc["error"]["kind"] == "write", doc
        assert snapshot(tmp_path) == kept


@pytest.mark.timeout(300)
def test_explain_writes_its_repro_again_into_its_own_folder(
        diverging: tuple[Path, Path], tmp_path: Path) -> None:
    """The repro folder is the studio's: explained again, the new repro replaces the old; a
    file the user added there since stays."""
    bad, recipe = diverging
    repro = tmp_path / "repro"
    assert cli("explain", str(bad), "--recipe", str(recipe), "-o", str(repro))[0] == 0
    (repro / "notes.txt").write_text("mine")
    code, doc = cli("explain", str(bad), "--recipe", str(recipe), "-o", str(repro))
    assert code == 0 and doc["repro"]["folder"] == str(repro), doc
    assert (repro / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in repro.iterdir() if not p.name.startswith(".")) == [
        "expected.npz", "inputs.npz", "model.onnx", "notes.txt", "repro.py"]


# ---------------------------------------------------------------------------- variant


@pytest.mark.timeout(300)
def test_a_variant_never_replaces_its_source_however_it_is_spelled(
        diverging: tuple[Path, Path], tmp_path: Path) -> None:
    bad, recipe = diverging
    source = tmp_path / "a.onnx"
    source.write_bytes(bad.read_bytes())
    os.link(source, tmp_path / "hard.onnx")
    (tmp_path / "soft.onnx").symlink_to(source)
    (tmp_path / "sub").mkdir()
    before = snapshot(tmp_path)
    for out in (source, tmp_path / "sub" / ".." / "a.onnx", tmp_path / "hard.onnx",
                tmp_path / "soft.onnx"):
        code, doc = cli("variant", str(source), "--recipe", str(recipe), "--kind", "optimized",
                        "-o", str(out))
        assert_refused(code, doc, "input")
        assert snapshot(tmp_path) == before


# ---------------------------------------------------------------------------- export


@pytest.mark.timeout(300)
def test_external_data_always_puts_the_weights_in_the_data_file(tmp_path: Path) -> None:
    """Case 10: a small model with external_data = "always" reads its weights from a data
    file that holds them (no empty data file beside inline weights)."""
    import onnx

    (tmp_path / "net.py").write_text(NET)
    path = tmp_path / "r.toml"
    path.write_text(recipe_text("out/net.onnx") + 'external_data = "always"\n')
    code, doc = cli("export", "--recipe", str(path))
    assert code == 0, doc
    model = onnx.load(str(tmp_path / "out" / "net.onnx"), load_external_data=False)
    stored = [t for t in model.graph.initializer if t.external_data]
    assert stored and not [t for t in model.graph.initializer if t.raw_data]
    data = [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".data")]
    assert len(data) == 1 and data[0].stat().st_size >= 4 * (4 * 3 + 3)


@pytest.mark.timeout(300)
def test_an_export_leaves_a_data_file_it_did_not_write(tmp_path: Path) -> None:
    """A file beside the target named as the export's data would be is the user's: the export
    takes another name for its data and leaves that file as it was."""
    (tmp_path / "net.py").write_text(NET)
    out = tmp_path / "out"
    out.mkdir()
    (out / "net.onnx.data").write_bytes(b"someone else's weights")
    path = tmp_path / "r.toml"
    path.write_text(recipe_text("out/net.onnx") + 'external_data = "always"\n')
    for _ in range(2):  # and again: the second export replaces only its own data
        code, doc = cli("export", "--recipe", str(path), "--validate")
        assert code == 0 and doc["validation"]["ok"], doc
        assert (out / "net.onnx.data").read_bytes() == b"someone else's weights"
        names = {p.name for p in out.iterdir() if not p.name.startswith(".")}
        ours = names - {"net.onnx", "net.onnx.data", "net.validation.npz"}
        assert len(ours) == 1 and re.fullmatch(r"net\.onnx\.\d+\.data", ours.pop()), names


# ---------------------------------------------------------------------------- batch


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "net.py").write_text(NET)
    for name in ("a", "b"):
        (tmp_path / f"{name}.toml").write_text(recipe_text(f"out/{name}.onnx"))
    return tmp_path


HOLDER = '''
import sys, time
from pathlib import Path
from onnx_studio.engine.batch.records import RecordLog

with RecordLog(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(120)
'''


@pytest.mark.timeout(300)
def test_a_second_batch_on_a_report_folder_is_refused_or_waits(project: Path) -> None:
    """Case 3: while a batch holds the report folder, a second one is refused naming it,
    results.jsonl untouched; with --wait it runs once the first has ended; a lock left by a
    batch that was killed is taken over."""
    report = project / "report"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(report)], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code, doc = cli("batch", str(project / "a.toml"), "-o", str(report))
        assert_refused(code, doc, "Another batch", str(holder.pid))
        assert "--wait" in doc["error"]["hint"]
        assert not (report / records.RESULTS).exists()

        waited: list[onnx_studio.BatchSummary] = []
        thread = threading.Thread(target=lambda: waited.append(onnx_studio.batch(
            [project / "a.toml"], report, wait=True, stream=io.StringIO())))
        thread.start()
        thread.join(3)
        assert thread.is_alive() and not waited  # it waits for the holder
        holder.kill()  # killed: its lock stays behind, and is taken over
        holder.wait(30)
        thread.join(240)
        assert waited and waited[0].ok, waited
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    lines = (report / records.RESULTS).read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["report"]["ok"] is True
    assert not (report / records.LOCK).exists()


@pytest.mark.timeout(400)
def test_resume_repairs_a_damaged_log_and_runs_what_lost_its_output(project: Path) -> None:
    """Cases 4 and 5: a torn last line and a garbage line are set aside, never appended to;
    the record redone is a whole line; a second --resume runs nothing; an item whose output
    was deleted (or changed) since its record runs again."""
    report = project / "report"
    items = [str(project / "a.toml"), str(project / "b.toml")]
    code, doc = cli("batch", items[0], "-o", str(report))
    assert code == 0 and doc["passed"] == 1, doc
    log = report / records.RESULTS
    first = log.read_text()
    with log.open("a") as damaged:
        damaged.write("this is no record\n")
        damaged.write('{"recipe": "torn')  # a line torn by a kill
    code, doc = cli("batch", *items, "-o", str(report), "--resume")
    assert code == 0 and doc["passed"] == 2 and doc["skipped"] == 1, doc
    lines = log.read_text().splitlines()
    assert log.read_text().endswith("\n") and len(lines) == 2
    assert [json.loads(line)["recipe"] for line in lines] == items
    assert lines[0] + "\n" == first
    aside = (report / records.DAMAGED).read_text()
    assert "this is no record" in aside and '{"recipe": "torn' in aside

    code, doc = cli("batch", *items, "-o", str(report), "--resume")
    assert code == 0 and doc["skipped"] == 2, doc
    assert log.read_text().splitlines() == lines

    (project / "out" / "a.onnx").unlink()
    code, doc = cli("batch", *items, "-o", str(report), "--resume")
    assert code == 0 and doc["skipped"] == 1, doc
    rerun = [r for r in doc["results"] if not r.get("resumed")]
    assert [r["recipe"] for r in rerun] == [items[0]]
    assert (project / "out" / "a.onnx").is_file()


@pytest.mark.timeout(300)
def test_a_batch_refuses_a_report_folder_it_does_not_own(project: Path) -> None:
    report = project / "photos"
    report.mkdir()
    (report / "holiday.jpg").write_bytes(b"jpeg")
    before = snapshot(project)
    code, doc = cli("batch", str(project / "a.toml"), "-o", str(report))
    assert_refused(code, doc, str(report), "holiday.jpg")
    assert snapshot(project) == before


@pytest.mark.timeout(300)
def test_a_failed_item_records_no_output_and_outputs_are_normalised(project: Path) -> None:
    (project / "recipes").mkdir()
    (project / "recipes" / "good.toml").write_text(
        recipe_text("../out/good.onnx", source="../net.py:Net"))
    (project / "recipes" / "bad.toml").write_text(
        recipe_text("../out/bad.onnx", source="../net.py:Missing"))
    code, doc = cli("batch", str(project / "recipes" / "good.toml"),
                    str(project / "recipes" / "bad.toml"), "-o", str(project / "report"))
    assert code == 1, doc
    rows = {Path(r["recipe"]).name: r for r in doc["results"]}
    assert rows["good.toml"]["output"] == str(project / "out" / "good.onnx")
    assert rows["bad.toml"]["output"] is None and not (project / "out" / "bad.onnx").exists()


# ---------------------------------------------------------------------------- the Python API


@pytest.mark.parametrize("call", [
    lambda: onnx_studio.export(123),  # type: ignore[arg-type]
    lambda: onnx_studio.export(None),  # type: ignore[arg-type]
    lambda: onnx_studio.export({"model": "net.py:Net"}),  # type: ignore[arg-type]
    lambda: onnx_studio.export("r.toml", timeout="soon"),  # type: ignore[arg-type]
    lambda: onnx_studio.export("r.toml", output=3),  # type: ignore[arg-type]
    lambda: onnx_studio.variant("m.onnx", "r.toml", "fp16", None),  # type: ignore[arg-type]
    lambda: onnx_studio.compare("a.onnx", "b.onnx", runs=0),
    lambda: onnx_studio.profile("m.onnx", dims={"batch": "two"}),  # type: ignore[dict-item]
    lambda: onnx_studio.explain("m.onnx", "r.toml", repro_dir=7),  # type: ignore[arg-type]
    lambda: onnx_studio.batch(123, "rep"),  # type: ignore[arg-type]
    lambda: onnx_studio.batch(["r.toml"], None),  # type: ignore[arg-type]
])
def test_a_wrong_argument_is_a_recipe_document(call: Any) -> None:
    """Case 7: never an exception, never "failed unexpectedly": kind `recipe`, exit status 2,
    a sentence naming the argument."""
    doc = call()
    assert doc.ok is False and doc.error is not None, doc
    assert doc.error.kind == "recipe", doc.error
    assert doc.error.exit_status() == 2
    assert "unexpectedly" not in doc.error.message and doc.error.hint


INTERRUPTED = '''
import os, signal, sys, threading, time
import onnx_studio

def interrupt():
    time.sleep(float(sys.argv[2]))
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt, daemon=True).start()
doc = onnx_studio.export(sys.argv[1])
print("DOC", doc.error.kind if doc.error else "none", flush=True)
'''

SLOW = NET.replace("        return self.fc(x)", "        import time\n        time.sleep(600)\n"
                   "        return self.fc(x)")


@pytest.mark.timeout(300)
def test_ctrl_c_in_an_api_call_ends_the_job_and_returns_cancelled(tmp_path: Path) -> None:
    """KeyboardInterrupt during a call (here: a model whose forward hangs) ends its worker and
    comes back as a `cancelled` document; the caller goes on."""
    (tmp_path / "net.py").write_text(SLOW)
    (tmp_path / "r.toml").write_text(recipe_text("out/net.onnx"))
    result = subprocess.run([sys.executable, "-c", INTERRUPTED, str(tmp_path / "r.toml"), "15"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=240,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "DOC cancelled" in result.stdout, result.stdout + result.stderr[-3000:]
    assert not (tmp_path / "out" / "net.onnx").exists()
    wait_until(lambda: not any(p.name.endswith(".tmp") for p in tmp_path.rglob("*")),
               "the job's temporary files to be gone", 30)


@pytest.mark.timeout(120)
def test_save_recipe_never_writes_over_the_model_through_a_hard_link(tmp_path: Path) -> None:
    (tmp_path / "net.py").write_text(NET)
    os.link(tmp_path / "net.py", tmp_path / "net.toml")  # the model file, by another name
    before = snapshot(tmp_path)
    code, doc = cli("export", f"{tmp_path / 'net.py'}:Net", "-o", str(tmp_path / "o.onnx"),
                    "--input", "x=2x4", "--save-recipe", str(tmp_path / "net.toml"))
    assert_refused(code, doc, "model source")
    assert snapshot(tmp_path) == before
