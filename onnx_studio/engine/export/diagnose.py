"""Find what will go wrong before (or after) an export, in terms the user can act on.

Two halves:

- `scan_source` reads the model's Python file (without running it) for the pitfalls the
  `torch.onnx` documentation warns about: NumPy in `forward`, `.item()`, `.data`, and in-place
  arithmetic on values taken from `tensor.shape`.
- `unsupported_operators` lists *every* operator the chosen exporter cannot convert, where the
  exporter itself stops at the first.
"""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path
from typing import Any

from onnx_studio.engine import torch_private

PITFALL_CATEGORY = "ExportPitfall"


def _warning(path: Path, line: int, message: str) -> dict[str, Any]:
    return {"category": PITFALL_CATEGORY, "message": message, "source": f"{path}:{line}"}


class _ForwardScanner(ast.NodeVisitor):
    """Walks one traced function body and records the seed's pitfalls with their lines."""

    def __init__(self, path: Path, numpy_names: set[str]) -> None:
        self.path = path
        self.numpy_names = numpy_names
        self.shape_names: set[str] = set()
        self.found: list[dict[str, Any]] = []

    def add(self, node: ast.AST, message: str) -> None:
        self.found.append(_warning(self.path, getattr(node, "lineno", 0), message))

    @staticmethod
    def _is_shape_value(node: ast.AST) -> bool:
        """x.shape, x.shape[i], x.shape[:2], x.size(), x.size(i)."""
        while isinstance(node, ast.Subscript):
            node = node.value
        if isinstance(node, ast.Attribute) and node.attr == "shape":
            return True
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "size"
        )

    def visit_Assign(self, node: ast.Assign) -> None:
        from_shape = self._is_shape_value(node.value) or (
            isinstance(node.value, ast.Name) and node.value.id in self.shape_names
        )
        if from_shape:
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        self.shape_names.add(name.id)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name) and node.target.id in self.shape_names:
            self.add(node, f"In-place `{node.target.id} {_OPS.get(type(node.op), '?')}= ...` on a "
                     "value taken from tensor.shape: in tracing it shares memory with the shape "
                     f"and can give wrong results; write `{node.target.id} = "
                     f"{node.target.id} {_OPS.get(type(node.op), '+')} ...` instead.")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.value.id in self.numpy_names:
            self.add(node, f"NumPy call `{node.value.id}.{node.attr}` in forward: tracing turns "
                     "NumPy values into constants; use the torch operator on tensors instead.")
        elif node.attr == "data" and not isinstance(node.ctx, ast.Store):
            self.add(node, "`.data` in forward can produce an incorrect trace; use "
                     "`.detach()` instead.")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and not node.args:
            if func.attr == "item":
                self.add(node, "`.item()` in forward becomes a constant when traced; pass the "
                         "tensor itself (torch casts single-element tensors implicitly).")
            elif func.attr in ("numpy", "tolist"):
                self.add(node, f"`.{func.attr}()` in forward leaves the graph: the value is "
                         "frozen as a constant; keep the computation in torch tensors.")
        self.generic_visit(node)


_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//"}


def used_class_names(module: Any) -> set[str]:
    """Class names of a module and all its submodules (scripted ones by their original name)."""
    modules = module.modules() if hasattr(module, "modules") else [module]
    return {getattr(m, "original_name", None) or type(m).__name__ for m in modules}


def _with_bases(tree: ast.Module, wanted: set[str]) -> set[str]:
    bases = {
        node.name: {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                    for b in node.bases}
        for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
    }
    found, todo = set(), list(wanted)
    while todo:
        name = todo.pop()
        if name in bases and name not in found:
            found.add(name)
            todo += bases[name]
    return found


def scan_source(path: Path, classes: set[str] | None = None) -> list[dict[str, Any]]:
    """Pitfall warnings (category ExportPitfall, source file:line) for a model's .py file:
    the `forward` of every class in `classes` and its bases (all classes when None)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []  # loading the source reports the real error
    numpy_names = {"numpy"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            numpy_names |= {a.asname or a.name for a in node.names if a.name == "numpy"}
    wanted = None if classes is None else _with_bases(tree, classes)
    found: list[dict[str, Any]] = []
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef) or (wanted is not None and cls.name not in wanted):
            continue
        for node in cls.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) \
                    and node.name == "forward":
                scanner = _ForwardScanner(path, numpy_names)
                for stmt in node.body:
                    scanner.visit(stmt)
                found += scanner.found
    seen: set[tuple[str, str]] = set()
    unique = []
    for w in found:
        key = (w["source"], w["message"])
        if key not in seen:
            seen.add(key)
            unique.append(w)
    return unique


# ---------------------------------------------------------------------------- warning hints

# What to change for the warnings exporters give most often (matched on the message start).
_HINTS = (
    ("Converting a tensor to a Python boolean",
     "An `if` on a tensor value is frozen by tracing: use torch.where, torch.cond, or the "
     "dynamo exporter, which captures such branches or says where it cannot."),
    ("Converting a tensor to a Python",
     "A tensor turned into a Python number is baked in as a constant: keep the value a tensor "
     "(torch casts single-element tensors implicitly), e.g. x.reshape(y, -1)."),
    ("Converting a tensor to a NumPy array",
     "NumPy values become constants: do the computation with torch operators instead."),
    ("torch.tensor results are registered as constants",
     "A torch.tensor(...) built from Python values is fixed in the graph: derive it from the "
     "inputs with torch operators if it should change."),
    ("Iterating over a tensor",
     "The loop count is fixed by the example input's size: use the scripted exporter for a "
     "real loop, or vectorize the loop."),
    ("Using len to get tensor shape",
     "Use tensor.shape[0] instead of len(tensor) so the size stays symbolic."),
    ("Exporting a model to ONNX with a batch_size other than 1",
     "Export with batch size 1, or pass the initial states (h0/c0) as model inputs."),
    ("Output nr",
     "This output does not depend on the inputs in the trace; check it is what you expect."),
)


def hint_for(message: str) -> str:
    """What to change for a known exporter or tracer warning ("" when there is no advice)."""
    for start, hint in _HINTS:
        if message.startswith(start):
            return hint
    return ""


# ---------------------------------------------------------------------------- operators

_TS_UNSUPPORTED = re.compile(r"Exporting the operator '([\w:.]+)' to ONNX opset version")
_DYNAMO_NO_FUNCTION = re.compile(
    r"No ONNX function found for <OpOverload\(op='([\w.]+)', overload='(\w+)'")
# the TorchScript exporter on an operator outside aten/prim (a custom op without a symbolic)
_TS_UNKNOWN_NAMESPACE = re.compile(r"operator with unrecognized namespace ([\w:.]+?)\.?(?:\s|$)")
_BUILTIN_NAMESPACES = ("aten", "prim", "quantized", "onnx")


def ops_named_in_error(message: str) -> list[str]:
    """The operator(s) an exporter's error message names."""
    dynamo = {f"{op}.{overload}" for op, overload in _DYNAMO_NO_FUNCTION.findall(message)}
    return sorted(set(_TS_UNSUPPORTED.findall(message)) | dynamo
                  | set(_TS_UNKNOWN_NAMESPACE.findall(message)))


