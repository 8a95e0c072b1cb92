"""The code-bearing text of a serialized ExportedProgram (`.pt2`'s program JSON) checked
against the forms torch writes: call targets the export verifier accepts, sympy expressions,
guards, tree specs and identifiers that are pasted into code, and plain strings elsewhere.
Anything else is a problem, said in a few words (`program_problems`).
"""

from __future__ import annotations

import ast
import json
import keyword
import re
from typing import Any

__all__ = ["PLAIN", "program_problems"]

PLAIN = re.compile(r"[^'\"\\\x00-\x1f\x7f]*")  # no quotes, backslashes or control chars

# sympy names torch's serializer writes (srepr) plus the functions torch adds for sympify
_SYMPY_CALLS = frozenset({
    "Symbol", "Dummy", "Integer", "Float", "Rational", "Add", "Mul", "Pow", "Max", "Min",
    "Abs", "Mod", "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "Equality", "Unequality",
    "StrictLessThan", "StrictGreaterThan", "LessThan", "GreaterThan", "And", "Or", "Not",
    "Xor", "floor", "ceiling", "sqrt", "Piecewise", "ExprCondPair",
    "FloorDiv", "ModularIndexing", "Where", "PythonMod", "CleanDiv", "CeilToInt",
    "FloorToInt", "CeilDiv", "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv",
    "IntTrueDiv", "IsNonOverlappingAndDenseIndicator", "TruncToFloat", "TruncToInt",
    "RoundToInt", "RoundDecimal", "ToFloat", "Identity",
})
_GUARD_CALLS = frozenset({"max", "min", "abs", "int", "float", "round",
                          "IsNonOverlappingAndDenseIndicator",
                          "cast_symbool_to_symint_guardless"})
_GUARD_METHODS = frozenset({"size", "stride", "storage_offset", "dim", "numel"})
_SYM_FUNCS = frozenset({"sym_int", "sym_float", "sym_ite", "sym_max", "sym_min", "sym_not",
                        "sym_sqrt", "sym_sum"})
_EXPR_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
               ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context)
# call_function targets the export verifier accepts (torch/_export/verifier.py)
_TORCH_OPS = re.compile(r"torch\.ops\.(?!__)\w+\.\w+(\.(?!__)\w+)?")
_OPERATOR_TARGETS = frozenset({
    "getitem", "add", "mul", "sub", "truediv", "ge", "le", "gt", "lt", "eq", "ne",
    "floordiv", "mod", "and_", "or_", "not_", "pow", "neg", "abs", "lshift", "rshift"})
_TORCH_TARGETS = frozenset({
    *(f"torch.{name}" for name in _SYM_FUNCS),
    "torch._C._set_grad_enabled", "torch.autograd.grad_mode.set_grad_enabled",
    "torch.amp.autocast_mode._enter_autocast", "torch.amp.autocast_mode._exit_autocast",
    "torch.fx.experimental.symbolic_shapes.cast_symbool_to_symint_guardless",
    "torch.export.custom_ops._call_custom_autograd_function_in_pre_dispatch"})
_PREDISPATCH = re.compile(r"torch\._functorch\.predispatch\.(?!__)\w+")


