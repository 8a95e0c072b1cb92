"""A file that is valid ONNX but that ONNX Runtime cannot run (no kernel for an operator on a type):
the verdict names the node, its operator and input types, and the line of the model's code that made
it, with the fix there (onnx_studio.engine.validation.unrunnable); a Hugging Face model that does
this (Falcon's ALiBi) is in test_hf_causes_named."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from onnx_studio.engine.validation.unrunnable import refused_node
from tests.engine.test_hf_derive import cli

pytestmark = pytest.mark.timeout(300)

MODEL = textwrap.dedent("""\
    import torch


    class Net(torch.nn.Module):
        def forward(self, x):
            y = x.to(torch.bfloat16) * 3
            return y.float() + 1
    """)


def test_a_node_without_a_kernel_is_named_at_the_models_line(tmp_path: Path) -> None:
    (tmp_path / "net.py").write_text(MODEL, encoding="utf-8")
    code, doc, err = cli("export", "net.py:Net", "--input", "x=2x4:float32", "-o", "net.onnx",
                         "--validate", cwd=tmp_path)
    assert code == 1, err
    error = doc["error"]
    assert error["kind"] == "validation", error
    assert "ONNX Runtime does not run Mul on bfloat16" in error["message"], error
    assert f"made at {tmp_path / 'net.py'}:6" in error["message"], error
    assert f"Make the line at {tmp_path / 'net.py'}:6 compute in float32" in error["hint"]
    assert "Could not find an implementation" in error["details"], "onnxruntime's own words"
    assert (tmp_path / "net.onnx").is_file(), "a valid ONNX file is kept"
    # a message that names no node, or a node the file lacks, adds nothing
    assert refused_node(tmp_path / "net.onnx", "Load model failed: bad magic") is None
    assert refused_node(tmp_path / "net.onnx", "node with name 'nowhere'") is None
