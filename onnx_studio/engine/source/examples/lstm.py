"""The FAQ's LSTM: "I have exported my lstm model, but its input size seems to be fixed?"

nn.LSTM takes its state as a tuple; this wrapper takes (input, h0, c0) flat so each tensor is
one named ONNX input, as in the seed's input_names=['input', 'h0', 'c0'].
The recipe uses the TorchScript exporter: with torch 2.13 the dynamo exporter's LSTM keeps the
example sequence length in a Reshape, so the file fails at any other length.
"""

from __future__ import annotations

import torch
from torch import nn


class LSTMModel(nn.Module):
    def __init__(self, input_size: int = 10, hidden_size: int = 20, layer_count: int = 4,
                 bidirectional: bool = True) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=layer_count,
                            bidirectional=bidirectional)

    def forward(self, input: torch.Tensor, h0: torch.Tensor,
                c0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        output, (hn, cn) = self.lstm(input, (h0, c0))
        return output, hn, cn
