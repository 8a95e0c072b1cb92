"""GraphModel: an ONNX graph read for browsing — nodes, tensors, module groups, subgraphs. (Its
nodes and tensors are onnx_studio.engine.graph.nodes'; which nodes fold away,
onnx_studio.engine.graph.folding.)

Built to open large exports fast: only what every view needs (op type, names, edges, module
path) is read eagerly; attributes, shapes, stack traces and initializer values are read from
the protobuf when asked for. External data is never loaded until one tensor's values are.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter, not_
from pathlib import Path
from typing import Any

from onnx_studio.engine.graph.columns import NodeColumns, NodeList
from onnx_studio.engine.graph.file_check import Problem, check_file, problem_nodes
from onnx_studio.engine.graph.folding import auxiliary_nodes
from onnx_studio.engine.graph.nodes import (
    Node,
    Shape,
    TensorInfo,
    _memory_map,
    _shape_of,
    dtype_name,
    format_shape,
)

__all__ = ["GraphModel", "Group", "Node", "Shape", "TensorInfo", "auxiliary_nodes",
           "dtype_name", "format_shape", "no_gc"]

# The graph view runs the ONNX checker on files up to this size (the checker parses the whole
# file, inline weights included: about 10 s for 300 MB here, on top of the view's own read).
VIEW_CHECKER_LIMIT = 256 * 2**20

_SUBGRAPH_TYPES = (5, 10)  # AttributeProto.GRAPH, GRAPHS
_SCOPE_ITEM = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")
# The dynamo exporter files nodes made by its own passes under this pseudo module.
_NO_MODULE = "_empty_nn_module_stack_from_metadata_hook"
_SCOPES_KEY = "pkg.torch.onnx.name_scopes"
_FUSED_KEY = "pkg.onnxscript.rewriter.rule_name"  # on a node fused from several
_NAME = attrgetter("name")


@contextmanager
def no_gc(freeze: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small objects: the objects
    built here hold no cycles worth collecting, and collections triggered by the sheer number
    of allocations cost a third of the build time on a 20k-node graph.

    ``freeze``: what was built is long-lived (a shown graph: millions of objects at 100k
    nodes); move it out of the collector's sight (`gc.freeze`) so that no later collection
    walks it again — a full collection over a 100k-node graph stalls the window for seconds,
    in the middle of a zoom. Frozen objects are still freed when their last reference goes.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if freeze:
                gc.freeze()
            gc.enable()


def _parse_list(text: str) -> list[str]:
    """Parse the exporter's ``"['', 'h.0', 'layer_norm']"`` without ast (4k nodes add up)."""
    return [a if a else b for a, b in _SCOPE_ITEM.findall(text)]


@dataclass
class Group:
    """A module of the model: a box that collapses to one node in the view."""

    id: str  # "" for the whole graph; "h.0/h.0.attn" style paths below it
    name: str  # short label ("attn")
    qualname: str  # the module's qualified name ("h.0.attn")
    class_name: str = ""
    parent: str | None = None
    children: list[str] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)
    depth: int = 0


