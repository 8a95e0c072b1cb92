"""The session object itself: stamps on its results, the dirty flag, and a worker that retires.

Results come from the real worker (shared by the module, as the window tests share it); the
dirty flag needs none. No widget is built here: the session is what the views read.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from onnx_studio.app.fingerprints import fingerprint
from onnx_studio.app.jobs import JobRunner
from onnx_studio.app.outcomes import ExportOutcome, FileStamp, ValidationOutcome
from onnx_studio.app.recipes import fallback_recipe
from onnx_studio.app.session import ExportSession
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine import shipped
from onnx_studio.engine.protocol import Event, PingRequest, Pong, Ready
from onnx_studio.engine.recipe import writing
from tests.app.conftest import EXPORT_TIMEOUT_MS, leave_idle


@pytest.fixture
def session(shared_runner: JobRunner, qtbot) -> Iterator[ExportSession]:
    """A session on the module's warm worker; left idle after the test."""
    s = ExportSession(runner=shared_runner)
    yield s
    s.shutdown()
    leave_idle(shared_runner, qtbot)


def export(session: ExportSession, qtbot) -> ExportOutcome:
    with qtbot.waitSignal(session.exportFinished, timeout=EXPORT_TIMEOUT_MS) as blocker:
        assert session.start_export() is not None, session.problems
    return blocker.args[0]


def validate(session: ExportSession, qtbot) -> ValidationOutcome:
    with qtbot.waitSignal(session.validationFinished, timeout=EXPORT_TIMEOUT_MS) as blocker:
        assert session.start_validation() is not None, session.validate_reason
    return blocker.args[0]


