"""Arrays and tables nested 20,000 levels deep (issue 23, item 4).

A recipe so deep is a `recipe` error, exit status 2 (it was kind `export`, exit 1, "maximum
recursion depth exceeded"), and so is one the parser reads but nothing after it could write or
send (a few hundred levels). A settings file or a recovery file so deep crashed the window at
every start: each is now kept as a backup beside itself and reset, the window starts and says
so once. The window itself: pytest-qt, offscreen; and `python -m app`, the real start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from onnx_studio.app import settings as settings_mod
from onnx_studio.app.recovery import recovery_dir
from onnx_studio.app.window import MainWindow
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.cli import main
from tests.conftest import REPO

DEPTH = 20_000


def nested(depth: int, open_: str = "[", close: str = "]", inner: str = "1") -> str:
    return open_ * depth + inner + close * depth


def deep_recipe(depth: int, **inline: str) -> str:
    value = nested(depth, **inline)
    return (f'version = 1\n[model]\nsource = "net.py:Net"\nkwargs = {{ a = {value} }}\n'
            '[[inputs]]\nname = "x"\nshape = [2, 3]\n[export]\noutput = "net.onnx"\n')


@pytest.mark.parametrize(("depth", "inline", "words"), [
    (DEPTH, {}, ["too deeply to read"]),                             # the parser's own limit
    (DEPTH, {"open_": "{b = ", "close": "}"}, ["too deeply to read"]),  # inline tables
    (400, {}, ["model.kwargs.a", "64 levels"]),    # read, but no writer or sender would cope
], ids=["arrays", "tables", "readable"])
def test_a_deep_recipe_is_a_recipe_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         depth: int, inline: dict[str, str],
                                         words: list[str]) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(deep_recipe(depth, **inline), encoding="utf-8")
    for argv in (["export", "--recipe", str(path)],
                 ["validate", str(tmp_path / "net.onnx"), "--recipe", str(path)]):
        code = main([*argv, "--json"])
        doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert code == 2, doc
        assert doc["ok"] is False and doc["error"]["kind"] == "recipe", doc
        message = doc["error"]["message"]
        assert message.count("\n") == 0 and len(message) < 300, message
        for word in words:
            assert word in message, message
    assert not (tmp_path / "net.onnx").exists()


def test_nesting_up_to_the_limit_still_round_trips(tmp_path: Path) -> None:
    """The limit leaves room: 60 levels (62 in the document) load, save and load again."""
    path = tmp_path / "ok.toml"
    path.write_text(deep_recipe(60), encoding="utf-8")
    recipe = recipes.load(path)
    recipes.save(recipe, tmp_path / "again.toml")
    assert recipes.load(tmp_path / "again.toml").model.kwargs == recipe.model.kwargs


# ----------------------------------------------------------------------------- the window


def banner_text(window: MainWindow) -> str:
    return str(window.form.banner.label.text()) if window.form.banner.isVisible() else ""


def open_window(qtbot, settings: settings_mod.Settings | None = None,
                notice: str | None = None) -> MainWindow:
    """A window started as `onnx_studio.app.main.run` starts it (no worker: nothing here needs
    one)."""
    window = MainWindow(settings or settings_mod.Settings(), notice, start_worker=False)
    qtbot.addWidget(window)
    window.load_initial(None)
    window.show()
    return window


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.*.bak"))


@pytest.mark.parametrize(("name", "text"), [
    ("settings.toml", f"recent_recipes = {nested(DEPTH)}\n"),
    ("settings.toml", f"theme = {nested(DEPTH, '{a = ', '}')}\n"),
    ("settings.json", f'{{"recent_recipes": {nested(DEPTH)}}}'),  # an earlier release's file
], ids=["toml-arrays", "toml-tables", "legacy-json"])
def test_a_deep_settings_file_is_kept_aside_and_the_window_starts(qtbot, name: str,
                                                                 text: str) -> None:
    path = settings_mod.settings_path().with_name(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    settings, notice = settings_mod.load()
    assert notice is not None and "too deeply" in notice, notice
    [backup] = backups(path)
    assert backup.read_text(encoding="utf-8") == text, "the file is kept as it was"
    window = open_window(qtbot, settings, notice)
    assert banner_text(window) == notice
    settings_mod.save(settings)  # what the start-up does after a notice
    assert settings_mod.load()[1] is None, "reset: the next start is clean"


def write_recovery(pid: int, recipe_text: str, meta_text: str | None = None) -> Path:
    folder = recovery_dir()
    folder.mkdir(parents=True, exist_ok=True)
    toml = folder / f"{pid}.toml"
    toml.write_text(recipe_text, encoding="utf-8")
    toml.with_suffix(".json").write_text(meta_text or json.dumps(
        {"recipe_path": None, "base_dir": str(folder), "saved_at": 0.0}), encoding="utf-8")
    return toml


@pytest.mark.parametrize("deep", ["recipe", "note"])
def test_a_deep_recovery_file_is_kept_aside_and_the_window_starts(qtbot, deep: str) -> None:
    if deep == "recipe":
        toml = write_recovery(999_999_001, deep_recipe(DEPTH))
    else:
        toml = write_recovery(999_999_002, deep_recipe(1), f'{{"base_dir": {nested(DEPTH)}}}')
    kept = toml.read_text(encoding="utf-8")
    window = open_window(qtbot)
    text = banner_text(window)
    assert "could not be read" in text and "Restore" not in text, text
    [backup] = backups(toml)
    assert str(backup) in text and backup.read_text(encoding="utf-8") == kept
    assert not toml.exists() and not toml.with_suffix(".json").exists()
    assert window.session.recipe.model.source, "the default recipe is loaded"
    assert banner_text(open_window(qtbot)) == "", "told once: reset"


def test_deep_values_typed_into_the_form_are_a_field_error(qtbot) -> None:
    window = open_window(qtbot)
    before = window.session.recipe.model.kwargs
    for text in (f"a = {nested(DEPTH)}", f"a = {nested(400)}"):
        window.form.model_form.kwargs.setText(text)
        window.form.model_form.kwargs.editingFinished.emit()
        assert "too deeply" in window.session.problems["model.kwargs"]
        assert window.session.recipe.model.kwargs == before


def test_the_real_start_with_both_files_so_deep(tmp_path: Path) -> None:
    """`python -m app --exit-after-paint`: it starts, and the next start is clean."""
    path = settings_mod.settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"recent_recipes = {nested(DEPTH)}\n", encoding="utf-8")
    toml = write_recovery(999_999_003, deep_recipe(DEPTH))
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(REPO),
           "ONNX_STUDIO_OUTPUT_DIR": str(tmp_path)}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "onnx_studio.app", "--exit-after-paint"],
                              cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "window_s" in json.loads(done.stdout.strip().splitlines()[-1])
    assert settings_mod.load()[1] is None and len(backups(path)) == 1
    assert not toml.exists() and len(backups(toml)) == 1
