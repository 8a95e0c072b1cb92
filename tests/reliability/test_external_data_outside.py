"""`inspect` refuses a file whose external data lies outside its folder (issue 23, item 6).

A weight's data file named by an absolute path, by `../`, or through a symlink whose target is
elsewhere makes a reader open a file the model's folder does not hold; onnx and ONNX Runtime
refuse such a file, and so did validate, compare, profile and variant, while `inspect` said ok.
Now it is an error problem (`external_data_outside`), `ok: false`, exit status 1, with the
file's facts still printed; the Graph tab does not read the values either.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_studio.engine.cli import main
from onnx_studio.engine.graph.model import GraphModel


def model_with_data_at(folder: Path, location: str, data_at: Path) -> Path:
    """folder/m.onnx: y = x + w, w (2x3 float32) in external data named `location`, its bytes
    written at `data_at`."""
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data_at.parent.mkdir(parents=True, exist_ok=True)
    data_at.write_bytes(w.raw_data)
    w = model.graph.initializer[0]
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "24")):
        w.external_data.add(key=key, value=value)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "m.onnx"
    onnx.save(model, str(path))
    return path


@pytest.fixture(params=["dotdot", "absolute", "symlink"])
def outside(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    folder, elsewhere = tmp_path / "model", tmp_path / "elsewhere" / "w.bin"
    if request.param == "dotdot":
        return model_with_data_at(folder, "../elsewhere/w.bin", elsewhere), "../elsewhere/w.bin"
    if request.param == "absolute":
        return model_with_data_at(folder, str(elsewhere), elsewhere), str(elsewhere)
    path = model_with_data_at(folder, "w.bin", elsewhere)
    (folder / "w.bin").symlink_to(elsewhere)  # beside the model by name, elsewhere in fact
    return path, "w.bin"


def test_inspect_says_the_file_is_unusable(outside: tuple[Path, str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path, location = outside
    assert main(["inspect", str(path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert doc["ok"] is False and doc["error"]["kind"] == "invalid_file", doc
    assert doc["nodes"] == 1, "the file's facts are still printed"
    [problem] = [p for p in doc["problems"] if p["severity"] == "error"]
    assert problem["code"] == "external_data_outside" and problem["tensor"] == "w"
    assert repr(location) in problem["message"] and "outside" in problem["message"]
    assert repr(location) in doc["error"]["message"]

    assert main(["inspect", str(path)]) == 1  # the text form says it too
    captured = capsys.readouterr()
    assert "error: external data file" in captured.out and "outside" in captured.err


def test_the_graph_does_not_read_values_from_outside(outside: tuple[Path, str]) -> None:
    path, _ = outside
    graph = GraphModel.load(path)
    assert [p.code for p in graph.problems if p.severity == "error"] == ["external_data_outside"]
    with pytest.raises(Exception, match="outside"):
        graph.initializer_array("w")


def test_data_beside_the_model_is_fine(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "model"
    path = model_with_data_at(folder, "w.bin", folder / "data" / "w.bin")
    os.symlink(folder / "data" / "w.bin", folder / "w.bin")  # a symlink that stays inside
    assert main(["inspect", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert doc["ok"] is True and not [p for p in doc["problems"] if p["severity"] == "error"]
    assert GraphModel.load(path).initializer_array("w").tolist() == [[0, 1, 2], [3, 4, 5]]
