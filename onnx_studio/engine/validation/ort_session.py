"""The ONNX Runtime side of validation: read the file, check it, open a session.

What the installed onnxruntime can load (`ort_max_opset`, `ort_domains`), warnings found
before running (`preflight`), SessionOptions from the recipe's providers and optimization
level, and onnxruntime's errors turned into sentences. onnx and onnxruntime are imported
inside the functions that need them.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import StudioError, one_line
from onnx_studio.engine.graph.summary import all_nodes
from onnx_studio.engine.recipe import Recipe
from onnx_studio.engine.validation.metrics import validation_warning as _warning
from onnx_studio.engine.validation.unrunnable import refused_node

OPTIMIZATION_LEVELS = ("disable", "basic", "extended", "all")
# Domains of the standard operator sets; onnxruntime's own (com.microsoft, ...) are asked
# from the installed build, see ort_domains().
STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml"})


def read_onnx(path: Path) -> Any:
    """The ModelProto without its external data (enough to check opsets, domains, names)."""
    import onnx

    if not path.is_file():
        raise StudioError("validation", f"The ONNX file {path} does not exist.",
                          "Export the model first, or check the path.")
    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as exc:
        raise StudioError("validation", f"{path.name} is not a readable ONNX file "
                          f"({one_line(exc)}).",
                          "Export it again; the file may be truncated or not an ONNX model."
                          ) from None


@cache
def ort_max_opset(domain: str = "") -> int:
    """The highest opset of `domain` that the installed onnxruntime loads.

    onnxruntime has no API for this; it refuses models stamped above its release's opset at
    load time, so probe a one-node model from the newest opset onnx knows downwards (each
    probe is well under a millisecond).
    """
    import onnx
    import onnxruntime as ort
    from onnx import helper

    node = helper.make_node("Identity", ["x"], ["y"])
    graph = helper.make_graph([node], "probe", [helper.make_tensor_value_info("x", 1, [1])],
                              [helper.make_tensor_value_info("y", 1, [1])])
    options = ort.SessionOptions()
    options.log_severity_level = 4
    for version in range(onnx.defs.onnx_opset_version(), 6, -1):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, version)])
        model.ir_version = 8
        try:
            ort.InferenceSession(model.SerializeToString(), options,
                                 providers=["CPUExecutionProvider"])
        except Exception:
            continue
        return version
    return 7


@cache
def ort_domains() -> frozenset[str]:
    """Operator domains the installed onnxruntime has kernels for."""
    try:
        from onnxruntime.capi import onnxruntime_pybind11_state as ort_c

        return frozenset(schema.domain for schema in ort_c.get_all_operator_schema())
    except Exception:  # a build without the schema API: the domains every build has
        return frozenset({"com.microsoft", "com.microsoft.nchwc", "com.ms.internal.nhwc"})


def preflight(proto: Any, recipe: Recipe) -> list[dict[str, Any]]:
    """Warnings found before running: opset too new, unknown domains, baked-in dynamic axes."""
    found: list[dict[str, Any]] = []
    imports = {op.domain: op.version for op in proto.opset_import}
    opset = imports.get("", imports.get("ai.onnx"))
    if opset is not None and opset > ort_max_opset():
        found.append(_warning(
            f"The model uses opset {opset} but the installed onnxruntime supports up to "
            f"{ort_max_opset()}; it may refuse to load it. Export with opset = "
            f"{ort_max_opset()} or upgrade onnxruntime."))
    known = STANDARD_DOMAINS | ort_domains() | {f.domain for f in proto.functions}
    unknown: dict[str, set[str]] = {}
    for node in all_nodes(proto.graph):
        if node.domain not in known:
            unknown.setdefault(node.domain, set()).add(node.op_type)
    for domain, ops in sorted(unknown.items()):
        found.append(_warning(
            f"Operator domain {domain!r} ({', '.join(sorted(ops))}) is unknown to "
            f"onnxruntime; it will not run unless a custom-op library provides it."))
    by_name = {i.name: i for i in proto.graph.input}
    for spec in recipe.inputs:
        value = by_name.get(spec.name)
        if value is None or not value.type.HasField("tensor_type"):
            continue
        dims = value.type.tensor_type.shape.dim
        for axis, dim_name in sorted(spec.dynamic.items()):
            if -len(dims) <= axis < len(dims) and dims[axis].HasField("dim_value"):
                found.append(_warning(
                    f"Input {spec.name!r} axis {axis} ({dim_name!r}) is fixed to "
                    f"{dims[axis].dim_value} in the ONNX file, so other {dim_name} sizes will "
                    "fail; the export baked it in."))
    graph_outputs = [o.name for o in proto.graph.output]
    for i, (wanted, name) in enumerate(zip(recipe.outputs, graph_outputs, strict=False)):
        if wanted.name != name:
            found.append(_warning(f"Output {i} is named {name!r} in the ONNX file but "
                                  f"{wanted.name!r} in the recipe."))
    return found


# Session settings that add no copy of the weights. ONNX Runtime maps a data file's aligned
# tensors into memory instead of reading them, but pre-packing (a MatMul's weight laid out
# again for its kernel, at load) allocates a second copy of each and keeps it: measured on a
# 0.95 GiB decoder, 1.52 GiB at the load's peak and 0.97 GiB after it by default, 1.08 and
# 0.52 without pre-packing (and 1.02 GiB once every weight was read by a run). Runs are
# slower (2.5x on that model): right for validation, which runs a few inputs, not for
# profiling.
LOW_MEMORY = {"session.disable_prepacking": "1"}


def has_external_data(path: Path) -> bool:
    """Does the .onnx file at `path` keep weights in a data file beside it (a large model)?"""
    from onnx_studio.engine.export.onnx_file import referenced_data

    return bool(referenced_data(path))


def session_settings(providers: list[str], optimization: str) -> tuple[Any, list[str]]:
    """SessionOptions at the chosen optimization level and the checked provider list."""
    import onnxruntime as ort

    if optimization not in OPTIMIZATION_LEVELS:
        raise StudioError("validation", f"Unknown optimization level {optimization!r}; use "
                          f"one of {', '.join(OPTIMIZATION_LEVELS)}.")
    providers = list(providers) or ["CPUExecutionProvider"]
    available = ort.get_available_providers()
    missing = [p for p in providers if p not in available]
    if missing:
        raise StudioError(
            "validation",
            f"This onnxruntime has no {missing[0]}; it offers {', '.join(available)}.",
            'Set validate.providers = ["CPUExecutionProvider"], or install the onnxruntime '
            "build for that device.")
    options = ort.SessionOptions()
    options.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[optimization]
    # its own log lines would go to stderr, not to the user; failures reach us as exceptions
    options.log_severity_level = 4
    return options, providers


def create_session(path: Path, providers: list[str], optimization: str,
                   found: list[dict[str, Any]], low_memory: bool = False) -> Any:
    """An onnxruntime InferenceSession, or a StudioError saying why there cannot be one;
    `low_memory`: one that adds no copy of the file's weights (see LOW_MEMORY)."""
    import onnxruntime as ort

    options, providers = session_settings(providers, optimization)
    if low_memory:
        for key, value in LOW_MEMORY.items():
            options.add_session_config_entry(key, value)
    try:
        return ort.InferenceSession(str(path), options, providers=providers)
    except Exception as exc:
        message = f"ONNX Runtime cannot load {path.name}: {ort_message(exc)}"
        hint = " ".join(w["message"] for w in found) or (
            "Check the opset and the operators in the Warnings; re-export if needed.")
        node = refused_node(path, str(exc))
        if node is not None:  # the node it names: its operator, types and the model's line
            message, hint = f"ONNX Runtime cannot load {path.name}: {node[0]}", node[1]
        raise StudioError("validation", message, hint, details=str(exc)) from None


_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ")
# onnxruntime puts the C++ source location and function signature inside its messages
_ORT_SOURCE = re.compile(r"/onnxruntime_src/\S+:\d+ (?:[\w:<>,&*~ ]+?\([^()]*\) )?")


def ort_message(exc: BaseException) -> str:
    """An onnxruntime error as one readable sentence: no error-code prefix, no C++ location."""
    text = " ".join(str(exc).split())
    text = _ORT_PREFIX.sub("", text)
    text = _ORT_SOURCE.sub("", text)
    return text if len(text) <= 400 else text[:397] + "..."
