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


@pytest.mark.timeout(600)
def test_an_encoder_with_dropout_traced_by_torchscript_validates(tmp_path: Path) -> None:
    """BERT's dropout (0.1): torch.onnx's TorchScript exporter put the whole model in training
    mode after the trace (its wrapper's mode), so the validation that ran it next found a
    model that is not the same twice."""
    from tests.engine.hf_tiny import build as build_tiny

    model = build_tiny("bert", tmp_path)
    code, doc, err = studio_export(f"hf:{model}", tmp_path / "out", "--exporter", "torchscript",
                                   "--task", "feature-extraction")
    assert code == 0 and doc["ok"], (doc.get("error"), err[-3000:])
    assert doc["validation"]["ok"], doc["validation"]


def test_a_torchscript_export_leaves_every_submodule_in_its_mode() -> None:
    import io

    import torch

    from onnx_studio.engine.export.exporter_state import modes_kept

    inner = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.5)).eval()
    wrapper = torch.nn.Module()  # training, as every new module is
    wrapper.inner = inner
    wrapper.forward = inner.forward  # type: ignore[method-assign]
    torch.onnx.export(wrapper, (torch.ones(1, 3),), io.BytesIO(), dynamo=False)
    assert inner.training, "torch.onnx sets the wrapper's mode on every submodule"
    inner.eval()
    with modes_kept(wrapper):
        torch.onnx.export(wrapper, (torch.ones(1, 3),), io.BytesIO(), dynamo=False)
    assert not inner.training and not inner[1].training and wrapper.training
