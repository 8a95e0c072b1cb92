"""forward()'s parameters read from model files without running them
(onnx_studio.engine.source.signatures) and the inputs they ask for
(onnx_studio.engine.source.arguments.follow_signature)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from onnx_studio.engine.recipe import InputSpec
from onnx_studio.engine.source.arguments import follow_signature
from onnx_studio.engine.source.describe import describe
from onnx_studio.engine.source.signatures import first_layer_input, pt2_signature

LAYERS = '''
import torch
from torch import nn


class Flat(nn.Module):
    def __init__(self, features: int = 12):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(features, 3), nn.ReLU())


class Signal(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(in_channels=2, out_channels=4, kernel_size=3)


class Words(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.rnn = nn.LSTM(8, 8, batch_first=True)


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(6, 8)


class Unsized(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, 2)
'''


@pytest.mark.parametrize(("name", "expected"), [
    ("Flat", ([1, 12], "float32")),  # an __init__ default sizes the layer
    ("Signal", ([1, 2, 64], "float32")),
    ("Words", ([1, 8], "int64")),  # token ids ("auto" keeps them below the vocabulary)
    ("Sequence", ([8, 1, 6], "float32")),  # (seq, batch, features) without batch_first
    ("Unsized", None),
])
def test_the_first_layer_sizes_the_input(name: str, expected: object) -> None:
    assert first_layer_input(ast.parse(LAYERS), name) == expected


GATE = '''
import torch


class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor, y, gain: float = 1.5, mask=None, label="a", *args,
                steps: int = 2, **extra):
        return self.fc(x) * gain
'''


def test_follow_signature_keeps_the_user_s_inputs_and_leaves_optional_ones_out(
        tmp_path: Path) -> None:
    (tmp_path / "gate.py").write_text(GATE, encoding="utf-8")
    signature = describe("gate.py:Gate", tmp_path).forward_signature
    fresh = follow_signature([], [], signature)
    assert [(s.name, s.kind, s.shape if s.is_tensor else s.const, s.keyword)
            for s in fresh] == [("x", "tensor", [1, 4], False), ("y", "tensor", [1, 4], False),
                                ("gain", "float", 1.5, False), ("label", "str", "a", False),
                                ("steps", "int", 2, True)]
    # an input of the same name keeps what the user set; an unnamed tensor is taken in order
    kept = follow_signature([InputSpec(name="gain", kind="float", const=0.25),
                             InputSpec(name="old", shape=[7, 4], dtype="float16")], [], signature)
    assert [(s.name, s.shape, s.dtype) for s in kept[:2]] == [("x", [7, 4], "float16"),
                                                              ("y", [1, 4], "float32")]
    assert kept[2].const == 0.25
    # without a signature (an example): every name a tensor, [1] when new
    assert [(s.name, s.shape) for s in follow_signature([], ["a", "b"])] == [("a", [1]),
                                                                             ("b", [1])]


class Nested(torch.nn.Module):
    def forward(self, inputs: dict[str, torch.Tensor], pair: tuple[torch.Tensor, torch.Tensor],
                *, scale: float) -> torch.Tensor:
        return inputs["ids"].float().sum() + pair[0] * pair[1] * scale


def test_a_pt2_names_nested_inputs_with_dots_and_keeps_keywords(tmp_path: Path) -> None:
    args = ({"ids": torch.ones(2, 3, dtype=torch.int32)}, (torch.randn(4), torch.randn(4)))
    program = torch.export.export(Nested(), args, {"scale": 2.0})
    path = tmp_path / "nested.pt2"
    torch.export.save(program, path)
    found = [(p.name, p.kind, p.shape, p.dtype, p.default) for p in pt2_signature(path)]
    assert found == [("inputs.ids", "positional", [2, 3], "int32", None),
                     ("pair.0", "positional", [4], "float32", None),
                     ("pair.1", "positional", [4], "float32", None),
                     ("scale", "keyword", None, "", "2.0")]
    description = describe(str(path), tmp_path)
    assert description.forward_params == ["inputs", "pair", "scale"]
    specs = follow_signature([], [], description.forward_signature)
    assert [(s.name, s.kind, s.keyword) for s in specs][-1] == ("scale", "float", True)
