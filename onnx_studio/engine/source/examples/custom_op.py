"""The seed's custom-operator model: FooModel calling custom_ops::foo_forward.

The seed's op is written in C++; here it is defined with torch.library so it runs anywhere.
Its ONNX symbolic (custom_domain::Foo) is not registered here but in the recipe's extension
file, resources/models/custom_op_symbolics.py, exactly as a user would do it. ONNX Runtime
cannot run custom_domain::Foo unless given an implementation (a custom-op library, or an ONNX
function added to the file).
"""

from __future__ import annotations

import torch


@torch.library.custom_op("custom_ops::foo_forward", mutates_args=())
def foo_forward(input1: torch.Tensor, input2: torch.Tensor, attr1: float,
                attr2: int) -> torch.Tensor:
    return (input1 + input2) * attr1 + attr2


@foo_forward.register_fake
def _(input1: torch.Tensor, input2: torch.Tensor, attr1: float, attr2: int) -> torch.Tensor:
    return torch.empty_like(input1)


class FooModel(torch.nn.Module):
    def __init__(self, attr1: float = 2.0, attr2: int = 3) -> None:
        super().__init__()
        self.attr1 = attr1
        self.attr2 = attr2

    def forward(self, input1: torch.Tensor, input2: torch.Tensor) -> torch.Tensor:
        return torch.ops.custom_ops.foo_forward(input1, input2, self.attr1, self.attr2)
