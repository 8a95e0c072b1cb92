"""The seed's "Tracing vs Scripting" models.

LoopModel runs a Python loop over a tensor count: tracing records the iterations that ran, so
the ONNX graph is a fixed chain of Adds (right only for the example count). LoopModel2 calls a
scripted function, so the TorchScript exporter emits an ONNX Loop that takes any count.
"""

from __future__ import annotations

import torch


class LoopModel(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        for i in range(y):  # y is a 0-d tensor, as in the seed
            x = x + i
        return x


@torch.jit.script
def loop(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    for i in range(int(y)):
        x = x + i
    return x


class LoopModel2(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return loop(x, y)
