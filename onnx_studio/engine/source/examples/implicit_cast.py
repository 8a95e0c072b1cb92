"""The FAQ's "Does ONNX support implicit scalar datatype casting?" ScriptModule.

In the seed's day the scripted `y + 3` was exported with an int64 constant (wrong); current
exporters type the scalar from the tensor, so the ONNX output stays float32.
"""

from __future__ import annotations

import torch


class ImplicitCastType(torch.jit.ScriptModule):
    @torch.jit.script_method
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The exporter knows x is float32, so 2 is exported as float32 too.
        y = x + 2
        # The seed: without type propagation this 3 became int64.
        return y + 3
