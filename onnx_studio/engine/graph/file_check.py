"""Is an .onnx file usable? The ONNX checker, by path, and our own checks that name the culprit.

`check_file(path)` returns a list of `Problem`s, each an error or a warning that names the node
or tensor at fault:

- `cycle`: nodes that feed each other (an ONNX graph must be acyclic), named;
- `dangling_input`: a node input (or a graph output) that no node, graph input or initializer
  produces, with the node and the tensor;
- `missing_external_data`: a weight stored in a data file beside the model that is not there,
  with the file and the tensor;
- `external_data_outside`: a weight whose data file lies outside the model's folder (an
  absolute location, `..`, a symlink out), which onnx and ONNX Runtime refuse to read: a file
  must not make a reader open any file on the machine;
- `unknown_operator`: an operator of the standard ONNX domains that ONNX does not define (an
  error), or an operator of a domain neither ONNX nor the file defines (a warning: a custom-op
  library may provide it);
- `checker`: what `onnx.checker.check_model` says that the checks above do not already say,
  as a warning (the checker refuses some files ONNX Runtime runs, e.g. old IR versions).

The checker runs on the path (not a loaded ModelProto) so that models over 2 GB, whose weights
live in external data, are checked too; it reads the external data's places, not its bytes.
`inspect`, `validate` and the Graph tab use it; `refuse_unusable` turns the errors into the
`invalid_file` error of the JSON contract. Imports onnx inside the functions, never torch.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import StudioError, one_line

ERROR, WARNING = "error", "warning"
STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"})
# what onnxruntime brings kernels for besides the standard domains: never "unknown"
RUNTIME_DOMAINS = frozenset({"com.microsoft", "com.microsoft.nchwc", "com.ms.internal.nhwc",
                             "org.pytorch.aten"})
# checker sentences already said, better, by one of our checks
_CHECKER_SAID = {
    "cycle": ("topologically sorted", "is not output of any previous nodes"),
    "dangling_input": ("topologically sorted", "is not output of any previous nodes",
                       "Graph output", "is not produced"),
    "missing_external_data": ("external", "doesn't exist", "not accessible", "location",
                              "should be stored in", "is not regular file"),
    "external_data_outside": ("external", "points outside", "should be a relative path",
                              "location", "should be file inside", "symlink"),
    "unknown_operator": ("No Op registered", "No opset import for domain",
                         "is not a registered function/op"),
}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the file: its severity, what kind, a sentence naming the culprit,
    and the nodes (main-graph indexes and names) and tensor it concerns."""

    severity: str  # "error" | "warning"
    code: str  # cycle | dangling_input | missing_external_data | unknown_operator | checker
    message: str
    nodes: tuple[str, ...] = ()  # node labels (name, or op type and index when unnamed)
    node_indices: tuple[int, ...] = field(default=(), compare=False)
    tensor: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`problems` of the inspect document)."""
        return {"severity": self.severity, "code": self.code, "message": self.message,
                "nodes": list(self.nodes), "tensor": self.tensor}


def check_file(path: str | Path, *, model: Any = None, nodes: Sequence[Any] | None = None,
               producer: Mapping[str, int] | None = None, full_check: bool = False,
               checker: bool = True) -> list[Problem]:
    """Every problem of the .onnx file at `path`, errors first. `model` is the file's ModelProto
    when the caller has loaded it already (without external data), `nodes` its main graph's nodes
    when read already (objects with the attributes of `_Node`, e.g. onnx_studio.engine.graph.model's
    `Node`: reading 100k protobuf nodes twice costs a quarter second) and `producer` the index of
    the node making each tensor of it, when built already; the checker (unless `checker` is false)
    reads the file by path in any case. Raises StudioError(`source`) for a file that is not ONNX at
    all."""
    import onnx

    path = Path(path)
    if model is None:
        try:
            model = onnx.load(str(path), load_external_data=False)
        except Exception as exc:
            raise StudioError("source", f"{path.name} is not a readable ONNX file "
                              f"({type(exc).__name__}); re-export it or choose another "
                              "file.", details=str(exc)) from None
    nodes = _read(model.graph) if nodes is None else nodes
    found = graph_problems(model.graph, model, nodes, producer)
    found += _external_data_problems(model, nodes, path.parent)
    said = {p.code for p in found}
    verdict = _checker_problem(path, full_check) if checker else None
    if verdict is not None and not any(
            text in verdict.message for code in said for text in _CHECKER_SAID.get(code, ())):
        found.append(verdict)
    return sorted(found, key=lambda p: p.severity != ERROR)


def errors(problems: list[Problem]) -> list[Problem]:
    """The problems that make the file unusable."""
    return [p for p in problems if p.severity == ERROR]


def refuse_unusable(path: str | Path, problems: list[Problem]) -> None:
    """Raise the `invalid_file` StudioError (exit status 1) when any problem is an error:
    the first one's sentence, every one of them in the details."""
    bad = errors(problems)
    if not bad:
        return
    more = f" ({len(bad) - 1} more in the details)" if len(bad) > 1 else ""
    raise StudioError(
        "invalid_file", f"{Path(path).name} is not a valid ONNX model: {bad[0].message}{more}.",
        "Export the model again; a file edited or written by another tool must keep the graph "
        "acyclic, every tensor produced before it is used, and its external data files beside "
        "it.", details="\n".join(f"{p.severity}: {p.message}" for p in bad))


