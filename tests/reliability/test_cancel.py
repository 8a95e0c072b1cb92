"""Cancel in the window is honest: before the rename the previous file stays and the job is
"cancelled"; once the new file is in place, the window is told the export had finished.
Through the real session, worker and exporter, on the offscreen window platform."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from onnx_studio.app.session import ExportSession
from tests.reliability.models_h1 import write_process_models

pytestmark = pytest.mark.slow  # real worker processes: torch imports, exports

WAIT_MS = 100_000


def recipe_for(folder: Path, model: str, output: str, validate: bool) -> Path:
    path = folder / f"{model}.toml"
    path.write_text(f'''
version = 1
[model]
source = "process_models.py:{model}"
[[inputs]]
name = "x"
shape = [2, 4]
[export]
output = "{output}"
[validate]
enabled = {str(validate).lower()}
random_trials = 0
dynamic_sizes = false
''', encoding="utf-8")
    return path


@pytest.fixture
def session(qapp, qtbot) -> Iterator[ExportSession]:
    session = ExportSession()
    yield session
    session.runner.shutdown()


def start(session: ExportSession, qtbot, recipe: Path) -> None:
    assert session.open_recipe(recipe)
    qtbot.waitUntil(lambda: session.runner.ready_info is not None, timeout=WAIT_MS)
    assert session.start_export() is not None, session.problems


def temp_leftovers(folder: Path) -> list[Path]:
    return sorted(folder.glob(".*.tmp"))


def test_cancel_before_the_rename_keeps_the_previous_file(
        session: ExportSession, qtbot, tmp_path: Path) -> None:
    write_process_models(tmp_path)
    target = tmp_path / "out" / "model.onnx"
    target.parent.mkdir()
    target.write_bytes(b"the previous export")
    start(session, qtbot, recipe_for(tmp_path, "HangsInExport", "out/model.onnx", False))
    qtbot.waitUntil(lambda: (tmp_path / "hang.pid").exists(), timeout=WAIT_MS)
    assert temp_leftovers(target.parent)
    session.cancel()
    qtbot.waitUntil(lambda: session.export_result is not None, timeout=10_000)
    outcome = session.export_result
    assert outcome is not None
    error = outcome.error
    assert error is not None and error.kind == "cancelled"
    assert "was cancelled" in error.message and "had already finished" not in error.message
    assert target.read_bytes() == b"the previous export"
    # the cancelled worker's temporary folder goes with it, not at the next export
    assert temp_leftovers(target.parent) == []


def test_cancel_after_the_rename_says_the_export_had_finished(
        session: ExportSession, qtbot, tmp_path: Path) -> None:
    write_process_models(tmp_path)
    target = tmp_path / "after" / "model.onnx"
    start(session, qtbot, recipe_for(tmp_path, "HangsInValidation", "after/model.onnx", True))
    qtbot.waitUntil(lambda: (tmp_path / "validating").exists(), timeout=WAIT_MS)
    session.cancel()
    qtbot.waitUntil(lambda: session.export_result is not None, timeout=10_000)
    outcome = session.export_result
    assert outcome is not None
    error = outcome.error
    assert error is not None
    assert "had already finished" in error.message and str(target) in error.message
    assert target.is_file() and target.stat().st_size > 0
    assert temp_leftovers(target.parent) == []
    # the file in place is the session's file: Summary, Graph and Validate follow it
    assert session.opened is not None and session.opened.path == target.resolve()
    assert session.opened.inspect is not None and session.validate_target == target.resolve()
