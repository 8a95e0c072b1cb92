"""Per-node errors of a validation (`intermediates`): worst first, the first divergent marked.

"Show on graph" asks for the Graph tab's nodes to be coloured by their max abs diff and for
the chosen node (or the first divergent one) to be centred.
"""

from __future__ import annotations

import html
import math

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from onnx_studio.app.validation.common import (
    add_row,
    make_table,
    number,
    paint_verdict,
    sort_key,
    verdict_color,
)
from onnx_studio.engine.protocol import Intermediates, NodeMetrics

HEADERS = ["Node", "Value", "max abs", "max rel", "mismatched", "Result"]
NO_INTERMEDIATES = ("Per-node numbers were not computed. Turn on Options ▸ Validation ▸ "
                    "<b>Per node</b> and validate again (dynamo exports) to see where inside "
                    "the graph ONNX Runtime starts to differ.")


class NodesPanel(QWidget):
    """The table of compared nodes and the buttons that put their errors on the graph."""

    # (values by ONNX node name, label, node to centre or "")
    showOnGraph = Signal(object, str, str)
    clearGraph = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.nodes: dict[str, NodeMetrics] = {}  # the shown validation's, by ONNX node
        self.first: str | None = None
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.table = make_table(HEADERS, stretch=0)
        self.table.setSortingEnabled(True)
        self.show_button = QPushButton("Show on graph")
        self.show_button.setToolTip("Colour the Graph tab's nodes by max abs diff and centre "
                                    "the selected node (or the first divergent one)")
        self.clear_button = QPushButton("Clear graph colours")
        row = QHBoxLayout()
        row.addWidget(self.summary, 1)
        row.addWidget(self.show_button)
        row.addWidget(self.clear_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.table, 1)
        self.show_button.clicked.connect(self.show_on_graph)
        self.clear_button.clicked.connect(self.clearGraph)
        self.table.itemDoubleClicked.connect(lambda *_: self.show_on_graph())
        self.set_intermediates(None, False)

    def set_intermediates(self, data: Intermediates | None, dark: bool) -> None:
        """Fill from the validation's `intermediates` (None: they were not asked for)."""
        self.table.setSortingEnabled(False)
        self.table.clear()
        self.nodes = data.nodes if data is not None else {}
        self.first = data.first_divergent if data is not None else None
        usable = bool(self.nodes)
        self.show_button.setEnabled(usable)
        self.clear_button.setEnabled(usable)
        self.table.setVisible(usable)
        if data is None:
            self.summary.setText(NO_INTERMEDIATES)
            return
        if not usable:
            reason = data.message or "no node could be compared"
            self.summary.setText(f"No per-node numbers: {html.escape(str(reason))} "
                                 "(see Warnings).")
            return
        failed = sum(1 for n in self.nodes.values() if not n.passed)
        if self.first:
            color = verdict_color(False, dark)
            self.summary.setText(
                f"<b style='color:{color}'>First divergent node: {html.escape(self.first)}"
                f"</b> (in graph order); {failed} of {len(self.nodes)} compared nodes are "
                "outside the tolerance.")
        else:
            self.summary.setText(f"All {len(self.nodes)} compared nodes agree within the "
                                 "tolerance; the largest differences are at the top.")
        for name, entry in self.nodes.items():
            passed = entry.passed
            result = "✔" if passed else "✘"
            if name == self.first:
                result = "✘ first divergent"
            item = add_row(
                self.table,
                [name, entry.value, number(entry.max_abs_diff), number(entry.max_rel_diff),
                 number(entry.mismatched), result],
                {2: sort_key(entry.max_abs_diff), 3: sort_key(entry.max_rel_diff),
                 4: sort_key(entry.mismatched)},
                tooltip=entry.message or "")
            paint_verdict(item, 5, passed, dark, whole_row=name == self.first)
            if name == self.first:
                font = QFont(item.font(0))
                font.setBold(True)
                for column in range(len(HEADERS)):
                    item.setFont(column, font)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(2, Qt.SortOrder.DescendingOrder)
        self.table.scrollToTop()

    def overlay_values(self) -> dict[str, float]:
        """Each node's error against its tolerance (1.0 = at the tolerance), an absolute scale:
        a graph whose every node is within tolerance shows no red. A node that failed without
        a ratio (shapes differ, a NaN against a number) is off the scale."""
        values = {}
        for name, n in self.nodes.items():
            ratio = n.tolerance_ratio
            if ratio is None:
                ratio = 0.0 if n.passed else math.inf
            values[name] = float(ratio)
        return values

    def show_on_graph(self) -> None:
        if not self.nodes:
            return
        chosen = self.table.selectedItems()  # the user's pick, else the first divergent node
        node = chosen[0].text(0) if chosen else (self.first or "")
        self.showOnGraph.emit(self.overlay_values(), "error ÷ tolerance", node)
