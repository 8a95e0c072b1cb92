"""Folding: the nodes that only compute shapes or constants, and the visible node each one
is drawn inside (a dynamic export's Shape → Gather → Concat chains would otherwise span the
whole graph)."""

from __future__ import annotations

import math
from typing import Any, Protocol

from onnx_studio.engine.graph.columns import NodeColumns

# Ops that, fed only by constants and shapes, compute shapes or masks rather than activations.
_SHAPE_OPS = frozenset({
    "Shape", "Size", "Constant", "ConstantOfShape", "Gather", "GatherElements", "Unsqueeze",
    "Squeeze", "Concat", "Slice", "Cast", "CastLike", "Add", "Sub", "Mul", "Div", "Mod", "Floor",
    "Ceil", "Neg", "Abs", "Min", "Max", "Equal", "Less", "LessOrEqual", "Greater",
    "GreaterOrEqual", "Where", "Not", "And", "Or", "Range", "Reshape", "Identity", "Expand",
    "ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin", "Sqrt", "Sum", "Tile", "Trilu",
    "Transpose", "Flatten",
})
# Single-tensor ops that exporters put on weights (a TorchScript export shares a weight
# through Identity, a folded transpose shows up as Transpose of an initializer).
_WEIGHT_OPS = frozenset({"Identity", "Cast", "Transpose", "Reshape", "Unsqueeze", "Squeeze",
                         "Flatten", "DequantizeLinear"})
_SMALL_INITIALIZER = 64  # elements; larger initializers are weights, not shape constants
_SOURCES = frozenset({"Shape", "Size"})  # shape values from any input
_STANDARD = frozenset({"", "ai.onnx"})


class FoldableGraph(Protocol):
    """What folding reads of a graph (onnx_studio.engine.graph.model.GraphModel has it): the
    folding sits below the model that calls it, so it names the parts, not the class."""

    columns: NodeColumns
    outputs: list[str]
    initializers: dict[str, Any]

    def initializer_values(self) -> Any:
        """The initializers' value numbers in `columns` (numpy)."""


def auxiliary_nodes(model: FoldableGraph) -> dict[int, int]:
    """Nodes that only compute shapes or constants, mapped to the visible node they feed.

    A dynamic-shape export computes every Reshape target from ``Shape`` of the input; drawn
    as nodes, those chains become edges that span the whole graph. Folded into their first
    real consumer they are still listed (properties panel, search), but not laid out.
    """
    aux = _auxiliary(model)
    owner: dict[int, int] = {}
    aux_set = set(aux)
    # Consumers come later in a (topologically sorted) ONNX graph: walk backwards so each
    # consumer already knows its owner.
    for i, readers in zip(reversed(aux), reversed(_readers(model, aux)), strict=True):
        found = -1
        for r in readers:
            if r not in aux_set:
                found = r
                break
            if r in owner:
                found = owner[r]
                break
        if found >= 0:
            owner[i] = found
        else:
            aux_set.discard(i)  # feeds nothing visible: keep it on screen
    return owner


def _readers(model: FoldableGraph, nodes: list[int]) -> list[list[int]]:
    """For each of `nodes`, the nodes reading its outputs: output by output, each output's
    readers in graph order."""
    import numpy as np

    c = model.columns
    if not c.unique_made:  # a value made twice: its readers by name
        by_name = c.consumers_of([t for i in nodes for t in c.outputs[i]])
        return [[r for t in c.outputs[i] for r in by_name.get(t, ())] for i in nodes]
    wanted = np.zeros(len(c) + 1, dtype=bool)  # (the last: "made by none", -1)
    wanted[nodes] = True
    pos = np.flatnonzero(wanted[c.input_source])
    pos = pos[np.lexsort((c.input_node[pos], c.input_value[pos]))]  # by output, then reader
    source, reader = c.input_source[pos], c.input_node[pos].tolist()
    bounds = np.searchsorted(source, np.append(nodes, len(c))).tolist()  # (nodes ascend)
    return [reader[bounds[k]:bounds[k + 1]] for k in range(len(nodes))]


