"""Layered top-to-bottom layout of a GraphModel, laid out one module group at a time.

Each expanded group is laid out on its own (its children: nodes and child groups, plus an
entry and an exit port), so a collapsed module is one box and expanding one re-lays out
only that group and the coordinates of its ancestors. Each group's items are placed by the
small Sugiyama in onnx_studio.engine.graph.layered.

Why not igraph's C ``layout_sugiyama``: measured over every group of a fully expanded graph
(tests/benchmarks/bench_graph.py --compare-igraph) it is about 2.4x faster (0.2 s against
0.5 s for 5,200 groups, 20k nodes), but it places unit-size vertices — no box widths, no
ports, no routes that keep clear of wide boxes. Opening a graph lays out only the visible
level (a few milliseconds either way), so the core that knows real sizes wins.
"""

from __future__ import annotations

from functools import partial
from itertools import chain, pairwise
from typing import Any, cast

from onnx_studio.engine.graph.edges import LiftedEdges
from onnx_studio.engine.graph.items import (
    IN,
    OUT,
    Item,
    Measure,
    NodeItems,
    NodeMeasure,
    ViewGroup,
    default_measure,
    measure_each,
    short,
)
from onnx_studio.engine.graph.layered import H_GAP, LayeredLayout, Placement
from onnx_studio.engine.graph.model import GraphModel, auxiliary_nodes, format_shape, no_gc
from onnx_studio.engine.graph.scene import Boxes, Edge, Edges, Run, Scene, make_edge
from onnx_studio.engine.graph.tree import ViewTree

__all__ = ["HEADER", "IN", "OUT", "PAD", "GraphLayout", "Item", "Measure", "NodeMeasure",
           "ViewGroup", "default_measure", "measure_each"]

PAD = 14.0  # inside an expanded group
HEADER = 22.0  # title strip of an expanded group
MAX_CHILDREN = 1000


# --------------------------------------------------------------------------- the hierarchy

