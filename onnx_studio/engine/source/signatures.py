"""forward()'s parameters read from a model file without running it.

A .py class: its forward() as written (ast), and a guess of the first tensor's shape from
the first layer its `__init__` builds (Linear in_features, Conv2d in_channels, Embedding's
vocabulary, ...). A .pt2: the serialized ExportedProgram's inputs (models/model.json, read with
`json`: names, shapes, dtypes, dynamic axes, constants, keyword or not). A TorchScript archive:
the forward() its compiled code records (`code/`, read with `ast`; the top module's class
named by data.pkl's first global, read with `pickletools`). Nothing is unpickled, imported or
evaluated: onnx_studio.engine.source.load is the only place a model is loaded.
"""

from __future__ import annotations

import ast
import io
import json
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ForwardParam:
    """One parameter of forward() as written: how it is passed, its default and annotation
    as source text ("" when absent), so the form can offer keyword inputs and constants.

    What the file says of a tensor's example: `shape` (guessed from a .py model's first layer,
    read from a .pt2's example inputs), `dtype` (int64 for an embedding's ids: the "auto"
    fill keeps them below its vocabulary) and `dynamic` axes (axis as text -> dimension name,
    from a .pt2). A .pt2 lists one parameter per input leaf, a nested one named with dots
    ("inputs.ids")."""

    name: str
    kind: str  # positional | keyword (keyword-only) | var_positional | var_keyword
    default: str | None = None  # the default's source text; None: no default
    annotation: str = ""
    shape: list[int] | None = None
    dtype: str = ""
    dynamic: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------- .py (ast)


def forward_signature(tree: ast.Module, class_name: str) -> list[ForwardParam]:
    """The parameters of `class_name`'s forward (inherited from a base in the same file),
    without self, its tensors' shapes guessed from the first layer; [] without a forward."""
    fwd = _method(tree, class_name, "forward")
    if fwd is None:
        return []
    params = signature_of(fwd)
    guess = first_layer_input(tree, class_name)
    if guess is not None:
        for param in params:
            if param.kind in ("positional", "keyword") and _tensor_like(param):
                param.shape, param.dtype = guess
    return params


def signature_of(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ForwardParam]:
    """A method's parameters without self, as written."""
    args = func.args

    def text(node: ast.expr | None) -> str:
        return ast.unparse(node) if node is not None else ""

    positional = [*args.posonlyargs, *args.args][1:]  # without self
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = [ForwardParam(a.arg, "positional", text(d) if d is not None else None,
                        text(a.annotation)) for a, d in zip(positional, defaults, strict=True)]
    if args.vararg is not None:
        out.append(ForwardParam(args.vararg.arg, "var_positional", None,
                                text(args.vararg.annotation)))
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append(ForwardParam(a.arg, "keyword", text(d) if d is not None else None,
                                text(a.annotation)))
    if args.kwarg is not None:
        out.append(ForwardParam(args.kwarg.arg, "var_keyword", None, text(args.kwarg.annotation)))
    return out


def base_name(node: ast.expr) -> str:
    """The last name of a class or call expression (nn.Linear -> Linear, Generic[T] -> Generic)."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript):
        return base_name(node.value)
    return ""


def _method(tree: ast.Module, class_name: str,
            method: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """`class_name`'s `method`, or the one it inherits from a base class in the same file."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    seen: set[str] = set()
    current: str | None = class_name
    while current in classes and current not in seen:
        seen.add(current)
        cls = classes[current]
        found = next((f for f in cls.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                      and f.name == method), None)
        if found is not None:
            return found
        current = next((b for b in map(base_name, cls.bases) if b in classes), None)
    return None


TENSOR_ANNOTATIONS = ("Tensor", "torch.Tensor")


def _tensor_like(param: ForwardParam) -> bool:
    """A parameter the first layer could take: annotated Tensor, or bare without a default."""
    if param.annotation:
        return param.annotation in TENSOR_ANNOTATIONS
    return param.default is None


