"""Layered (Sugiyama) layout of one DAG with real box sizes: layers, order, coordinates.

Longest-path layering in graph order, dummy nodes on long edges, barycenter ordering, and
coordinates by weighted isotonic regression (straight chains, no overlaps); routes leave a box
along its bottom and enter the next along its top. It knows nothing about ONNX graphs or
module groups: onnx_studio.engine.graph.layout lays out each group with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

H_GAP = 24.0  # between two boxes in a layer
D_GAP = 8.0  # next to an edge's dummy
DUMMY_W = 4.0
V_GAP = 34.0  # between layers: room for the edge and its shape label
_ALIGN_PASSES = 5  # coordinate passes; odd, so the last one goes down


@dataclass
class Placement:
    """Coordinates of one group's items (content coordinates, top-left at 0, 0)."""

    pos: list[tuple[float, float]]  # top-left per item
    routes: list[list[tuple[float, float]]]  # per edge, source port to target port
    width: float
    height: float
    _bounds: list[tuple[float, float, float, float]] | None = None

    def route_bounds(self) -> list[tuple[float, float, float, float]]:
        """Per route: x0, y0, x1, y1 of its points (computed once; placements are shared)."""
        if self._bounds is None:
            out = []
            for r in self.routes:
                xs = [p[0] for p in r]
                ys = [p[1] for p in r]
                out.append((min(xs), min(ys), max(xs), max(ys)))
            self._bounds = out
        return self._bounds


