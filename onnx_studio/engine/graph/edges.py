"""The edges between the children of each module group of a GraphLayout, lifted from the
graph's own: an edge between two nodes is drawn in their lowest common group (between the
children holding them) and as entry and exit edges in the groups below. The whole graph's
top level is found in one pass over the edges; every other group's when one first opens, so a
graph opened collapsed never lifts its 100k edges into the modules. A mixin of GraphLayout."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from onnx_studio.engine.graph.items import IN, OUT
from onnx_studio.engine.graph.model import GraphModel, no_gc

if TYPE_CHECKING:
    from onnx_studio.engine.graph.items import ViewGroup


class LiftedEdges:
    """`_edges_of(gid)`: the edges between a group's children, lifted on demand."""

    model: GraphModel
    groups: dict[str, ViewGroup]
    parent_of: dict[str, str]  # item key -> view group id
    expanded: set[str]
    _node_keys: list[str]  # node index -> its item key ("" when folded)
    _visible: Any  # numpy: node index -> not folded
    _edges: dict[str, dict[tuple[str, str], list[str]]]
    _lifted: bool  # edges below the top level are lifted when a group opens

    def chain(self, key: str) -> list[str]:
        """View group ids from the root down to the group holding ``key``."""
        return self._chain_of_group(self.parent_of[key])

    def _chain_of_group(self, gid: str) -> list[str]:
        """View group ids from the root down to `gid`."""
        out = []
        g: str | None = gid
        while g is not None:
            out.append(g)
            g = self.groups[g].parent if g else None
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

    def _visible_pairs(self) -> tuple[Any, list[tuple[str, str, str]]]:
        """The edges drawn at full expansion, in the order the lifting visits them: the
        (node, input) pairs that make one (numpy positions into the model's columns; the
        source of a graph input's edge is -1), then the edges into the graph outputs as
        (source item, target item, tensor)."""
        import numpy as np  # lazily: the window shows before numpy is needed

        m = self.model
        c = m.columns
        keys = self._node_keys
        shown_inputs = [k[2:] for k in self.groups[""].items if k[:2] == "i:"]
        visible = self._visible
        source = c.input_source
        read = visible[c.input_node] if len(keys) else np.zeros(0, dtype=bool)
        from_node = read & (source >= 0)
        from_node[from_node] = visible[source[from_node]]
        from_input = read & (source < 0) & c.value_mask(shown_inputs)[c.input_value]
        outs: list[tuple[str, str, str]] = []
        for t in m.outputs:
            p = c.made_by(t)
            if p is not None and keys[p]:
                outs.append((keys[p], "o:" + t, t))
            elif t in shown_inputs:
                outs.append(("i:" + t, "o:" + t, t))
        return np.flatnonzero(from_node | from_input), outs

    def _source_keys(self, pairs: Any) -> list[str]:
        """The source item of each of these (node, input) pairs: a node's key or a graph
        input's."""
        c = self.model.columns
        keys, names = self._node_keys, c.value_names
        return [keys[s] if s >= 0 else "i:" + names[v] for s, v in
                zip(c.input_source[pairs].tolist(), c.input_value[pairs].tolist(), strict=True)]

    def _visible_edges(self) -> tuple[list[str], list[str], list[str]]:
        """Source items, target items and tensors of every edge drawn at full expansion, in
        the order the lifting visits them (graph order of the consumers, then graph
        outputs)."""
        pairs, outs = self._visible_pairs()
        c = self.model.columns
        srcs = self._source_keys(pairs)
        dsts = list(map(self._node_keys.__getitem__, c.input_node[pairs].tolist()))
        tensors = list(map(c.flat_inputs.__getitem__, pairs.tolist()))
        for src, dst, t in outs:
            srcs.append(src)
            dsts.append(dst)
            tensors.append(t)
        return srcs, dsts, tensors

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
        pairs, outs = self._visible_pairs()
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
        for src, p, j in zip(self._source_keys(pairs[across]), pairs[across].tolist(),
                             dst[across].tolist(), strict=True):
            ta, tb = top_of(src), top_of(keys[j])
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
        edges = self._edges
        # The groups an edge between two modules is drawn in, for each pair of the
        # modules holding its ends: (group, source or None for the edge's own, target or
        # None): in their lowest common group between the children holding either end,
        # then as an exit edge in each group below it on the source's side and an entry
        # edge on the target's.
        plans: dict[tuple[str, str], list[tuple[str, str | None, str | None]]] = {}

        chains: dict[str, list[str]] = {}

        def chain(gid: str) -> list[str]:
            c = chains.get(gid)
            if c is None:
                c = chains[gid] = self._chain_of_group(gid)
            return c

        def plan(gu: str, gv: str) -> list[tuple[str, str | None, str | None]]:
            cu, cv = chain(gu), chain(gv)
            k = 0
            while k < len(cu) and k < len(cv) and cu[k] == cv[k]:
                k += 1
            steps: list[tuple[str, str | None, str | None]] = [
                (cu[k - 1], "g:" + cu[k] if k < len(cu) else None,
                 "g:" + cv[k] if k < len(cv) else None)]
            steps += [(cu[j], "g:" + cu[j + 1] if j + 1 < len(cu) else None, OUT)
                      for j in range(k, len(cu))]
            steps += [(cv[j], IN, "g:" + cv[j + 1] if j + 1 < len(cv) else None)
                      for j in range(k, len(cv))]
            return steps

        parent_of = self.parent_of
        srcs, dsts, tensors = self._visible_edges()
        for src, dst, t, gs, gd in zip(srcs, dsts, tensors, map(parent_of.__getitem__, srcs),
                                       map(parent_of.__getitem__, dsts), strict=True):
            if gs == gd:  # most edges stay inside one module
                inside = edges.get(gd)
                if inside is None:
                    inside = edges[gd] = {}
                lst = inside.get((src, dst))
                if lst is None:
                    inside[(src, dst)] = [t]
                elif t not in lst:
                    lst.append(t)
                continue
            steps = plans.get((gs, gd)) or plans.setdefault((gs, gd), plan(gs, gd))
            for gid, a, b in steps:
                inside = edges.get(gid)
                if inside is None:
                    inside = edges[gid] = {}
                pair = (a or src, b or dst)
                lst = inside.get(pair)
                if lst is None:
                    inside[pair] = [t]
                elif t not in lst:
                    lst.append(t)
        if top is not None:
            edges[""] = top