class GraphLayout(ViewTree, LiftedEdges):
    """The expand/collapse state of a graph's module groups and its current layout."""

    def __init__(self, model: GraphModel, measure: Measure | None = None,
                 max_children: int = MAX_CHILDREN, fold: bool = True,
                 left_to_right: bool = False, measure_nodes: NodeMeasure | None = None
                 ) -> None:
        self.model = model
        self.measure = measure or default_measure
        self.measure_nodes = measure_nodes or measure_each(self.measure)
        # Left to right: each group's layers run across instead of down; boxes and group
        # frames (title on top) stay as they are.
        self.left_to_right = left_to_right
        self.folded: dict[int, int] = auxiliary_nodes(model) if fold else {}
        self.folded_into: dict[int, list[int]] = {}
        for a, owner in self.folded.items():
            self.folded_into.setdefault(owner, []).append(a)
        self.items = NodeItems(model)
        self.groups: dict[str, ViewGroup] = {}
        self.parent_of: dict[str, str] = {}  # item key -> view group id
        self._node_keys: list[str] = []  # node index -> its item key ("" when folded)
        self._edges: dict[str, dict[tuple[str, str], list[str]]] = {}
        with no_gc():
            self._build_tree(max_children)
        self._lifted = False  # edges below the top level are lifted when a group opens
        self.expanded: set[str] = {""}
        self._shown: dict[str, str] = {}  # view group -> the collapsed box showing it, or ""
        self._structure: dict[str, tuple[LayeredLayout, list[str], list[tuple[str, str]]]] = {}
        self._placement: dict[str, Placement] = {}
        self._group_slots: dict[str, list[int]] = {}  # where a group's child groups are
        self._cores: dict[tuple[object, ...], LayeredLayout] = {}
        self._placed: dict[tuple[object, ...], Placement] = {}
        self._sizes: dict[str, tuple[float, float]] = {}
        self._op_types: dict[str, str] = {}  # a measured node's key -> its label, the op type
        self._all_measured = False  # every visible node's box measured
        self._titles: dict[tuple[str, str], float] = {}  # a group title's text -> its width
        self._level: dict[str, int] | None = None  # see _levels
        # per expanded group: the placement its frame was measured for, and the frame
        self._frames: dict[str, tuple[Placement, tuple[float, float, float | None,
                                                       float | None]]] = {}
        self._scene: Scene | None = None

    # ------------------------------------------------------------------ state
    def is_group(self, key: str) -> bool:
        """True for a box that can expand (a module group or a section)."""
        return key.startswith("g:")

    def toggle(self, gid: str) -> None:
        """Expand a collapsed group or collapse an expanded one."""
        if gid in self.expanded:
            self.collapse(gid)
        else:
            self.expand(gid)

    def expand(self, gid: str) -> None:
        """Show a group's children (its ancestors expand too)."""
        for g in self._lineage(gid):
            if g not in self.expanded:
                self.expanded.add(g)
                self._dirty(g)

    def collapse(self, gid: str) -> None:
        """Show a group as one box (the whole graph never collapses)."""
        if gid and gid in self.expanded:
            self.expanded.discard(gid)
            self._dirty(gid)

    def expand_all(self) -> None:
        """Expand every group."""
        self.expanded = set(self.groups)
        self._placement.clear()
        self._shown.clear()
        self._scene = None

    def collapse_to_depth(self, depth: int) -> None:
        """Expand the groups ``depth`` levels deep (0: every top-level module is one box)."""
        self.expanded = {g for g, level in self._levels().items() if level <= depth}
        self._placement.clear()
        self._shown.clear()
        self._scene = None

    def max_depth(self) -> int:
        """How many levels of groups nest in this graph (0: none; sections count as a level)."""
        return max(self._levels().values(), default=0)

    def _levels(self) -> dict[str, int]:
        """Each group's level: how many groups hold it, itself included (0: the graph)."""
        if self._level is None:
            level: dict[str, int] = {"": 0}
            for gid in self.groups:
                up = [gid]
                while up[-1] not in level:
                    up.append(self.groups[up[-1]].parent or "")
                base = level[up.pop()]
                for k, g in enumerate(reversed(up), start=1):
                    level[g] = base + k
            self._level = level
        return self._level

    def _dirty(self, gid: str) -> None:
        """A group's placement depends on what is expanded below it: drop it and its
        ancestors' placements, keep every other group's."""
        self._scene = None
        self._shown.clear()
        self._placement.pop(gid, None)
        for g in self._lineage(gid):
            self._placement.pop(g, None)
        self._placement.pop("", None)

    def _lineage(self, gid: str) -> list[str]:
        out = []
        g: str | None = gid
        while g:
            out.append(g)
            g = self.groups[g].parent
        return out

    def reveal(self, key: str) -> None:
        """Expand every group above an item so it has a box of its own."""
        for gid in self.chain(key):
            if gid not in self.expanded:
                self.expanded.add(gid)
                self._dirty(gid)

    def visible_key(self, key: str) -> str:
        """The box that shows ``key`` now: itself, or its outermost collapsed group."""
        gid = self.parent_of[key]
        shown = self._shown.get(gid)
        if shown is None:  # once per group and expansion state (search marks 1000s of hits)
            shown = next(("g:" + g for g in self.chain(key) if g not in self.expanded), "")
            self._shown[gid] = shown
        return shown or key

    def nodes_in(self, gid: str) -> list[int]:
        """Model node indices inside a view group (folded nodes included)."""
        out: list[int] = []
        stack = [gid]
        while stack:
            for k in self.groups[stack.pop()].items:
                if k.startswith("g:"):
                    stack.append(k[2:])
                elif k.startswith("n"):
                    i = int(k[1:])
                    out.append(i)
                    out.extend(self.folded_into.get(i, ()))
        return out

    def node_key(self, index: int) -> str:
        """The item key of a node (a folded node maps to the node it feeds)."""
        return f"n{self.folded.get(index, index)}"

    # ------------------------------------------------------------------ layout
    def _structure_of(self, gid: str) -> tuple[LayeredLayout, list[str], list[tuple[str, str]]]:
        st = self._structure.get(gid)
        if st is None:
            keys = self.groups[gid].items[:]
            gedges = self._edges_of(gid)
            pairs = list(gedges)
            if any(a == IN for a, _ in pairs):
                keys.insert(0, IN)
            if any(b == OUT for _, b in pairs):
                keys.append(OUT)
            idx = {k: i for i, k in enumerate(keys)}
            ends = tuple(map(idx.__getitem__, chain.from_iterable(pairs)))  # a, b, a, b...
            # The blocks of a deep model are one structure repeated: lay it out once. A
            # group's items are in graph order (_build_tree), so its edges and size are all
            # of its structure.
            sig = (ends, len(keys))
            core = self._cores.get(sig)
            if core is None:
                edges = list(zip(ends[::2], ends[1::2], strict=True))
                core = self._cores[sig] = LayeredLayout(len(keys), edges, self._ranks(keys))
            st = self._structure[gid] = (core, keys, pairs)
        return st

    def _ranks(self, keys: list[str]) -> list[float]:
        return [-1e18 if k == IN else 1e18 if k == OUT else self.rank(k) for k in keys]

    def _stacked(self, core: LayeredLayout, keys: list[str],
                 sizes: list[tuple[float, float]]) -> LayeredLayout:
        """The whole graph's core with its inputs (outputs) in rows where one layer of them
        would be wider than the rest of the graph (GPT-2 with its cache: 7 inputs, 5 outputs),
        so the graph keeps the shape of its body and reads at Fit."""
        below = _io_rows(keys, sizes, core.layer)
        if not below:
            return core
        sig = ("stacked", id(core), tuple(below))
        stacked = self._cores.get(sig)
        if stacked is None:
            stacked = self._cores[sig] = LayeredLayout(core.n, core.edges, self._ranks(keys),
                                                       below)
        return stacked

    def _size(self, key: str) -> tuple[float, float]:
        s = self._sizes.get(key)
        if s is None:
            s = self._sizes[key] = self.measure(self.items[key])
        return s

    def _measure_nodes(self, keys: list[str]) -> None:
        """Measure node boxes in one call (their Items are made only when asked for): their
        op types and their labels (names, cut to `short`'s length)."""
        c = self.model.columns
        ops, names = c.op_types, c.names
        nodes = [int(k[1:]) for k in keys]
        labels = list(map(ops.__getitem__, nodes))
        subs = [name if len(name) <= 28 else short(name)
                for name in (names[i] or f"{ops[i]}_{i}" for i in nodes)]  # Node.label
        self._sizes.update(zip(keys, self.measure_nodes(labels, subs), strict=True))
        self._op_types.update(zip(keys, labels, strict=True))

    def _measure_every_node(self) -> None:
        """Measure every visible node not measured yet in one call: most groups are open
        (a measure per group would cost more than the measuring)."""
        self._all_measured = True
        known = self._sizes
        unmeasured = [k for k in self._node_keys if k and k not in known]
        if unmeasured:
            self._measure_nodes(unmeasured)

    def _place(self, gid: str) -> Placement:
        """Lay out an expanded group (children first) and cache it."""
        pl = self._placement.get(gid)
        if pl is not None:
            return pl
        core, keys, _pairs = self._structure_of(gid)
        known = self._sizes
        if not self._all_measured:
            unmeasured = [k for k in keys if k[0] == "n" and k not in known]
            if unmeasured:
                self._measure_nodes(unmeasured)
        # a node's size is known (the most common child); the rest are filled below
        got: list[tuple[float, float] | None] = list(map(known.get, keys))
        in_port: list[float | None] = [None] * len(keys)
        out_port: list[float | None] = [None] * len(keys)
        if keys and keys[0] == IN:
            got[0] = (0.0, 0.0)
        if keys and keys[-1] == OUT:
            got[-1] = (0.0, 0.0)
        expanded = self.expanded
        for i in self._slots(gid, keys):
            k = keys[i]
            if k[2:] in expanded:
                sub = self._place(k[2:])
                w, h, in_port[i], out_port[i] = self._expanded_box(k[2:], sub)
                got[i] = (w, h)
            else:
                got[i] = self._size(k)
        # (None left: the whole graph's inputs and outputs)
        sizes = [s if s is not None else self._size(k) for k, s in zip(keys, got, strict=True)
                 ] if None in got else cast(list[tuple[float, float]], got)
        if self.left_to_right:  # lay out across: the core's "width" is our height
            sizes = [(h, w) for w, h in sizes]
        if not gid:
            core = self._stacked(core, keys, sizes)
        sig = (id(core), tuple(sizes), tuple(in_port), tuple(out_port))
        pl = self._placed.get(sig)
        if pl is None:  # placements depend only on the structure, sizes and ports
            pl = core.place(sizes, in_port, out_port)
            if self.left_to_right:
                pl = Placement(pos=[(b, a) for a, b in pl.pos],
                               routes=[[(b, a) for a, b in r] for r in pl.routes],
                               width=pl.height, height=pl.width)
            self._placed[sig] = pl
        self._placement[gid] = pl
        return pl

    def _slots(self, gid: str, keys: list[str]) -> list[int]:
        """Where a group's child groups are among its keys."""
        slots = self._group_slots.get(gid)
        if slots is None:
            slots = self._group_slots[gid] = [i for i, k in enumerate(keys) if k[0] == "g"]
        return slots

    def _expanded_box(self, gid: str, pl: Placement) -> tuple[float, float, float | None,
                                                               float | None]:
        done = self._frames.get(gid)
        if done is not None and done[0] is pl:  # asked by _place, then again by _emit
            return done[1]
        _core, keys, _pairs = self._structure_of(gid)
        text = (self.groups[gid].label, self.items["g:" + gid].sublabel)  # its title strip
        title_w = self._titles.get(text)
        if title_w is None:  # (the blocks of a deep model share their modules' titles)
            title_w = self._titles[text] = self.measure(Item("", "title", *text, 0))[0]
        w = max(pl.width, title_w) + 2 * PAD
        h = pl.height + HEADER + 2 * PAD
        dx = PAD + (w - 2 * PAD - pl.width) / 2
        # Where edges enter and leave the frame: along its top and bottom (top to bottom), or
        # its left and right sides (left to right).
        axis, off = (1, HEADER + PAD) if self.left_to_right else (0, dx)
        ip = off + pl.pos[0][axis] if keys and keys[0] == IN else None
        op = off + pl.pos[-1][axis] if keys and keys[-1] == OUT else None
        self._frames[gid] = (pl, (w, h, ip, op))
        return w, h, ip, op

    def scene(self) -> Scene:
        """Boxes and edges for the current expansion state, in scene coordinates."""
        if self._scene is not None:
            return self._scene
        if not self._all_measured and 2 * len(self.expanded) > len(self.groups):
            self._measure_every_node()
        root = self._place("")
        runs: list[Run] = []
        with no_gc():
            self._walk("", root, 0.0, 0.0, None, runs)
            self._scene = self._columns(runs, root)
        return self._scene

    def _walk(self, gid: str, pl: Placement, ox: float, oy: float,
              frame: tuple[float, float] | None, runs: list[Run]) -> None:
        """Where each expanded group is drawn: one run per group, parents first."""
        _core, keys, _pairs = self._structure_of(gid)
        run = Run(gid, pl, ox, oy, frame, [])
        runs.append(run)
        expanded, pos, across = self.expanded, pl.pos, self.left_to_right
        placement, frames = self._placement, self._frames
        for i in self._slots(gid, keys):
            k = keys[i]
            if k[2:] not in expanded:
                continue
            sub = placement.get(k[2:]) or self._place(k[2:])  # (placed with this group)
            done = frames.get(k[2:])
            w, h, _ip, _op = done[1] if done is not None and done[0] is sub else \
                self._expanded_box(k[2:], sub)
            x, y = pos[i]
            x += ox
            y += oy
            run.opened.append(i)
            dx = PAD + (w - 2 * PAD - sub.width) / 2
            self._walk(k[2:], sub, x + dx, y + HEADER + PAD,
                       (x, x + w) if across else (y, y + h), runs)

    def _columns(self, runs: list[Run], root: Placement) -> Scene:
        """The scene's columns from the runs: the runs sharing a placement (the blocks of a
        deep model) are offset together, so the work per box is a few numpy operations."""
        import numpy as np  # lazily: the window shows before numpy is needed

        batches: dict[int, list[Run]] = {}
        for run in runs:
            batches.setdefault(id(run.pl), []).append(run)
        keys: list[str] = []
        xs, ys, ws, hs, depths, opened, bounds = [], [], [], [], [], [], []
        edge_batches: list[tuple[int, int, list[Run]]] = []  # first edge, per run, runs
        n_edges = 0
        across = self.left_to_right
        for group in batches.values():
            first = group[0]
            _core, keys0, pairs0 = self._structure_of(first.gid)
            lo = 1 if keys0 and keys0[0] == IN else 0
            hi = len(keys0) - 1 if keys0 and keys0[-1] == OUT else len(keys0)
            m = hi - lo
            ox = np.array([r.ox for r in group])
            oy = np.array([r.oy for r in group])
            if m:
                # The same placement means the same sizes: the first run's are everyone's.
                size = np.array([self._box_size(first.gid, k) for k in keys0[lo:hi]])
                pos = np.array(first.pl.pos[lo:hi], dtype=float)
                xs.append((pos[:, 0][None, :] + ox[:, None]).ravel())
                ys.append((pos[:, 1][None, :] + oy[:, None]).ravel())
                ws.append(np.tile(size[:, 0], len(group)))
                hs.append(np.tile(size[:, 1], len(group)))
                depths.append(np.repeat([self.groups[r.gid].depth + 1 for r in group], m))
                flags = np.zeros(len(group) * m, dtype=bool)
                flags[[g * m + i - lo for g, r in enumerate(group) for i in r.opened]] = True
                structure = self._structure
                for r in group:
                    keys.extend(structure[r.gid][1][lo:hi])
                opened.append(flags)
            k = len(pairs0)
            if k:
                rb = np.array(first.pl.route_bounds(), dtype=float).reshape(k, 4)
                b = rb[None, :, :] + np.stack([ox, oy, ox, oy], axis=1)[:, None, :]
                entering = np.array([a == IN for a, _ in pairs0])
                leaving = np.array([e == OUT for _, e in pairs0])
                if entering.any() or leaving.any():  # (never the whole graph's: no frame)
                    # Entry and exit edges reach the group's border, where the parent's end.
                    frames = np.array([r.frame for r in group], dtype=float)
                    b[:, entering, 0 if across else 1] = frames[:, :1]
                    b[:, leaving, 2 if across else 3] = frames[:, 1:]
                bounds.append(b.reshape(-1, 4))
                edge_batches.append((n_edges, k, group))
                n_edges += k * len(group)

        def joined(parts: list[Any], dtype: type) -> Any:
            return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

        # Labels and kinds in one pass over the boxes (a node's is its op type); a sublabel
        # is read from `items` when its Box is made.
        items = self.items
        labels: list[Any] = list(map(self._op_types.get, keys))
        kinds = ["node"] * len(keys)
        for i in [i for i, label in enumerate(labels) if label is None]:  # not a node
            item = items[keys[i]]
            labels[i], kinds[i] = item.label, item.kind
        boxes = Boxes(keys, kinds, labels, items, joined(xs, float), joined(ys, float),
                      joined(ws, float), joined(hs, float), joined(depths, int),
                      joined(opened, bool))
        edges = Edges(n_edges, partial(make_edge, edge_batches, across, self._structure,
                                       self._edges))
        return Scene(boxes=boxes, edges=edges, width=root.width, height=root.height,
                     index=dict(zip(keys, range(len(keys)), strict=True)),
                     edge_bounds=np.concatenate(bounds) if bounds else np.zeros((0, 4)))

    def _box_size(self, gid: str, key: str) -> tuple[float, float]:
        """The size of a child's box in `gid` as placed: an expanded group's frame, or its
        own box."""
        if key[0] == "g" and key[2:] in self.expanded:
            return self._expanded_box(key[2:], self._place(key[2:]))[:2]
        return self._size(key)

    def edge_label(self, edge: Edge) -> str:
        """The shape label of an edge ("batch×seq×768", "+2" when it carries more tensors),
        formatted on first use and kept."""
        if edge.label is None:
            text = format_shape(self.model.shape(edge.tensors[0]))
            n = len(edge.tensors)
            edge.label = text if n == 1 else f"{text} (+{n - 1})"
        return edge.label