class LayeredLayout:
    """Layers, order and dummies of one DAG (computed once; coordinates per size change)."""

    def __init__(self, n: int, edges: list[tuple[int, int]], rank: list[float],
                 below: list[tuple[int, int]] | None = None) -> None:
        """`below`: (u, v) pairs of items without an edge where v still goes in a layer below u's (u
        first in graph order): rows of a stack of boxes (onnx_studio.engine.graph.layout stacks a
        graph's many inputs and outputs)."""
        self.n = n
        self.edges = edges
        order = sorted(range(n), key=rank.__getitem__)
        pos_in_order = [0] * n
        for i, v in enumerate(order):
            pos_in_order[v] = i
        # Orient every edge forward in graph order: that breaks cycles that lifted edges
        # between groups can form, and makes `order` a topological order.
        self.flipped = [pos_in_order[u] > pos_in_order[v] for u, v in edges]
        fwd = [(v, u) if f else (u, v) for (u, v), f in zip(edges, self.flipped, strict=True)]
        preds: list[list[int]] = [[] for _ in range(n)]
        succs: list[list[int]] = [[] for _ in range(n)]
        for u, v in fwd:
            if u != v:
                preds[v].append(u)
                succs[u].append(v)
        if below:  # the rows of a stack count as predecessors when layering, no more
            preds_or_above = [p[:] for p in preds]
            for u, v in below:
                preds_or_above[v].append(u)
        else:
            preds_or_above = preds
        stacked = self.stacked = {v for pair in below or () for v in pair}
        layer = [0] * n
        for v in order:
            if preds_or_above[v]:
                layer[v] = max(layer[u] for u in preds_or_above[v]) + 1
        # Sources (constants, side inputs) sit just above their first consumer, not at the top.
        for v in reversed(order):
            if not preds[v] and succs[v] and v not in stacked:
                layer[v] = max(layer[v], min(layer[s] for s in succs[v]) - 1)
        # Build the proper graph: dummies on edges spanning several layers.
        self.layer = layer[:]
        up: list[list[int]] = [[] for _ in range(n)]
        down: list[list[int]] = [[] for _ in range(n)]
        self.chains: list[list[int]] = []  # per edge: [u, dummies..., v] in forward direction
        for u, v in fwd:
            if u == v:
                self.chains.append([u, v])
                continue
            chain = [u]
            prev = u
            for lay in range(layer[u] + 1, layer[v]):
                d = len(self.layer)
                self.layer.append(lay)
                up.append([prev])
                down.append([])
                down[prev].append(d)
                chain.append(d)
                prev = d
            up[v].append(prev)
            down[prev].append(v)
            chain.append(v)
            self.chains.append(chain)
        self.up, self.down = up, down
        total = len(self.layer)
        nlayers = max(self.layer) + 1 if total else 0
        self.layers: list[list[int]] = [[] for _ in range(nlayers)]
        rank_of = [float(pos_in_order[v]) for v in range(n)] + [0.0] * (total - n)
        for c in self.chains:  # dummies start under their source
            for d in c[1:-1]:
                rank_of[d] = rank_of[c[0]]
        for v in sorted(range(total), key=rank_of.__getitem__):
            self.layers[self.layer[v]].append(v)
        self._order()

    def _order(self) -> None:
        """Barycenter sweeps: down using predecessors, up using successors."""
        pos = [0.0] * len(self.layer)
        for lay in self.layers:
            for i, v in enumerate(lay):
                pos[v] = float(i)
        for sweep in range(4):
            down = sweep % 2 == 0
            rng = range(1, len(self.layers)) if down else range(len(self.layers) - 2, -1, -1)
            nbrs = self.up if down else self.down
            for li in rng:
                lay = self.layers[li]
                key = {}
                for v in lay:
                    ns = nbrs[v]
                    key[v] = sum(pos[u] for u in ns) / len(ns) if ns else pos[v]
                if self.stacked:  # a stack's boxes first, the edges passing it after
                    lay.sort(key=lambda v: (v not in self.stacked, key[v], pos[v]))
                else:
                    lay.sort(key=lambda v: (key[v], pos[v]))
                for i, v in enumerate(lay):
                    pos[v] = float(i)

    def place(self, sizes: list[tuple[float, float]],
              in_port: list[float | None] | None = None,
              out_port: list[float | None] | None = None) -> Placement:
        """Coordinates for the given item sizes. ``in_port``/``out_port``: a fixed x offset
        inside an item where all its incoming/outgoing edges attach (an expanded group's
        entry and exit), None to spread edges along the box."""
        total = len(self.layer)
        n = self.n
        w = [s[0] for s in sizes] + [DUMMY_W] * (total - n)
        h = [s[1] for s in sizes] + [0.0] * (total - n)
        x = [0.0] * total  # centre x
        for lay in self.layers:
            cx = 0.0
            for i, v in enumerate(lay):
                if i:
                    cx += self._sep(lay[i - 1], v, w)
                x[v] = cx
        # Alternate downward and upward passes; an odd count ends on a downward pass, so
        # chains hang straight below their sources.
        for it in range(_ALIGN_PASSES):
            down = it % 2 == 0
            rng = range(1, len(self.layers)) if down else range(len(self.layers) - 2, -1, -1)
            nbrs = self.up if down else self.down
            for li in rng:
                lay = self.layers[li]
                if lay and lay[0] in self.stacked:
                    self._pack(lay, x, w)
                else:
                    self._align(lay, nbrs, x, w)
        minx = min((x[v] - w[v] / 2 for v in range(total)), default=0.0)
        maxx = max((x[v] + w[v] / 2 for v in range(total)), default=0.0)
        tops = []
        y = 0.0
        for lay in self.layers:
            tops.append(y)
            y += max((h[v] for v in lay), default=0.0) + V_GAP
        height = y - V_GAP if self.layers else 0.0
        band = [max((h[v] for v in lay), default=0.0) for lay in self.layers]
        pos = []
        for v in range(n):
            li = self.layer[v]
            pos.append((x[v] - w[v] / 2 - minx, tops[li] + (band[li] - h[v]) / 2))
        # Ports: edges leave a box along its bottom, ordered by where they go.
        out_slots: dict[int, list[int]] = {}
        in_slots: dict[int, list[int]] = {}
        for ei, c in enumerate(self.chains):
            out_slots.setdefault(c[0], []).append(ei)
            in_slots.setdefault(c[-1], []).append(ei)
        out_x: dict[int, float] = {}
        in_x: dict[int, float] = {}
        for v, eis in out_slots.items():
            fixed = (out_port[v] if out_port and v < n else None)
            eis.sort(key=lambda e: x[self.chains[e][1]])
            for k, e in enumerate(eis):
                out_x[e] = (pos[v][0] + fixed if fixed is not None else
                            pos[v][0] + w[v] * (k + 1) / (len(eis) + 1))
        for v, eis in in_slots.items():
            fixed = (in_port[v] if in_port and v < n else None)
            eis.sort(key=lambda e: x[self.chains[e][-2]])
            for k, e in enumerate(eis):
                in_x[e] = (pos[v][0] + fixed if fixed is not None else
                           pos[v][0] + w[v] * (k + 1) / (len(eis) + 1))
        routes = []
        for ei, c in enumerate(self.chains):
            u, v = c[0], c[-1]
            lu, lv = self.layer[u], self.layer[v]
            # Run straight down to the bottom of the source's layer (and in from the top of
            # the target's) so curves only bend in the gaps between layers, never beside a
            # taller neighbour.
            pts = [(out_x[ei], pos[u][1] + h[u]), (out_x[ei], tops[lu] + band[lu])]
            for d in c[1:-1]:
                li = self.layer[d]
                dx = x[d] - minx
                pts.append((dx, tops[li]))
                pts.append((dx, tops[li] + band[li]))
            pts.append((in_x[ei], tops[lv]))
            pts.append((in_x[ei], pos[v][1]))
            routes.append(pts)
        return Placement(pos=pos, routes=routes, width=maxx - minx, height=height)

    def _pack(self, lay: list[int], x: list[float], w: list[float]) -> None:
        """A row of a stack: its boxes from the stack's left edge (x = 0), side by side, and
        what else the layer holds (the edges passing down) packed on their right; the
        other layers align to that."""
        x[lay[0]] = w[lay[0]] / 2
        for a, b in pairwise(lay):
            x[b] = x[a] + self._sep(a, b, w)

    @staticmethod
    def _sep(a: int, b: int, w: list[float]) -> float:
        gap = H_GAP if w[a] > DUMMY_W and w[b] > DUMMY_W else D_GAP
        return (w[a] + w[b]) / 2 + gap

    def _align(self, lay: list[int], nbrs: list[list[int]], x: list[float],
               w: list[float]) -> None:
        """Move a layer's items towards the mean x of their neighbours without reordering
        or overlapping them (weighted isotonic regression by pool-adjacent-violators)."""
        if not lay:
            return
        if len(lay) == 1:  # most layers of a module hold one item: no ordering to keep
            v = lay[0]
            if nbrs[v]:
                x[v] = self._pull(v, nbrs[v], x)[0]
            return
        targets: list[float] = []
        weights: list[float] = []
        for v in lay:
            if nbrs[v]:
                target, weight = self._pull(v, nbrs[v], x)
                targets.append(target)
                weights.append(weight)
            else:
                targets.append(x[v])
                weights.append(0.05)
        offs = [0.0]
        for i in range(1, len(lay)):
            offs.append(offs[-1] + self._sep(lay[i - 1], lay[i], w))
        # blocks: [sum w*y, sum w, count]
        blocks: list[list[float]] = []
        for t, wt, o in zip(targets, weights, offs, strict=True):
            blocks.append([wt * (t - o), wt, 1.0])
            while len(blocks) > 1 and (blocks[-2][0] / blocks[-2][1]
                                       > blocks[-1][0] / blocks[-1][1]):
                b = blocks.pop()
                blocks[-1][0] += b[0]
                blocks[-1][1] += b[1]
                blocks[-1][2] += b[2]
        i = 0
        for sw, sw_w, cnt in blocks:
            val = sw / sw_w
            for _ in range(int(cnt)):
                x[lay[i]] = val + offs[i]
                i += 1

    def _pull(self, v: int, ns: list[int], x: list[float]) -> tuple[float, float]:
        """Where v's neighbours pull it (their weighted mean x) and how hard (total weight).

        Dummy-to-dummy links weigh most, so long edges stay straight; a link with one dummy
        end weighs more than one between two real boxes.
        """
        n = self.n
        tot = acc = 0.0
        for u in ns:
            wt = 8.0 if (u >= n and v >= n) else 2.0 if (u >= n or v >= n) else 1.0
            acc += wt * x[u]
            tot += wt
        return acc / tot, tot
