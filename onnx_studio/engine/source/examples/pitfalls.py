"""Models from the seed's "Avoiding Pitfalls": each traces to a wrong graph.

ItemReshape uses `y.item()`: tracing turns the count into a constant (a TracerWarning), so the
ONNX file ignores y. ShapeInplace does `+=` on a value read from `tensor.shape`: while tracing,
the two names share memory and the file computes the wrong length. The dynamo exporter gets
both right.
"""

from __future__ import annotations

import torch


class ItemReshape(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # Bad! y.item() will be replaced with a constant during tracing.
        return x.reshape(y.item(), -1)  # type: ignore[arg-type]


class ShapeInplace(torch.nn.Module):
    """The seed returns the Python int; here it sizes a tensor so the result is an output."""

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        batch_size, seq_length = states.shape[:2]  # noqa: RUF059  (the seed, verbatim)
        real_seq_length = seq_length
        real_seq_length += 2
        return states.new_ones(real_seq_length + seq_length)
