"""Two graphs side by side, A and B, each in the Graph tab's own browser (onnx_studio.app.graph):
nodes without a match outlined, and a click on a matched node selecting its match on the other side
(onnx_studio.engine.analysis.matching's pairs). Side by side when the tab is wide enough for both,
one above the other when it is not (beside the form on a 1024-pixel screen). Their properties panels
hide together (the toolbar's Properties): the two graphs then take the full width."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QSplitter, QWidget

from onnx_studio.app.graph.browser import GraphBrowser
from onnx_studio.engine.protocol import NodeMatching


class SideBySideGraphs(QSplitter):
    """Graph A on the left, B on the right, linked by the node matching."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Orientation.Horizontal, parent)
        self.a = GraphBrowser()
        self.b = GraphBrowser()
        self.addWidget(self.a)
        self.addWidget(self.b)
        self.a_to_b: dict[int, int] = {}
        self.b_to_a: dict[int, int] = {}
        self.a.view.boxClicked.connect(lambda _i: self._follow(self.a, self.b, self.a_to_b))
        self.b.view.boxClicked.connect(lambda _i: self._follow(self.b, self.a, self.b_to_a))
        # the properties panels shown or hidden together: hidden, the graphs take the width
        a_shown, b_shown = self.a.toolbar.properties_action, self.b.toolbar.properties_action
        a_shown.toggled.connect(b_shown.setChecked)
        b_shown.toggled.connect(a_shown.setChecked)

    def minimumSizeHint(self) -> QSize:
        """As small as one graph: narrower than two, the graphs stack (resizeEvent); so the
        window's minimum height on a 768-pixel screen does not grow by a second graph."""
        hints = [w.minimumSizeHint() for w in (self.a, self.b)]
        return QSize(max(h.width() for h in hints), max(h.height() for h in hints))

    def resizeEvent(self, event: QResizeEvent) -> None:
        both = sum(w.minimumSizeHint().width() for w in (self.a, self.b)) + self.handleWidth()
        wanted = (Qt.Orientation.Horizontal if event.size().width() >= both
                  else Qt.Orientation.Vertical)
        if self.orientation() != wanted:
            self.setOrientation(wanted)
        super().resizeEvent(event)

    def show_files(self, a: Path, b: Path, matching: NodeMatching) -> bool:
        """Load both files and outline what has no match; False when one cannot be shown."""
        if not (self.a.load_file(a) and self.b.load_file(b)):
            return False
        self.a_to_b = {i: j for i, j in matching.pairs}
        self.b_to_a = {j: i for i, j in matching.pairs}
        self.a.set_marks({name: "no match in B" for name in matching.unmatched_a})
        self.b.set_marks({name: "no match in A" for name in matching.unmatched_b})
        return True

    def _follow(self, source: GraphBrowser, target: GraphBrowser, pairs: dict[int, int]
                ) -> None:
        key = source.selected_key or ""
        if not key.startswith("n") or not key[1:].isdigit():
            return
        if source.model is not source.root or target.model is not target.root:
            return
        match = pairs.get(int(key[1:]))
        if match is not None:
            target.select_node(match)

    def select_in_a(self, index: int) -> None:
        """Select node `index` of A (and so its match in B)."""
        self.a.select_node(index)
        self._follow(self.a, self.b, self.a_to_b)
