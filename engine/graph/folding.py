"""Folding: the nodes that only compute shapes or constants, and the visible node each one
is drawn inside (a dynamic export's Shape → Gather → Concat chains would otherwise span the
whole graph)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.graph.model import GraphModel

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


def auxiliary_nodes(model: GraphModel) -> dict[int, int]:
    """Nodes that only compute shapes or constants, mapped to the visible node they feed.

    A dynamic-shape export computes every Reshape target from ``Shape`` of the input; drawn
    as nodes, those chains become edges that span the whole graph. Folded into their first
    real consumer they are still listed (properties panel, search), but not laid out.
    """
    static: set[str] = set()  # shape-like values
    const: set[str] = set(model.initializers)  # any value computed from constants only
    for name, init in model.initializers.items():
        n = 1
        for d in init.dims:
            n *= d
        if n <= _SMALL_INITIALIZER:
            static.add(name)
    graph_outputs = set(model.outputs)
    aux: list[int] = []
    for node in model.nodes:
        op = node.op_type
        if op not in _SHAPE_OPS and op not in _WEIGHT_OPS:  # most nodes: one look-up
            continue
        if node.domain not in ("", "ai.onnx"):
            continue
        if not graph_outputs.isdisjoint(node.outputs):
            continue
        # ("" names an absent optional input or output: never asked for below)
        if op in _SHAPE_OPS and (op in ("Shape", "Size")
                                 or static.issuperset(filter(None, node.inputs))):
            aux.append(node.index)
            static.update(node.outputs)
            const.update(node.outputs)
        elif op in _WEIGHT_OPS and const.issuperset(filter(None, node.inputs)):
            aux.append(node.index)
            const.update(node.outputs)
    owner: dict[int, int] = {}
    aux_set = set(aux)
    # Consumers come later in a (topologically sorted) ONNX graph: walk backwards so each
    # consumer already knows its owner.
    for i in reversed(aux):
        found = -1
        for out in model.nodes[i].outputs:
            for c in model.consumers.get(out, ()):
                if c not in aux_set:
                    found = c
                elif c in owner:
                    found = owner[c]
                if found >= 0:
                    break
            if found >= 0:
                break
        if found >= 0:
            owner[i] = found
        else:
            aux_set.discard(i)  # feeds nothing visible: keep it on screen
    return owner
