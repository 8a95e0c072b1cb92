"""Per-node comparison of a dynamo export: where inside the graph does ONNX Runtime diverge?

The dynamo exporter names each ONNX value after the FX node it came from and records that node
in the ONNX node's `pkg.torch.onnx.fx_node` metadata. So the values of the exported program's
FX graph (captured again here, decomposed with the exporter's own table) can be compared with
the ONNX values of the same name. ONNX Runtime computes them all in one run: every matched
value is added as an extra graph output. (torch.onnx.verification's interpreter does the same
but builds a fresh session per node, and needs the in-memory ONNXProgram that a file lacks.)
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from engine import torch_private
from engine.errors import one_line
from engine.export.onnx_file import uses_external_data
from engine.recipe import Recipe
from engine.validation.metrics import REL_EPS
from engine.validation.metrics import validation_warning as _warning

_FX_NODE = re.compile(r"^%(\S+) : .*?call_function\[target=([^\]]+)\]")


def compare_nodes(
    recipe: Recipe,
    onnx_path: Path,
    proto: Any,
    loaded: Any,
    inputs: tuple[Any, ...],
    feed_names: list[str | None],
    *,
    session_options: tuple[Any, list[str]],
    warn: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """{"nodes": {onnx node name: {max_abs_diff, max_rel_diff, ...}}, "first_divergent": name}.

    Nodes are listed in graph order; `first_divergent` is the first whose values are outside
    atol + rtol * |reference| (None when all agree or nothing could be compared).
    """
    empty: dict[str, Any] = {"nodes": {}, "first_divergent": None, "compared": 0}
    from engine.source.arguments import is_structured

    if is_structured(recipe):  # the capture below takes positional tensors only
        warn(_warning("Intermediate values are compared for models that take positional "
                      "tensors only; this recipe has keyword, dict/tuple or constant inputs."))
        return {**empty, "message": "keyword, dict/tuple or constant inputs"}
    producers = _fx_producers(proto)
    if not producers:
        warn(_warning("Intermediate values can only be compared for dynamo exports (their "
                      "nodes name the FX node they come from); this file has no such names."))
        return {**empty, "message": "no FX node names in the ONNX file"}
    try:
        fx_values, fx_targets = _fx_values(recipe, loaded, inputs)
    except Exception as exc:
        warn(_warning(f"Intermediate values were not compared: capturing the model again "
                      f"failed ({one_line(exc)})."))
        return {**empty, "message": f"capture failed: {one_line(exc)}"}

    graph_outputs = {o.name for o in proto.graph.output}
    matched = []  # (value name, onnx node name, fx name) in graph order
    for value_name, (node_name, fx_name, target) in producers.items():
        if fx_name not in fx_values or value_name != fx_name or value_name in graph_outputs:
            continue
        if target and fx_targets.get(fx_name) not in (None, target):
            continue  # same name, different op: the capture here differs from the export's
        matched.append((value_name, node_name, fx_name))
    if not matched:
        warn(_warning("No intermediate value of the ONNX file matches the model captured "
                      "again here; per-node numbers are not available."))
        return {**empty, "message": "no values matched"}

    try:
        got = _ort_values(onnx_path, [m[0] for m in matched], inputs, feed_names,
                          session_options)
    except Exception as exc:
        warn(_warning(f"Intermediate values were not compared: ONNX Runtime could not compute "
                      f"them ({one_line(exc)})."))
        return {**empty, "message": f"onnxruntime failed: {one_line(exc)}"}
    rtol, atol = recipe.validate.rtol, recipe.validate.atol
    nodes: dict[str, dict[str, Any]] = {}
    first = None
    for (value_name, node_name, fx_name), cand in zip(matched, got, strict=True):
        entry = _node_metrics(fx_values[fx_name], np.asarray(cand), rtol, atol)
        entry["value"] = value_name
        nodes[node_name] = entry
        if first is None and not entry["passed"]:
            first = node_name
    return {"nodes": nodes, "first_divergent": first, "compared": len(nodes)}


def _fx_producers(proto: Any) -> dict[str, tuple[str, str, str]]:
    """Value name -> (ONNX node name, FX node name, FX target) from the node metadata."""
    out: dict[str, tuple[str, str, str]] = {}
    for node in proto.graph.node:
        meta = {p.key: p.value for p in node.metadata_props}
        match = _FX_NODE.match(meta.get("pkg.torch.onnx.fx_node", ""))
        if not match:
            continue
        for value in node.output:
            if value:
                out[value] = (node.name, match.group(1), match.group(2).removeprefix("torch.ops."))
    return out


def _fx_values(recipe: Recipe, loaded: Any, inputs: tuple[Any, ...]
               ) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Run the decomposed exported program node by node; keep every tensor it computes."""
    import torch

    from engine.source.inputs import dynamic_shapes

    program = loaded.exported_program
    if program is None:
        program = torch.export.export(loaded.module, tuple(inputs),
                                      dynamic_shapes=dynamic_shapes(recipe), strict=False)
    program = _decompose_like_the_exporter(program)
    values: dict[str, np.ndarray] = {}
    targets: dict[str, str] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            result = super().run_node(n)
            if n.op == "call_function" and isinstance(result, torch.Tensor):
                tensor = result.detach().cpu()
                if tensor.is_complex():
                    tensor = torch.view_as_real(tensor)
                if tensor.dtype == torch.bfloat16:
                    tensor = tensor.float()
                values[n.name] = tensor.numpy().copy()
                targets[n.name] = str(n.target)
            return result

    with torch.no_grad():
        Recorder(program.module()).run(*[t.clone() for t in inputs])
    return values, targets


