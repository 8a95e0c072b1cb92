"""Node boxes measured all at once (numpy sums of character widths) are the sizes the
one-by-one measure gives, whatever the names hold."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from onnx_studio.app.graph.fonts import BoxFonts
from onnx_studio.engine.graph.items import Item

NAMES = {"/h.0/attn/MatMul_1": "MatMul", "": "Add", "a" * 40: "Gemm",
         "/encoder/layer.11/attention/self/Softmax": "Softmax", "tab\there": "Add",
         "Ünïcode/ノード_1": "LayerNormalization", "emoji 🙂 name": "Ωp"}


def test_node_boxes_measured_at_once_as_one_by_one(qtbot) -> None:  # type: ignore[no-untyped-def]
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    ascii_names = [name for name in NAMES if name.isascii()]
    bmp_names = [name for name in NAMES if all(ord(c) < 1 << 16 for c in name)]
    for names in (ascii_names, bmp_names, list(NAMES)):  # (emoji: past the numpy table)
        fonts = BoxFonts(app.font())
        ops = [NAMES[name] for name in names]
        one_by_one = [fonts.measure(Item("", "node", op, name, 0.0))
                      for op, name in zip(ops, names, strict=True)]
        assert BoxFonts(app.font()).measure_nodes(ops, names) == one_by_one, names
    assert BoxFonts(app.font()).measure_nodes([], []) == []
