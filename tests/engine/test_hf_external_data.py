"""`hf:` exports honour `export.external_data` (issue 24, 8): with "always" each .onnx file gets
its data file, the export document lists it (`files[].data_files`), and the folder's set is
one commit: exporting again with "never" replaces the pair by one inline file, the old data
file leaving with its set, the user's own files staying."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import onnx
import onnxruntime as ort
import pytest

from onnx_studio.engine import file_set
from tests.engine.hf_models import ROOT, build

pytestmark = pytest.mark.timeout(600)  # two CLI exports on a loaded 2-core machine


def export(folder: Path, model: Path, out: Path, external_data: str) -> dict[str, Any]:
    import os
    import subprocess
    import sys

    recipe = folder / f"{external_data}.toml"
    recipe.write_text(f'version = 1\n[model]\nsource = "hf:{model}"\n[export]\n'
                      f'output = "{out}"\nexternal_data = "{external_data}"\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "onnx_studio.engine.cli", "export", "--recipe",
                           str(recipe), "--json"], capture_output=True, text=True, env=env,
                          cwd=folder, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_always_writes_a_data_file_per_onnx_and_the_report_lists_it(tmp_path: Path) -> None:
    model = build("bert", tmp_path)  # any architecture: the files, not the exporter, are tested
    out = tmp_path / "out"
    file_set.claim_folder(out, "export", [])  # a folder the studio exported into before
    (out / "README.md").write_text("the user's notes")  # then the user's notes beside
    doc = export(tmp_path, model, out, "always")
    assert [(f["name"], f["data_files"]) for f in doc["files"]] == \
        [("model.onnx", ["model.onnx.data"])]
    assert sorted(p.name for p in out.iterdir()) == \
        sorted([file_set.MANIFEST, "README.md", "model.onnx", "model.onnx.data"])
    proto = onnx.load(str(out / "model.onnx"), load_external_data=False)
    external = [t for t in proto.graph.initializer
                if t.data_location == onnx.TensorProto.EXTERNAL]
    inline = [t for t in proto.graph.initializer if t not in external]
    assert len(external) >= 10  # every weight matrix and vector of the 2 layers
    assert all(t.ByteSize() < 1024 for t in inline)  # only scalars and tiny vectors stay
    assert {e.value for t in external for e in t.external_data if e.key == "location"} == \
        {"model.onnx.data"}
    session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    assert session.get_outputs()[0].name == "logits"
    del session

    doc = export(tmp_path, model, out, "never")
    assert [(f["name"], f["data_files"]) for f in doc["files"]] == [("model.onnx", [])]
    assert sorted(p.name for p in out.iterdir()) == \
        sorted([file_set.MANIFEST, "README.md", "model.onnx"])
    assert (out / "README.md").read_text() == "the user's notes"
    assert file_set.previous_set(out, "export") == ["model.onnx"]
