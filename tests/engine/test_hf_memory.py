"""Memory of export + validate, and half-precision checkpoints (issue 37, 2 and 3), on tiny
models: the exporter keeps no weight after an export, the PyTorch model is gone before ONNX
Runtime opens a file, and a bfloat16 or float16 checkpoint exports in its own type. The
real-size figures are tests/engine/test_hf_real_size.py's (marker `real_size`)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.conftest import REPO
from tests.engine.hf_models import build, studio_export, write_recipe

_NO_WEIGHT_KEPT = """
import gc, weakref
import torch
from onnx_studio.engine.export.exporter_state import forget_exported_graphs

model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()).eval()
weight = weakref.ref(model[0].weight)
with torch.no_grad():
    program = torch.onnx.export(model, (torch.randn(2, 64),), dynamo=True, optimize=True)
del program, model
kept = gc.collect() >= 0 and weight() is not None
forget_exported_graphs()
gc.collect()
print("kept before", kept, "after", weight() is not None)
"""


@pytest.mark.timeout(300)
def test_the_exporter_keeps_no_weight_once_the_export_is_dropped() -> None:
    """onnxscript's optimizer matchers remembered the last graph, and through it every weight
    (measured: the whole model stayed resident after the export). In a process of its own, as
    a worker runs its one job: a test process that ran other tests before holds other things."""
    done = subprocess.run([sys.executable, "-c", _NO_WEIGHT_KEPT], capture_output=True,
                          text=True, timeout=280, cwd=REPO, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "kept before True after False", done.stdout


def _live_models() -> int:
    from transformers import PreTrainedModel

    return sum(1 for found in gc.get_objects() if isinstance(found, PreTrainedModel))


@pytest.mark.timeout(600)  # a loaded 2-core machine; ~15 s when idle
def test_the_pytorch_model_is_freed_before_onnx_runtime_opens_a_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Export + validate never holds the model and a session (a copy of the weights) at
    once; the references computed first judge the files as before (trials, tokens)."""
    from onnx_studio.engine import pipeline
    from onnx_studio.engine.recipe import load as load_recipe
    from onnx_studio.engine.validation import hf_checks

    opened: list[int] = []
    real = hf_checks.create_session

    def counting(*args: Any, **kwargs: Any) -> Any:
        gc.collect()
        opened.append(_live_models())
        return real(*args, **kwargs)

    monkeypatch.setattr(hf_checks, "create_session", counting)
    source = build("llama", tmp_path)
    recipe = load_recipe(write_recipe(f"hf:{source}", tmp_path / "out", tmp_path / "r.toml"))
    report = pipeline.export_hf(recipe, validate=True)
    assert report.ok, report.error
    assert report.validation is not None and report.validation.verdict == "passed"
    assert report.validation.generation is not None
    assert report.validation.generation.tokens_equal
    assert opened and opened == [0] * len(opened)  # trials' session, generation's session


def _half_folder(tmp_path: Path, dtype: str) -> Path:
    import transformers

    target = tmp_path / f"llama_{dtype}"
    model = transformers.LlamaForCausalLM.from_pretrained(build("llama", tmp_path),
                                                          dtype=getattr(torch, dtype))
    model.save_pretrained(target)
    return target


def _file_dtype(doc: dict[str, Any]) -> str:
    outputs = doc["files"][0]["graph"]["outputs"]
    return str(next(o["dtype"] for o in outputs if o["name"] == "logits"))


@pytest.mark.timeout(600)  # a loaded 2-core machine; ~20 s when idle
def test_a_float16_checkpoint_exports_in_float16_and_validates_on_the_cpu(
        tmp_path: Path) -> None:
    """No silent upcast; compared with eager float16 at float16's tolerances, said so."""
    code, doc, err = studio_export(f"hf:{_half_folder(tmp_path, 'float16')}", tmp_path / "out")
    assert code == 0, err
    assert _file_dtype(doc) == "float16"
    validation = doc["validation"]
    assert validation["ok"] and validation["conclusive"] and validation["generation"][
        "tokens_equal"]
    assert (validation["rtol"], validation["atol"]) == (1e-2, 5e-2)
    assert any("The model is float16" in w["message"] for w in doc["warnings"])


@pytest.mark.timeout(600)  # a loaded 2-core machine; ~30 s when idle
def test_a_bfloat16_checkpoint_exports_in_bfloat16_inconclusive_on_the_cpu_unless_upcast(
        tmp_path: Path) -> None:
    """ONNX Runtime's CPU provider cannot run bfloat16 (no Where kernel, among others): the
    verdict says so and how to validate; the float32 it names validates."""
    folder = _half_folder(tmp_path, "bfloat16")
    code, doc, err = studio_export(f"hf:{folder}", tmp_path / "out")
    assert code == 0, err
    assert _file_dtype(doc) == "bfloat16"
    validation = doc["validation"]
    assert validation["ok"] and validation["conclusive"] is False
    assert "bfloat16" in validation["message"] and "dtype=float32" in validation["hint"]
    code, doc, err = studio_export(f"hf:{folder}", tmp_path / "out32", "--model-kwarg",
                                   "dtype=float32")
    assert code == 0, err
    assert _file_dtype(doc) == "float32"
    assert doc["validation"]["ok"] and doc["validation"]["conclusive"]