def _decompose_like_the_exporter(program: Any) -> Any:
    """Decompose as torch.onnx does, so node names match the ONNX values'.

    That step is private to torch.onnx; should it move, torch's default decompositions give
    mostly the same names, and the target check in compare_nodes drops the ones that differ.
    """
    try:
        return torch_private.prepare_for_onnx(program, torch_private.onnx_registry())
    except (ImportError, AttributeError):  # moved in this torch: the default decompositions
        return program.run_decompositions()


def _ort_values(onnx_path: Path, names: list[str], inputs: tuple[Any, ...],
                feed_names: list[str | None], session_options: tuple[Any, list[str]]
                ) -> list[Any]:
    """ONNX Runtime's values of the tensors `names`: the graph, without its weights, gets them
    as extra outputs and is written beside the original, so external data is read from the
    same files by ONNX Runtime and never copied into this process's memory."""
    import onnx
    import onnxruntime as ort

    graph_only = onnx.load(str(onnx_path), load_external_data=False)
    known = {v.name: v for v in graph_only.graph.value_info}
    del graph_only.graph.output[:]
    for name in names:
        graph_only.graph.output.append(known.get(name) or onnx.ValueInfoProto(name=name))
    options, providers = session_options
    if not uses_external_data(graph_only):  # the weights are in the proto: hand it over
        session = ort.InferenceSession(graph_only.SerializeToString(), options,
                                       providers=providers)
    else:
        fd, temp = tempfile.mkstemp(prefix=f".{onnx_path.name}.nodes.", suffix=".onnx",
                                    dir=onnx_path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(graph_only.SerializeToString())
            session = ort.InferenceSession(temp, options, providers=providers)
        finally:
            os.unlink(temp)
    del graph_only
    feeds = {name: t.detach().cpu().numpy().copy()
             for name, t in zip(feed_names, inputs, strict=True) if name}
    return list(session.run(names, feeds))


def _node_metrics(ref: np.ndarray, cand: np.ndarray, rtol: float, atol: float
                  ) -> dict[str, Any]:
    if ref.shape != cand.shape:
        return {"max_abs_diff": None, "max_rel_diff": None, "passed": False,
                "message": f"shape {list(cand.shape)} in ONNX, {list(ref.shape)} in PyTorch"}
    r = ref.astype(np.float64, copy=False)
    c = cand.astype(np.float64, copy=False)
    finite = np.isfinite(r) & np.isfinite(c)
    diff = np.abs(c - r)[finite]
    scale = np.abs(r)[finite]
    nonfinite_mismatch = int(np.count_nonzero(~finite & ~((r == c) | (np.isnan(r) & np.isnan(c)))))
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / (scale + REL_EPS)).max()) if diff.size else 0.0
    allowed = atol + rtol * scale
    outside = int(np.count_nonzero(diff > allowed)) + nonfinite_mismatch
    # the error against its tolerance, element by element: <= 1 passes (an absolute scale for
    # the graph's colours); None (off the scale: not passed) for a NaN or inf where the other
    # side has none
    ratio: float | None
    if nonfinite_mismatch:
        ratio = None
    elif not diff.size:
        ratio = 0.0
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(diff > 0, diff / allowed, 0.0)
        ratio = float(ratios.max())
    return {"max_abs_diff": max_abs, "max_rel_diff": max_rel, "passed": outside == 0,
            "mismatched": outside, "tolerance_ratio": ratio}




