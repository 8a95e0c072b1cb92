"""Which node of graph A is which node of graph B: by name first, then by structure.

1. By name: a node whose (non-empty) name is unique in B and has the same operator there.
2. By structure, forwards in graph order: a node matches an unmatched node of B with the same
   operator whose inputs come from the same places — the graph input of the same name (else
   the same position), a constant (any initializer or Constant node: weights need not be
   equal), or the output slot of a node already matched. Of several candidates, the first in
   B's order is taken.
3. By structure, backwards from the graph outputs: a node still unmatched whose first output
   goes to the same matched consumers (or the same graph output position) as an unmatched
   node of B with the same operator. This links the nodes after an inserted or a removed one
   (an extra Cast, Reshape instead of Flatten), where the forward pass stops.

Passes 2 and 3 repeat while they find something. Cost is linear in the nodes and edges (each
pass is one sweep with dictionaries), so two 4k-node graphs match in milliseconds.
Subgraphs (If/Loop bodies) are not matched; their owner node is.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

_CONST = ("const",)


@dataclass
class Matching:
    """Pairs of node indices (A, B), each with how it was found ("name" or "structure")."""

    pairs: dict[int, int] = field(default_factory=dict)  # A index -> B index
    how: dict[int, str] = field(default_factory=dict)  # A index -> "name" | "structure"
    unmatched_a: list[int] = field(default_factory=list)
    unmatched_b: list[int] = field(default_factory=list)

    @property
    def by_name(self) -> int:
        return sum(1 for h in self.how.values() if h == "name")

    @property
    def by_structure(self) -> int:
        return sum(1 for h in self.how.values() if h == "structure")

    def b_to_a(self) -> dict[int, int]:
        return {b: a for a, b in self.pairs.items()}


class _Side:
    """One graph's nodes in the form the matcher reads."""

    def __init__(self, graph: Any) -> None:
        self.nodes = list(graph.node)
        # protobuf fields are slow to read: each one once, into plain lists
        self.names = [n.name for n in self.nodes]
        types = [n.op_type for n in self.nodes]
        self.ops = [f"{n.domain}::{t}" if n.domain else t
                    for n, t in zip(self.nodes, types, strict=True)]
        self.ins = [[name for name in n.input if name] for n in self.nodes]
        self.outs = [list(n.output) for n in self.nodes]
        self.constant = [t == "Constant" and not i for t, i in zip(types, self.ins, strict=True)]
        self.inputs = [v.name for v in graph.input]
        self.outputs = [v.name for v in graph.output]
        self.consts = {t.name for t in graph.initializer}
        self.producer: dict[str, tuple[int, int]] = {}
        self.consumers: dict[str, list[tuple[int, int]]] = {}
        for i, (ins, outs) in enumerate(zip(self.ins, self.outs, strict=True)):
            if self.constant[i]:
                self.consts.update(o for o in outs if o)
                continue
            for slot, out in enumerate(outs):
                if out:
                    self.producer[out] = (i, slot)
            for slot, name in enumerate(ins):
                self.consumers.setdefault(name, []).append((i, slot))
        self.output_pos = {name: i for i, name in enumerate(self.outputs)}

    def is_constant_node(self, i: int) -> bool:
        return self.constant[i]


def match_graphs(graph_a: Any, graph_b: Any) -> Matching:
    """Match the nodes of two ONNX GraphProtos (see the module docstring for the rules)."""
    a, b = _Side(graph_a), _Side(graph_b)
    pairs: dict[int, int] = {}
    how: dict[int, str] = {}
    taken: set[int] = set()

    b_names: dict[str, int] = {}
    dup: set[str] = set()
    for i, name in enumerate(b.names):
        if name:
            if name in b_names:
                dup.add(name)
            b_names[name] = i
    for i, name in enumerate(a.names):
        j = b_names.get(name) if name and name not in dup else None
        if j is not None and j not in taken and a.ops[i] == b.ops[j]:
            pairs[i] = j
            how[i] = "name"
            taken.add(j)

    input_key_a = _input_keys(a.inputs, b.inputs)
    for _ in range(4):
        found = _forward(a, b, pairs, how, taken, input_key_a)
        found += _backward(a, b, pairs, how, taken)
        if not found:
            break
    return Matching(pairs=pairs, how=how,
                    unmatched_a=[i for i in range(len(a.nodes)) if i not in pairs],
                    unmatched_b=[j for j in range(len(b.nodes)) if j not in taken])


