"""Settings that never lock the user out: an unusable file is moved aside under a timestamped
name and replaced by defaults, a wrong key is ignored and the rest kept, a newer version's file
is read and never overwritten without a backup, and the user is told once.

Every test runs on the temp config folder of tests/conftest.py (ONNX_STUDIO_CONFIG_DIR).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from onnx_studio.app import settings as settings_mod
from onnx_studio.engine import dirs
from tests.conftest import REPO

STAMP = r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d(-\d+)?"
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def settings_file() -> Path:
    path = settings_mod.settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def backups(path: Path) -> list[Path]:
    pattern = re.compile(re.escape(path.name) + r"\." + STAMP + r"\.bak$")
    return sorted(p for p in path.parent.iterdir() if pattern.match(p.name))


def test_backup_names_carry_the_time_and_a_counter_within_one_second(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    when = datetime(2026, 11, 23, 18, 40, 12)
    first = settings_mod.backup_path(path, when)
    assert first.name == "settings.toml.2026-11-23T18-40-12.bak"
    first.write_text("one", encoding="utf-8")
    second = settings_mod.backup_path(path, when)
    assert second.name == "settings.toml.2026-11-23T18-40-12-2.bak"
    second.mkdir()  # a folder set aside takes its name too
    assert settings_mod.backup_path(path, when).name == "settings.toml.2026-11-23T18-40-12-3.bak"


@pytest.mark.parametrize(("content", "reason"), [
    (b"version = 1\ntheme = \"\xff\xfe\"\n", "its bytes are not UTF-8 text"),
    (b"{ not toml", "not valid TOML"),
    (b"version = \"one\"\n", "its version 'one' is not a whole number from 1 up"),
    (b"version = 0\n", "its version 0 is not a whole number from 1 up"),
], ids=["not-utf8", "invalid-toml", "version-text", "version-zero"])
def test_an_unusable_file_is_moved_aside_and_reported_once(content: bytes, reason: str) -> None:
    path = settings_file()
    earlier = path.with_name("settings.toml.2020-01-01T00-00-00.bak")
    earlier.write_text("an earlier backup", encoding="utf-8")
    path.write_bytes(content)

    settings, notice = settings_mod.load()
    assert settings == settings_mod.Settings()
    assert notice is not None and reason in notice and "damaged" in notice
    assert not path.exists(), "moved, not copied: the next start must not read it again"
    [backup] = [p for p in backups(path) if p != earlier]
    assert backup.read_bytes() == content, "never deleted: it may hold the recent list"
    assert str(backup) in notice
    assert earlier.read_text(encoding="utf-8") == "an earlier backup", "earlier backups kept"

    settings_mod.save(settings)  # what the start-up does after a notice
    assert settings_mod.load() == (settings, None), "told once: the next start is clean"
    assert len(backups(path)) == 2


def test_a_folder_in_place_of_the_file_is_moved_aside() -> None:
    path = settings_file()
    path.mkdir()
    (path / "inside.txt").write_text("keep me", encoding="utf-8")
    settings, notice = settings_mod.load()
    assert settings == settings_mod.Settings()
    assert notice is not None and "A folder was in the place of the settings file" in notice
    [backup] = backups(path)
    assert (backup / "inside.txt").read_text(encoding="utf-8") == "keep me"
    settings_mod.save(settings)
    assert path.is_file() and settings_mod.load() == (settings, None)


@pytest.mark.skipif(AS_ROOT or os.name != "posix", reason="root reads and moves anything")
def test_an_unreadable_file_and_a_folder_that_cannot_move() -> None:
    path = settings_file()
    path.write_text("version = 1\n", encoding="utf-8")
    path.chmod(0)
    settings, notice = settings_mod.load()
    assert settings == settings_mod.Settings()
    assert notice is not None and "could not be read" in notice
    [backup] = backups(path)
    backup.chmod(0o600)

    path.mkdir()
    folder = path.parent
    folder.chmod(0o555)  # nothing in it can be renamed, nothing new written
    try:
        settings, notice = settings_mod.load()
        assert settings == settings_mod.Settings()
        assert notice is not None and "could not be moved aside" in notice
        assert "settings are not saved until that folder is removed or renamed" in notice
        with pytest.raises(OSError):
            settings_mod.save(settings)  # the window catches it and says so
        folder.chmod(0o755)
        path.rmdir()
        path.write_text("version = 9\n", encoding="utf-8")
        settings, notice = settings_mod.load()
        assert notice is not None and "newer version" in notice
        folder.chmod(0o555)
        with pytest.raises(OSError):  # no backup can be made: the newer file is not touched
            settings_mod.save(settings)
        assert path.read_text(encoding="utf-8") == "version = 9\n"
    finally:
        folder.chmod(0o755)


def test_wrong_types_of_single_keys_are_ignored_and_the_rest_kept() -> None:
    path = settings_file()
    text = ('version = 1\ntheme = "purple"\nrecent_recipes = "nope"\ngeometry = 5\n'
            'last_folder = "/data/models"\nrecent_models = ["/data/a.pt2"]\n'
            'splitter = true\n')
    path.write_text(text, encoding="utf-8")
    settings, notice = settings_mod.load()
    assert settings.last_folder == "/data/models" and settings.recent_models == ["/data/a.pt2"]
    assert (settings.theme, settings.recent_recipes, settings.geometry, settings.splitter) == (
        "system", [], "", "")
    assert notice is not None
    for words in ("theme ('purple' is not one of system, light, dark)",
                  "recent_recipes (a list of paths, not text)", "geometry (text, not a number)",
                  "splitter (text, not true/false)"):
        assert words in notice
    assert "last_folder" not in notice and "recent_models" not in notice
    [backup] = backups(path)
    assert backup.read_text(encoding="utf-8") == text and f"kept as {backup}" in notice
    assert path.read_text(encoding="utf-8") == text, "copied: the good keys stay on disk"

    settings_mod.save(settings)
    assert settings_mod.load() == (settings, None), "told once"
    assert len(backups(path)) == 1


def test_a_newer_versions_file_is_read_and_backed_up_once_before_it_is_overwritten() -> None:
    path = settings_file()
    text = ('version = 7\ntheme = "dark"\nrecent_recipes = ["/r/a.toml", "/r/b.toml"]\n'
            'last_folder = 3\n\n[panels]\nlayout = "grid"\n')
    path.write_text(text, encoding="utf-8")
    settings, notice = settings_mod.load()
    assert settings.theme == "dark" and settings.recent_recipes == ["/r/a.toml", "/r/b.toml"]
    assert settings.last_folder == "" and settings.version == settings_mod.SETTINGS_VERSION
    assert notice is not None
    assert "newer version" in notice and "settings version 7" in notice
    assert "last_folder (text, not a number)" in notice
    assert path.read_text(encoding="utf-8") == text and backups(path) == [], "load writes nothing"

    settings.add_recent("recipe", "/r/c.toml")
    settings_mod.save(settings)
    [backup] = backups(path)
    assert backup.read_text(encoding="utf-8") == text, "the newer file, byte for byte"
    assert settings_mod.load() == (settings, None)
    settings_mod.save(settings)
    assert len(backups(path)) == 1, "once: what replaced it is ours"


def test_a_damaged_settings_file_of_an_earlier_release_is_moved_aside() -> None:
    legacy = dirs.config_dir() / "settings.json"
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_text("[1, 2]", encoding="utf-8")
    settings, notice = settings_mod.load()
    assert settings == settings_mod.Settings()
    assert notice is not None and "does not hold a table of settings" in notice
    assert not legacy.exists() and len(backups(legacy)) == 1

    legacy.write_text(json.dumps({"version": 1, "theme": 5, "recent_models": ["/m.pt"]}),
                      encoding="utf-8")
    settings, notice = settings_mod.load()
    assert settings.recent_models == ["/m.pt"] and notice and "theme (text, not a number)" in notice
    assert len(backups(legacy)) == 1, "the old file is never written: nothing to back up"


def banner_text(window: Any) -> str | None:
    """The text of the window's notice banner when it is shown (found by its class, wherever
    the form keeps it), else None."""
    from PySide6.QtWidgets import QFrame

    [banner] = [w for w in window.findChildren(QFrame) if type(w).__name__ == "Banner"]
    return str(banner.label.text()) if banner.isVisible() else None


def test_the_window_shows_the_notice_once(qtbot) -> None:
    from onnx_studio.app.window import MainWindow

    settings_file().write_text("{ not toml", encoding="utf-8")
    settings, notice = settings_mod.load()
    assert notice is not None
    window = MainWindow(settings, notice, start_worker=False)
    qtbot.addWidget(window)
    window.show()
    assert banner_text(window) == notice
    settings_mod.save(settings)  # what the start-up does after a notice
    again, second = settings_mod.load()
    assert second is None
    other = MainWindow(again, second, start_worker=False)
    qtbot.addWidget(other)
    other.show()
    assert banner_text(other) is None, "told once"


def test_the_start_up_tells_once_and_leaves_a_good_file(tmp_path: Path) -> None:
    """`python -m app --exit-after-paint` on a damaged file: it opens, and the next start is
    clean (the start-up saves right after the notice)."""
    path = settings_file()
    path.write_bytes(b"\xff\xfe\x00")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "onnx_studio.app", "--exit-after-paint"],
                            cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert settings_mod.load()[1] is None and path.is_file()
    [backup] = backups(path)
    assert backup.read_bytes() == b"\xff\xfe\x00"
