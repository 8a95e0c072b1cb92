"""A Hugging Face recipe saved from the window to another folder reopens and exports (issue 25,
finding 1).

Saving rewrote `source = "hf:/path/gpt2"` as `"<new folder>/hf:/path/gpt2"` (the prefix taken
for part of a file name), and reopening failed blaming `export.output` (a folder, the output of
an `hf:` source). The rebase keeps the prefix and moves only the folder part, as it does for
`hf-config:`; the output stays the same folder. The real window, a real worker, a tiny GPT-2
built from its config class.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from onnx_studio.app import settings as settings_mod
from onnx_studio.app.jobs import JobRunner
from onnx_studio.app.session import ExportSession
from onnx_studio.app.window import MainWindow
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.paths import rebase_recipe_paths, source_path
from onnx_studio.engine.recipe import recipe_problems
from tests.app.conftest import EXPORT_TIMEOUT_MS, export_and_wait, leave_idle
from tests.engine.hf_models import build


@pytest.fixture(scope="module")
def runner(qapp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobRunner]:
    """A warm worker for the module (its job folders in the temp tree)."""
    root = tmp_path_factory.mktemp("worker")
    patch = pytest.MonkeyPatch()
    patch.setenv("ONNX_STUDIO_CACHE_DIR", str(root / "cache"))
    patch.setenv("ONNX_STUDIO_DATA_DIR", str(root / "data"))
    runner = JobRunner()
    runner.start()
    yield runner
    runner.shutdown()
    runner.deleteLater()
    patch.undo()


@pytest.fixture
def window(runner: JobRunner, qtbot) -> Iterator[MainWindow]:
    session = ExportSession(runner=runner)
    w = MainWindow(settings_mod.Settings(), None, start_worker=False, session=session)
    session.start_worker()
    w.load_initial(None)
    w.show()
    yield w
    session.shutdown()
    try:
        leave_idle(runner, qtbot)
    finally:
        w.close()
        w.deleteLater()


@pytest.mark.parametrize(("source", "parts"), [
    ("hf:/models/gpt2", ("hf:", "/models/gpt2", "")),
    ("hf-config: models/t5 ", ("hf-config:", "models/t5", "")),
    ("nets/net.py:Net", ("", "nets/net.py", ":Net")),
    ("whole.pt", ("", "whole.pt", "")),
    ("example:alexnet", None),
    ("hf:", None),
])
def test_a_source_names_its_path_between_prefix_and_suffix(source: str, parts: object) -> None:
    assert source_path(source) == parts


@pytest.mark.parametrize("prefix", ["hf:", "hf-config:"])
def test_rebasing_moves_only_the_folder_of_a_hugging_face_source(tmp_path: Path,
                                                                 prefix: str) -> None:
    recipe = recipes.loads(f'version = 1\n[model]\nsource = "{prefix}models/gpt2"\n'
                           '[export]\noutput = "models/gpt2_onnx"\n', base_dir=tmp_path)
    moved = rebase_recipe_paths(recipe, tmp_path / "elsewhere")
    assert moved.model.source == f"{prefix}../models/gpt2"
    assert moved.export.output == "../models/gpt2_onnx"
    assert recipe_problems(moved) == []
    far = rebase_recipe_paths(recipe, tmp_path, absolute=True)
    assert far.model.source == f"{prefix}{tmp_path / 'models' / 'gpt2'}"


@pytest.mark.timeout(600)
def test_a_hugging_face_recipe_saved_elsewhere_reopens_and_exports(
        window: MainWindow, qtbot, tmp_path: Path) -> None:
    folder = build("gpt2", tmp_path / "models").resolve()
    assert window.open_hf_folder(folder)
    form = window.form.hf_task
    qtbot.waitUntil(lambda: form.task.count() > 0, timeout=EXPORT_TIMEOUT_MS)
    window.session.set_task("text-generation")  # without past: the shortest export of GPT-2
    # traced by TorchScript: what is tried is the saved recipe's paths, not the exporter (the
    # saved recipe carries the choice back)
    window.form.options_form.exporter.setCurrentText("torchscript")
    output = folder.with_name("gpt2_onnx")

    saved = tmp_path / "recipes" / "gpt2.toml"
    saved.parent.mkdir()
    assert window.save_recipe_to(saved), window.form.banner.label.text()
    recipe = recipes.load(saved)  # reads again: the output of an hf: source is a folder
    assert recipe.model.source == "hf:../models/gpt2"
    assert recipe.resolve("../models/gpt2").resolve() == folder
    assert recipe.output_path.resolve() == output
    assert recipe.export.exporter == "torchscript"

    window.session.new_recipe()
    assert window.open_path(saved), window.form.banner.label.text()
    assert window.session.problems == {}, window.session.problems
    qtbot.waitUntil(lambda: form.task.count() > 0, timeout=EXPORT_TIMEOUT_MS)
    message = export_and_wait(window, qtbot)
    report = message["report"]
    assert report["ok"] and report["exporter"] == "torchscript", report["error"]
    assert [Path(f["path"]).resolve().parent for f in report["files"]] == [output]
    assert (output / "model.onnx").is_file()
