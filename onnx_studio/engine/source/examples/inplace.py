"""In-place indexed assignment (`data[index] = new_data`), from the seed's FAQ and limitations.

Both forwards write into their `data` input: callers that compare against ONNX Runtime must
give the eager model its own copy of the inputs.
"""

from __future__ import annotations

import torch


class InPlaceIndexedAssignment(torch.nn.Module):
    """Supported from ONNX opset 11 (exported with ScatterND / index_put)."""

    def forward(self, data: torch.Tensor, new_data: torch.Tensor) -> torch.Tensor:
        data[1] = new_data
        return data


class InPlaceIndexedAssignmentONNX(torch.nn.Module):
    """The older seed's workaround: an explicit scatter_ with the index as an input."""

    def forward(self, data: torch.Tensor, index: torch.Tensor,
                new_data: torch.Tensor) -> torch.Tensor:
        new_data = new_data.unsqueeze(0)
        index = index.expand(1, new_data.size(1))
        data.scatter_(0, index, new_data)
        return data
