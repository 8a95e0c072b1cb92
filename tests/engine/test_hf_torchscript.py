"""The faster path for Hugging Face decoders (issue 24, 11): `--exporter torchscript` traces
each part, as Optimum does, and the same validation proves the file: every trial (the cache
empty and not) and 20 greedy tokens equal; the outputs' dynamic axes named after the input
dimensions they follow."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.hf_models import build, studio_export


@pytest.mark.timeout(600)  # one export and its validation on a loaded 2-core machine
def test_a_decoder_traced_by_torchscript_validates_like_the_default(tmp_path: Path) -> None:
    model = build("qwen2", tmp_path)
    code, doc, err = studio_export(f"hf:{model}", tmp_path / "out", "--exporter", "torchscript")
    assert code == 0, err[-3000:]
    assert doc["ok"] and doc["exporter"] == "torchscript"
    validation = doc["validation"]
    assert validation["ok"] and validation["generation"]["tokens_equal"]
    assert {t["kind"] for t in validation["trials"]} == {"export-inputs", "past-empty",
                                                          "past-nonempty"}
    outputs = {o["name"]: o["shape"] for o in doc["files"][0]["graph"]["outputs"]}
    assert outputs["logits"][:2] == ["batch_size", "sequence_length"]
    assert outputs["present.0.key"][0] == "batch_size"
    assert isinstance(outputs["present.0.key"][2], str)  # grows with the cache: not fixed