class GraphModel:
    """A browsable ONNX graph (the main graph, a subgraph of If/Loop/Scan, or a function)."""

    def __init__(self, graph: Any, *, path: Path | None = None, title: str = "",
                 parent: GraphModel | None = None,
                 functions: dict[tuple[str, str], Any] | None = None,
                 opset_imports: dict[str, int] | None = None, model: Any = None,
                 is_function: bool = False) -> None:
        self.proto = graph
        self.model_proto = model
        self.path = path
        self.parent = parent
        self.title = title or graph.name or "graph"
        self.functions: dict[tuple[str, str], Any] = functions or {}
        self.opset_imports: dict[str, int] = opset_imports or {}
        self.is_function = is_function
        # onnx_studio.engine.graph.file_check's findings (GraphModel.load)
        self.problems: list[Problem] = []
        self.checks_pending = False  # the file's checks left for run_checks
        self._consumers: dict[str, list[int]] | None = None  # built when first asked for
        if is_function:
            self.initializers: dict[str, Any] = {}
            self.inputs: list[str] = list(graph.input)
            self.outputs: list[str] = list(graph.output)
            self._value_info: dict[str, Any] = {}
            known = self.inputs
        else:
            inits = list(graph.initializer)
            self.initializers = dict(zip(map(_NAME, inits), inits, strict=True))
            given = [v.name for v in graph.input]
            self.inputs = [name for name in given if name not in self.initializers]
            self.outputs = [v.name for v in graph.output]
            # graph inputs and outputs now; value_info (one per value: 100k) when first asked
            self._value_info = {v.name: v for v in graph.input}
            for v in graph.output:
                self._value_info[v.name] = v
            known = [*self.initializers, *given]
        self._all_value_info = is_function  # a function's values carry no types
        # every node's fields read once (onnx_studio.engine.graph.columns); Node objects when looked
        # up
        self.columns = NodeColumns(list(graph.node), known)
        # Values read here but made nowhere in this graph come from an enclosing graph.
        self.outer_inputs: list[str] = self.columns.outer
        self._subgraphs: dict[tuple[int, str], GraphModel] = {}
        self._search_ops: dict[str, list[int]] | None = None  # lowercase op type -> nodes
        self._search_text: list[str] | None = None  # per node, what a query may match
        self.groups: dict[str, Group] = {}
        self._node_groups: list[str] | None = None
        self.group_code: Any = self._build_groups()  # node -> its group's place in `groups`
        self.nodes: Sequence[Node] = NodeList(self.columns, self.groups, self.group_code)

    def initializer_values(self) -> Any:
        """The initializers' value numbers in `columns` (numpy)."""
        return self.columns.known_values[:len(self.initializers)]

    @property
    def producer(self) -> dict[str, int]:
        """Value -> the node making it (built on first use)."""
        return self.columns.producer

    @property
    def consumers(self) -> dict[str, list[int]]:
        """Value -> the nodes reading it, in graph order (built on first use: opening a
        graph asks `NodeColumns.consumers_of` for the few values it needs)."""
        if self._consumers is None:
            self._consumers = self.columns.consumers()
        return self._consumers

    # ---------------------------------------------------------------- loading
    @classmethod
    def load(cls, path: str | os.PathLike[str], *, checks_now: bool = True) -> GraphModel:
        """Read an ``.onnx`` file (not its external data) and infer missing shapes.

        `checks_now=False` leaves the file's checks (onnx_studio.engine.graph.file_check: ours and
        the ONNX checker, 0.6 s at 100k nodes) for `run_checks`, which a view calls once the graph
        is on screen. Raises ``ValueError`` with a readable sentence for a file that is not an ONNX
        model.
        """
        import onnx

        p = Path(path)
        try:
            model = onnx.load(str(p), load_external_data=False)
        except FileNotFoundError:
            raise
        except Exception as exc:
            raise ValueError(f"{p.name} is not a readable ONNX model ({exc}).") from exc
        if not model.graph.node and not model.graph.input:
            raise ValueError(f"{p.name} holds no ONNX graph.")
        graph = cls.from_model(model, path=p)
        graph.checks_pending = True
        if checks_now:
            graph.run_checks()
        return graph

    def run_checks(self) -> bool:
        """Find the file's problems (cycles, dangling inputs, missing data, unknown operators;
        the ONNX checker too, except on files whose weights are inline and large, where it
        would read them all again: `inspect` and `validate` run it on any file) when `load`
        left them for later; True when there are any."""
        if not self.checks_pending or self.path is None:
            return False
        self.checks_pending = False
        self.problems = check_file(self.path, model=self.model_proto, nodes=self.nodes,
                                   producer=self.producer,
                                   checker=self.path.stat().st_size <= VIEW_CHECKER_LIMIT)
        return bool(self.problems)

    def problem_marks(self) -> dict[str, str]:
        """Node name -> the sentence of its problem, for the named nodes `problems` names."""
        names = self.columns.names
        return {names[i]: message for i, message in problem_nodes(self.problems).items()
                if i < len(names) and names[i]}

    @classmethod
    def from_model(cls, model: Any, path: Path | None = None) -> GraphModel:
        """Build from a ModelProto; shape inference runs only when value types are missing."""
        functions = {(f.domain, f.name): f for f in model.functions}
        opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
        title = path.stem if path else (model.graph.name or "graph")
        with no_gc():
            built = cls(model.graph, path=path, title=title, functions=functions,
                        opset_imports=opsets, model=model)
        made = built.columns.made_count
        typed = len(model.graph.value_info) + len(model.graph.output)
        # Dynamo exports carry types for every value; inference would only cost time there
        # (and, for a file without them, a second build with the types it adds).
        if not made or typed >= 0.9 * made:
            return built
        try:
            import onnx

            model = onnx.shape_inference.infer_shapes(model, strict_mode=False)
        except Exception:  # a custom op without a schema: keep the shapes we have
            return built
        with no_gc():
            return cls(model.graph, path=path, title=title, functions=functions,
                       opset_imports=opsets, model=model)

    # ---------------------------------------------------------------- groups
    def _build_groups(self) -> Any:
        """Make the module groups (and fill `Group.nodes`); returns each node's group as
        its place in `groups` (numpy)."""
        import numpy as np

        root = Group(id="", name=self.title, qualname="")
        self.groups = {"": root}
        c = self.columns
        protos, names = c.protos, c.names
        dynamo = any(p.key == _SCOPES_KEY for n in protos[:50] for p in n.metadata_props)
        scope_of: list[Any]  # per node: the text naming its module (None: none)
        gid_of: dict[str, str] = {}  # that text -> the group
        if dynamo:
            scope_of = []
            add = scope_of.append
            # Nodes of one module share the scope text up to their own name: parse it once.
            for proto in protos:
                text, fused = "", False
                for p in proto.metadata_props:  # the rewriter's key comes before the scopes
                    if p.key == _SCOPES_KEY:
                        text = p.value
                        break
                    fused = fused or p.key == _FUSED_KEY
                if not text:
                    add(None)
                    continue
                moved = self._fused_path(proto, text) if fused else []
                # keyed apart from scope texts (which start with "[")
                prefix = "\0".join(s[0] for s in moved) if moved else text[: text.rfind(",")]
                if prefix not in gid_of:
                    gid_of[prefix] = self._ensure_group(moved or self._dynamo_path(proto, text))
                add(prefix)
            unplaced = [i for i, prefix in enumerate(scope_of) if prefix is None]
        else:
            # A TorchScript name's scope is the text up to its last "/": one group per scope
            # (made in the order the scopes first appear, parents first).
            scope_of = [name[: name.rfind("/") + 1] for name in names]
            for prefix in dict.fromkeys(scope_of):
                self._scope_group(prefix, gid_of)
            unplaced = list(compress(range(len(names)), map(not_, names)))  # no scope
        number = {gid: k for k, gid in enumerate(self.groups)}
        code_of = {prefix: number[gid] for prefix, gid in gid_of.items()}
        code = np.fromiter(map(code_of.get, scope_of, repeat(-1)), np.int64, len(scope_of))
        code[unplaced] = -1
        self._fill_group_nodes(code)
        if unplaced:
            # Nodes the exporter left without a scope (e.g. a Split made by a rewrite) join
            # the deepest module that all their neighbours share (unplaced ones placed
            # earlier count; later ones, not yet placed, do not).
            outs = {t for i in unplaced for t in c.outputs[i]}
            readers = c.consumers_of(outs)
            gids = list(self.groups)
            for i in unplaced:
                gid = self._common_neighbour_group(i, code, gids, readers)
                self.groups[gid].nodes.append(i)
                code[i] = number[gid]
        return code

    @property
    def node_groups(self) -> list[str]:
        """Each node's module group id ("": the graph itself)."""
        if self._node_groups is None:
            gids = list(self.groups)
            self._node_groups = list(map(gids.__getitem__, self.group_code.tolist()))
        return self._node_groups

    def _fill_group_nodes(self, code: Any) -> None:
        """Each group's `nodes` from each node's group (`code`; -1: not placed yet), in
        graph order."""
        import numpy as np

        order = np.argsort(code, kind="stable")
        bounds = np.searchsorted(code[order], np.arange(len(self.groups) + 1)).tolist()
        members = order.tolist()
        for k, g in enumerate(self.groups.values()):
            a, b = bounds[k], bounds[k + 1]
            if a < b:
                g.nodes = members[a:b]

    def _dynamo_path(self, proto: Any, scopes_text: str) -> list[tuple[str, str, str, str]]:
        """Module steps (id part, short name, qualified name, class) of a dynamo node."""
        classes_text = next((p.value for p in proto.metadata_props
                             if p.key == "pkg.torch.onnx.class_hierarchy"), "")
        scopes = _parse_list(scopes_text)
        if not scopes or scopes[0] == _NO_MODULE:
            return []
        classes = _parse_list(classes_text)
        if classes and not self.groups[""].class_name:
            self.groups[""].class_name = classes[0]
        out = []
        prev = ""
        for i, qual in enumerate(scopes[1:-1], start=1):
            short = qual[len(prev) + 1:] if prev and qual.startswith(prev + ".") else qual
            cls_name = classes[i] if i < len(classes) else ""
            out.append((qual, short, qual, cls_name))
            prev = qual
        return out

    def _fused_path(self, proto: Any, scopes_text: str) -> list[tuple[str, str, str, str]]:
        """The module path of a node fused from several (a BatchNorm folded into its Conv keeps
        the BatchNorm's scope): the module beside it whose weights it reads (``features.0.weight``
        is its main op's), [] when none is."""
        path = self._dynamo_path(proto, scopes_text)
        quals = [qual for _part, _short, qual, _cls in path]
        for name in proto.input:
            owner, dot, _param = name.rpartition(".")
            if not dot or name not in self.initializers or owner in quals:
                continue
            parent = owner.rpartition(".")[0]
            if parent and parent not in quals:
                continue
            kept = path[:quals.index(parent) + 1] if parent else []
            short = owner[len(parent) + 1:] if parent else owner
            return [*kept, (owner, short, owner, "")]
        return []

    def _scope_group(self, prefix: str, cache: dict[str, str]) -> str:
        """The group of a TorchScript name's scope ``/h.0/attn/`` (``/h.0/attn/MatMul``),
        made after its parent's: each new scope adds one group."""
        gid = cache.get(prefix)
        if gid is None:
            if not prefix.startswith("/") or prefix == "/":
                gid = ""
            else:
                cut = prefix.rfind("/", 0, -1)
                parent = self._scope_group(prefix[: cut + 1], cache)
                part = prefix[cut + 1: -1]
                gid = f"{parent}/{part}" if parent else part
                if gid not in self.groups:  # (as _ensure_group, one step)
                    up = self.groups[parent]
                    self.groups[gid] = Group(gid, part, f"{up.qualname}.{part}" if parent
                                             else part, "", parent, depth=up.depth + 1)
                    up.children.append(gid)
            cache[prefix] = gid
        return gid

    def _ensure_group(self, path: list[tuple[str, str, str, str]], gid: str = "") -> str:
        """The group at `path` (id part, short name, qualified name, class per step) below
        `gid`, made with any step not made yet."""
        for part, short, qual, cls_name in path:
            parent = gid
            gid = f"{gid}/{part}" if gid else part
            if gid not in self.groups:
                self.groups[gid] = Group(id=gid, name=short, qualname=qual, class_name=cls_name,
                                         parent=parent, depth=self.groups[parent].depth + 1)
                self.groups[parent].children.append(gid)
        return gid

    def _common_neighbour_group(self, i: int, code: Any, gids: list[str],
                                readers: dict[str, list[int]]) -> str:
        """The deepest group that the neighbours of node `i` (placed so far: `code`, each
        node's place in `gids`, -1 for none yet) share."""
        c = self.columns
        paths = []
        neighbours = c.input_source[c.input_start[i]:c.input_start[i + 1]].tolist()
        neighbours += [r for out in c.outputs[i] for r in readers.get(out, ())]
        for j in neighbours:
            gid = gids[code[j]] if j >= 0 and code[j] >= 0 else ""
            if gid:
                paths.append(gid.split("/"))
        if not paths:
            return ""
        common = paths[0]
        for p in paths[1:]:
            k = 0
            while k < len(common) and k < len(p) and common[k] == p[k]:
                k += 1
            common = common[:k]
        gid = "/".join(common)
        return gid if gid in self.groups else ""

    def group_of_module(self, qualname: str) -> Group | None:
        """The group of a submodule by its qualified name (``"h.0.attn"``)."""
        for g in self.groups.values():
            if g.qualname == qualname:
                return g
        return None

    def group_nodes(self, gid: str) -> Iterator[int]:
        """Every node inside a group, its subgroups included."""
        stack = [gid]
        while stack:
            g = self.groups[stack.pop()]
            yield from g.nodes
            stack.extend(g.children)

    def ancestors(self, gid: str) -> list[str]:
        """Group ids from the root's child down to ``gid`` itself (root excluded)."""
        out = []
        while gid:
            out.append(gid)
            gid = self.groups[gid].parent or ""
        return out[::-1]

    # ---------------------------------------------------------------- tensors
    def tensor(self, name: str) -> TensorInfo:
        """Type and connections of one value (a ``KeyError`` when the graph has no such name)."""
        init = self.initializers.get(name)
        made = self.columns.made_by(name)
        readers = (list(self._consumers.get(name, ())) if self._consumers is not None
                   else self.columns.consumers_of((name,)).get(name, []))
        shape: Shape | None
        if init is not None:
            dtype, shape = dtype_name(init.data_type), list(init.dims)
        elif (vi := self._value(name)) is not None:
            dtype, shape = _shape_of(vi)
        elif made is not None or readers:
            dtype, shape = "?", None
        else:
            raise KeyError(name)
        if name in self.inputs:
            kind = "input"
        elif name in self.outputs:
            kind = "output"
        elif init is not None:
            kind = "initializer"
        elif made is not None:
            kind = "value"
        else:
            kind = "outer"
        return TensorInfo(name=name, dtype=dtype, shape=shape, kind=kind, producer=made,
                          consumers=readers, is_initializer=init is not None)

    def shape(self, name: str) -> Shape | None:
        """The shape of a value, or None when unknown (cheap; used for edge labels)."""
        init = self.initializers.get(name)
        if init is not None:
            return list(init.dims)
        vi = self._value(name)
        return _shape_of(vi)[1] if vi is not None else None

    def _value(self, name: str) -> Any:
        """The ValueInfoProto of a value, or None; the graph's value_info is indexed on the
        first look-up past the graph's inputs and outputs."""
        vi = self._value_info.get(name)
        if vi is None and not self._all_value_info:
            vi = self._value_near_producer(name)
            if vi is not None:
                return vi
            self._all_value_info = True
            index = {v.name: v for v in self.proto.value_info}
            index.update(self._value_info)  # inputs and outputs win, as before
            self._value_info = index
            vi = index.get(name)
        return vi

    def _value_near_producer(self, name: str) -> Any:
        """The ValueInfoProto of a value looked for where the exporters write it: value_info
        lists values in graph order, so a value made by node p of n sits near entry p / n of
        it. Found there, the first shape labels cost no index of 100k entries; else None."""
        p = self.columns.made_by(name)
        infos = self.proto.value_info
        if p is None or not len(infos):
            return None
        guess = p * len(infos) // max(len(self.nodes), 1)
        for k in range(max(0, guess - 48), min(len(infos), guess + 49)):
            if infos[k].name == name:
                return infos[k]
        return None

    def initializer_array(self, name: str) -> Any:
        """The values of an initializer as a numpy array. Values in external data are memory
        mapped (read-only; pages are read only as they are looked at), so asking for one
        tensor of a multi-GB model reads that tensor's bytes and nothing else."""
        from onnx import numpy_helper

        t = self.initializers[name]
        root_path = self._root().path
        base = root_path.parent if root_path is not None else Path()
        if t.data_location == 1:
            mapped = _memory_map(t, base)
            if mapped is not None:
                return mapped
        return numpy_helper.to_array(t, base_dir=str(base))

    def _root(self) -> GraphModel:
        g = self
        while g.parent is not None:
            g = g.parent
        return g

    # ---------------------------------------------------------------- subgraphs
    def subgraph(self, node_index: int, attribute: str) -> GraphModel:
        """The subgraph in a node attribute (``"body"``, ``"then_branch"``, ``"branches[1]"``)."""
        key = (node_index, attribute)
        if key not in self._subgraphs:
            node = self.nodes[node_index]
            base, _, idx = attribute.partition("[")
            attr = next(a for a in node.proto.attribute if a.name == base)
            g = attr.graphs[int(idx.rstrip("]"))] if idx else attr.g
            self._subgraphs[key] = GraphModel(
                g, path=self.path, title=f"{node.label}.{attribute}", parent=self,
                functions=self.functions, opset_imports=self.opset_imports)
        return self._subgraphs[key]

    def function_of(self, node_index: int) -> tuple[str, str] | None:
        """The (domain, name) of the local function a node calls, if it calls one."""
        node = self.nodes[node_index]
        key = (node.domain, node.op_type)
        return key if key in self.functions else None

    def function_graph(self, key: tuple[str, str]) -> GraphModel:
        """A local function's body as a graph."""
        cache_key = (-1, f"{key[0]}::{key[1]}")
        if cache_key not in self._subgraphs:
            self._subgraphs[cache_key] = GraphModel(
                self.functions[key], path=self.path, title=f"function {key[1]}", parent=self,
                functions=self.functions, opset_imports=self.opset_imports, is_function=True)
        return self._subgraphs[cache_key]

    def has_subgraphs(self, node_index: int) -> bool:
        """True when a node can be opened (control-flow body or local function)."""
        node = self.nodes[node_index]
        return bool(self.function_of(node_index)) or any(
            a.type in _SUBGRAPH_TYPES for a in node.proto.attribute)

    # ---------------------------------------------------------------- search
    def search(self, text: str) -> list[int]:
        """Indices of nodes matching ``text`` (case-insensitive), in graph order.

        A query that is exactly an op type ("softmax") finds the nodes of that type; any
        other query finds nodes whose name, op type or an input/output name contains it.
        """
        q = text.strip().lower()
        if not q:
            return []
        ops, lines = self._search_index()
        exact = ops.get(q)
        if exact:
            return list(exact)
        return [i for i, line in enumerate(lines) if q in line]

    def _search_index(self) -> tuple[dict[str, list[int]], list[str]]:
        """Lowercase op type -> nodes, and per node one lowercase line of what a query may
        match (name, op type, outputs, inputs; a NUL between them keeps a query from matching
        across two fields). Built once: a tenth of a second at 100k nodes."""
        if self._search_ops is None or self._search_text is None:
            c = self.columns
            ops: dict[str, list[int]] = {}
            for i, op in enumerate(c.op_types):
                ops.setdefault(op.lower(), []).append(i)
            self._search_text = ["\0".join((name, op, *outs, *ins)).lower() for name, op, outs, ins
                                 in zip(c.names, c.op_types, c.outputs, c.inputs, strict=True)]
            self._search_ops = ops
        return self._search_ops, self._search_text

    def build_indexes(self) -> None:
        """Build now what search and the properties panel look things up in (the search
        index, the value types, each value's producer and consumers): half a second at 100k
        nodes that the browser spends while idle after the first paint instead of before it
        or in the first search or click."""
        self._search_index()
        self._value("")
        _ = self.producer, self.consumers  # (each made on first use)

    def node_by_name(self, name: str) -> int | None:
        """Index of the node with this ONNX name."""
        names = self.columns.names
        return names.index(name) if name in names else None

    def breadcrumb(self) -> list[GraphModel]:
        """This graph and its enclosing graphs, outermost first."""
        out = []
        g: GraphModel | None = self
        while g is not None:
            out.append(g)
            g = g.parent
        return out[::-1]
