"""Two graphs side by side, A and B, each in the Graph tab's own browser (onnx_studio.app.graph):
nodes without a match outlined, and a click on a matched node selecting its match on the other side
(onnx_studio.engine.analysis.matching's pairs). Side by side when the tab is wide enough for both;
when it is not (beside the form on a 1024-pixel screen) one at a time, picked by two tabs that name
their files, each graph then as large as the tab (two stacked graphs were too short to label a box).
Each graph is labelled A or B with its file. Their properties panels hide together (the toolbar's
Properties): the two graphs then take the full width."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QSplitter, QTabBar, QVBoxLayout, QWidget

from onnx_studio.app.graph.browser import GraphBrowser
from onnx_studio.engine.protocol import NodeMatching


def _labelled(label: QLabel, browser: GraphBrowser) -> QWidget:
    column = QWidget()
    layout = QVBoxLayout(column)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(2)
    layout.addWidget(label)
    layout.addWidget(browser, 1)
    return column


class SideBySideGraphs(QWidget):
    """Graph A on the left, B on the right (or one at a time, by tabs), linked by the node
    matching."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.a = GraphBrowser()
        self.b = GraphBrowser()
        self.a_label, self.b_label = QLabel("<b>A</b>"), QLabel("<b>B</b>")
        self.switch = QTabBar()  # narrow: which of the two is shown
        self.switch.addTab("A")
        self.switch.addTab("B")
        self.switch.setExpanding(False)
        self.switch.currentChanged.connect(lambda _i: self._arrange())
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.columns = (_labelled(self.a_label, self.a), _labelled(self.b_label, self.b))
        for column in self.columns:
            self.splitter.addWidget(column)
        self.splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.switch)
        layout.addWidget(self.splitter, 1)
        self._wide = True
        self.switch.hide()
        self.a_to_b: dict[int, int] = {}
        self.b_to_a: dict[int, int] = {}
        self.a.view.boxClicked.connect(lambda _i: self._follow(self.a, self.b, self.a_to_b))
        self.b.view.boxClicked.connect(lambda _i: self._follow(self.b, self.a, self.b_to_a))
        # the properties panels shown or hidden together: hidden, the graphs take the width
        a_shown, b_shown = self.a.toolbar.properties_action, self.b.toolbar.properties_action
        a_shown.toggled.connect(b_shown.setChecked)
        b_shown.toggled.connect(a_shown.setChecked)

    def orientation(self) -> Qt.Orientation:
        """The graphs are never stacked: side by side, or one at a time (`side_by_side`)."""
        return self.splitter.orientation()

    @property
    def side_by_side(self) -> bool:
        """True when both graphs show, side by side; False: one at a time, by the tabs."""
        return self._wide

    def minimumSizeHint(self) -> QSize:
        """As small as one graph: narrower than two, they show one at a time (resizeEvent); so
        the window's minimum size on a 1024x768 screen does not grow by a second graph."""
        hints = [w.minimumSizeHint() for w in (self.a, self.b)]
        return QSize(max(h.width() for h in hints),
                     max(h.height() for h in hints) + self.switch.sizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        both = sum(w.minimumSizeHint().width() for w in (self.a, self.b)) + \
            self.splitter.handleWidth()
        wide = event.size().width() >= both
        if wide != self._wide:
            self._wide = wide
            self._arrange()
        super().resizeEvent(event)

    def _arrange(self) -> None:
        self.switch.setVisible(not self._wide)
        for k, column in enumerate(self.columns):
            column.setVisible(self._wide or self.switch.currentIndex() == k)

    def show_files(self, a: Path, b: Path, matching: NodeMatching) -> bool:
        """Load both files and outline what has no match; False when one cannot be shown."""
        if not (self.a.load_file(a) and self.b.load_file(b)):
            return False
        for k, (side, path, label) in enumerate((("A", a, self.a_label),
                                                  ("B", b, self.b_label))):
            label.setText(f"<b>{side}</b> {html.escape(path.name)}")
            label.setToolTip(str(path))
            self.switch.setTabText(k, f"{side}: {path.name}")
            self.switch.setTabToolTip(k, str(path))
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
