"""A dynamic size where ONNX needs a constant: the dynamo exporter's failure to translate a node
whose attribute (a Conv's `group`, a kernel size...) is computed from a dynamic dimension, named
with the node, the model's line and the change that exports it (`attribute_error`).

CondConv (timm's tf_efficientnet_cc_*) runs one grouped convolution with a group per sample:
`groups = batch * channels`. ONNX's Conv takes `group` as an attribute, a constant of the file,
so no exporter can keep that batch dynamic: the TorchScript exporter bakes the traced batch into
the file. Exported with a static batch, the group count is a constant and the model exports.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import StudioError, chain_text, exception_chain
from onnx_studio.engine.recipe import Recipe

# "Error when translating node %conv2d_40 : [...] = call_function[target=torch.ops.aten.conv2d
# .default](args = (...))" and, deeper in the chain, "named_attrs={'group': SymbolicTensor("
_NODE = re.compile(r"Error when translating node %(?P<node>\w+) : .*?target=(?P<target>[\w.]+)")
_ATTRIBUTE = re.compile(
    r"named_attrs=\{[^}]*?['\"](?P<attr>\w+)['\"]: SymbolicTensor\(name='(?P<value>\w+)'")
_SYMBOLIC = "Unsupported attribute type"


def find(exc: BaseException) -> tuple[str, str, str] | None:
    """(node, its operator, the ONNX attribute given a symbolic size) when the exporter failed
    because an attribute was a dynamic size; None otherwise."""
    texts = [str(e) for e in exception_chain(exc)]
    if not any(_SYMBOLIC in t for t in texts):
        return None
    node = next((m for m in map(_NODE.search, texts) if m), None)
    attribute = next((m for m in map(_ATTRIBUTE.search, texts) if m), None)
    if node is None or attribute is None:
        return None
    return node["node"], node["target"].removesuffix(".default"), attribute["attr"]


def model_line(model: Any, args: tuple[Any, ...], dynamic_shapes: Any, node: str) -> str:
    """"file.py:LINE (`code`)" of the model's code that made `node`, read from the node's stack
    in a fresh capture (torch.export.export); "" when it cannot be told. Best effort."""
    import torch

    try:
        program = torch.export.export(model, args, dynamic_shapes=dynamic_shapes, strict=False)
    except Exception:
        return ""
    found = next((n for n in program.graph.nodes if n.name == node), None)
    stack = (found.meta.get("stack_trace") or "") if found is not None else ""
    frames = _frames(stack)
    outside = [f for f in frames if "/torch/" not in f[0].replace("\\", "/")]
    if not outside:
        return ""
    file, line, code = outside[-1]
    return f"{Path(file).name}:{line}" + (f" (`{code}`)" if code else "")


def _frames(stack: str) -> list[tuple[str, int, str]]:
    """(file, line, code) of each frame of a Python stack trace's text, outermost first."""
    lines = stack.splitlines()
    out = []
    for i, text in enumerate(lines):
        match = re.match(r'\s*File "(?P<file>[^"]+)", line (?P<line>\d+)', text)
        if match:
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            code = "" if code.startswith("File ") else code
            out.append((match["file"], int(match["line"]), code))
    return out


def attribute_error(exc: BaseException, found: tuple[str, str, str], recipe: Recipe,
                    locate: Callable[[str], str]) -> StudioError:
    """The error of a node whose ONNX attribute is a dynamic size: the node, the model's line,
    and the hint that exports it (the dynamic axes removed), which the hint test applies."""
    node, target, attribute = found
    line = locate(node)
    at = f" at {line}" if line else ""
    dims = list(recipe.dynamic_dims())
    if len(dims) == 1:
        which = f"the dynamic dimension {dims[0]!r}"
        change = (f"Export with a static {dims[0]!r}: remove {dims[0]!r} from the dynamic axes "
                  "of the inputs and outputs (the file then runs at the example's size only)")
    else:
        which = f"a dynamic dimension (one of {', '.join(map(repr, dims))})"
        change = ("Export with static sizes: remove the dynamic axes the attribute follows "
                  f"(one of {', '.join(map(repr, dims))}) from the inputs and outputs")
    grouped = (" (a grouped convolution with a group per sample, as CondConv computes it, has "
               "no ONNX form with a dynamic batch)") if attribute == "group" else ""
    message = (f"The dynamo exporter cannot translate node {node} ({target}){at}: its "
               f"{attribute!r} is computed from {which}, and ONNX takes {attribute!r} as a "
               f"constant of the file{grouped}.")
    hint = (f"{change}. No exporter keeps it dynamic: the TorchScript exporter would bake the "
            "traced size into the file.")
    error = StudioError("export", message, hint, details=chain_text(exc))
    error.no_fallback = True  # type: ignore[attr-defined]  # the other exporter cannot help
    return error
