"""A laid-out scene: the boxes and edges the graph view draws, as columns.

A fully expanded 100k-node graph has 100k boxes and 130k edges; the view needs their
coordinates as numpy columns (culling, hit tests, the minimap) and a Box or an Edge object only
for the few it draws in detail or the user points at. So the layout fills the columns a laid
-out group at a time, and a Box or Edge is made when first asked for.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, overload

from onnx_studio.engine.graph.items import IN, OUT

if TYPE_CHECKING:
    from onnx_studio.engine.graph.layered import LayeredLayout, Placement

T = TypeVar("T")


@dataclass(slots=True)
class Box:
    """A laid-out box in scene coordinates (top-left x, y)."""

    key: str
    kind: str
    x: float
    y: float
    w: float
    h: float
    label: str
    sublabel: str
    expanded: bool = False
    depth: int = 0


class Edge:
    """A laid-out edge: a polyline whose vertical runs are joined by S-curves.

    The points are made on first use from the group's shared route and the group's offset
    (the blocks of a deep model share one placement; most edges are never looked at closely).
    ``label`` (the tensor's shape) is None until `GraphLayout.edge_label` formats it.
    """

    __slots__ = ("_head", "_points", "_route", "_tail", "across", "entering", "label", "ox",
                 "oy", "reversed", "tensors")

    def __init__(self, route: list[tuple[float, float]], ox: float, oy: float,
                 tensors: list[str], label: str | None, reversed: bool = False,
                 entering: bool = False, head: float | None = None,
                 tail: float | None = None, across: bool = False) -> None:
        self._route, self.ox, self.oy = route, ox, oy
        # the group border an entry/exit edge reaches: a y, or an x when laid out across
        self._head, self._tail = head, tail
        self.across = across  # a left-to-right edge: it runs along x between layers
        self._points: list[tuple[float, float]] | None = None
        self.tensors = tensors
        self.label = label
        self.reversed = reversed
        self.entering = entering  # an entry edge inside a group: the parent's edge names it

    @property
    def points(self) -> list[tuple[float, float]]:
        """The polyline in scene coordinates, source port first."""
        if self._points is None:
            ox, oy = self.ox, self.oy
            pts = [(px + ox, py + oy) for px, py in self._route]
            if self._head is not None:
                pts.insert(0, (self._head, pts[0][1]) if self.across
                           else (pts[0][0], self._head))
            if self._tail is not None:
                pts.append((self._tail, pts[-1][1]) if self.across
                           else (pts[-1][0], self._tail))
            self._points = pts
        return self._points


class _MadeOnLookUp(Sequence[T]):
    """A sequence whose items are made when looked up (`_make`), from columns."""

    def _make(self, i: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> list[T]: ...

    def __getitem__(self, i: int | slice) -> T | list[T]:
        n = len(self)
        if isinstance(i, slice):
            return [self._make(j) for j in range(*i.indices(n))]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._make(i)

    def __iter__(self) -> Iterator[T]:
        return (self._make(i) for i in range(len(self)))


class Boxes(_MadeOnLookUp[Box]):
    """The scene's boxes: one column per field (`x`, `y`, `w`, `h`, `depth`, `expanded` as
    numpy arrays; `keys`, `kinds`, `labels` as lists), a Box made per look-up (its sublabel
    read then from `items`, the layout's items by key)."""

    def __init__(self, keys: list[str], kinds: list[str], labels: list[str],
                 items: Mapping[str, Any], x: Any, y: Any, w: Any, h: Any, depth: Any,
                 expanded: Any) -> None:
        self.keys, self.kinds, self.labels, self.items = keys, kinds, labels, items
        self.x, self.y, self.w, self.h = x, y, w, h
        self.depth, self.expanded = depth, expanded

    def __len__(self) -> int:
        return len(self.keys)

    def _make(self, i: int) -> Box:
        key = self.keys[i]
        return Box(key, self.kinds[i], float(self.x[i]), float(self.y[i]), float(self.w[i]),
                   float(self.h[i]), self.labels[i], self.items[key].sublabel,
                   bool(self.expanded[i]), int(self.depth[i]))


class Edges(_MadeOnLookUp[Edge]):
    """The scene's edges, each made by `make` when first asked for and then kept (its shape
    label is formatted on it once)."""

    def __init__(self, count: int, make: Callable[[int], Edge]) -> None:
        self._count = count
        self._new = make
        self._made: dict[int, Edge] = {}

    def __len__(self) -> int:
        return self._count

    def _make(self, i: int) -> Edge:
        edge = self._made.get(i)
        if edge is None:
            edge = self._made[i] = self._new(i)
        return edge


@dataclass
class Scene:
    """Everything the view draws for the current expansion state."""

    boxes: Boxes
    edges: Edges
    width: float
    height: float
    index: dict[str, int]  # box key -> position in boxes
    edge_bounds: Any  # numpy (edges, 4): x0, y0, x1, y1 of each edge's points (culling)


def make_edge(batches: list[tuple[int, int, list[Run]]], across: bool,
          structure: dict[str, tuple[LayeredLayout, list[str], list[tuple[str, str]]]],
          tensors: dict[str, dict[tuple[str, str], list[str]]], i: int) -> Edge:
    """Edge `i` of a scene onnx_studio.engine.graph.layout made (the runs sharing a placement in
    turn), from the layout's structures and lifted edges (not the layout: a scene holds no
    cycle)."""
    start, k, runs = batches[bisect_right(batches, i, key=lambda t: t[0]) - 1]
    g, ei = divmod(i - start, k)
    run = runs[g]
    core, _keys, pairs = structure[run.gid]
    a, b = pairs[ei]
    frame = run.frame
    head = frame[0] if frame is not None and a == IN else None
    tail = frame[1] if frame is not None and b == OUT else None
    # The parent's edge already names what enters a group.
    return Edge(run.pl.routes[ei], run.ox, run.oy, tensors[run.gid][(a, b)],
                "" if a == IN else None, core.flipped[ei], a == IN, head, tail, across)


@dataclass(slots=True)
class Run:
    """An expanded group as drawn: its placement, offset, the parent's frame its entry and
    exit edges reach (None for the whole graph), and the positions of its open children."""

    gid: str
    pl: Placement
    ox: float
    oy: float
    frame: tuple[float, float] | None
    opened: list[int]