def _input_keys(inputs_a: Sequence[str], inputs_b: Sequence[str]) -> dict[str, Hashable]:
    """A's graph inputs keyed as B's: by name when B has it, else by position."""
    in_b = set(inputs_b)
    return {name: ("in", name if name in in_b else (inputs_b[i] if i < len(inputs_b) else i))
            for i, name in enumerate(inputs_a)}


def _b_value_key(b: _Side, name: str) -> Hashable:
    if name in b.consts:
        return _CONST
    if name in b.producer:
        return ("n", *b.producer[name])
    return ("in", name)


def _forward(a: _Side, b: _Side, pairs: dict[int, int], how: dict[int, str], taken: set[int],
             input_key_a: dict[str, Hashable]) -> int:
    index: dict[Hashable, list[int]] = {}
    for j, ins in enumerate(b.ins):
        if j in taken or b.constant[j]:
            continue
        key = (b.ops[j], tuple(_b_value_key(b, n) for n in ins))
        index.setdefault(key, []).append(j)
    found = 0
    for i, ins in enumerate(a.ins):
        if i in pairs or a.constant[i]:
            continue
        keys: list[Hashable] = []
        for name in ins:
            if name in a.consts:
                keys.append(_CONST)
            elif name in a.producer:
                producer, slot = a.producer[name]
                if producer not in pairs:
                    break
                keys.append(("n", pairs[producer], slot))
            elif name in input_key_a:
                keys.append(input_key_a[name])
            else:  # a value from an enclosing graph: no counterpart known
                break
        else:
            candidates = index.get((a.ops[i], tuple(keys)))
            while candidates:
                j = candidates.pop(0)
                if j not in taken:
                    pairs[i] = j
                    how[i] = "structure"
                    taken.add(j)
                    found += 1
                    break
    return found


def _consumer_key(side: _Side, node_index: int, mapped: dict[int, int] | None
                  ) -> Hashable | None:
    """Where a node's first output goes: graph output positions and consumer (node, slot)s,
    consumers given as B indices (through `mapped` for A; None when one is unmatched)."""
    outputs = [o for o in side.outs[node_index] if o]
    if not outputs:
        return None
    name = outputs[0]
    refs: list[tuple[Any, ...]] = []
    if name in side.output_pos:
        refs.append(("out", side.output_pos[name]))
    for consumer, slot in side.consumers.get(name, []):
        if mapped is not None:
            if consumer not in mapped:
                return None
            consumer = mapped[consumer]
        refs.append(("n", consumer, slot))
    return tuple(sorted(refs)) if refs else None


def _backward(a: _Side, b: _Side, pairs: dict[int, int], how: dict[int, str],
              taken: set[int]) -> int:
    index: dict[Hashable, list[int]] = {}
    for j in range(len(b.nodes)):
        if j in taken:
            continue
        key = _consumer_key(b, j, None)
        if key is not None:
            index.setdefault((b.ops[j], key), []).append(j)
    found = 0
    for i in range(len(a.nodes) - 1, -1, -1):
        if i in pairs:
            continue
        key = _consumer_key(a, i, pairs)
        if key is None:
            continue
        candidates = index.get((a.ops[i], key))
        while candidates:
            j = candidates.pop()
            if j not in taken:
                pairs[i] = j
                how[i] = "structure"
                taken.add(j)
                found += 1
                break
    return found
