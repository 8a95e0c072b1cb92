"""The worker's compare and profile jobs: a request in, progress events and one result out,
decoded by the protocol; a missing file is the job's `error`."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_studio.engine.protocol import CompareResult, ErrorEvent, ProfileResult, Progress, decode
from onnx_studio.engine.worker import Channel, handle


def _mlp(path: Path, scale: float) -> Path:
    w = numpy_helper.from_array(np.full((4, 4), scale, np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Sigmoid", ["h"], ["y"], name="sigmoid")], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [w])
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                    str(path))
    return path


def _run(line: str) -> list[object]:
    stream = io.StringIO()
    handle(decode(line), Channel(stream))
    return [decode(text) for text in stream.getvalue().splitlines()]


def test_compare_job(tmp_path: Path) -> None:
    a, b = _mlp(tmp_path / "a.onnx", 1.0), _mlp(tmp_path / "b.onnx", 1.5)
    said = _run(f'{{"id": 3, "job": "compare", "a": "{a}", "b": "{b}", "runs": 2, '
                '"dims": {"batch": 3}}')
    assert any(isinstance(m, Progress) for m in said)
    result = said[-1]
    assert isinstance(result, CompareResult) and result.id == 3
    doc = result.comparison
    assert doc.ok is False and doc.parity is not None and not doc.parity.ok
    assert [c.name for c in doc.initializers.changed] == ["w"]
    assert doc.matching is not None and doc.matching.by_name == 2


def test_profile_job_and_a_missing_file(tmp_path: Path) -> None:
    a = _mlp(tmp_path / "a.onnx", 1.0)
    result = _run(f'{{"id": 4, "job": "profile", "onnx": "{a}", "runs": 3}}')[-1]
    assert isinstance(result, ProfileResult) and result.profile.ok
    assert {n.name for n in result.profile.nodes} <= {"mm", "sigmoid"}
    assert result.profile.notes and "batch" in result.profile.notes[0]
    error = _run(f'{{"id": 5, "job": "profile", "onnx": "{tmp_path / "no.onnx"}"}}')[-1]
    assert isinstance(error, ErrorEvent) and error.error.kind == "source"