def is_custom_op(op: str) -> bool:
    """Whether an operator name ("custom_ops::foo", "mylib.foo.default") is a custom op, not
    one of torch's own namespaces."""
    namespace = re.split(r"::|\.", op, maxsplit=1)[0]
    return namespace not in _BUILTIN_NAMESPACES


def unsupported_operators_torchscript(
    module: Any, args: tuple[Any, ...], opset: int, operator_export_type: str = "ONNX"
) -> list[str]:
    """Every operator the TorchScript exporter leaves unconverted at `opset`.

    The exporter stops at the first; exported again with ONNX_FALLTHROUGH it keeps each one as
    an `org.pytorch.<namespace>` node instead, which is exactly its own verdict for all of them.
    """
    import io

    import onnx
    import torch

    if operator_export_type != "ONNX":
        return []  # the other modes keep unconvertible operators instead of failing
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, buffer, dynamo=False, opset_version=opset,  # type: ignore[arg-type]
                          operator_export_type=torch.onnx.OperatorExportTypes.ONNX_FALLTHROUGH)
    model = onnx.load_from_string(buffer.getvalue())
    missing: set[str] = set()

    def walk(graph: Any) -> None:
        for node in graph.node:
            if node.domain.startswith("org.pytorch."):
                missing.add(f"{node.domain.removeprefix('org.pytorch.')}::{node.op_type}")
            for attr in node.attribute:
                for sub in [attr.g, *attr.graphs] if attr.HasField("g") else attr.graphs:
                    walk(sub)

    walk(model.graph)
    return sorted(missing)


def unsupported_operators_dynamo(
    module: Any,
    args: tuple[Any, ...],
    dynamic_shapes: Any,
    opset: int | None,
    custom_translation_table: dict[Any, Any] | None = None,
) -> list[str]:
    """Every operator of the captured program that has no ONNX translation after decomposition."""
    import torch

    exported = (
        module if isinstance(module, torch.export.ExportedProgram)
        else torch.export.export(module, args, dynamic_shapes=dynamic_shapes, strict=False)
    )
    torchlib = torch_private.torchlib_opset()
    registry = torch_private.onnx_registry(max(opset or torchlib, torchlib))
    for torch_op, onnx_op in (custom_translation_table or {}).items():
        registry.register_op(torch_op, onnx_op, is_complex=False)
    program = torch_private.prepare_for_onnx(exported, registry)
    missing: set[str] = set()
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        try:
            function, _ = torch_private.dispatch(node, registry)
        except Exception:  # a dispatcher crash means no usable translation either
            function = None
        if function is None:
            missing.add(str(node.target))
    return sorted(missing)


def unsupported_hint(exporter: str, ops: list[str]) -> str:
    custom = [op for op in ops if is_custom_op(op)]
    if custom:
        return _custom_op_hint(exporter, custom)
    other = "torchscript" if exporter == "dynamo" else "dynamo"
    names = ", ".join(ops) if ops else "the operator above"
    return (
        f"Rewrite the model to avoid {names}, try exporter = \"{other}\" or another opset, or "
        "register a translation in an extension file (export.extensions): "
        + ("a `custom_translation_table` dict for dynamo." if exporter == "dynamo"
           else "torch.onnx.register_custom_op_symbolic for torchscript.")
    )


def _custom_op_hint(exporter: str, ops: list[str]) -> str:
    """What a custom operator needs: a symbolic (TorchScript) or a translation (dynamo)."""
    names = ", ".join(ops)
    if exporter == "dynamo":
        return (f"{names} is a custom operator: give the dynamo exporter its translation, a "
                "`custom_translation_table = {torch.ops.<namespace>.<op>.default: "
                "onnxscript_function}` dict in an extension file (export.extensions).")
    qualified = ops[0].replace(".", "::", 1) if "::" not in ops[0] else ops[0]
    return (f"{names} is a custom operator without an ONNX symbolic: register one in an "
            f"extension file (export.extensions) with torch.onnx.register_custom_op_symbolic("
            f"\"{qualified}\", symbolic, opset), or use the dynamo exporter with a "
            "`custom_translation_table` entry for it.")