def problem_nodes(problems: list[Problem]) -> dict[int, str]:
    """Main-graph node index -> the sentence of its (first) problem, for marking the view."""
    marks: dict[int, str] = {}
    for problem in problems:
        for index in problem.node_indices:
            marks.setdefault(index, problem.message)
    return marks


# ---------------------------------------------------------------------------- our checks


class NodeAttributes:
    """The graphs and tensors a node holds in its attributes, read from its NodeProto
    (``proto``) on first use and kept (``_payload``): most nodes never need them."""

    __slots__ = ()
    proto: Any
    _payload: tuple[list[Any], list[Any]] | None

    @property
    def subgraphs(self) -> list[Any]:
        """The GraphProtos in the node's attributes (If/Loop/Scan bodies)."""
        return attribute_payload(self)[0]

    @property
    def tensors(self) -> list[Any]:
        """The TensorProtos in the node's attributes (a Constant's value)."""
        return attribute_payload(self)[1]


class _Node(NodeAttributes):
    """What the checks read of a NodeProto, read once (protobuf field access is slow); the
    attributes (subgraphs, tensors) only when asked for."""

    __slots__ = ("_payload", "domain", "index", "inputs", "label", "op_type", "outputs",
                 "proto")

    def __init__(self, index: int, proto: Any) -> None:
        self.index = index
        self.proto = proto
        self.op_type: str = proto.op_type
        self.domain: str = proto.domain
        self.label: str = proto.name or f"{self.op_type}_{index}"
        self.inputs: list[str] = proto.input[:]
        self.outputs: list[str] = proto.output[:]
        self._payload = None


def attribute_payload(node: Any) -> tuple[list[Any], list[Any]]:
    """(subgraphs, tensors) held in the attributes of a node that keeps its NodeProto in
    ``proto`` and a cache slot ``_payload``; read once."""
    payload = node._payload
    if payload is None:
        subgraphs: list[Any] = []
        tensors: list[Any] = []
        for attr in node.proto.attribute:
            kind = attr.type
            if kind == _GRAPH:
                subgraphs.append(attr.g)
            elif kind == _GRAPHS:
                subgraphs.extend(attr.graphs)
            elif kind == _TENSOR:
                tensors.append(attr.t)
        payload = node._payload = (subgraphs, tensors)
    return payload


_TENSOR, _GRAPH, _GRAPHS = 4, 5, 10  # onnx.AttributeProto.AttributeType


@cache
def _plain(domain: str, op_type: str) -> bool:
    """True for a standard operator whose schema declares no graph or tensor attribute:
    its nodes hold neither, and reading the attributes of 100k nodes to find that out costs
    a third of a second."""
    if domain not in STANDARD_DOMAINS:
        return False
    import onnx

    try:
        schema = onnx.defs.get_schema(op_type, "" if domain == "ai.onnx" else domain)
    except Exception:  # not an ONNX operator: _unknown_operators says so
        return False
    kinds = onnx.defs.OpSchema.AttrType
    return not any(a.type in (kinds.GRAPH, kinds.GRAPHS, kinds.TENSOR)
                   for a in schema.attributes.values())


