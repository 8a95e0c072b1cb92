"""A real-size decoder (issue 24, 8): a Qwen2 of Qwen2.5-0.5B's shapes with 28 layers, 553M
parameters, 2.2 GB of float32 weights (over protobuf's 2 GB), built from its config with random
weights (`hf-config:`), exports with its cache into model.onnx + model.onnx.data (external_data
"auto") and validates, greedy tokens included, while the export and validation together peak
at no more than 3x the weights (the largest process of the command, from getrusage)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.engine.hf_models import ROOT, qwen2_folder

LAYERS = 28
MEASURE = '''
import json, resource, subprocess, sys
done = subprocess.run(json.loads(sys.argv[1]), capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-4000:],
                  "peak": peak}))
'''


@pytest.mark.real_size
@pytest.mark.timeout(7200)  # minutes on a quiet machine; far more on a loaded one
@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_a_2_2_gb_decoder_exports_and_validates_within_3x_its_weights(
        tmp_path: Path, exporter: str) -> None:
    """With either exporter: the TorchScript exporter's weights, a file each above 2 GB, are
    gathered into one model.onnx.data as Optimum does (issue 33, 12)."""
    model, weight_bytes = qwen2_folder(tmp_path, LAYERS)
    assert weight_bytes > 2**31  # more than protobuf can hold in one message
    available = psutil.virtual_memory().available
    if available < 4 * weight_bytes:
        pytest.skip(f"needs {4 * weight_bytes / 2**30:.0f} GiB free, the machine has "
                    f"{available / 2**30:.0f}")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "onnx_studio.engine.cli", "export", f"hf-config:{model}", "-o",
               str(out), "--exporter", exporter, "--validate", "--json"]
    done = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(command)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    figures = json.loads(done.stdout)
    assert figures["code"] == 0, figures["stderr"]
    doc = json.loads(figures["stdout"].strip().splitlines()[-1])
    assert doc["ok"], doc["error"]
    assert [(f["name"], f["data_files"]) for f in doc["files"]] == \
        [("model.onnx", ["model.onnx.data"])]
    assert (out / "model.onnx.data").stat().st_size >= weight_bytes * 0.9
    assert doc["validation"]["ok"] and doc["validation"]["generation"]["tokens_equal"]
    assert "Writing the weights" in figures["stderr"]  # progress while the weights are written
    assert figures["peak"] <= 3 * weight_bytes, \
        f"peak {figures['peak'] / weight_bytes:.2f}x the weights"