def _io_rows(keys: list[str], sizes: list[tuple[float, float]], layer: list[int]
             ) -> list[tuple[int, int]]:
    """(upper, lower) pairs that stack the graph inputs (outputs) of one layer into rows, each
    row no wider than the graph's widest other box (or its widest input): the `below`
    constraints of LayeredLayout. Empty when every layer of them fits on one row (or holds
    fewer than three)."""
    io = [i for i, k in enumerate(keys) if k[:2] in ("i:", "o:")]
    if len(io) < 3:
        return []
    body = max((sizes[i][0] for i, k in enumerate(keys) if k[:2] not in ("i:", "o:")),
               default=0.0)
    limit = max([body] + [sizes[i][0] for i in io])
    by_layer: dict[tuple[str, int], list[int]] = {}
    for i in io:
        by_layer.setdefault((keys[i][:2], layer[i]), []).append(i)
    below: list[tuple[int, int]] = []
    for members in by_layer.values():
        if len(members) < 3:  # two side by side read well enough
            continue
        rows: list[list[int]] = [[]]
        width = 0.0
        for i in members:
            w = sizes[i][0]
            if rows[-1] and width + H_GAP + w > limit:
                rows.append([])
            width = (width + H_GAP + w) if rows[-1] else w
            rows[-1].append(i)
        for upper, lower in pairwise(rows):
            below.extend((u, v) for u in upper for v in lower)
    return below
