"""Real-size decoders built from their configs with random weights (`hf-config:`), exported
with their cache into model.onnx + model.onnx.data (external_data "auto") and validated,
greedy tokens included, by the command line; the peak is the resident memory of the whole
command (its process tree, sampled by `tree_peak`) as a multiple of the float32 weights.

- issue 24, 8: a Qwen2 of Qwen2.5-0.5B's shapes (553M parameters, 2.2 GB, over protobuf's
  2 GB), with either exporter;
- issue 37, 2: export + validate within 1.5x the weights (the PyTorch model is freed before
  ONNX Runtime opens the file): that Qwen2 and a Llama-3.2-1B-shaped decoder (1.24B, 4.9 GB);
- issue 37, 3: a Llama-3.2-3B-shaped decoder (3.2B, 12.8 GB: more than half of a 23 GiB
  machine), behind its own marker:
  python -m pytest -m real_size_3b tests/engine/test_hf_real_size.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.engine.hf_models import llama_folder, qwen2_folder, tree_peak, write_recipe

LAYERS = 28
BOUND = 1.5  # issue 37, 2: export + validate within 1.5x the weights


def _export_and_validate(model: Path, out: Path, *extra: str,
                         atol: float | None = None) -> tuple[dict[str, Any], int]:
    """`onnx-studio export hf-config:MODEL -o OUT --validate --json` measured (through a
    recipe when `atol` is given): (the JSON document, the peak in bytes)."""
    source: list[str] = [f"hf-config:{model}"]
    if atol is not None:
        recipe = out.parent / f"{model.name}.toml"
        write_recipe(f"hf-config:{model}", out, recipe)
        recipe.write_text(recipe.read_text() + f"\n[validate]\natol = {atol}\n")
        source = ["--recipe", str(recipe)]
    command = [sys.executable, "-m", "onnx_studio.engine.cli", "export", *source,
               "-o", str(out), "--validate", "--json", *extra]
    out.parent.mkdir(parents=True, exist_ok=True)
    code, stdout, stderr, peak, seconds = tree_peak(command, out.parent)
    print(f"{model.name} {' '.join(extra)}: {seconds:.0f} s, peak {peak / 2**30:.2f} GiB")
    assert code == 0, stderr[-4000:]
    doc = json.loads(stdout.strip().splitlines()[-1])
    assert "Writing the weights" in stderr  # progress while the weights are written
    return doc, peak


def _check(doc: dict[str, Any], out: Path, weight_bytes: int) -> None:
    assert doc["ok"], doc["error"]
    assert [(f["name"], f["data_files"]) for f in doc["files"]] == \
        [("model.onnx", ["model.onnx.data"])]
    assert (out / "model.onnx.data").stat().st_size >= weight_bytes * 0.9
    assert doc["validation"]["ok"] and doc["validation"]["generation"]["tokens_equal"]


def _needs(factor: float, weight_bytes: int) -> None:
    available = psutil.virtual_memory().available
    if available < factor * weight_bytes + 2 * 2**30:
        pytest.skip(f"needs {(factor * weight_bytes + 2 * 2**30) / 2**30:.0f} GiB free, the "
                    f"machine has {available / 2**30:.0f}")


@pytest.mark.real_size
@pytest.mark.timeout(7200)  # minutes on a quiet machine; far more on a loaded one
@pytest.mark.parametrize(("exporter", "bound"), [("dynamo", BOUND), ("torchscript", 3.0)])
def test_a_2_2_gb_decoder_exports_and_validates_within_its_bound(
        tmp_path: Path, exporter: str, bound: float) -> None:
    """With either exporter: the TorchScript exporter's weights, a file each above 2 GB, are
    gathered into one model.onnx.data as Optimum does (issue 33, 12). The dynamo export is
    held to issue 37's 1.5x; the TorchScript one to issue 24's 3x (not measured against
    1.5x)."""
    model, weight_bytes = qwen2_folder(tmp_path, LAYERS)
    assert weight_bytes > 2**31  # more than protobuf can hold in one message
    _needs(2 * bound, weight_bytes)
    out = tmp_path / "out"
    doc, peak = _export_and_validate(model, out, "--exporter", exporter)
    _check(doc, out, weight_bytes)
    assert peak <= bound * weight_bytes, f"peak {peak / weight_bytes:.2f}x the weights"


@pytest.mark.real_size
@pytest.mark.timeout(7200)
def test_a_1_24b_llama_exports_and_validates_within_1_5x_its_weights(tmp_path: Path) -> None:
    model, weight_bytes = llama_folder(tmp_path, "1b")
    _needs(2 * BOUND, weight_bytes)
    out = tmp_path / "out"
    doc, peak = _export_and_validate(model, out)
    _check(doc, out, weight_bytes)
    assert peak <= BOUND * weight_bytes, f"peak {peak / weight_bytes:.2f}x the weights"


@pytest.mark.real_size_3b
@pytest.mark.timeout(14400)  # half an hour on a quiet 2-core machine
def test_a_3_2b_llama_more_than_half_the_memory_exports_and_validates(tmp_path: Path) -> None:
    """12.8 GB of float32 weights on a 23 GiB machine: possible only within 1.5x (measured:
    1.16x). Validated at atol 1e-4: at the default 1e-5, 0.07 % of the generation's logits
    (near zero in a random 28-layer model) differ by up to 4.7e-5, float32 rounding, every
    token equal (docs/benchmarks.md)."""
    model, weight_bytes = llama_folder(tmp_path, "3b")
    _needs(1.25, weight_bytes)
    out = tmp_path / "out"
    doc, peak = _export_and_validate(model, out, atol=1e-4)
    _check(doc, out, weight_bytes)
    assert peak <= BOUND * weight_bytes, f"peak {peak / weight_bytes:.2f}x the weights"