# the first layer's constructor argument that sizes the input, and the shape it implies
_FEATURES = {"Linear": "in_features", "Bilinear": "in1_features", "LazyLinear": "",
             "Conv1d": "in_channels", "Conv2d": "in_channels", "Conv3d": "in_channels",
             "ConvTranspose1d": "in_channels", "ConvTranspose2d": "in_channels",
             "ConvTranspose3d": "in_channels", "BatchNorm1d": "num_features",
             "BatchNorm2d": "num_features", "BatchNorm3d": "num_features",
             "Embedding": "num_embeddings", "LSTM": "input_size", "GRU": "input_size",
             "RNN": "input_size", "LayerNorm": "normalized_shape",
             "TransformerEncoderLayer": "d_model", "TransformerEncoder": ""}
SEQUENCE = 8  # the length of a guessed sequence axis
SPATIAL = {1: [64], 2: [32, 32], 3: [8, 32, 32]}  # guessed spatial axes of a convolution


def first_layer_input(tree: ast.Module, class_name: str) -> tuple[list[int], str] | None:
    """(shape, dtype) of an input the first sized layer that `class_name`'s
    __init__ builds would take (in source order); None when no layer says."""
    init = _method(tree, class_name, "__init__")
    if init is None:
        return None
    ints = _int_defaults(init)
    calls = sorted((n for n in ast.walk(init) if isinstance(n, ast.Call)),
                   key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        layer = base_name(call.func)
        keyword = _FEATURES.get(layer)
        if not keyword:
            continue
        size = _int_argument(call, keyword, ints)
        if size is None or size <= 0:
            continue
        return _layer_shape(layer, size, _flag(call, "batch_first"))
    return None


def _layer_shape(layer: str, size: int, batch_first: bool) -> tuple[list[int], str]:
    if layer == "Embedding":
        return [1, SEQUENCE], "int64"
    if layer in ("LSTM", "GRU", "RNN", "TransformerEncoderLayer"):
        return ([1, SEQUENCE, size] if batch_first else [SEQUENCE, 1, size]), "float32"
    rank = layer[-2:-1]
    if layer.startswith(("Conv", "BatchNorm")) and rank.isdigit() and int(rank) in SPATIAL:
        if layer.startswith("BatchNorm") and rank == "1":
            return [1, size], "float32"
        return [1, size, *SPATIAL[int(rank)]], "float32"
    return [1, size], "float32"


def _int_defaults(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, int]:
    """__init__'s parameters with an int default (a layer sized by one is sized by default)."""
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults,
                     strict=True))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
              if d is not None]
    out = {}
    for arg, default in pairs:
        value = _literal(default)
        if isinstance(value, int) and not isinstance(value, bool):
            out[arg.arg] = value
    return out


def _int_argument(call: ast.Call, keyword: str, ints: dict[str, int]) -> int | None:
    node = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg == keyword), None)
    if node is None:
        return None
    if isinstance(node, ast.Name):
        return ints.get(node.id)
    value = _literal(node)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _flag(call: ast.Call, name: str) -> bool:
    return any(k.arg == name and _literal(k.value) is True for k in call.keywords)


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


# ---------------------------------------------------------------------------- .pt2 (json)

# torch._export.serde.schema.ScalarType -> dtype name
_PT2_DTYPES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float16",
               7: "float32", 8: "float64", 9: "complex32", 10: "complex64", 11: "complex128",
               12: "bool", 13: "bfloat16", 28: "uint16", 34: "uint32", 35: "uint64"}
_SYMBOL = re.compile(r"^Symbol\('(\w+)'")
_CONSTANTS = {"as_int": int, "as_float": float, "as_bool": bool, "as_string": str}