def _auxiliary(model: FoldableGraph, rounds: int = 48) -> list[int]:
    """The nodes computing shapes (from Shape, Size and small constants) or constants (from
    initializers), in graph order: each such node reads only values of that kind made by
    earlier nodes. Found for every node at once, a round per step of the longest such chain
    (a few in an export); a graph with longer chains is walked node by node instead."""
    import numpy as np

    c = model.columns
    n = len(c)
    candidate = c.op_mask(_SHAPE_OPS | _WEIGHT_OPS)
    if not candidate.any():
        return []
    at = np.flatnonzero(candidate)  # (their domains only: most nodes are not candidates)
    candidate[at] = np.fromiter(map(_STANDARD.__contains__, c.domains_of(at.tolist())), bool,
                                len(at))
    for t in model.outputs:  # a graph output stays on screen
        p = c.made_by(t)
        if p is not None:
            candidate[p] = False
    shape_op = candidate & c.op_mask(_SHAPE_OPS)
    weight_op = candidate & c.op_mask(_WEIGHT_OPS)
    source_op = shape_op & c.op_mask(_SOURCES)
    reader, value, maker = c.input_node, c.input_value, c.input_source
    earlier = (maker >= 0) & (maker < reader)  # made before it is read
    maker = np.where(earlier, maker, 0)
    inits = model.initializers
    const_value = np.zeros(len(c.value_names), dtype=bool)
    const_value[model.initializer_values()] = True
    const_value[c.value_ids[""]] = True  # "": an absent optional input, never asked for
    # small initializers (shape constants): only those a shape op reads are looked at
    names = c.value_names
    static_value = np.zeros(len(names), dtype=bool)
    for v in np.unique(value[shape_op[reader] & const_value[value]]).tolist():
        init = inits.get(names[v])
        static_value[v] = init is not None and math.prod(init.dims) <= _SMALL_INITIALIZER
    static_value[c.value_ids[""]] = True
    static_in = static_value[value]
    const_in = const_value[value]

    def settle(start: Any, base: Any, ok: Any, alone: Any) -> Any:
        """The least set of nodes S ⊇ `start`: `base` nodes whose inputs are all `ok` or
        made earlier by a node of S (`alone`: base nodes that need nothing)."""
        found = start
        for _ in range(rounds):
            unmet = np.bincount(reader[~(ok | (earlier & found[maker]))], minlength=n)
            grown = start | (base & (alone | (unmet == 0)))
            if (grown == found).all():
                return found
            found = grown
        return None

    shape = settle(source_op, shape_op, static_in, source_op)
    found = None if shape is None else settle(shape, weight_op, const_in,
                                              np.zeros(n, dtype=bool))
    if found is None:
        return _walk(model, candidate)
    return np.flatnonzero(found).tolist()


def _walk(model: FoldableGraph, candidate: Any) -> list[int]:
    """`_auxiliary` node by node, in graph order (for graphs with long chains)."""
    import numpy as np

    c = model.columns
    static = {name for name, t in model.initializers.items()  # shape-like values
              if math.prod(t.dims) <= _SMALL_INITIALIZER}
    const: set[str] = set(model.initializers)  # any value computed from constants only
    aux: list[int] = []
    for i in np.flatnonzero(candidate).tolist():
        op, inputs, outputs = c.op_types[i], c.inputs[i], c.outputs[i]
        # ("" names an absent optional input or output: never asked for below)
        if op in _SHAPE_OPS and (op in _SOURCES or static.issuperset(filter(None, inputs))):
            aux.append(i)
            static.update(outputs)
            const.update(outputs)
        elif op in _WEIGHT_OPS and const.issuperset(filter(None, inputs)):
            aux.append(i)
            const.update(outputs)
    return aux
