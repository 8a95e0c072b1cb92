"""Invalid .onnx files are named as such: `inspect`, `validate` and the window's Graph tab.

The files are built with onnx.helper: a cycle, a node reading a tensor nothing produces, a
weight whose external data file is gone, an operator ONNX does not define, and an operator of
a custom domain (a warning only). `validate` also refuses a recipe whose inputs do not fit the
file before any trial runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_studio.engine.cli import main

MODEL = '''
import torch


class Relu(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''

RECIPE = '''version = 1
[model]
source = "relu_model.py:Relu"
[[inputs]]
name = "x"
shape = {shape}
dtype = "{dtype}"
[export]
output = "unused.onnx"
[validate]
random_trials = 1
'''


def _save(folder: Path, name: str, nodes: list, *, inits: tuple = (), domain: str = "",
          external: bool = False) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph(nodes, name, [x], [y], initializer=list(inits))
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    path = folder / f"{name}.onnx"
    if external:
        onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                  location=f"{name}.bin", size_threshold=0)
        (folder / f"{name}.bin").unlink()  # the data file is gone
    else:
        onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("invalid_files")
    node = helper.make_node
    weight = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    made = {
        # A needs C's output, C needs B's, B needs A's; D hangs below the cycle
        "cyclic": _save(folder, "cyclic", [
            node("Add", ["x", "c"], ["a"], name="A"), node("Relu", ["a"], ["b"], name="B"),
            node("Neg", ["b"], ["c"], name="C"), node("Identity", ["a"], ["y"], name="D")]),
        "dangling": _save(folder, "dangling", [node("Add", ["x", "ghost"], ["y"], name="adder")]),
        "missing_data": _save(folder, "missing_data", [node("Add", ["x", "w"], ["y"],
                                                            name="addw")],
                              inits=(weight,), external=True),
        "unknown_op": _save(folder, "unknown_op", [node("FooBar", ["x"], ["y"], name="mystery")]),
        "custom_domain": _save(folder, "custom_domain", [
            node("Foo", ["x"], ["y"], name="custom", domain="my.domain")], domain="my.domain"),
        "good": _save(folder, "good", [node("Relu", ["x"], ["y"], name="relu")]),
        # only the ONNX checker sees this: Relu takes one input
        "two_inputs": _save(folder, "two_inputs", [node("Relu", ["x", "x"], ["y"],
                                                        name="relu2")]),
    }
    (folder / "relu_model.py").write_text(MODEL, encoding="utf-8")
    return made


# what each bad file's error names: (problem code, words of the sentence, nodes marked)
BAD = {
    "cyclic": ("cycle", ["cycle", "A, B, C"], {"A", "B", "C"}),
    "dangling": ("dangling_input", ["adder", "'ghost'"], {"adder"}),
    "missing_data": ("missing_external_data", ["'missing_data.bin'", "'w'"], set()),
    "unknown_op": ("unknown_operator", ["mystery", "FooBar"], {"mystery"}),
}


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines, "no JSON line printed"
    return code, json.loads(lines[-1])


@pytest.mark.parametrize("name", sorted(BAD))
def test_inspect_reports_the_problem_and_exits_1(
        name: str, files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code_name, words, nodes = BAD[name]
    code, doc = run_json(capsys, "inspect", str(files[name]))
    assert code == 1, doc
    assert doc["ok"] is False and doc["error"]["kind"] == "invalid_file"
    assert doc["error"]["message"].startswith(f"{name}.onnx is not a valid ONNX model: ")
    for word in words:
        assert word in doc["error"]["message"], doc["error"]
    # the file's facts are still there, the problem listed with what it names
    assert doc["nodes"] >= 1 and doc["inputs"][0]["name"] == "x"
    errors = [p for p in doc["problems"] if p["severity"] == "error"]
    assert errors[0]["code"] == code_name
    assert set(errors[0]["nodes"]) == nodes


def test_inspect_text_lists_the_problems(files: dict[str, Path],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(files["dangling"])]) == 1
    captured = capsys.readouterr()
    assert "error: node adder (Add) reads tensor 'ghost'" in captured.out
    assert "error: dangling.onnx is not a valid ONNX model" in captured.err


def test_a_custom_domain_is_a_warning_and_a_good_file_has_no_problem(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, "inspect", str(files["custom_domain"]))
    assert code == 0 and doc["ok"] and doc["error"] is None, doc
    (problem,) = doc["problems"]
    assert problem["severity"] == "warning" and problem["code"] == "unknown_operator"
    assert "my.domain::Foo" in problem["message"] and problem["nodes"] == ["custom"]
    code, doc = run_json(capsys, "inspect", str(files["good"]))
    assert code == 0 and doc["problems"] == [], doc


def _recipe(files: dict[str, Path], shape: str = "[2, 3]", dtype: str = "float32",
            name: str = "recipe") -> Path:
    path = files["good"].parent / f"{name}.toml"
    path.write_text(RECIPE.format(shape=shape, dtype=dtype), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["cyclic", "missing_data"])
def test_validate_refuses_an_invalid_file_before_running(
        name: str, files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 1 (the file cannot be validated), kind invalid_file, no trial run."""
    code, doc = run_json(capsys, "validate", str(files[name]), "--recipe", str(_recipe(files)))
    assert code == 1, doc
    assert doc["error"]["kind"] == "invalid_file"
    for word in BAD[name][1]:
        assert word in doc["error"]["message"], doc["error"]
    assert doc["validation"] is None


