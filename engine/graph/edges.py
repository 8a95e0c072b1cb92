"""The edges between the children of each module group of a GraphLayout, lifted from the
graph's own: an edge between two nodes is drawn in their lowest common group (between the
children holding them) and as entry and exit edges in the groups below. The whole graph's
top level is found in one pass over the edges; every other group's when one first opens, so a
graph opened collapsed never lifts its 100k edges into the modules. A mixin of GraphLayout."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.graph.items import IN, OUT
from engine.graph.model import GraphModel, no_gc

if TYPE_CHECKING:
    from engine.graph.items import ViewGroup


class LiftedEdges:
    """`_edges_of(gid)`: the edges between a group's children, lifted on demand."""

    model: GraphModel
    groups: dict[str, ViewGroup]
    parent_of: dict[str, str]  # item key -> view group id
    expanded: set[str]
    _node_keys: list[str]  # node index -> its item key ("" when folded)
    _edges: dict[str, dict[tuple[str, str], list[str]]]
    _lifted: bool  # edges below the top level are lifted when a group opens

    def chain(self, key: str) -> list[str]:
        """View group ids from the root down to the group holding ``key``."""
        out = []
        gid: str | None = self.parent_of[key]
        while gid is not None:
            out.append(gid)
            gid = self.groups[gid].parent if gid else None
        return out[::-1]

    def _edges_of(self, gid: str) -> dict[tuple[str, str], list[str]]:
        """The edges between a group's children (keys ``IN``/``OUT`` for what enters and
        leaves it): the top level's from one pass over the graph's edges, every other
        group's when the first of them is laid out (a graph opened collapsed never lifts its
        100k edges into the modules)."""
        if gid not in self._edges and not self._lifted:
            if gid or len(self.expanded) > 1:  # a group is open: every level's edges are needed
                with no_gc():
                    self._build_edges()
            else:
                self._edges[""] = self._top_edges()
        return self._edges.get(gid, {})

    def _visible_pairs(self) -> tuple[Any, list[str], list[tuple[str, str, str]]]:
        """The edges drawn at full expansion, in the order the lifting visits them: the
        (node, input) pairs that make one (positions into the model's columns; a graph
        input's edge has source -1), each pair's source item key, then the edges into the
        graph outputs as (source item, target item, tensor)."""
        import numpy as np  # lazily: the window shows before numpy is needed

        m = self.model
        c = m.columns
        keys = self._node_keys
        shown_inputs = [k[2:] for k in self.groups[""].items if k[:2] == "i:"]
        visible = np.fromiter(map(bool, keys), bool, len(keys))
        source = c.input_source
        read = visible[c.input_node] if len(keys) else np.zeros(0, dtype=bool)
        from_node = read & (source >= 0)
        from_node[from_node] = visible[source[from_node]]
        from_input = read & (source < 0) & c.value_mask(shown_inputs)[c.input_value]
        pairs = np.flatnonzero(from_node | from_input)
        names = c.value_names
        srcs = [keys[s] if s >= 0 else "i:" + names[v] for s, v in
                zip(source[pairs].tolist(), c.input_value[pairs].tolist(), strict=True)]
        outs: list[tuple[str, str, str]] = []
        for t in m.outputs:
            p = c.made_by(t)
            if p is not None and keys[p]:
                outs.append((keys[p], "o:" + t, t))
            elif t in shown_inputs:
                outs.append(("i:" + t, "o:" + t, t))
        return pairs, srcs, outs

    def _visible_edges(self) -> list[tuple[str, str, str]]:
        """(source item, target item, tensor) of every edge drawn at full expansion, in the
        order the lifting visits them (graph order of the consumers, then graph outputs)."""
        pairs, srcs, outs = self._visible_pairs()
        c = self.model.columns
        keys, flat = self._node_keys, c.flat_inputs
        dsts = c.input_node[pairs].tolist()
        return [*zip(srcs, map(keys.__getitem__, dsts), map(flat.__getitem__, pairs.tolist()),
                     strict=True), *outs]

    def _top_edges(self) -> dict[tuple[str, str], list[str]]:
        """The top level's edges: between the top-level items holding either end."""
        import numpy as np

        top: dict[str, str] = {"": ""}  # view group -> its top-level group item ("": none)
        for gid in self.groups:
            if gid and gid not in top:
                chain = [gid]
                while chain[-1] not in top:
                    chain.append(self.groups[chain[-1]].parent or "")
                t = top[chain[-1]] or "g:" + chain[-2]
                for g in chain[:-1]:
                    top[g] = t
        parent_of = self.parent_of
        pairs, srcs, outs = self._visible_pairs()
        c = self.model.columns
        keys = self._node_keys

        def top_of(key: str) -> str:
            return top[parent_of[key]] or key

        # each visible node's top-level item as a number (its module's, unless it sits in
        # the whole graph itself); the extra last entry stands for a graph input
        numbers: dict[str, int] = {}
        group_top = [numbers.setdefault(top[g], len(numbers)) if top[g] else -1
                     for g in self.model.groups]
        node_top = np.append(np.array(group_top, dtype=np.int64)[self.model.group_code], -1)
        for i in np.flatnonzero(node_top[:-1] < 0).tolist():
            if keys[i]:
                node_top[i] = numbers.setdefault(top_of(keys[i]), len(numbers))
        source = c.input_source[pairs]
        dst = c.input_node[pairs]
        across = np.flatnonzero((node_top[source] != node_top[dst]) | (source < 0))
        edges: dict[tuple[str, str], list[str]] = {}
        flat = c.flat_inputs
        for k, p, j in zip(across.tolist(), pairs[across].tolist(), dst[across].tolist(),
                           strict=True):
            ta, tb = top_of(srcs[k]), top_of(keys[j])
            if ta != tb:
                lst = edges.setdefault((ta, tb), [])
                t = flat[p]
                if t not in lst:
                    lst.append(t)
        for src, dst, t in outs:
            ta, tb = top_of(src), top_of(dst)
            if ta != tb:
                lst = edges.setdefault((ta, tb), [])
                if t not in lst:
                    lst.append(t)
        return edges

    def _build_edges(self) -> None:
        """Lift every visible edge to the groups it passes through: an edge between
        siblings in its lowest common group, and entry/exit edges in the groups below. The
        top level's edges, when already found, are kept as they are (the same by
        construction; its layout may be cached on them)."""
        self._lifted = True
        top = self._edges.pop("", None)
        chains: dict[str, list[str]] = {}
        edges = self._edges

        def chain_of(key: str) -> list[str]:
            gid = self.parent_of[key]
            c = chains.get(gid)
            if c is None:
                c = chains[gid] = self.chain(key)
            return c

        def add(gid: str, a: str, b: str, tensor: str) -> None:
            lst = edges.setdefault(gid, {}).setdefault((a, b), [])
            if tensor not in lst:
                lst.append(tensor)

        parent_of = self.parent_of

        def connect(src: str, dst: str, tensor: str) -> None:
            gu = parent_of[src]
            if gu == parent_of[dst]:  # most edges stay inside one module
                add(gu, src, dst, tensor)
                return
            cu, cv = chain_of(src), chain_of(dst)
            k = 0
            while k < len(cu) and k < len(cv) and cu[k] == cv[k]:
                k += 1
            lca = cu[k - 1]
            a = "g:" + cu[k] if k < len(cu) else src
            b = "g:" + cv[k] if k < len(cv) else dst
            add(lca, a, b, tensor)
            for j in range(k, len(cu)):
                add(cu[j], "g:" + cu[j + 1] if j + 1 < len(cu) else src, OUT, tensor)
            for j in range(k, len(cv)):
                add(cv[j], IN, "g:" + cv[j + 1] if j + 1 < len(cv) else dst, tensor)

        visible = self._visible_edges()
        for src, dst, t in visible:
            gd = parent_of[dst]
            if parent_of[src] == gd:  # most edges stay inside one module
                lst = edges.setdefault(gd, {}).setdefault((src, dst), [])
                if t not in lst:
                    lst.append(t)
            else:
                connect(src, dst, t)
        if top is not None:
            edges[""] = top