def touch(path: Path) -> None:
    """Give `path` another modification time (its size and bytes stay)."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_an_export_is_stamped_with_its_recipe_and_file(session: ExportSession, qtbot,
                                                       tmp_path: Path) -> None:
    session.set_recipe(fallback_recipe(tmp_path))
    sent = session.fingerprint
    outcome = export(session, qtbot)
    assert outcome.ok, outcome.error
    assert session.export_result is outcome
    output = session.recipe.output_path
    assert outcome.output == output and output.is_file()
    assert outcome.stamp.recipe == sent
    assert outcome.stamp.onnx == FileStamp.of(output)
    assert outcome.stamp.onnx is not None and outcome.stamp.onnx.size > 0
    assert session.is_current(outcome)

    # editing the recipe makes the result stale; the same data again makes it current
    with session.edit("options") as recipe:
        recipe.export.seed += 1
    assert not session.is_current(outcome)
    with session.edit("options") as recipe:
        recipe.export.seed -= 1
    assert session.fingerprint == sent and session.is_current(outcome)

    touch(output)  # the file changed on disk (another export, another program)
    assert not session.is_current(outcome)


def test_a_failed_export_stamps_no_file(session: ExportSession, qtbot, tmp_path: Path) -> None:
    (tmp_path / "bad_net.py").write_text(
        "import torch\n\nclass Net(torch.nn.Module):\n"
        "    def forward(self, x):\n        return x @ torch.ones(7, 2)\n", encoding="utf-8")
    session.set_recipe(recipes.loads(
        'version = 1\n[model]\nsource = "bad_net.py:Net"\n[[inputs]]\nname = "x"\n'
        'shape = [2, 3]\n[export]\noutput = "bad.onnx"\n', base_dir=tmp_path))
    outcome = export(session, qtbot)
    assert not outcome.ok and not outcome.written and outcome.error is not None
    assert outcome.stamp.onnx is None and outcome.stamp.recipe == session.fingerprint
    assert session.is_current(outcome), "still what this recipe does"


def test_a_validation_belongs_to_the_file_it_validated(session: ExportSession, qtbot,
                                                       tmp_path: Path) -> None:
    session.set_recipe(fallback_recipe(tmp_path))
    first = export(session, qtbot)
    assert first.ok and session.validate_target == first.output
    validation = validate(session, qtbot)
    assert validation.ok and not validation.from_export, validation.error
    assert validation.onnx == first.output
    assert validation.stamp.onnx == first.stamp.onnx, "the file as the export wrote it"
    assert validation.stamp.recipe == session.fingerprint
    assert session.validation_result is validation and session.is_current(validation)

    # a new export writes the file again: the validation is of the old file now
    second = export(session, qtbot)
    assert second.ok and session.is_current(second)
    assert second.stamp.onnx != first.stamp.onnx
    assert not session.is_current(validation) and not session.is_current(first)
    assert session.validation_result is validation, "kept, and known to be stale"


def test_an_export_that_validates_stamps_its_validation(session: ExportSession, qtbot,
                                                        tmp_path: Path) -> None:
    session.set_recipe(fallback_recipe(tmp_path))
    with session.edit("options") as recipe:
        recipe.validate.enabled = True
        recipe.validate.random_trials = 1
    outcome = export(session, qtbot)
    validation = session.validation_result
    assert outcome.ok and validation is not None and validation.from_export
    assert validation.job == outcome.job and validation.ok
    assert validation.onnx == outcome.output and validation.stamp == outcome.stamp
    assert outcome.report is not None
    assert validation.validation is outcome.report.validation, "the export's own, typed"


def test_the_dirty_flag_compares_fingerprints(tmp_path: Path, qtbot,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "r.toml"
    recipe = fallback_recipe(tmp_path)
    recipes.save(recipe, path)
    session = ExportSession(use_worker=False)
    changes: list[bool] = []
    session.dirtyChanged.connect(changes.append)
    session.set_recipe(recipes.load(path), path)
    assert not session.dirty and changes == []

    def no_toml(*_: Any) -> str:
        raise AssertionError("an edit wrote TOML")

    # an edit compares fingerprints: no TOML is written (tomlkit costs milliseconds)
    monkeypatch.setattr(writing, "dumps", no_toml)  # what to_toml and save write with
    with session.edit("options") as edited:
        edited.export.opset = 19
    assert session.dirty and changes == [True]
    with session.edit("options") as edited:
        edited.export.opset = 20
    assert session.dirty and changes == [True], "told once"
    with session.edit("options") as edited:
        edited.export.opset = recipe.export.opset
    assert not session.dirty and changes == [True, False], "back to what the file holds"
    monkeypatch.undo()

    with session.edit("options") as edited:
        edited.export.opset = 19
    assert session.save(path) and not session.dirty and changes[-1] is False
    assert recipes.load(path).export.opset == 19
    assert session.fingerprint == fingerprint(recipes.load(path))

    # the same data in another folder is another recipe (its relative paths mean other files)
    moved = recipes.load(path)
    moved.base_dir = tmp_path / "elsewhere"
    assert fingerprint(moved) != session.fingerprint


def test_parse_errors_and_problems_in_form_order(qtbot, tmp_path: Path) -> None:
    session = ExportSession(use_worker=False)
    session.set_recipe(fallback_recipe(tmp_path))
    assert session.problems == {}
    with session.edit("options"):
        session.set_parse_error("validate.rtol", "rtol must be a number.")
    with session.edit("inputs"):
        session.set_parse_error("inputs[0].shape", "not a shape.")
    assert list(session.problems) == ["inputs[0].shape", "validate.rtol"], "the forms' order"
    assert session.validate_reason.startswith("inputs[0].shape")
    session.name_inputs(["a"])  # the inputs are rewritten: their unparsed text is gone
    assert list(session.problems) == ["validate.rtol"]


@pytest.mark.slow
def test_a_worker_that_retires_after_extensions_is_replaced_quietly(
        session: ExportSession, shared_runner: JobRunner, qtbot) -> None:
    """onnx_studio.engine.worker ends (status 0) after a job that ran extension files: no error is
    shown, no job fails, the spare takes over, and a request sent meanwhile reaches the spare."""
    qtbot.waitUntil(lambda: shared_runner.spare_ready, timeout=60_000)
    old, spare = shared_runner.worker_pid, shared_runner.spare_pid
    lost: list[str] = []
    log: list[str] = []
    session.workerLost.connect(lost.append)
    session.logLine.connect(log.append)
    pongs: list[Event] = []
    # sent as soon as the export's result arrives: before the worker's exit is seen
    session.exportFinished.connect(
        lambda _: shared_runner.submit(PingRequest(), pongs.append))
    assert session.open_recipe(shipped.recipes_dir() / "custom_op.toml")
    assert session.recipe.export.extensions, "the recipe runs extension files"
    outcome = export(session, qtbot)
    assert outcome.ok, outcome.error

    qtbot.waitUntil(lambda: bool(pongs), timeout=60_000)
    assert isinstance(pongs[-1], Pong), pongs
    assert pongs[-1].pid == spare, "the request the old worker never started went on"
    assert shared_runner.worker_pid == spare and old != spare
    assert shared_runner.ready_info is not None
    assert lost == [] and not any(line.startswith("!!") for line in log), log
    assert any("ended after its job (exit status 0)" in line for line in log), log

    # the next export runs in the fresh worker, as if nothing had happened
    again = export(session, qtbot)
    assert again.ok, again.error
    assert lost == []


def test_a_worker_with_an_untested_torch_is_said_once(qtbot) -> None:
    """The worker says whether its torch lies in the tested range; the user is told."""
    session = ExportSession(use_worker=False)
    notices: list[str] = []
    session.notice.connect(notices.append)
    ready = Ready(protocol=1, pid=1, torch="2.99.0", import_s=1.0, torch_tested=False)
    session.runner.workerReady.emit(ready)  # what a ready worker announces
    assert len(notices) == 1 and "torch 2.99.0" in notices[0] and "tested" in notices[0]
    session.runner.workerReady.emit(dataclasses.replace(ready, torch="2.13.0+cpu",
                                                        torch_tested=True))
    assert len(notices) == 1
    session.shutdown()


def test_a_file_replaced_with_the_same_size_and_time_is_read_again(tmp_path: Path,
                                                                   qtbot) -> None:
    """The session's file stamp has the inode: a file replaced by a rename with its size and
    modification time kept is another file. No watcher event is needed: the stamp is looked
    at again when asked (the window does when it becomes active)."""
    from tests.app.conftest import write_mlp

    session = ExportSession(use_worker=False)
    path = write_mlp(tmp_path / "m.onnx", 1.0)
    opened = session.open_onnx(path)
    assert not opened.reread and session.stale(opened) is None
    other = write_mlp(tmp_path / "other.onnx", 2.0)  # the same size: only a weight differs
    stat = path.stat()
    assert other.stat().st_size == stat.st_size
    os.utime(other, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(other, path)
    assert path.stat().st_mtime_ns == stat.st_mtime_ns and path.stat().st_size == stat.st_size
    assert session.stale(opened) is not None, "another inode: another file"
    session.results.watch.blockSignals(True)  # as on a file system that says nothing
    assert session.check_files()
    again = session.results.opened
    assert again is not None and again.reread and again.path == path.resolve()
    assert again.stamp is not None and opened.stamp is not None
    assert again.stamp.inode != opened.stamp.inode
    said = session.stale(again)
    assert said is not None and "not been validated" in said.sentence
    assert not session.check_files(), "nothing changed since"
    session.shutdown()