def _read(graph: Any) -> list[_Node]:
    return [_Node(i, proto) for i, proto in enumerate(graph.node)]


def graph_problems(graph: Any, model: Any, nodes: Sequence[Any] | None = None,
                   producer: Mapping[str, int] | None = None) -> list[Problem]:
    """Cycles, dangling inputs and unknown operators of the main graph (node indexes of the
    main graph) and, by name only, of the subgraphs of If/Loop/Scan nodes. `nodes` is the
    graph's nodes as `_read` gives them, when read already."""
    nodes = _read(graph) if nodes is None else nodes
    if producer is None:
        producer = {out: n.index for n in nodes for out in n.outputs if out}
    found = _cycles(nodes, producer) + _dangling(graph, nodes, set(), top=True, made=producer)
    found += _unknown_operators(nodes, model)
    return found


def _cycles(nodes: Sequence[Any], producer: Mapping[str, int]) -> list[Problem]:
    """Nodes on a cycle: what is left after removing, again and again, the nodes nothing
    feeds (Kahn), then the nodes that feed nothing left. `producer`: tensor -> the node
    making it."""
    # Exporters write nodes in topological order: then no node reads a later node's output
    # and there is no cycle (one pass instead of building the graph's edge sets).
    if all(producer.get(name, -1) < node.index for node in nodes for name in node.inputs):
        return []
    feeds: list[set[int]] = [set() for _ in nodes]  # i -> the nodes i feeds
    needs: list[set[int]] = [set() for _ in nodes]  # i -> the nodes feeding i
    for node in nodes:
        for name in node.inputs:
            j = producer.get(name)
            if j is not None:
                feeds[j].add(node.index)
                needs[node.index].add(j)
    left = _peel(set(range(len(nodes))), needs, feeds)
    left = _peel(left, feeds, needs)  # what only hangs below a cycle is not on it
    if not left:
        return []
    order = sorted(left)
    names = [nodes[i].label for i in order]
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return [Problem(ERROR, "cycle", f"the graph has a cycle through nodes {shown}: each needs "
                    "another's output, so none can run first", tuple(names), tuple(order))]


def _peel(left: set[int], before: list[set[int]], after: list[set[int]]) -> set[int]:
    """Remove from `left` every node whose `before` set (within `left`) is empty, repeatedly."""
    count = {i: len(before[i] & left) for i in left}
    ready = [i for i, c in count.items() if c == 0]
    left = set(left)
    while ready:
        i = ready.pop()
        left.discard(i)
        for j in after[i]:
            if j in left:
                count[j] -= 1
                if count[j] == 0:
                    ready.append(j)
    return left


def _dangling(graph: Any, nodes: Sequence[Any], outer: set[str], *, top: bool,
              where: str = "", made: Collection[str] | None = None) -> list[Problem]:
    known = set(outer) | {v.name for v in graph.input} | {t.name for t in graph.initializer}
    known |= {t.name for t in graph.sparse_initializer}
    if made is None:
        made = {out for n in nodes for out in n.outputs if out}
    found: list[Problem] = []
    for node in nodes:
        for name in node.inputs:
            if name and name not in known and name not in made:
                found.append(Problem(
                    ERROR, "dangling_input", f"node {node.label}{where} ({node.op_type}) "
                    f"reads tensor {name!r}, which no node, graph input or initializer "
                    "produces", (node.label,), (node.index,) if top else (), name))
        for sub in () if _plain(node.domain, node.op_type) else node.subgraphs:
            found += _dangling(sub, _read(sub), known.union(made), top=False,
                               where=f"{where} (in a subgraph of {node.label})")
    for value in graph.output:
        if value.name not in known and value.name not in made:
            found.append(Problem(ERROR, "dangling_input", f"graph output {value.name!r}"
                                 f"{where} is produced by no node", (), (), value.name))
    return found


