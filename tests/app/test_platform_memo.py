"""A platform check that passed is remembered (onnx_studio.app.platform_memo): the next start skips
it while nothing it read has changed, and runs it again when anything has (another display, a
library changed); a problem is never remembered."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from onnx_studio.app import platform_memo
from tests.conftest import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the check reads Linux shared libraries")

OFFSCREEN = {"QT_QPA_PLATFORM": "offscreen"}
# does the check run? `usable` in a fresh process, and whether it imported the check
PROBE = """
import json, sys
from pathlib import Path
from onnx_studio.app.platform_memo import usable
status = usable("onnx-studio gui", env=json.loads(sys.argv[1]), memo=Path(sys.argv[2]))
print(json.dumps({"status": status, "checked": "onnx_studio.app.platform_check" in sys.modules}))
"""


def start(env: dict[str, str], memo: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(env), str(memo)],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_pass_is_remembered_until_a_file_it_read_changes(tmp_path: Path) -> None:
    memo = tmp_path / "cache" / platform_memo.MEMO
    assert start(OFFSCREEN, memo) == {"status": 0, "checked": True}
    files = json.loads(memo.read_text(encoding="utf-8"))["files"]
    assert any(Path(p).name == "libQt6Widgets.so.6" for p in files), sorted(files)
    assert "/etc/ld.so.cache" in files or not Path("/etc/ld.so.cache").exists()
    assert start(OFFSCREEN, memo) == {"status": 0, "checked": False}, "the pass, remembered"

    # a library the answer rests on changes (here a copy standing for one): checked again
    library = tmp_path / "libstandin.so.1"
    shutil.copyfile(next(p for p in files if p.endswith("libQt6Widgets.so.6")), library)
    saved = json.loads(memo.read_text(encoding="utf-8"))
    saved["files"][str(library)] = platform_memo._stamp(str(library))
    memo.write_text(json.dumps(saved), encoding="utf-8")
    assert start(OFFSCREEN, memo)["checked"] is False
    with library.open("ab") as fh:
        fh.write(b"\0")
    assert start(OFFSCREEN, memo) == {"status": 0, "checked": True}
    library.unlink()
    assert start(OFFSCREEN, memo)["checked"] is False, "remembered again, without the copy"


def test_another_display_is_checked_again_and_a_problem_is_never_remembered(
        tmp_path: Path) -> None:
    memo = tmp_path / platform_memo.MEMO
    assert start(OFFSCREEN, memo) == {"status": 0, "checked": True}
    passed = memo.read_bytes()
    out = io.StringIO()
    with redirect_stderr(out):
        status = platform_memo.usable("onnx-studio gui", env={}, memo=memo)  # no display
    assert status == 2
    assert "there is no display" in out.getvalue()
    assert memo.read_bytes() == passed, "the failed check left the memo as it was"
    with redirect_stderr(io.StringIO()):
        assert platform_memo.usable("onnx-studio gui", env={}, memo=memo) == 2, "said again"


def test_a_memo_that_cannot_be_read_or_written_is_as_if_there_were_none(
        tmp_path: Path) -> None:
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("", encoding="utf-8")
    memo = blocked / platform_memo.MEMO
    assert platform_memo.usable("onnx-studio gui", env=OFFSCREEN, memo=memo) == 0
    assert blocked.read_text(encoding="utf-8") == ""
    broken = tmp_path / platform_memo.MEMO
    broken.write_text('{"key": ', encoding="utf-8")  # cut off
    assert start(OFFSCREEN, broken) == {"status": 0, "checked": True}
    assert json.loads(broken.read_text(encoding="utf-8"))["files"], "written whole this time"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