def test_validate_refuses_inputs_that_do_not_fit_and_names_each(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 2 with one sentence naming the input and each way it does not fit; the good
    file with a fitting recipe validates (the check refuses only what does not fit)."""
    recipe = _recipe(files, shape="[4, 3, 5]", dtype="int64", name="wrong")
    code, doc = run_json(capsys, "validate", str(files["good"]), "--recipe", str(recipe))
    assert code == 2, doc
    error = doc["error"]
    assert error["kind"] == "inputs" and doc["validation"] is None
    assert error["message"].startswith("The recipe's inputs do not fit good.onnx: x: ")
    assert "dtype int64, the file takes float32" in error["message"]
    assert "rank 3 (4x3x5), the file takes rank 2 (2x3)" in error["message"]
    assert "tolerance" not in error["hint"] and "rtol" not in error["hint"]

    recipe = _recipe(files, shape="[2, 5]", name="wide")
    code, doc = run_json(capsys, "validate", str(files["good"]), "--recipe", str(recipe))
    assert code == 2 and "axis 1 is 5, the file fixes it at 3" in doc["error"]["message"], doc

    code, doc = run_json(capsys, "validate", str(files["good"]), "--recipe",
                         str(_recipe(files)))
    assert code == 0 and doc["validation"]["ok"], doc


def test_the_graph_tab_lists_the_problems_and_outlines_the_nodes(
        files: dict[str, Path], qtbot) -> None:
    from onnx_studio.app import settings as settings_mod
    from onnx_studio.app.window import MainWindow

    window = MainWindow(settings_mod.Settings(), None, start_worker=False)
    qtbot.addWidget(window)
    window.show()
    assert window.open_path(files["cyclic"])
    tab = window.tabs.graph
    window.tabs.setCurrentWidget(tab)  # the checks run once the graph is painted
    qtbot.waitUntil(lambda: tab.problems.isVisibleTo(tab), timeout=10_000)  # above the graph
    text = tab.problems.text()
    assert "not a valid ONNX model" in text and "cycle through nodes A, B, C" in text
    browser = tab.browser
    assert browser is not None and browser.model is not None
    marked = {browser.model.nodes[i].name for i in range(len(browser.model.nodes))
              if browser.model.nodes[i].name in browser.marks}
    assert marked == {"A", "B", "C"}
    assert browser.canvas.marks, "the marked nodes are outlined on the canvas"
    # the properties of a marked node say what is wrong with it
    browser.select_node(0)
    assert "cycle" in browser.properties.browser.toPlainText()

    # a good file: no banner, no outline left from the previous one
    assert window.open_path(files["good"])
    window.tabs.setCurrentWidget(tab)
    qtbot.waitUntil(lambda: not browser.root.checks_pending, timeout=10_000)
    assert tab.problems.text() == "" and not tab.problems.isVisibleTo(tab)
    assert browser.marks == {} and not browser.canvas.marks


def test_the_checker_runs_once_the_graph_is_shown_and_its_warning_follows(
        files: dict[str, Path], qtbot) -> None:
    """The graph is painted without waiting for the file's checks (0.6 s of the open at 100k
    nodes, the ONNX checker's 0.4 s of it); their verdict reaches the tab's problems right
    after, and belongs to that file."""
    from onnx_studio.app import settings as settings_mod
    from onnx_studio.app.window import MainWindow

    window = MainWindow(settings_mod.Settings(), None, start_worker=False)
    qtbot.addWidget(window)
    window.show()
    assert window.open_path(files["two_inputs"])
    tab = window.tabs.graph
    window.tabs.setCurrentWidget(tab)  # the checks wait for the graph to be painted
    assert tab.browser is not None and tab.browser.root is not None
    assert "input size 2" not in tab.problems.text()  # not waited for
    qtbot.waitUntil(lambda: "input size 2" in tab.problems.text(), timeout=10_000)
    assert "The ONNX checks have warnings" in tab.problems.text()
    assert [p.code for p in tab.browser.root.problems] == ["checker"]
    assert not tab.browser.root.checks_pending

    # another file shown before the checks ran: the first file's verdict never reaches it
    assert window.open_path(files["two_inputs"])
    assert window.open_path(files["good"])
    qtbot.wait(300)
    assert tab.problems.text() == "" and tab.browser.root.problems == []
