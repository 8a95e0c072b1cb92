"""The shipped files: found as package data, inside the wheel, and run from a copy in the user's
data folder so that nothing is ever written into the install tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from onnx_studio.engine import dirs, shipped
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.recipe import split_source
from onnx_studio.engine.source.examples import EXAMPLES, RECIPES
from tests.conftest import REPO


def _tree(folder: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*") if "__pycache__" not in p.parts}


def test_the_shipped_files_are_the_resources_package() -> None:
    from onnx_studio import resources

    assert shipped.root() == Path(resources.__file__).parent
    names = [p.stem for p in shipped.recipe_paths()]
    assert "default" in names and names == sorted(names)
    assert shipped.recipes_dir() == RECIPES
    assert {f"{name}.toml" for name in EXAMPLES} <= {p.name for p in shipped.recipe_paths()}
    assert shipped.is_shipped(shipped.models_dir() / "tiny_cnn.py")
    assert not shipped.is_shipped(REPO / "onnx_studio" / "engine" / "shipped.py")


def test_every_file_a_shipped_recipe_names_ships_too() -> None:
    for path in shipped.recipe_paths():
        recipe = recipes.load(path)
        file, _ = split_source(recipe.model.source)
        named = [p for p in (file, recipe.model.checkpoint, *recipe.export.extensions,
                             *(s.file for s in recipe.inputs)) if p]
        for name in named:
            target = recipe.resolve(name)
            assert target.is_file() and shipped.is_shipped(target), (path.name, name)


def test_data_folder_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.setenv("ONNX_STUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ONNX_STUDIO_OUTPUT_DIR", str(tmp_path / "old"))
    assert dirs.data_dir() == tmp_path / "data"
    assert shipped.examples_dir() == tmp_path / "data" / "examples"
    monkeypatch.delenv("ONNX_STUDIO_DATA_DIR")
    assert dirs.data_dir() == tmp_path / "old", "the older variable still counts"
    monkeypatch.delenv("ONNX_STUDIO_OUTPUT_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert dirs.data_dir() == tmp_path / "xdg" / "onnx-studio"


def test_a_shipped_recipe_runs_from_a_copy_in_the_data_folder() -> None:
    before = _tree(shipped.root())
    shipped_path = shipped.recipes_dir() / "default.toml"
    copy = shipped.working_copy(shipped_path)
    folder = shipped.examples_dir() / "default"
    assert copy == folder / "default.toml"
    assert (folder / "models" / "tiny_cnn.py").read_bytes() == (
        shipped.models_dir() / "tiny_cnn.py").read_bytes()
    recipe = recipes.load(copy)
    assert recipe.model.source == "models/tiny_cnn.py:TinyCNN"
    assert recipe.output_path == folder / "out" / "tiny_cnn.onnx"
    original = recipes.load(shipped_path)
    assert recipe.inputs == original.inputs and recipe.export.output == original.export.output

    # a second call refreshes nothing that did not change, and keeps the exports
    (folder / "out").mkdir()
    (folder / "out" / "tiny_cnn.onnx").write_bytes(b"an export")
    stamps = _tree(folder)
    assert shipped.working_copy(shipped_path) == copy
    assert _tree(folder) == stamps
    # a copy edited by hand is put back to the shipped recipe
    copy.write_text(copy.read_text().replace("[2, 3, 32, 32]", "[9, 3, 32, 32]"))
    assert recipes.load(shipped.working_copy(shipped_path)).inputs == original.inputs
    assert (folder / "out" / "tiny_cnn.onnx").read_bytes() == b"an export"
    assert _tree(shipped.root()) == before, "nothing is written into the shipped files"


def test_the_copy_keeps_the_shipped_comments_and_copies_extensions(tmp_path: Path,
                                                                    monkeypatch) -> None:
    fake = tmp_path / "resources"
    (fake / "recipes").mkdir(parents=True)
    (fake / "models").mkdir()
    (fake / "models" / "ext.py").write_text("# an extension\n")
    (fake / "models" / "net.py").write_text("# a model\n")
    (fake / "recipes" / "mine.toml").write_text(
        "# shipped comment\nversion = 1\n\n[model]\n"
        'source = "../models/net.py:Net"  # the model\n\n'
        '[export]\noutput = "out/mine.onnx"\nextensions = ["../models/ext.py"]\n')
    monkeypatch.setattr(shipped, "root", lambda: fake)
    copy = shipped.working_copy(fake / "recipes" / "mine.toml")
    text = copy.read_text()
    assert "# shipped comment" in text and 'source = "models/net.py:Net"  # the model' in text
    assert 'extensions = ["models/ext.py"]' in text
    assert (copy.parent / "models" / "ext.py").read_text() == "# an extension\n"
    assert recipes.load(copy).output_path == shipped.examples_dir() / "mine" / "out" / "mine.onnx"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of this checkout (the build leaves build/ and egg-info
    folders behind)."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "out", "site"))
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path / "wheels"), "-q"],
        cwd=source, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PIP_NO_INPUT": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = (tmp_path / "wheels").glob("*.whl")
    return built


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_wheel_holds_one_package_and_the_examples(wheel: Path) -> None:
    """One top-level import package, `onnx_studio` (no `app`, `engine` or `resources` beside
    it), with the recipes and model files as its package data; the screenshots stay out."""
    names = set(zipfile.ZipFile(wheel).namelist())
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"onnx_studio"}, sorted(top)
    expected = {"onnx_studio/resources/__init__.py"} | {
        p.relative_to(REPO).as_posix() for pattern in ("recipes/*.toml", "models/*.py")
        for p in (REPO / "onnx_studio" / "resources").glob(pattern)}
    assert len(expected) > 10
    assert expected <= names, sorted(expected - names)
    assert not [n for n in names if n.endswith(".png")]
    assert {"onnx_studio/engine/shipped.py", "onnx_studio/app/recipes.py",
            "onnx_studio/__main__.py", "onnx_studio/py.typed"} <= names


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_installed_wheel_runs_the_cli_worker_batch_and_window(
        wheel: Path, tmp_path: Path) -> None:
    """Installed into a fresh virtual environment (the libraries it needs from this Python,
    `--system-site-packages`; the studio from the wheel alone), run from a folder outside the
    checkout: `import app` and `import engine` fail, and the CLI, its worker, a batch and the
    window all work."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, timeout=120)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    script = venv / ("Scripts/onnx-studio.exe" if os.name == "nt" else "bin/onnx-studio")
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True, timeout=300, capture_output=True)
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    env["QT_QPA_PLATFORM"] = "offscreen"

    def run(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(a) for a in args], cwd=work, env=env, capture_output=True,
                              text=True, timeout=timeout)

    where = run(python, "-c", "import onnx_studio, onnx_studio.engine.worker as w; "
                "print(onnx_studio.__file__); print(w.__file__)")
    assert where.returncode == 0, where.stderr
    assert all(Path(line).is_relative_to(venv) for line in where.stdout.split()), where.stdout
    for name in ("app", "engine", "resources"):
        missing = run(python, "-c", f"import {name}")
        assert "ModuleNotFoundError" in missing.stderr, (name, missing.stderr)
    version = run(script, "--version")
    assert version.returncode == 0 and version.stdout.startswith("onnx-studio "), version
    assert run(python, "-m", "onnx_studio", "--version").stdout == version.stdout

    (work / "net.py").write_text("import torch\n\n\nclass Net(torch.nn.Module):\n"
                                 "    def __init__(self):\n        super().__init__()\n"
                                 "        self.fc = torch.nn.Linear(4, 3)\n\n"
                                 "    def forward(self, x):\n        return self.fc(x).relu()\n")
    exported = run(script, "export", "net.py:Net", "-o", "out/mlp.onnx", "--input", "x=2x4",
                   "--dynamic", "x:0=batch", "--validate", "--json")
    doc = json.loads(exported.stdout.strip().splitlines()[-1])
    assert exported.returncode == 0 and doc["ok"], exported.stdout + exported.stderr
    assert (work / "out" / "mlp.onnx").is_file()

    recipe = work / "mlp.toml"
    recipe.write_text('version = 1\n[model]\nsource = "net.py:Net"\n'
                      '[[inputs]]\nname = "x"\nshape = [2, 4]\n'
                      '[export]\noutput = "zoo/mlp.onnx"\n')
    batch = run(script, "batch", recipe, "-o", "report", "--json")
    summary = json.loads(batch.stdout.strip().splitlines()[-1])
    assert batch.returncode == 0 and summary["ok"], batch.stdout + batch.stderr
    assert (work / "report" / "results.jsonl").is_file()

    window = run(script, "gui", "--exit-after-paint", timeout=120)
    assert window.returncode == 0, window.stdout + window.stderr


def test_the_cli_runs_a_shipped_recipe_from_its_copy(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from onnx_studio.engine.cli import main

    before = _tree(shipped.root())
    code = main(["export", "--recipe", str(shipped.recipes_dir() / "lstm.toml"), "--json"])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0, doc
    assert Path(doc["output"]).is_relative_to(shipped.examples_dir() / "lstm")
    assert Path(doc["output"]).is_file()
    assert _tree(shipped.root()) == before  # nothing written into the shipped files
