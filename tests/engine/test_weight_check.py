"""The validation's weight check (onnx_studio.engine.validation.weights): no false alarm on weights
the exporters changed legitimately (a BatchNorm folded into the Conv or Gemm before it, a parameter
stored transposed, reshaped or cast), and still a warning naming the parameter when a file holds a
weight that is not the model's.

Models are .py files in a temp folder named by recipes, exported and validated through
onnx_studio.engine.pipeline (and the CLI for the JSON), as a user's would be; the layout cases at
the end build small ONNX graphs by hand, since no exporter writes them on request.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from onnx_studio.engine import pipeline
from onnx_studio.engine import recipe as recipe_mod
from onnx_studio.engine.cli import main
from onnx_studio.engine.protocol import ExportReport
from onnx_studio.engine.validation.weights import weight_warnings

MODELS = textwrap.dedent('''
    import torch
    from torch import nn


    def _trained_statistics(module):
        """BatchNorm statistics far from the defaults, as after training: the fold matters."""
        generator = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for bn in module.modules():
                if isinstance(bn, nn.modules.batchnorm._BatchNorm):
                    n = bn.num_features
                    bn.running_mean.copy_(torch.rand(n, generator=generator) * 2 - 1)
                    bn.running_var.copy_(torch.rand(n, generator=generator) * 2 + 0.05)
                    bn.weight.copy_(torch.rand(n, generator=generator) + 0.5)
                    bn.bias.copy_(torch.rand(n, generator=generator) * 2 - 1)
        return module


    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.relu = nn.ReLU()
            self.block = nn.Sequential(nn.Conv2d(8, 8, 3, groups=2, bias=False),
                                       nn.BatchNorm2d(8, eps=1e-3), nn.ReLU())
            self.head = nn.Linear(8, 4)
            _trained_statistics(self)

        def forward(self, x):
            x = self.block(self.relu(self.bn(self.conv(x))))
            return self.head(x.mean((2, 3)))


    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc2 = nn.Linear(8, 3)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))


    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            return self.fc(x)


    def tiny_resnet():
        """A Hugging Face ResNet with tiny sizes and random weights, as a factory."""
        from transformers import ResNetConfig, ResNetForImageClassification

        config = ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16],
                              depths=[1, 1], layer_type="basic", num_labels=3,
                              return_dict=False)
        return _trained_statistics(ResNetForImageClassification(config)).eval()
''')


def _recipe(folder: Path, name: str, source: str, shape: list[int], exporter: str
            ) -> recipe_mod.Recipe:
    path = folder / f"{name}.toml"
    path.write_text(textwrap.dedent(f'''\
        version = 1
        [model]
        source = "models.py:{source}"
        [[inputs]]
        name = "x"
        shape = {shape}
        fill = "randn"
        [export]
        output = "{name}.onnx"
        exporter = "{exporter}"
        {"opset = 17" if exporter == "torchscript" else ""}
        [validate]
        random_trials = 1
        '''), encoding="utf-8")
    return recipe_mod.load(path)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("weights")
    (path / "models.py").write_text(MODELS, encoding="utf-8")
    return path


def _weight_warnings(report: ExportReport) -> list[str]:
    every = list(report.warnings) + list((report.validation and report.validation.warnings)
                                         or [])
    return [w.message for w in every if "weight" in w.message.lower()]


def _assert_passes_quietly(report: ExportReport) -> None:
    assert report.ok, report.error
    assert report.validation is not None and report.validation.ok
    assert _weight_warnings(report) == []


# ---------------------------------------------------------------------------- folded: no alarm


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_batchnorm_folded_into_conv_is_not_a_difference(folder: Path, exporter: str) -> None:
    recipe = _recipe(folder, f"cnn_{exporter}", "SmallCNN", [2, 3, 12, 12], exporter)
    report = pipeline.export(recipe, validate=True)
    _assert_passes_quietly(report)
    proto = onnx.load(str(recipe.output_path))
    ops = {node.op_type for node in proto.graph.node}
    assert "BatchNormalization" not in ops  # the exporter folded both BatchNorms
    if exporter == "dynamo":
        # optimize kept the parameter's name on the folded value: the case that used to warn
        stored = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
        assert "conv.weight" in stored
        from onnx_studio.engine.source.load import load_model

        ours = load_model(recipe).module.state_dict()["conv.weight"].numpy()
        assert not np.allclose(stored["conv.weight"], ours, rtol=1e-3)


@pytest.mark.slow
def test_tiny_transformers_resnet_has_no_weight_warning(folder: Path) -> None:
    pytest.importorskip("transformers")
    recipe = _recipe(folder, "resnet", "tiny_resnet", [1, 3, 32, 32], "dynamo")
    _assert_passes_quietly(pipeline.export(recipe, validate=True))


def test_linear_used_transposed_by_gemm_has_no_weight_warning(folder: Path) -> None:
    recipe = _recipe(folder, "mlp_ts", "Mlp", [2, 4], "torchscript")
    report = pipeline.export(recipe, validate=True)
    _assert_passes_quietly(report)
    gemm = [n for n in onnx.load(str(recipe.output_path)).graph.node if n.op_type == "Gemm"]
    assert gemm and "fc1.weight" in gemm[0].input  # the parameter itself, transposed by Gemm
    assert any(a.name == "transB" and a.i == 1 for a in gemm[0].attribute)


# ---------------------------------------------------------------------------- a real difference


def test_a_patched_weight_is_named_and_validation_fails(
        folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = _recipe(folder, "plain", "Plain", [2, 4], "dynamo")
    assert pipeline.export(recipe, validate=False).ok
    proto = onnx.load(str(recipe.output_path))
    weight = next(i for i in proto.graph.initializer if i.name == "fc.weight")
    values = numpy_helper.to_array(weight).copy()
    values[1, 2] += 0.5  # one wrong constant written into one weight
    weight.CopyFrom(numpy_helper.from_array(values, weight.name))
    broken = folder / "plain_patched.onnx"
    onnx.save(proto, str(broken))

    code = main(["validate", str(broken), "--recipe", str(folder / "plain.toml"), "--json"])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 1 and doc["ok"] is False and doc["error"]["kind"] == "validation", doc
    found = [w for w in doc["validation"]["warnings"] if "fc.weight" in w["message"]]
    assert len(found) == 1, doc["validation"]["warnings"]
    assert "fc.bias" not in found[0]["message"]  # only the weight that differs is named
    assert "0.5" in found[0]["message"] and found[0]["hint"]


def test_a_conv_weight_that_is_not_the_fold_names_the_parameter_and_the_batchnorm(
        folder: Path) -> None:
    recipe = _recipe(folder, "cnn_patched", "SmallCNN", [2, 3, 12, 12], "dynamo")
    assert pipeline.export(recipe, validate=False).ok
    proto = onnx.load(str(recipe.output_path))
    weight = next(i for i in proto.graph.initializer if i.name == "conv.weight")
    values = numpy_helper.to_array(weight).copy()
    values[0, 0, 0, 0] += 1.0
    weight.CopyFrom(numpy_helper.from_array(values, weight.name))
    broken = folder / "cnn_patched_file.onnx"
    onnx.save(proto, str(broken))
    report = pipeline.validate_file(recipe, broken)
    assert not report.ok and report.error is not None and report.error.kind == "validation"
    messages = _weight_warnings(report)
    assert len(messages) == 1 and "'conv.weight'" in messages[0] and "'bn'" in messages[0]
    assert "block" not in messages[0]  # the other, correctly folded, conv is not named


# ---------------------------------------------------------------------------- layouts, by hand


class _Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.register_buffer("unused", torch.zeros(5))


def _model(initializers: dict[str, np.ndarray], nodes: list[Any]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    return helper.make_model(graph)


def _check(tmp_path: Path, initializers: dict[str, Any], nodes: list[Any]
           ) -> list[dict[str, Any]]:
    torch.manual_seed(0)
    module = _Linear()
    proto = _model({k: v(module) if callable(v) else v for k, v in initializers.items()}, nodes)
    return weight_warnings(proto, tmp_path / "m.onnx", module)


def _w(module: _Linear) -> np.ndarray:
    return module.fc.weight.detach().numpy()


def _b(module: _Linear) -> np.ndarray:
    return module.fc.bias.detach().numpy()


MATMUL = [helper.make_node("MatMul", ["x", "fc.weight"], ["h"]),
          helper.make_node("Add", ["h", "fc.bias"], ["y"])]


def test_transposed_reshaped_and_cast_parameters_are_the_parameter(tmp_path: Path) -> None:
    # MatMul with the weight stored transposed, the bias reshaped to a row
    assert _check(tmp_path, {"fc.weight": lambda m: _w(m).T.copy(),
                             "fc.bias": lambda m: _b(m).reshape(1, 3)}, MATMUL) == []
    # cast to float16 (compared at float16's precision)
    assert _check(tmp_path, {"fc.weight": lambda m: _w(m).T.astype(np.float16),
                             "fc.bias": lambda m: _b(m).astype(np.float16)}, MATMUL) == []


def test_transposed_but_different_values_are_still_found(tmp_path: Path) -> None:
    def wrong(m: _Linear) -> np.ndarray:
        values = _w(m).T.copy()
        values[0, 0] += 1.0
        return values

    found = _check(tmp_path, {"fc.weight": wrong, "fc.bias": _b}, MATMUL)
    assert len(found) == 1 and "'fc.weight'" in found[0]["message"]
    assert "fc.bias" not in found[0]["message"]


def test_an_initializer_no_node_uses_is_not_a_finding(tmp_path: Path) -> None:
    gemm = [helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["y"], transB=1)]
    found = _check(tmp_path, {"fc.weight": _w, "fc.bias": _b,
                              "unused": np.ones(5, np.float32)}, gemm)
    assert found == []


def test_weights_rounded_through_float16_and_stored_in_float32_are_the_parameter(
        tmp_path: Path) -> None:
    """An fp16 variant keeps some weights in float32 after its conversion rounded them
    (issue 33, 13): float16's rounding is no difference; a weight 1 % off still is."""
    def rounded(m: _Linear) -> np.ndarray:
        return _w(m).T.astype(np.float16).astype(np.float32)

    assert not np.array_equal(rounded(_Linear()), _w(_Linear()).T)
    assert _check(tmp_path, {"fc.weight": rounded, "fc.bias": _b}, MATMUL) == []
    found = _check(tmp_path, {"fc.weight": lambda m: rounded(m) * 1.01, "fc.bias": _b},
                   MATMUL)
    assert len(found) == 1 and "'fc.weight'" in found[0]["message"]