def program_problems(data: bytes) -> list[str]:
    """The code-bearing texts of a serialized ExportedProgram (JSON) that are not of the form
    torch writes, each said in a few words; none for a text torch cannot read either."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return []  # torch cannot read it either: loading fails before anything from it runs
    except RecursionError:
        doc = None
    problems: list[str] = []
    try:
        _walk_program(doc, "", problems)
    except RecursionError:
        problems.append("nested too deeply to check")
    return problems


def _walk_program(node: Any, key: str, problems: list[str], in_node: bool = False) -> None:
    """Collect the code-bearing text of a program (see the module docstring) that is not
    of the form torch writes. Strings elsewhere must be plain: no quotes or backslashes."""
    if isinstance(node, list):
        for item in node:
            _walk_program(item, key, problems, in_node)
        return
    if isinstance(node, str):
        # a node's string arguments reach the generated code through repr(): any text is fine
        if not (PLAIN.fullmatch(node) or (in_node and key in ("as_string", "as_strings"))):
            problems.append(f"{key} {node[:40]!r}")
        return
    if not isinstance(node, dict):
        return
    if isinstance(node.get("target"), str) and "inputs" in node:  # a graph node
        in_node = True
        if not _target_ok(node["target"]):
            problems.append(f"target {node['target'][:60]!r}")
        for item in node["inputs"] if isinstance(node["inputs"], list) else []:
            name = item.get("name", "") if isinstance(item, dict) else ""
            if name != "" and not _identifier(name):  # keyword names are pasted into code
                problems.append(f"argument name {str(name)[:40]!r}")
    for k, v in node.items():
        if not isinstance(k, str) or not PLAIN.fullmatch(k):
            problems.append(f"key {str(k)[:40]!r}")
        elif k == "metadata":
            continue  # stack traces and module paths: kept as text, never evaluated
        elif k == "target" and in_node:
            continue
        elif k == "expr_str":
            if not (isinstance(v, str) and _sympy_ok(v)):
                problems.append(f"expr_str {str(v)[:40]!r}")
        elif k == "guards_code":
            for guard in v if isinstance(v, list) else [v]:
                if not (isinstance(guard, str) and _guard_ok(guard)):
                    problems.append(f"guards_code {str(guard)[:40]!r}")
        elif k in ("in_spec", "out_spec"):
            if not (isinstance(v, str) and _treespec_ok(v)):
                problems.append(f"{k} {str(v)[:40]!r}")
        elif k == "forward_arg_names":
            for arg in v if isinstance(v, list) else [v]:
                if not _identifier(arg):
                    problems.append(f"forward_arg_names {str(arg)[:40]!r}")
        else:
            _walk_program(v, k, problems, in_node)


def _identifier(value: Any) -> bool:
    return isinstance(value, str) and value.isidentifier() and not keyword.iskeyword(value)


def _target_ok(target: str) -> bool:
    if target.startswith("#"):  # extension ops: resolved only by handlers registered in code
        return True
    if _TORCH_OPS.fullmatch(target) or _PREDISPATCH.fullmatch(target):
        return True
    module, _, name = target.partition(".")
    if module == "_operator":
        return name in _OPERATOR_TARGETS
    if module == "math":
        return name in ("ceil", "floor", "trunc")
    return target in _TORCH_TARGETS


def _treespec_ok(text: str) -> bool:
    """A pytree spec (JSON) whose strings, and the keys in its contexts, are all plain."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return False
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if k == "context" and isinstance(v, str):
                    try:
                        stack.append(json.loads(v))
                        continue
                    except (ValueError, RecursionError):
                        pass
                stack += [k, v]
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str) and not PLAIN.fullmatch(item):
            return False
    return True


def _parse(text: str) -> ast.Expression | None:
    if not text.isascii() or not _PRINTABLE.fullmatch(text):
        return None
    try:
        return ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


_PRINTABLE = re.compile(r"[\x20-\x7e]*")


def _sympy_ok(text: str) -> bool:
    """A symbolic size as torch writes it: sympy calls, numbers, symbols, operators."""
    tree = _parse(text)
    if tree is None:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in _SYMPY_CALLS):
                return False
            for kw in node.keywords:
                value = kw.value
                if isinstance(value, ast.UnaryOp):
                    value = value.operand
                if (kw.arg is None or kw.arg.startswith("_") or not isinstance(value, ast.Constant)
                        or isinstance(value.value, (str, bytes))):
                    return False
        elif isinstance(node, ast.Name):
            if node.id.startswith("_"):
                return False
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, bytes) or (
                    isinstance(node.value, str) and not re.fullmatch(r"[\w.+\-]*", node.value)):
                return False
        elif not isinstance(node, (*_EXPR_NODES, ast.keyword)):
            return False
    return True


def _guard_ok(text: str) -> bool:
    """A guard as torch writes it, e.g. "L['y'].size()[0] <= L['x'].size()[0]"."""
    tree = _parse(text)
    if tree is None:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if node.keywords or not (
                    (isinstance(func, ast.Name) and func.id in _GUARD_CALLS)
                    or isinstance(func, ast.Attribute)):  # attributes are checked below
                return False
        elif isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name) and base.id == "math":
                if not re.fullmatch(r"[a-z]\w*", node.attr):
                    return False
            elif isinstance(base, ast.Name) and base.id == "torch":
                if node.attr not in _SYM_FUNCS:
                    return False
            elif node.attr not in _GUARD_METHODS:
                return False
        elif isinstance(node, ast.Name):
            if node.id not in {"L", "math", "torch", *_GUARD_CALLS}:
                return False
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, bytes) or (
                    isinstance(node.value, str) and not re.fullmatch(r"\w+", node.value)):
                return False
        elif not isinstance(node, (*_EXPR_NODES, ast.Subscript)):
            return False
    return True
