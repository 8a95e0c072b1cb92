"""The edges between the children of each module group of a GraphLayout, lifted from the
graph's own: an edge between two nodes is drawn in their lowest common group (between the
children holding them) and as entry and exit edges in the groups below. The whole graph's
top level is found in one pass over the edges; every other group's when one first opens, so a
graph opened collapsed never lifts its 100k edges into the modules. A mixin of GraphLayout."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    _pending: list[tuple[str, str, str]]  # the edges to lift

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

    def _visible_edges(self) -> list[tuple[str, str, str]]:
        """(source item, target item, tensor) of every edge drawn at full expansion, in the
        order the lifting visits them (graph order of the consumers, then graph outputs)."""
        m = self.model
        producer = m.producer
        keys = self._node_keys
        shown_inputs = {k[2:] for k in self.groups[""].items if k[:2] == "i:"}
        out: list[tuple[str, str, str]] = []
        add = out.append
        for node, dst in zip(m.nodes, keys, strict=True):
            if not dst:  # folded
                continue
            for t in node.inputs:
                p = producer.get(t)
                if p is not None:
                    src = keys[p]
                    if src:
                        add((src, dst, t))
                elif t in shown_inputs:
                    add(("i:" + t, dst, t))
        for t in m.outputs:
            p = producer.get(t)
            if p is not None and keys[p]:
                add((keys[p], "o:" + t, t))
            elif t in shown_inputs:
                add(("i:" + t, "o:" + t, t))
        return out

    def _top_edges(self) -> dict[tuple[str, str], list[str]]:
        """The top level's edges: between the top-level items holding either end."""
        top: dict[str, str] = {"": ""}  # view group -> its top-level group item

        def top_of(key: str) -> str:
            gid = self.parent_of[key]
            t = top.get(gid)
            if t is None:
                chain = self.chain(key)
                t = top[gid] = "g:" + chain[1]
            return t or key

        edges: dict[tuple[str, str], list[str]] = {}
        self._pending = self._visible_edges()  # kept for the lifting, often right after
        for src, dst, t in self._pending:
            a, b = top_of(src), top_of(dst)
            if a != b:
                lst = edges.setdefault((a, b), [])
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

        visible, self._pending = self._pending or self._visible_edges(), []
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
