"""Extension for the custom_op example: the ONNX symbolic for custom_ops::foo_forward.

Listed in the recipe's export.extensions, this file runs in the worker before the export, the
way the seed registers a symbolic for a C++ custom operator: the op becomes custom_domain::Foo
(version from custom_opsets) with its two scalar arguments as attributes.
"""

from torch.onnx import register_custom_op_symbolic
from torch.onnx.symbolic_helper import parse_args


@parse_args("v", "v", "f", "i")
def symbolic_foo_forward(g, input1, input2, attr1, attr2):
    return g.op("custom_domain::Foo", input1, input2, attr1_f=attr1, attr2_i=attr2)


register_custom_op_symbolic("custom_ops::foo_forward", symbolic_foo_forward, 9)
