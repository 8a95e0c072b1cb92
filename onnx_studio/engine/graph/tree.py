"""The view's tree of a GraphLayout: a view group per module group (and per section of a
group too big to lay out at once), each listing its items — nodes, child groups, the graph's
inputs and outputs — in graph order, every item's parent, and each group's node count. A
mixin of GraphLayout.

Built from the model's columns (each node's group, which nodes fold away) with numpy: a
node costs no Python work here beyond its key, so a 100k-node graph gets its tree in a few
hundredths of a second.
"""

from __future__ import annotations

from typing import Any

from onnx_studio.engine.graph.items import Item, NodeItems, ViewGroup, counted
from onnx_studio.engine.graph.model import GraphModel, format_shape

SECTION = 500  # items per section when a group is split


class ViewTree:
    """`_build_tree`: the view groups, their items in graph order, and `parent_of`."""

    model: GraphModel
    folded: dict[int, int]
    items: NodeItems
    groups: dict[str, ViewGroup]
    parent_of: dict[str, str]  # item key -> view group id
    _node_keys: list[str]  # node index -> its item key ("" when folded)
    _visible: Any  # numpy: node index -> not folded

    def _build_tree(self, max_children: int) -> None:
        import numpy as np  # lazily: the window shows before numpy is needed

        m = self.model
        n = len(m.nodes)
        keys = self._node_keys = [f"n{i}" for i in range(n)]  # a node's Item: when asked for
        for i in self.folded:
            keys[i] = ""
        visible = self._visible = np.ones(n, dtype=bool)
        if self.folded:
            visible[np.fromiter(self.folded, np.int64, len(self.folded))] = False
        gids = list(m.groups)
        shown = np.flatnonzero(visible)
        shown_code = m.group_code[shown]
        # Per group: its visible nodes, its subgroups' included (`count`), and the first of
        # them (`first`). A group's children are in graph order: its nodes by index, a
        # child group where its first visible node comes (a group whose nodes all fold
        # away has no item).
        never = n + 1
        first = [never] * len(gids)
        codes, at = np.unique(shown_code, return_index=True)
        for k, i in zip(codes.tolist(), shown[at].tolist(), strict=True):
            first[k] = i
        count = np.bincount(shown_code, minlength=len(gids)).tolist()
        number = {gid: k for k, gid in enumerate(gids)}
        parent = [number[g.parent or ""] for g in m.groups.values()]
        for k in range(len(gids) - 1, 0, -1):  # children come after their parents
            p = parent[k]
            count[p] += count[k]
            if first[k] < first[p]:
                first[p] = first[k]
        vgroups = self.groups
        for (gid, g), c in zip(m.groups.items(), count, strict=True):
            vgroups[gid] = ViewGroup(gid, g.name if gid else m.title,
                                     g.class_name.rsplit(".", 1)[-1], g.parent, depth=g.depth,
                                     count=c)
        order = np.argsort(shown_code, kind="stable")
        own = shown[order].tolist()  # visible nodes by group, in graph order within one
        own_keys = list(map(keys.__getitem__, own))
        bounds = np.searchsorted(shown_code[order], np.arange(len(gids) + 1)).tolist()
        parent_of = self.parent_of
        parent_of.update(zip(own_keys, map(gids.__getitem__, shown_code[order].tolist()),
                             strict=True))
        for k, (gid, g) in enumerate(m.groups.items()):
            if first[k] == never:
                continue
            if not g.children:
                vgroups[gid].items = own_keys[bounds[k]:bounds[k + 1]]
                continue
            kids = [(first[number[c]], c) for c in g.children if first[number[c]] != never]
            at_rank = {r: "g:" + c for r, c in kids}
            ranks = sorted(own[bounds[k]:bounds[k + 1]] + [r for r, _ in kids])
            vgroups[gid].items = [at_rank.get(r) or keys[r] for r in ranks]
            parent_of.update(dict.fromkeys(at_rank.values(), gid))
        # a group's Item (its box) is made when first asked for (onnx_studio.engine.graph.items)
        self.items.groups = vgroups
        self.items.first = {gid: r for gid, r in zip(gids, first, strict=True) if r != never}
        # (a module whose nodes were all folded away has no item)
        readers = m.columns.consumers_of(set(m.outer_inputs)) if m.outer_inputs else {}
        extra_inputs = [t for t in m.outer_inputs  # (read only by folded nodes: not shown)
                        if not all(r in self.folded for r in readers.get(t, ()))]
        inputs = []
        for i, name in enumerate(m.inputs + extra_inputs):
            key = "i:" + name
            # the shape alone: the box's colour and place say it is an input (a graph's
            # inputs often have long symbolic shapes, and many of them share a row)
            shape = format_shape(m.shape(name))
            self.items[key] = Item(key, "input", name,
                                   shape if i < len(m.inputs) else f"outer · {shape}",
                                   -1.0 - len(m.inputs) + i)
            inputs.append(key)
            self.parent_of[key] = ""
        vgroups[""].items[:0] = inputs  # in front, in order
        for name in m.outputs:
            key = "o:" + name
            self.items[key] = Item(key, "output", name, format_shape(m.shape(name)),
                                   float(len(m.nodes) + 1))
            self._attach(key, "")
        for gid in [gid for gid, vg in vgroups.items() if len(vg.items) > max_children]:
            self._split(gid, max_children)

    def rank(self, key: str) -> float:
        """Position of an item in graph order (a node's is its index)."""
        return float(key[1:]) if key[0] == "n" else self.items[key].rank

    def _attach(self, key: str, gid: str) -> None:
        self.groups[gid].items.append(key)
        self.parent_of[key] = gid

    def _split(self, gid: str, max_children: int) -> None:
        """Split a group with too many children into sections (Model Explorer does too)."""
        vg = self.groups[gid]
        if len(vg.items) <= max_children:
            return
        items = sorted(vg.items, key=self.rank)
        keep = [k for k in items if k[:2] in ("i:", "o:")]
        rest = [k for k in items if k[:2] not in ("i:", "o:")]
        vg.items = keep
        for s in range(0, len(rest), SECTION):
            chunk = rest[s:s + SECTION]
            sid = f"{gid}/§{s // SECTION + 1}" if gid else f"§{s // SECTION + 1}"
            label = f"section {s // SECTION + 1}"
            sub = f"items {s + 1}–{s + len(chunk)}"
            count = sum(1 if k[0] == "n" else self.groups[k[2:]].count for k in chunk)
            self.groups[sid] = ViewGroup(id=sid, label=label, sublabel=sub, parent=gid,
                                         items=chunk, depth=vg.depth + 1, count=count)
            for k in chunk:
                self.parent_of[k] = sid
                if k.startswith("g:"):
                    self.groups[k[2:]].parent = sid
            key = "g:" + sid
            self.items[key] = Item(key, "section", label, counted("", count),
                                   self.rank(chunk[0]))
            self.parent_of[key] = gid
            vg.items.append(key)
        vg.items.sort(key=self.rank)
        for k in vg.items:
            if k.startswith("g:"):
                self._split(k[2:], max_children)

