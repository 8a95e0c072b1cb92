"""A torch.autograd.Function with a static `symbolic`, from the seed's "Static Symbolic Method".

The TorchScript exporter calls MyRelu.symbolic (ONNX Clip with min 0); the dynamo exporter
traces through forward instead.
"""

from __future__ import annotations

from typing import Any

import torch


class MyRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, input: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def symbolic(g: Any, input: Any) -> Any:
        return g.op("Clip", input, g.op("Constant", value_t=torch.tensor(0, dtype=torch.float)))


class MyReluModel(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return MyRelu.apply(x)
