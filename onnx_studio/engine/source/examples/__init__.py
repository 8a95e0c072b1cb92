"""The seed documents' models as ready-made sources: `example:<name>`.

This package imports no torch: the window lists the gallery from `EXAMPLES` alone, and each
model module is imported only when `Example.factory()` is called (in the worker).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_studio.engine import shipped

_HERE = Path(__file__).resolve().parent
RECIPES = shipped.recipes_dir()  # one recipe for each example, named after it


@dataclass(frozen=True)
class Example:
    name: str
    title: str
    description: str
    module: str  # file in this package that defines the model (imported lazily)
    factory_name: str  # class or function in that module that builds the model
    forward_params: tuple[str, ...]
    exporter: str  # the exporter its recipe uses
    # What the seed says happens, for the gallery and the tests: "exports", "wrong_values"
    # (exports, but ONNX Runtime disagrees with PyTorch) or the export's error kind.
    expected: str = "exports"

    @property
    def recipe(self) -> Path:
        return RECIPES / f"{self.name}.toml"

    @property
    def source_file(self) -> Path:
        return _HERE / f"{self.module}.py"

    def factory(self) -> Callable[..., Any]:
        """The class or function that builds the model (imports torch)."""
        module = importlib.import_module(f"{__name__}.{self.module}")
        return getattr(module, self.factory_name)

    def build(self, **kwargs: Any) -> Any:
        """A fresh model (random weights) in eval mode."""
        return self.factory()(**kwargs).eval()


_ALL = (
    Example("alexnet", "AlexNet",
            "torchvision's AlexNet, reproduced layer for layer (random weights); the seed's "
            "end-to-end example.", "alexnet", "AlexNet", ("x",), "dynamo"),
    Example("loop_traced", "LoopModel (traced)",
            "A Python for-loop over a tensor count; tracing unrolls it into a chain of Adds "
            "fixed to the example count.", "loops", "LoopModel", ("x", "y"), "torchscript"),
    Example("loop_scripted", "LoopModel2 (scripted loop)",
            "The same loop in a torch.jit.script function: exported as an ONNX Loop that "
            "honours any loop count.", "loops", "LoopModel2", ("x", "y"), "torchscript"),
    Example("inplace_index", "In-place indexed assignment",
            "data[1] = new_data, supported from ONNX opset 11 (ScatterND).",
            "inplace", "InPlaceIndexedAssignment", ("data", "new_data"), "torchscript"),
    Example("inplace_scatter", "In-place scatter (older workaround)",
            "The older seed's workaround for indexed assignment: data.scatter_ with an "
            "index input.", "inplace", "InPlaceIndexedAssignmentONNX",
            ("data", "index", "new_data"), "torchscript"),
    Example("list_loop", "ListLoopModel (tensor lists)",
            "A scripted loop that builds lists of tensors: ONNX Sequence ops, opset 11+.",
            "lists", "ListLoopModel", ("x",), "torchscript"),
    Example("split_list", "Split into a list",
            "torch.split into a known number of pieces: exportable without tensor lists.",
            "lists", "AnotherModel", ("x",), "dynamo"),
    Example("unbind", "Unbind",
            "x.unbind(0): the seed calls it not exportable; current exporters manage it.",
            "lists", "UnbindModel", ("x",), "dynamo"),
    Example("lstm", "LSTM with a dynamic sequence axis",
            "The FAQ's 4-layer bidirectional LSTM; the sequence length is a dynamic axis.",
            "lstm", "LSTMModel", ("input", "h0", "c0"), "torchscript"),
    Example("implicit_cast", "Implicit scalar cast",
            "A ScriptModule adding Python scalars to a float tensor; the FAQ's type "
            "propagation case.", "implicit_cast", "ImplicitCastType", ("x",), "torchscript"),
    Example("custom_op", "Custom operator",
            "A custom op (custom_ops::foo_forward) exported as custom_domain::Foo by a "
            "symbolic registered in an extension file.", "custom_op", "FooModel",
            ("input1", "input2"), "torchscript"),
    Example("autograd_function", "autograd.Function with symbolic",
            "MyRelu, a torch.autograd.Function whose static symbolic() emits ONNX Clip.",
            "autograd_function", "MyReluModel", ("x",), "torchscript"),
    Example("item_reshape", "Pitfall: .item() in forward",
            "x.reshape(y.item(), -1): tracing bakes y in, so the ONNX file ignores it; "
            "validation catches it when y changes. The dynamo exporter keeps y.",
            "pitfalls", "ItemReshape", ("x", "y"), "torchscript", expected="wrong_values"),
    Example("shape_inplace", "Pitfall: in-place arithmetic on a shape",
            "seq += 2 on a value from tensor.shape: traced, it changes the shape it came from "
            "and the file computes the wrong length. The dynamo exporter gets it right.",
            "pitfalls", "ShapeInplace", ("states",), "torchscript", expected="wrong_values"),
    Example("unconvertible", "Unconvertible operators",
            "lgamma and digamma: neither exporter converts them, so export fails and lists "
            "both.", "unconvertible", "GammaModel", ("x",), "dynamo",
            expected="unsupported_operator"),
)

EXAMPLES: dict[str, Example] = {e.name: e for e in _ALL}
