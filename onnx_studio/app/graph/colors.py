"""Box colours: by op category (default) or by an overlay value (on its `Scale`, from
onnx_studio.engine.graph.overlay), on light and dark palettes."""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette

from onnx_studio.engine.graph.overlay import Scale

__all__ = ["Scale", "category", "category_color", "group_color", "is_dark", "ramp_color",
           "text_color_on"]

# Netron-like families, so a user coming from there reads the picture at once.
_CATEGORY_HUE = {
    "layer": 210,  # Conv, Gemm, MatMul: where the weights are
    "activation": 0,
    "normalization": 130,
    "attention": 275,
    "shape": 40,
    "math": 185,
    "control": 300,
    "io": 95,
    "other": 220,
}
_CATEGORY = {
    **dict.fromkeys(("Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum", "MatMulInteger",
                     "QLinearConv", "QLinearMatMul", "Gather", "GatherElements", "LSTM", "GRU",
                     "RNN", "Embedding"), "layer"),
    **dict.fromkeys(("Relu", "LeakyRelu", "PRelu", "Gelu", "Sigmoid", "Tanh", "Softmax",
                     "LogSoftmax", "Elu", "Selu", "HardSigmoid", "HardSwish", "Softplus",
                     "Mish", "Erf", "Clip", "FastGelu", "QuickGelu"), "activation"),
    **dict.fromkeys(("BatchNormalization", "LayerNormalization", "InstanceNormalization",
                     "GroupNormalization", "RMSNormalization", "SimplifiedLayerNormalization",
                     "SkipLayerNormalization", "LpNormalization", "Dropout"), "normalization"),
    **dict.fromkeys(("Attention", "MultiHeadAttention", "GroupQueryAttention",
                     "RotaryEmbedding"), "attention"),
    **dict.fromkeys(("Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Concat",
                     "Split", "Slice", "Expand", "Tile", "Pad", "Shape", "Size", "Identity",
                     "Cast", "CastLike", "Constant", "ConstantOfShape", "Range", "Where",
                     "Resize", "DepthToSpace", "SpaceToDepth", "ScatterND", "GatherND",
                     "Trilu", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"),
                    "shape"),
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Neg", "Abs",
                     "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "Min",
                     "Max", "Sum", "Mean", "Equal", "Less", "Greater", "Not", "And", "Or",
                     "Reciprocal", "Floor", "Ceil", "Sin", "Cos", "CumSum", "ArgMax",
                     "ArgMin", "TopK"), "math"),
    **dict.fromkeys(("If", "Loop", "Scan"), "control"),
}


def category(op_type: str) -> str:
    """The colour family of an op type."""
    return _CATEGORY.get(op_type, "other")


def is_dark(palette: QPalette) -> bool:
    """True when the window palette is a dark scheme."""
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def category_color(cat: str, dark: bool) -> QColor:
    """Fill for a category: soft on light palettes, deep on dark ones, text stays readable."""
    hue = _CATEGORY_HUE.get(cat, 220)
    if cat == "other":
        return QColor.fromHsl(hue, 20, 70 if dark else 225)
    return QColor.fromHsl(hue, 110 if dark else 160, 62 if dark else 212)


def group_color(depth: int, dark: bool, expanded: bool) -> QColor:
    """Fill of a module box; nested expanded groups alternate so their borders read."""
    if expanded:
        return QColor.fromHsl(215, 25, (38 + 8 * (depth % 2)) if dark else (246 - 7 * (depth % 2)))
    return QColor.fromHsl(215, 45, 78 if dark else 200)


# A perceptual-ish ramp (viridis stops) for overlay values.
_RAMP = [(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)]


def ramp_color(t: float) -> QColor:
    """Colour of a normalised value in [0, 1] (NaN gives grey)."""
    if t != t:  # NaN
        return QColor(150, 150, 150)
    t = min(1.0, max(0.0, t))
    pos = t * (len(_RAMP) - 1)
    i = min(int(pos), len(_RAMP) - 2)
    f = pos - i
    a, b = _RAMP[i], _RAMP[i + 1]
    return QColor(*(round(a[k] + (b[k] - a[k]) * f) for k in range(3)))


def text_color_on(fill: QColor) -> QColor:
    """Black or white, whichever reads better on ``fill``."""
    lum = 0.299 * fill.redF() + 0.587 * fill.greenF() + 0.114 * fill.blueF()
    return QColor(20, 20, 20) if lum > 0.55 else QColor(245, 245, 245)