def pt2_signature(path: Path) -> list[ForwardParam]:
    """The user inputs of a .pt2's program, one per leaf in the order the program takes them:
    a tensor with its example's shape, dtype and dynamic axes (a symbolic size is named
    "batch" on the first axis it appears first on, dim1, dim2, ... elsewhere; the same symbol
    the same name), a constant with its value as the default. [] when it cannot be read."""
    try:
        with zipfile.ZipFile(path) as archive:
            name = next(n for n in archive.namelist() if n.endswith("/models/model.json"))
            data = json.loads(archive.read(name))
        module = data["graph_module"]
        leaves = [spec for spec in module["signature"]["input_specs"]
                  if "user_input" in spec or "constant_input" in spec]
        tensors = module["graph"]["tensor_values"]
        names = _leaf_names(module, len(leaves))
    except (zipfile.BadZipFile, OSError, StopIteration, KeyError, TypeError, ValueError,
            AttributeError):
        return []
    symbols: dict[str, str] = {}
    out = []
    for spec, (leaf, keyword) in zip(leaves, names, strict=True):
        kind = "keyword" if keyword else "positional"
        try:
            if "constant_input" in spec:
                value = _pt2_constant(spec["constant_input"]["value"])
                out.append(ForwardParam(leaf, kind, repr(value), type(value).__name__))
                continue
            arg = spec["user_input"]["arg"]
            if "as_tensor" not in arg:
                value = _pt2_constant(arg)
                out.append(ForwardParam(leaf, kind, repr(value), type(value).__name__))
                continue
            meta = tensors[arg["as_tensor"]["name"]]
            shape, dynamic = _pt2_sizes(meta["sizes"], symbols)
            out.append(ForwardParam(leaf, kind, None, "Tensor", shape,
                                    _PT2_DTYPES.get(meta.get("dtype"), "float32"), dynamic))
        except (KeyError, TypeError, ValueError, AttributeError):
            out.append(ForwardParam(leaf, kind, None, "Tensor"))
    return out


def _pt2_constant(value: dict[str, Any]) -> Any:
    if "as_none" in value:
        return None
    for key, kind in _CONSTANTS.items():
        if key in value and isinstance(value[key], kind):
            return value[key]
    raise ValueError(f"not a plain constant: {sorted(value)}")


def _pt2_sizes(sizes: list[dict[str, Any]], symbols: dict[str, str]
               ) -> tuple[list[int], dict[str, str]]:
    shape: list[int] = []
    dynamic: dict[str, str] = {}
    for axis, size in enumerate(sizes):
        if "as_int" in size:
            shape.append(int(size["as_int"]))
            continue
        expr = size["as_expr"]
        shape.append(int(expr["hint"]["as_int"]))
        match = _SYMBOL.match(expr.get("expr_str", ""))
        if match is None:  # a size derived from others (2*s0): follows them, not an axis of its own
            continue
        symbol = match.group(1)
        if symbol not in symbols:
            symbols[symbol] = ("batch" if axis == 0 and "batch" not in symbols.values()
                               else f"dim{len(symbols) + 1}")
        dynamic[str(axis)] = symbols[symbol]
    return shape, dynamic


def _leaf_names(module: dict[str, Any], count: int) -> list[tuple[str, bool]]:
    """(dotted name, keyword) of each input leaf, from the root call's in_spec (its args and
    kwargs tree) and forward_arg_names; the flat inputs' own names when those do not fit."""
    try:
        root = next(c for c in module["module_call_graph"] if c["fqn"] == "")
        signature = root["signature"]
        version, tree = json.loads(signature["in_spec"])
        arg_names = list(signature.get("forward_arg_names") or [])
        args, kwargs = tree["children_spec"]
        out: list[tuple[str, bool]] = []
        for i, child in enumerate(args["children_spec"]):
            base = arg_names[i] if i < len(arg_names) else f"arg{i}"
            out += [(n, False) for n in _tree_leaves(child, base)]
        keys = json.loads(kwargs["context"])
        for key, child in zip(keys, kwargs["children_spec"], strict=True):
            out += [(n, True) for n in _tree_leaves(child, str(key))]
        if len(out) == count and version == 1:
            return out
    except (StopIteration, KeyError, TypeError, ValueError):
        pass
    specs = [s for s in module["signature"]["input_specs"]
             if "user_input" in s or "constant_input" in s]
    names = []
    for i, spec in enumerate(specs):
        arg = spec.get("user_input", {}).get("arg", {})
        inner = next(iter(arg.values()), None) if isinstance(arg, dict) and arg else None
        names.append((inner["name"] if isinstance(inner, dict) and "name" in inner
                      else spec.get("constant_input", {}).get("name", f"arg{i}"), False))
    return names


