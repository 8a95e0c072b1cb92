"""A recipe is saved only where it overwrites nothing the recipe uses (issue 23, item 3).

`--save-recipe` and the window's Save As refuse, before any work and writing nothing, a path
that is not a `.toml` name or that is (after symlinks and `..`) the model source, a checkpoint,
an extension, an input file, the export's output, or a path inside a Hugging Face export's
output folder: kind `write`, exit status 2, a sentence saying what to change.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from onnx_studio.app import settings as settings_mod
from onnx_studio.app.window import MainWindow
from onnx_studio.engine import file_set
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.cli import main
from onnx_studio.engine.recipe import to_toml

MLP = '''import torch


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
'''
EXTENSION = "# registers nothing; named by the recipe\n"


RECIPE = """version = 1
[model]
source = "mlp.py:MLP"
checkpoint = "w.pt"
[[inputs]]
name = "x"
shape = [2, 4]
fill = "file"
file = "x.npy"
[export]
output = "out.onnx"
extensions = ["ext.py"]
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A recipe, its model, checkpoint, extension and input file, and a previous export."""
    (tmp_path / "mlp.py").write_text(MLP, encoding="utf-8")
    torch.save({"fc.weight": torch.zeros(2, 4), "fc.bias": torch.zeros(2)}, tmp_path / "w.pt")
    np.save(tmp_path / "x.npy", np.zeros((2, 4), np.float32))
    (tmp_path / "ext.py").write_text(EXTENSION, encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "out.onnx").write_bytes(b"the previous export")
    (tmp_path / "r.toml").write_text(RECIPE, encoding="utf-8")
    return tmp_path


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder`: a file's bytes, a symlink's target, a folder's mark."""
    found: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        found[key] = (f"-> {os.readlink(path)}" if path.is_symlink() else
                      "<dir>" if path.is_dir() else path.read_bytes())
    return found


def export_saving_to(project: Path, target: str, capsys: pytest.CaptureFixture[str]
                     ) -> tuple[int, dict]:
    code = main(["export", "--recipe", str(project / "r.toml"), "--save-recipe", target,
                 "--json"])
    captured = capsys.readouterr()
    assert "Loading" not in captured.err and "Exporting" not in captured.err, "work was done"
    return code, json.loads(captured.out.strip().splitlines()[-1])


def assert_refused(code: int, doc: dict, *words: str) -> None:
    assert code == 2, doc
    assert doc["ok"] is False and doc["error"]["kind"] == "write", doc
    message = doc["error"]["message"]
    assert message.count("\n") == 0 and "--save-recipe" in message, message
    for word in words:
        assert word in message, message


@pytest.mark.parametrize(("target", "words"), [
    ("mlp.py", ["mlp.py", ".toml"]),                    # the model's own source
    ("out.onnx", ["out.onnx", ".toml"]),                # the export's output
    ("sub/../w.pt", ["w.pt", ".toml"]),                 # a checkpoint, by way of ..
    ("model.toml", ["model source"]),                   # a symlink to the model
    ("sub/../sub/extension.toml", ["extension"]),       # a symlink to an extension
    ("weights.toml", ["checkpoint"]),                   # a symlink to the checkpoint
    ("output.toml", ["export output"]),                 # a symlink to the output
    ("inputs.toml", ["input file of 'x'"]),             # a symlink to an input file
    ("sub.toml", ["folder"]),                           # not a file at all
])
def test_save_recipe_refuses_the_files_the_recipe_uses(
        project: Path, capsys: pytest.CaptureFixture[str], target: str,
        words: list[str]) -> None:
    (project / "model.toml").symlink_to(project / "mlp.py")
    (project / "sub" / "extension.toml").symlink_to(project / "ext.py")
    (project / "weights.toml").symlink_to(project / "w.pt")
    (project / "output.toml").symlink_to(project / "out.onnx")
    (project / "inputs.toml").symlink_to(project / "x.npy")
    (project / "sub.toml").mkdir()
    before = snapshot(project)
    code, doc = export_saving_to(project, str(project / target), capsys)
    assert_refused(code, doc, *words)
    assert snapshot(project) == before, "nothing is written or changed"


def test_save_recipe_refuses_a_place_inside_a_hugging_face_output_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "tiny"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "gpt2"}', encoding="utf-8")
    out = tmp_path / "tiny_onnx"
    file_set.claim_folder(out, "export", ["model.onnx"])  # a previous export's folder
    (out / "model.onnx").write_bytes(b"the previous export")
    before = snapshot(tmp_path)
    for target in (out / "recipe.toml", out / "deeper" / ".." / "recipe.toml"):
        code = main(["export", f"hf-config:{model}", "-o", str(out), "--save-recipe",
                     str(target), "--json"])
        doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert_refused(code, doc, "output folder", str(out))
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------------------ the window


def banner_text(window: MainWindow) -> str:
    banner = window.form.banner
    return str(banner.label.text()) if banner.isVisible() else ""


def test_save_as_in_the_window_refuses_the_same_files(qtbot, project: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONNX_STUDIO_DATA_DIR", str(project / "data"))
    window = MainWindow(settings_mod.Settings(), None, start_worker=False)
    qtbot.addWidget(window)
    window.load_initial(None)
    window.show()
    window.session.set_recipe(recipes.load(project / "r.toml"))
    (project / "model.toml").symlink_to(project / "mlp.py")
    form = to_toml(window.session.recipe)
    before = snapshot(project)
    for target, words in ((project / "mlp.py", ".toml"), (project / "out.onnx", ".toml"),
                          (project / "sub" / ".." / "model.toml", "model source"),
                          (project / "ext.py", ".toml")):
        assert not window.save_recipe_to(target)
        text = banner_text(window)
        assert "not saved" in text and words in text and "choose another" in text, text
        assert to_toml(window.session.recipe) == form, "the form is untouched"
        assert window.session.recipe_path is None and window.session.dirty is False
        assert snapshot(project) == before, f"{target} was written"
    assert window.save_recipe_to(project / "sub" / "saved.toml"), banner_text(window)
    assert recipes.load(project / "sub" / "saved.toml").model.checkpoint == "../w.pt"
