"""GraphBrowser: the Graph tab — toolbar, breadcrumb, graph view and properties panel."""

from __future__ import annotations

import html
import importlib.util
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QImage, QKeySequence, QPainter, QPalette, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSplitter,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.graph import colors
from app.graph.canvas import BoxFonts, GraphCanvas
from app.graph.properties import PropertiesPanel
from app.graph.view import GraphView
from engine.graph.layout import GraphLayout
from engine.graph.model import GraphModel, no_gc

MAX_EXPORT_PIXELS = 12000  # longest side of an exported PNG


class GraphBrowser(QWidget):
    """Browse an ONNX graph: module groups, search, properties, subgraphs, overlays."""

    nodeActivated = Signal(str)  # ONNX node name, on double-click of a plain node
    loadFailed = Signal(str)  # a sentence saying why the file could not be shown
    graphShown = Signal()  # a (sub)graph was laid out and put on screen
    problemsChanged = Signal()  # the file's checks, run once it was shown, found problems

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.fonts = BoxFonts(self.font())
        self.canvas = GraphCanvas(self.fonts)
        self.view = GraphView(self.canvas, self)
        self.properties = PropertiesPanel(self)
        self.root: GraphModel | None = None
        self.model: GraphModel | None = None
        self.layout_state: GraphLayout | None = None
        self._layouts: dict[int, GraphLayout] = {}
        self.fold_shape_ops = True
        self.left_to_right = False
        self.overlay: dict[str, float] | None = None
        self.overlay_label = ""
        self.overlay_scale: colors.Scale | None = None
        self.marks: dict[str, str] = {}  # ONNX node name -> what is wrong with it
        self.hits: list[int] = []  # node indices matching the search
        self.hit_pos = -1
        self.selected_key: str | None = None
        self._build_ui()
        self._auto_view = True  # place the view for the user until they move it
        self.view.userMoved.connect(self._user_moved)
        self.view.resized.connect(self._view_resized)
        self.view.boxClicked.connect(self._clicked)
        self.view.edgeClicked.connect(self._edge_clicked)
        self.view.boxDoubleClicked.connect(self._double_clicked)
        self._unindexed: GraphModel | None = None  # shown, its indexes not built yet
        self.view.painted.connect(self._painted)
        self.properties.linkActivated.connect(self._link)

    # ------------------------------------------------------------------ ui
    def _build_ui(self) -> None:
        bar = QToolBar(self)
        bar.setIconSize(QSize(16, 16))
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.toolbar = bar

        def act(text: str, slot: object, tip: str, shortcut: str | None = None,
                on_bar: bool = True) -> QAction:
            a = QAction(text, self)
            a.setToolTip(tip + (f" ({shortcut})" if shortcut else ""))
            a.triggered.connect(slot)
            if shortcut:
                a.setShortcut(QKeySequence(shortcut))
                a.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            self.addAction(a)
            if on_bar:
                bar.addAction(a)
            return a

        act("Fit", self.fit, "Show the whole graph", "0")
        act("+", lambda: self.view.zoom(1.25), "Zoom in", "Ctrl++")
        act("−", lambda: self.view.zoom(0.8), "Zoom out", "Ctrl+-")
        bar.addSeparator()
        act("Expand all", self.expand_all, "Open every module box")
        self.depth_combo = QComboBox(self)
        self.depth_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.depth_combo.setToolTip(
            "How deep module boxes are opened. Level 1 opens the top-level modules (each "
            "transformer block, say) to show what is inside them, level 2 the modules inside "
            "those, and so on; deeper modules stay closed boxes. Double-click a box to open or "
            "close one module.")
        self.depth_combo.activated.connect(self._depth_chosen)
        bar.addWidget(self.depth_combo)
        self.direction_action = QAction("Left to right", self)
        self.direction_action.setCheckable(True)
        self.direction_action.setToolTip("Lay the graph out left to right instead of top to "
                                         "bottom (suits wide screens and long chains)")
        self.direction_action.toggled.connect(self.set_left_to_right)
        bar.addAction(self.direction_action)
        self.fold_action = QAction("Fold shapes", self)
        self.fold_action.setCheckable(True)
        self.fold_action.setChecked(True)
        self.fold_action.setToolTip("Fold constants and shape arithmetic into the node they feed")
        self.fold_action.toggled.connect(self.set_fold_shape_ops)
        bar.addAction(self.fold_action)
        bar.addSeparator()
        act("PNG…", self._export_png_clicked, "Save the graph as a PNG image")
        act("SVG…", self._export_svg_clicked, "Save the graph as an SVG drawing")
        self.netron_action = act("Netron", self.open_in_netron,
                                 "Open the file in Netron (the netron package is installed)")
        self.netron_action.setVisible(importlib.util.find_spec("netron") is not None)

        # Second row: where we are (breadcrumb of subgraphs) on the left, search on the right.
        row = QWidget(self)
        row_layout = QHBoxLayout(row)
        row_layout.setContentsMargins(4, 0, 4, 0)
        row_layout.setSpacing(2)
        self.crumbs = QWidget(row)
        self.crumb_layout = QHBoxLayout(self.crumbs)
        self.crumb_layout.setContentsMargins(0, 0, 0, 0)
        self.crumb_layout.setSpacing(2)
        row_layout.addWidget(self.crumbs)
        row_layout.addStretch(1)
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Find node, op type or tensor (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.setMinimumWidth(180)
        self.search.returnPressed.connect(self.find_next)
        self.search.textChanged.connect(lambda _t: self._search_timer.start())
        self._search_timer: QTimer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(250)
        self._search_timer.timeout.connect(self._run_search)
        row_layout.addWidget(self.search, 2)
        for text, slot, tip, key in (("◀", self.find_previous, "Previous match", "Shift+F3"),
                                     ("▶", self.find_next, "Next match", "F3")):
            button = QToolButton(row)
            button.setDefaultAction(act(text, slot, tip, key, on_bar=False))
            button.setAutoRaise(True)
            row_layout.addWidget(button)
        self.hit_label = QLabel("", self)
        self.hit_label.setMinimumWidth(56)
        row_layout.addWidget(self.hit_label)
        find = QShortcut(QKeySequence.StandardKey.Find, self)
        find.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        find.activated.connect(self._focus_search)

        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(self.view)
        split.addWidget(self.properties)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        split.setSizes([700, 300])
        self.splitter = split
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(bar)
        lay.addWidget(row)
        lay.addWidget(split, 1)

    def _focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    # ------------------------------------------------------------------ loading
    def load_file(self, path: str | Path, expand_all: bool = False) -> bool:
        """Open an ``.onnx`` file (with every module expanded when `expand_all`: laid out
        once, expanded); on failure show why (and emit loadFailed) and return False."""
        try:
            with no_gc(freeze=True):
                model = GraphModel.load(path, checks_now=False)
        except FileNotFoundError:
            return self._fail(f"{Path(path).name} does not exist.")
        except ValueError as exc:
            return self._fail(str(exc))
        self.load_model(model, expand_all)
        return True

    def _fail(self, message: str) -> bool:
        self.properties.model = None
        self.properties.browser.setHtml("<h3>Cannot show the graph</h3>"
                                        f"<p>{html.escape(message)}</p>")
        self.loadFailed.emit(message)
        return False

    def load_model(self, model: GraphModel, expand_all: bool = False) -> None:
        """Show a GraphModel (its top level collapsed, or every module expanded)."""
        self.root = model
        self._layouts.clear()
        self._show(model, expand_all)

    def open_subgraph(self, node_index: int, attribute: str) -> None:
        """Show the subgraph of an If/Loop/Scan node of the current graph."""
        assert self.model is not None
        self._show(self.model.subgraph(node_index, attribute))

    def open_function(self, node_index: int) -> None:
        """Show the body of the local function a node calls."""
        assert self.model is not None
        key = self.model.function_of(node_index)
        if key is not None:
            self._show(self.model.function_graph(key))

    def _show(self, model: GraphModel, expand_all: bool = False) -> None:
        self.model = model
        lay = self._layouts.get(id(model))
        if lay is None:
            with no_gc(freeze=True):
                lay = GraphLayout(model, measure=self.fonts.measure,
                                  measure_nodes=self.fonts.measure_nodes, fold=self.fold_shape_ops,
                                  left_to_right=self.left_to_right)
            self._layouts[id(model)] = lay
        if expand_all:
            lay.expand_all()
        self.layout_state = lay
        self.selected_key = None
        self.hits, self.hit_pos = [], -1
        self.properties.set_graph(model, lay)
        self.properties.overlay = self.overlay
        self.properties.overlay_label = self.overlay_label
        self.properties.marks = self.marks
        self._apply_layout()
        self._auto_view = True
        self._initial_view()
        self._fill_depth_choices()
        if expand_all:
            self.depth_combo.setCurrentIndex(self.depth_combo.count() - 1)
        self._update_crumbs()
        if self.search.text():
            self._run_search()
        self._unindexed = model
        self.graphShown.emit()

    def _painted(self) -> None:
        # Once the new graph is on screen, check the file and build its search index and
        # value types when the window is next idle: the first paint waits for none of them,
        # nor the first search or click for the indexes.
        root = self.root
        if root is not None and root.checks_pending:
            QTimer.singleShot(0, self, lambda: self._run_checks(root))
        model, self._unindexed = self._unindexed, None
        if model is not None:
            QTimer.singleShot(0, self, model.build_indexes)

    def _run_checks(self, root: GraphModel) -> None:
        if root.run_checks() and root is self.root:
            self.problemsChanged.emit()

    def _user_moved(self) -> None:
        self._auto_view = False

    def fit(self) -> None:
        """Show the whole graph at any expansion (the user's choice: kept through resizes)."""
        self._auto_view = False
        self.view.fit()

    def _view_resized(self) -> None:
        # Loaded while the tab was hidden or small: place it again at its real size.
        if self._auto_view and not self.view.fit_mode and self.canvas.scene_data is not None:
            self._initial_view()

    def node_count(self) -> int:
        """Nodes in the main graph (0 when nothing is loaded)."""
        return len(self.root.nodes) if self.root is not None else 0

    def _initial_view(self) -> None:
        """Readable from the start: fit when that stays legible, else 100 % at the top."""
        self.view.resetTransform()
        rect = self.canvas.boundingRect()
        vp = self.view.viewport().size()
        fit = min(vp.width() / max(rect.width(), 1), vp.height() / max(rect.height(), 1))
        if fit >= 0.6:
            self.view.fit()
        else:
            s = min(1.0, max(0.6, vp.width() / max(rect.width(), 1)))
            self.view.set_zoom(s)
            self.view.centerOn(QPointF(rect.center().x(),
                                       rect.top() + vp.height() / (2 * s)))

    def _apply_layout(self, anchor: str | None = None) -> None:
        """Lay out the current expansion state; keep ``anchor``'s box where it was on screen."""
        lay = self.layout_state
        assert lay is not None and self.model is not None
        before = None
        if anchor is not None and self.canvas.scene_data is not None:
            i = self.canvas.scene_data.index.get(anchor)
            if i is not None:
                b = self.canvas.scene_data.boxes[i]
                before = self.view.mapFromScene(QPointF(b.x, b.y))
        # 100k boxes: collections triggered by allocations would cost seconds
        with no_gc(freeze=True):
            scene = lay.scene()
            self.canvas.overlay = self.overlay
            if self.overlay is not None:
                self.canvas.overlay_norm = self.overlay_scale or colors.Scale.of_values(
                    self.overlay.values())
            self.canvas.set_data(scene, self.model, lay, self.palette())
        self.view.content_changed()
        if before is not None and anchor in scene.index:
            b = scene.boxes[scene.index[anchor]]
            now = self.view.mapFromScene(QPointF(b.x, b.y))
            d = now - before
            self.view.horizontalScrollBar().setValue(self.view.horizontalScrollBar().value()
                                                     + d.x())
            self.view.verticalScrollBar().setValue(self.view.verticalScrollBar().value() + d.y())
        self._restore_marks()

    def _restore_marks(self) -> None:
        sc = self.canvas.scene_data
        lay = self.layout_state
        if sc is None or lay is None:
            return
        if self.selected_key is not None:
            self.canvas.selected = sc.index.get(lay.visible_key(self.selected_key)
                                                if self.selected_key in lay.parent_of
                                                else self.selected_key, -1)
        self.canvas.hits = {sc.index[k] for k in
                            (lay.visible_key(lay.node_key(i)) for i in self.hits)
                            if k in sc.index}
        marked: set[int] = set()
        if self.marks and self.model is not None:
            for i in (n.index for n in self.model.nodes if n.name in self.marks):
                k = lay.visible_key(lay.node_key(i))
                if k in sc.index:
                    marked.add(sc.index[k])
        self.canvas.marks = marked
        self.canvas.update()

    def _update_crumbs(self) -> None:
        while self.crumb_layout.count():
            item = self.crumb_layout.takeAt(0)
            w = item.widget() if item is not None else None
            if w is not None:
                w.deleteLater()
        assert self.model is not None
        chain = self.model.breadcrumb()
        self.crumb_buttons: list[QToolButton] = []
        for k, g in enumerate(chain):
            if k:
                self.crumb_layout.addWidget(QLabel("›", self.crumbs))
            b = QToolButton(self.crumbs)
            b.setText(g.title)
            b.setAutoRaise(True)
            b.setEnabled(k < len(chain) - 1)
            b.clicked.connect(lambda _c=False, target=g: self._show(target))
            self.crumb_layout.addWidget(b)
            self.crumb_buttons.append(b)
        self.crumbs.setVisible(len(chain) > 1)

    def breadcrumb(self) -> list[str]:
        """Titles from the main graph down to the one shown."""
        return [g.title for g in self.model.breadcrumb()] if self.model else []

    # ------------------------------------------------------------------ expand / collapse
    def toggle_group(self, gid: str) -> None:
        """Expand or collapse one module group."""
        assert self.layout_state is not None
        self._auto_view = False
        self.layout_state.toggle(gid)
        self._apply_layout(anchor="g:" + gid)

    def expand_all(self) -> None:
        """Expand every module group."""
        if self.layout_state is not None:
            self.layout_state.expand_all()
            self._apply_layout()
            self.depth_combo.setCurrentIndex(self.depth_combo.count() - 1)

    def collapse_to_depth(self, depth: int) -> None:
        """Expand modules up to ``depth`` levels; 0 shows each top-level module as a box."""
        if self.layout_state is not None:
            self.layout_state.collapse_to_depth(depth)
            self._apply_layout()
            self._initial_view()
            self.depth_combo.setCurrentIndex(min(depth, self.depth_combo.count() - 1))

    def _depth_chosen(self, index: int) -> None:
        lay = self.layout_state
        if lay is None:
            return
        if index >= lay.max_depth():
            self.expand_all()
            self._initial_view()
        else:
            self.collapse_to_depth(index)

    def _fill_depth_choices(self) -> None:
        """One entry per nesting level of the graph shown: what each one opens."""
        lay = self.layout_state
        deepest = lay.max_depth() if lay is not None else 0
        self.depth_combo.clear()
        for d in range(deepest + 1):
            if d == 0:
                text = "Modules closed"
            elif d == deepest:
                text = f"All {d} levels open" if d > 1 else "All modules open"
            else:
                text = f"Modules open {d} level{'s' if d > 1 else ''} deep"
            self.depth_combo.addItem(text, d)
        self.depth_combo.setCurrentIndex(0)
        self.depth_combo.setEnabled(deepest > 0)

    def set_left_to_right(self, across: bool) -> None:
        """Lay the graph out left to right (True) or top to bottom (False, the default)."""
        self.left_to_right = across
        if self.direction_action.isChecked() != across:
            self.direction_action.setChecked(across)
        if self.model is not None:
            self._layouts.clear()
            self._show(self.model)

    def set_fold_shape_ops(self, fold: bool) -> None:
        """Fold (default) or show constants and shape arithmetic as nodes of their own."""
        self.fold_shape_ops = fold
        if self.fold_action.isChecked() != fold:
            self.fold_action.setChecked(fold)
        if self.model is not None:
            self._layouts.pop(id(self.model), None)
            self._show(self.model)

    # ------------------------------------------------------------------ selection
    def _clicked(self, index: int) -> None:
        sc = self.canvas.scene_data
        if sc is None:
            return
        if index < 0:
            self.selected_key = None
            self.canvas.selected = -1
            self.canvas.update()
            self.properties.show_empty()
            return
        self.select_key(sc.boxes[index].key)

    def _edge_clicked(self, index: int) -> None:
        sc = self.canvas.scene_data
        assert sc is not None
        self.show_tensor(sc.edges[index].tensors[0])

    def show_tensor(self, name: str) -> None:
        """Show a tensor's properties (type, shape, producer, consumers, values)."""
        self.properties.show_tensor(name)

    def select_key(self, key: str, center: bool = False) -> None:
        """Select a box by item key ("n12", "g:h.0", "i:x") and show its properties."""
        sc = self.canvas.scene_data
        assert sc is not None
        self.selected_key = key
        self.canvas.selected = sc.index.get(key, -1)
        self.canvas.update()
        if center and self.canvas.selected >= 0:
            self._auto_view = False
            b = sc.boxes[self.canvas.selected]
            self.view.center_on_rect(QRectF(b.x, b.y, b.w, b.h))
        if key.startswith("n"):
            self.properties.show_node(int(key[1:]))
        elif key.startswith("g:"):
            self.properties.show_group(key[2:])
        elif key[:2] in ("i:", "o:"):
            self.properties.show_tensor(key[2:])

    def select_node(self, index: int) -> None:
        """Reveal a node (expanding its modules), select and centre it, show its details."""
        lay = self.layout_state
        assert lay is not None
        key = lay.node_key(index)
        if lay.visible_key(key) != key:
            lay.reveal(key)
            self._apply_layout()
        self.select_key(key, center=True)
        if key != f"n{index}":  # a folded node: its consumer is selected, its details shown
            self.properties.show_node(index)

    def _double_clicked(self, index: int) -> None:
        sc = self.canvas.scene_data
        assert sc is not None and self.model is not None
        key = sc.boxes[index].key
        if key.startswith("g:"):
            self.toggle_group(key[2:])
        elif key.startswith("n"):
            ni = int(key[1:])
            subs = self.model.nodes[ni].subgraph_attributes
            if subs:
                self.open_subgraph(ni, subs[0])
            elif self.model.function_of(ni):
                self.open_function(ni)
            else:
                self.nodeActivated.emit(self.model.nodes[ni].name)

    def _link(self, link: str) -> None:
        kind, _, rest = link.partition(":")
        if kind == "node":
            self.select_node(int(rest))
        elif kind == "tensor":
            self.properties.show_tensor(rest)
        elif kind == "group":
            self.select_group(rest)
        elif kind == "sub":
            idx, _, attr = rest.partition(":")
            self.open_subgraph(int(idx), attr)
        elif kind == "func":
            self.open_function(int(rest))

    def select_group(self, gid: str) -> None:
        """Reveal and select a module group."""
        lay = self.layout_state
        assert lay is not None
        key = "g:" + gid
        if lay.visible_key(key) != key:
            lay.reveal(key)
            self._apply_layout()
        self.select_key(key, center=True)

    # ------------------------------------------------------------------ search
    def find_nodes(self, text: str) -> int:
        """Search by node name, op type or tensor name; select the first match.
        Returns the number of matches."""
        self.search.blockSignals(True)
        self.search.setText(text)
        self.search.blockSignals(False)
        self._run_search()
        if self.hits:
            self.find_next()
        return len(self.hits)

    def _run_search(self) -> None:
        if self.model is None:
            return
        self.hits = self.model.search(self.search.text())
        self.hit_pos = -1
        self._update_hit_label()
        self._restore_marks()

    def _update_hit_label(self) -> None:
        if not self.search.text().strip():
            self.hit_label.setText("")
        elif not self.hits:
            self.hit_label.setText("no match")
        else:
            self.hit_label.setText(f"{max(self.hit_pos, 0) + 1 if self.hit_pos >= 0 else 0}"
                                   f" / {len(self.hits)}")

    def find_next(self) -> None:
        """Go to the next search match."""
        self._step(1)

    def find_previous(self) -> None:
        """Go to the previous search match."""
        self._step(-1)

    def _step(self, d: int) -> None:
        if self._search_timer.isActive():
            self._search_timer.stop()
            self._run_search()
        if not self.hits:
            return
        self.hit_pos = (self.hit_pos + d) % len(self.hits)
        self.select_node(self.hits[self.hit_pos])
        query = self.search.text().strip()
        model = self.model
        if model is not None and (query in model.producer or query in model.consumers):
            self.show_tensor(query)  # the query names a tensor: show the tensor itself
        self._restore_marks()
        self.canvas.current_hit = self.canvas.selected
        self._update_hit_label()

    # ------------------------------------------------------------------ overlay
    def set_overlay(self, values: Mapping[str, float], label: str, *,
                    scale: colors.Scale | None = None) -> None:
        """Colour nodes by a value per ONNX node name; a collapsed group takes its largest.

        ``scale`` None fits the ramp to the values (relative); a fixed `colors.Scale` colours
        on an absolute scale, e.g. ``Scale(0.01, 100, log=True, mark=1.0)`` for error against
        tolerance (values in [0, inf), 1.0 = at tolerance). The legend shows ``label``, the
        range and the mark. Nodes without a value are drawn grey.
        """
        self.overlay = dict(values)
        self.overlay_label = label
        self.properties.overlay = self.overlay
        self.properties.overlay_label = label
        norm = scale if scale is not None else colors.Scale.of_values(self.overlay.values())
        self.overlay_scale = norm
        self.canvas.overlay = self.overlay
        self.canvas.overlay_norm = norm
        self.canvas.refresh_colors()
        self.view.legend.set_range(label, norm)
        self.view.legend.show()
        self.view.minimap.rebuild()

    def clear_overlay(self) -> None:
        """Back to colouring by op type."""
        self.overlay = None
        self.overlay_scale = None
        self.properties.overlay = None
        self.canvas.overlay = None
        self.canvas.refresh_colors()
        self.view.legend.hide()
        self.view.minimap.rebuild()

    def set_marks(self, reasons: Mapping[str, str]) -> None:
        """Outline nodes that have a problem: ONNX node name -> one sentence saying what.

        A collapsed group holding a marked node is outlined too; the properties panel of a
        marked node shows its sentence. Replaces earlier marks; names not in the graph are
        ignored.
        """
        self.marks = dict(reasons)
        self.properties.marks = self.marks
        self._restore_marks()

    def clear_marks(self) -> None:
        """Remove every problem outline."""
        self.set_marks({})

    # ------------------------------------------------------------------ export
    def export_png(self, path: str | Path) -> None:
        """Save the whole laid-out graph as a PNG (scaled down when very large)."""
        rect = self.canvas.boundingRect()
        s = min(1.5, MAX_EXPORT_PIXELS / max(rect.width(), rect.height(), 1))
        img = QImage(max(1, int(rect.width() * s)), max(1, int(rect.height() * s)),
                     QImage.Format.Format_ARGB32)
        img.fill(self.palette().color(QPalette.ColorRole.Base))
        p = QPainter(img)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.view.scene().render(p, QRectF(img.rect()), rect)
        p.end()
        if not img.save(str(path), "PNG"):  # type: ignore[call-overload]
            raise OSError(f"Could not write {path}.")

    def export_svg(self, path: str | Path) -> None:
        """Save the whole laid-out graph as an SVG drawing."""
        from PySide6.QtSvg import QSvgGenerator

        rect = self.canvas.boundingRect()
        gen = QSvgGenerator()
        gen.setFileName(str(path))
        gen.setSize(rect.size().toSize())
        gen.setViewBox(QRectF(0, 0, rect.width(), rect.height()))
        gen.setTitle(self.model.title if self.model else "graph")
        p = QPainter(gen)
        p.fillRect(QRectF(0, 0, rect.width(), rect.height()),
                   self.palette().color(QPalette.ColorRole.Base))
        self.view.scene().render(p, QRectF(0, 0, rect.width(), rect.height()), rect)
        p.end()

    def _export_png_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save graph as PNG", self._export_name(".png"),
                                              "PNG image (*.png)")
        if path:
            self.export_png(path)

    def _export_svg_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save graph as SVG", self._export_name(".svg"),
                                              "SVG drawing (*.svg)")
        if path:
            self.export_svg(path)

    def _export_name(self, suffix: str) -> str:
        if self.root is not None and self.root.path is not None:
            return str(self.root.path.with_suffix(suffix))
        return "graph" + suffix

    def open_in_netron(self) -> None:
        """Open the file in Netron in the background (only offered when it is installed)."""
        if self.root is not None and self.root.path is not None:
            subprocess.Popen([sys.executable, "-m", "netron", str(self.root.path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    # ------------------------------------------------------------------ palette
    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self.canvas.scene_data is not None:
            self.canvas.palette = self.palette()
            self.canvas.refresh_colors()
            self.view.minimap.rebuild()
        if event.type() == QEvent.Type.PaletteChange and self.properties.model is not None:
            # After the children have their new palette too: links take colours when rendered.
            QTimer.singleShot(0, self.properties.refresh)