def _tree_leaves(node: dict[str, Any], name: str) -> list[str]:
    children = node.get("children_spec") or []
    if node.get("type") is None or not children:
        return [name] if node.get("type") is None else []
    keys: list[Any] = list(range(len(children)))
    if node["type"] == "builtins.dict":
        keys = json.loads(node["context"])
    out = []
    for key, child in zip(keys, children, strict=True):
        out += _tree_leaves(child, f"{name}.{key}")
    return out


# ---------------------------------------------------------------------------- TorchScript


def torchscript_signature(path: Path) -> list[ForwardParam]:
    """The parameters without a default of the forward() a TorchScript archive's top module
    records, with their types (a scripted model's first layer's size where its code keeps it);
    [] when it cannot be read. Those with a default keep it: the exporter passes a loaded
    TorchScript module tensors only (a module wrapping one to add constants cannot be traced)."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            pickle_name = next(n for n in names if n.count("/") == 1
                               and n.endswith("/data.pkl"))
            root = pickle_name.split("/", 1)[0]
            module, cls = _first_global(archive.read(pickle_name))
            code = archive.read(f"{root}/code/{module.replace('.', '/')}.py").decode("utf-8")
            sources = {n for n in names if n.startswith(f"{root}/code/") and n.endswith(".py")}
            tree = ast.parse(code)
            fwd = _method(tree, cls, "forward")
            if fwd is None:
                return []
            params = [p for p in signature_of(fwd) if p.default is None]
            for param in params:
                param.annotation = param.annotation.replace("torch.", "")
            size = _scripted_first_layer(archive, root, tree, cls, sources)
    except (zipfile.BadZipFile, OSError, StopIteration, KeyError, ValueError, SyntaxError,
            UnicodeDecodeError):
        return []
    if size is not None:
        for param in params:
            if param.annotation == "Tensor" and param.default is None:
                param.shape, param.dtype = size
    return params


def _first_global(data: bytes) -> tuple[str, str]:
    """data.pkl's first global: (module, class) of the archive's top module."""
    import pickletools  # only a TorchScript archive is read with it (not the window's start)

    strings: list[str] = []
    for opcode, arg, _ in pickletools.genops(io.BytesIO(data)):
        if opcode.name == "GLOBAL" and isinstance(arg, str):
            module, _, name = arg.partition(" ")
            return module, name
        if opcode.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE") and isinstance(arg, str):
            strings.append(arg)
        if opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
            return strings[-2], strings[-1]
    raise ValueError("no global in data.pkl")


def _scripted_first_layer(archive: zipfile.ZipFile, root: str, tree: ast.Module, cls: str,
                          sources: set[str]) -> tuple[list[int], str] | None:
    """A scripted model's first submodule (its class body's first `name : __torch__...`
    attribute) whose code keeps the sizing constant (`in_features : Final[int] = 4`)."""
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if node is None:
        return None
    candidates = [(cls, tree)]
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and ast.unparse(item.annotation).startswith(
                "__torch__."):
            module, _, name = ast.unparse(item.annotation).rpartition(".")
            file = f"{root}/code/{module.replace('.', '/')}.py"
            if file in sources:
                candidates.append((name, ast.parse(archive.read(file).decode("utf-8"))))
    for name, module_tree in candidates:
        body = next((n for n in module_tree.body if isinstance(n, ast.ClassDef)
                     and n.name == name), None)
        if body is None:
            continue
        finals = {ast.unparse(a.target): _literal(a.value) for a in body.body
                  if isinstance(a, ast.AnnAssign) and a.value is not None}
        layer = re.sub(r"^___torch_mangle_\d+\.", "", name)
        keyword = _FEATURES.get(layer)
        size = finals.get(keyword) if keyword else None
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            return _layer_shape(layer, size, finals.get("batch_first") is True)
    return None


__all__ = ["ForwardParam", "base_name", "first_layer_input", "forward_signature",
           "pt2_signature", "signature_of", "torchscript_signature"]