def _unknown_operators(nodes: Sequence[Any], model: Any) -> list[Problem]:
    import onnx

    functions = {(f.domain, f.name) for f in model.functions}
    imports = {o.domain: o.version for o in model.opset_import}
    # A graph uses a few dozen operators: look at each once, and at the nodes only when one
    # of them is unknown.
    kinds = {(n.domain, n.op_type) for n in nodes}
    if all(key in functions or key[0] in RUNTIME_DOMAINS
           or (key[0] in STANDARD_DOMAINS
               and onnx.defs.has(key[1], "" if key[0] == "ai.onnx" else key[0]))
           for key in kinds):
        return []
    found: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    defined: dict[tuple[str, str], bool] = {}  # onnx.defs.has per operator, not per node
    for node in nodes:
        key = (node.domain, node.op_type)
        if key in functions:
            continue
        op = f"{node.domain}::{node.op_type}" if node.domain else node.op_type
        if node.domain in STANDARD_DOMAINS:
            version = imports.get(node.domain, imports.get("ai.onnx" if not node.domain
                                                           else node.domain, 0))
            domain = "" if node.domain == "ai.onnx" else node.domain
            if key not in defined:
                defined[key] = onnx.defs.has(node.op_type, domain)
            if defined[key]:
                continue
            found.append(Problem(ERROR, "unknown_operator", f"node {node.label} uses operator "
                                 f"{op}, which ONNX does not define (opset {version})",
                                 (node.label,), (node.index,)))
        elif node.domain not in RUNTIME_DOMAINS and key not in seen:
            seen.add(key)
            users = [n for n in nodes if (n.domain, n.op_type) == key]
            found.append(Problem(
                WARNING, "unknown_operator", f"operator {op} (node "
                f"{', '.join(n.label for n in users[:5])}) is in domain {node.domain!r}, "
                "which neither ONNX nor this file defines: ONNX Runtime runs it only with a "
                "custom-op library that provides it", tuple(n.label for n in users),
                tuple(n.index for n in users)))
    return found


def _external_data_problems(model: Any, nodes: Sequence[Any], folder: Path) -> list[Problem]:
    """Initializers stored in a data file that is not in the model's folder: one that lies
    outside it (absolute, `..`, a symlink out; compared with symlinks resolved), or one that is
    missing beside the model."""
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    outside: dict[str, list[str]] = {}
    missing: dict[str, list[str]] = {}
    for tensor in _tensors(model.graph, nodes):
        if not uses_external_data(tensor):
            continue
        location = ExternalDataInfo(tensor).location
        if location and lies_outside(folder, location):
            outside.setdefault(location, []).append(tensor.name)
        elif not location or not (folder / location).is_file():
            missing.setdefault(location or "(no location)", []).append(tensor.name)
    return [Problem(ERROR, "external_data_outside",
                    f"external data file {location!r} lies outside the model's folder (it holds "
                    f"{_names(names)}); the data must sit in the .onnx file's folder", (), (),
                    names[0])
            for location, names in outside.items()] + [
            Problem(ERROR, "missing_external_data",
                    f"external data file {location!r} is missing beside the model (it holds "
                    f"{_names(names)})", (), (), names[0])
            for location, names in missing.items()]


def lies_outside(folder: Path, location: str) -> bool:
    """True when the external data file `location` of a model in `folder` is not inside that
    folder: an absolute path, `..` out of it, or a symlink whose target is elsewhere."""
    if os.path.isabs(location):
        return True
    return not Path(os.path.realpath(folder / location)).is_relative_to(
        os.path.realpath(folder))


def _names(names: list[str]) -> str:
    quoted = [repr(n) for n in names[:3]]
    return ("tensor " if len(names) == 1 else "tensors ") + ", ".join(quoted) + (
        f" and {len(names) - 3} more" if len(names) > 3 else "")


def _tensors(graph: Any, nodes: Sequence[Any] | None = None) -> Iterator[Any]:
    yield from graph.initializer
    for node in _read(graph) if nodes is None else nodes:
        if _plain(node.domain, node.op_type):
            continue
        yield from node.tensors
        for sub in node.subgraphs:
            yield from _tensors(sub)


def _checker_problem(path: Path, full_check: bool) -> Problem | None:
    import onnx

    try:
        onnx.checker.check_model(str(path), full_check=full_check)
    except onnx.checker.ValidationError as exc:
        # a warning: the checker is stricter than ONNX Runtime (old IR versions, attributes)
        # and what makes a file unusable is an error of the checks above
        return Problem(WARNING, "checker", f"the ONNX checker says: {one_line(exc)}")
    except Exception as exc:  # shape inference (full_check) on an op it does not know
        return Problem(WARNING, "checker", f"the ONNX checker could not finish: {one_line(exc)}")
    return None
