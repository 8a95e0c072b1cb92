"""What takes a box in a laid-out graph: an `Item` (a node, a module group, a graph input or
output), a `ViewGroup` (a module, the whole graph, or a section of a big group), and how
boxes are measured (`Measure`, `NodeMeasure`; a view passes its fonts')."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onnx_studio.engine.graph.model import GraphModel

IN, OUT = "^in", "^out"  # what enters and what leaves a group, as its edges name them


@dataclass(slots=True)
class Item:
    """Something that takes a box in a group: a node, a group, a graph input or output."""

    key: str  # "n12", "g:h.0", "i:input_ids", "o:logits"
    kind: str  # "node" | "group" | "section" | "input" | "output"
    label: str
    sublabel: str
    rank: float  # position in graph order, used for layering and cycle breaking


@dataclass(slots=True)
class ViewGroup:
    """A group as the view sees it: a module, the whole graph, or a section of a big group."""

    id: str
    label: str
    sublabel: str
    parent: str | None
    items: list[str] = field(default_factory=list)
    depth: int = 0
    count: int = 0  # visible nodes inside, subgroups included


Measure = Callable[[Item], tuple[float, float]]
# Sizes of many node boxes at once, from their labels and sublabels (100k nodes in one call).
NodeMeasure = Callable[[list[str], list[str]], list[tuple[float, float]]]


def default_measure(item: Item) -> tuple[float, float]:
    """Box size without a font: about 7 px per character, two lines."""
    w = max(len(item.label) * 7.5, len(item.sublabel) * 6.0) + 20.0
    return max(w, 48.0), 36.0 if item.sublabel else 24.0


def measure_each(measure: Measure) -> NodeMeasure:
    """A NodeMeasure that asks `measure` once per node."""
    def nodes(labels: list[str], sublabels: list[str]) -> list[tuple[float, float]]:
        return [measure(Item("", "node", a, b, 0.0))
                for a, b in zip(labels, sublabels, strict=True)]
    return nodes


class NodeItems(dict[str, Item]):
    """Items by key; a node's Item, and a module group's, are built on first use: most
    stay inside collapsed groups and are never measured or drawn. A group's needs its view
    group (`groups`) and its first visible node (`first`), filled in by the layout (a
    group whose nodes all fold away has none)."""

    def __init__(self, model: GraphModel) -> None:
        super().__init__()
        self.model = model
        self.groups: dict[str, ViewGroup] = {}
        self.first: dict[str, int] = {}

    def __missing__(self, key: str) -> Item:
        if key.startswith("g:"):
            gid = key[2:]
            vg, first = self.groups.get(gid), self.first.get(gid)
            if vg is None or first is None or not gid:
                raise KeyError(key)
            item = self[key] = Item(key, "group", vg.label, counted(vg.sublabel, vg.count),
                                    float(first))
            return item
        if not key.startswith("n"):
            raise KeyError(key)
        i = int(key[1:])
        c = self.model.columns
        label = c.names[i] or f"{c.op_types[i]}_{i}"  # as Node.label
        item = self[key] = Item(key, "node", c.op_types[i], short(label), float(i))
        return item


def counted(base: str, count: int) -> str:
    """A group box's second line: its class (when known) and how many nodes it holds."""
    text = f"{count} node" + ("" if count == 1 else "s")
    return f"{base} · {text}" if base else text


def short(name: str, limit: int = 28) -> str:
    """A long ONNX name cut in the middle so both ends stay readable."""
    if len(name) <= limit:
        return name
    half = (limit - 1) // 2
    return name[:half] + "…" + name[-(limit - 1 - half):]
