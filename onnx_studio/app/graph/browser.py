"""GraphBrowser: the Graph tab's browser — toolbar, breadcrumb, graph view and properties panel.

A view of a `BrowserModel` (onnx_studio.engine.graph.browser_model): it draws what the model says
(the graph shown, its expansion, the selection, the search, the overlay and the marks), subscribes
to the model's events, and turns clicks and keys into the model's methods. What only a screen has
stays here: the zoom and scroll position, fonts and colours, the idle work after a paint.
"""

from __future__ import annotations

import html
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QPalette, QShortcut
from PySide6.QtWidgets import QFileDialog, QSplitter, QToolButton, QVBoxLayout, QWidget

from onnx_studio.app.graph import colors
from onnx_studio.app.graph.canvas import GraphCanvas
from onnx_studio.app.graph.fonts import BoxFonts
from onnx_studio.app.graph.pictures import save_png, save_svg
from onnx_studio.app.graph.properties import PropertiesPanel
from onnx_studio.app.graph.toolbar import GraphToolbar, SearchRow
from onnx_studio.app.graph.view import GraphView
from onnx_studio.engine.graph.browser_model import BrowserModel, Search, Selection
from onnx_studio.engine.graph.layout import GraphLayout
from onnx_studio.engine.graph.model import GraphModel, no_gc
from onnx_studio.engine.graph.overlay import Overlay


class GraphBrowser(QWidget):
    """Browse an ONNX graph: module groups, search, properties, subgraphs, overlays.

    `state` is the model it shows (a fresh one when not given); everything the browser shows
    is read from it, everything the user does goes through its methods."""

    nodeActivated = Signal(str)  # ONNX node name, on double-click of a plain node
    loadFailed = Signal(str)  # a sentence saying why the file could not be shown
    graphShown = Signal()  # a (sub)graph was laid out and put on screen
    problemsChanged = Signal()  # the file's checks, run once it was shown, found problems

    def __init__(self, parent: QWidget | None = None, state: BrowserModel | None = None
                 ) -> None:
        super().__init__(parent)
        self.fonts = BoxFonts(self.font())
        self.canvas = GraphCanvas(self.fonts)
        self.view = GraphView(self.canvas, self)
        self.properties = PropertiesPanel(self)
        self.state = state if state is not None else BrowserModel()
        if self.state.measure is None:
            self.state.measure = self.fonts.measure
            self.state.measure_nodes = self.fonts.measure_nodes
        self._build_ui()
        self._auto_view = True  # place the view for the user until they move it
        self._unindexed: GraphModel | None = None  # shown, its indexes not built yet
        self.view.userMoved.connect(self._user_moved)
        self.view.resized.connect(self._view_resized)
        self.view.boxClicked.connect(self._clicked)
        self.view.edgeClicked.connect(self._edge_clicked)
        self.view.boxDoubleClicked.connect(self._double_clicked)
        self.view.painted.connect(self._painted)
        self.properties.linkActivated.connect(self._link)
        events = self.state.events
        events.graph.connect(self._graph_shown)
        events.layout.connect(self._layout_changed)
        events.selection.connect(self._selection_changed)
        events.focus.connect(self._bring_into_view)
        events.search.connect(self._search_changed)
        events.overlay.connect(self._overlay_changed)
        events.marks.connect(self._marks_changed)

    # ------------------------------------------------------------------ the model's state
    @property
    def root(self) -> GraphModel | None:
        """The file's main graph."""
        return self.state.root

    @property
    def model(self) -> GraphModel | None:
        """The graph shown (the main graph, a subgraph or a function)."""
        return self.state.graph

    @property
    def layout_state(self) -> GraphLayout | None:
        """The shown graph's layout and expansion."""
        return self.state.layout

    @property
    def selected_key(self) -> str | None:
        """The key of the box selected ("n12", "g:h.0", "i:x"), or None."""
        return self.state.selection.key

    @property
    def overlay(self) -> dict[str, float] | None:
        """The values the nodes are coloured by now (None: by op type)."""
        shown = self.state.overlay
        return dict(shown.values) if shown is not None else None

    @property
    def overlay_label(self) -> str:
        shown = self.state.overlay
        return shown.label if shown is not None else ""

    @property
    def overlay_scale(self) -> colors.Scale | None:
        shown = self.state.overlay
        return shown.ramp if shown is not None else None

    @property
    def marks(self) -> dict[str, str]:
        """ONNX node name -> what is wrong with it (outlined)."""
        return self.state.marks

    # ------------------------------------------------------------------ ui
    def _build_ui(self) -> None:
        bar = self.toolbar = GraphToolbar(self)
        self.addActions(bar.shortcut_actions)
        bar.fit_action.triggered.connect(self.fit)
        bar.zoom_in_action.triggered.connect(lambda: self.view.zoom(1.25))
        bar.zoom_out_action.triggered.connect(lambda: self.view.zoom(0.8))
        bar.expand_action.triggered.connect(self.expand_all)
        self.depth_combo = bar.depth_combo
        self.depth_combo.activated.connect(self._depth_chosen)
        self.direction_action = bar.direction_action
        self.direction_action.toggled.connect(self.set_left_to_right)
        self.fold_action = bar.fold_action
        self.fold_action.toggled.connect(self.set_fold_shape_ops)
        bar.png_action.triggered.connect(lambda: self._save_clicked("png"))
        bar.svg_action.triggered.connect(lambda: self._save_clicked("svg"))
        bar.netron_action.triggered.connect(self.open_in_netron)
        bar.properties_action.toggled.connect(lambda on: self.properties.setVisible(on))

        row = self.search_row = SearchRow(self)
        self.crumbs = row.crumbs
        row.crumbChosen.connect(self._crumb_chosen)
        self.search = row.search
        self.hit_label = row.hit_label
        self.addActions([row.previous_action, row.next_action])
        row.previous_action.triggered.connect(lambda: self.find_next(-1))
        row.next_action.triggered.connect(lambda: self.find_next())
        self.search.returnPressed.connect(lambda: self.find_next())
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(250)
        self._search_timer.timeout.connect(self._run_search)
        self.search.textChanged.connect(lambda _t: self._search_timer.start())
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
            self.state.load_file(path, expand_all)
        except FileNotFoundError:
            return self._fail(f"{Path(path).name} does not exist.")
        except ValueError as exc:
            return self._fail(str(exc))
        return True

    def _fail(self, message: str) -> bool:
        self.properties.model = None
        self.properties.browser.setHtml("<h3>Cannot show the graph</h3>"
                                        f"<p>{html.escape(message)}</p>")
        self.loadFailed.emit(message)
        return False

    def load_model(self, model: GraphModel, expand_all: bool = False) -> None:
        """Show a GraphModel (its top level collapsed, or every module expanded)."""
        self.state.load(model, expand_all)

    def _graph_shown(self, graph: GraphModel) -> None:
        """Another graph (or the same one laid out anew): draw everything the model holds."""
        lay = self.state.layout
        assert lay is not None
        self.properties.set_graph(graph, lay)
        self._overlay_changed(self.state.overlay, redraw=False)
        self.properties.marks = self.state.marks
        self._apply_layout()
        self._auto_view = True
        self._initial_view()
        self._fill_depth_choices()
        self._update_crumbs()
        self._search_changed(self.state.search)
        if self.direction_action.isChecked() != self.state.left_to_right:
            self.direction_action.setChecked(self.state.left_to_right)
        if self.fold_action.isChecked() != self.state.fold:
            self.fold_action.setChecked(self.state.fold)
        self._unindexed = graph
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

    def _user_moved(self) -> None:  # zoomed or panned: the view is the user's now
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
        lay, graph = self.state.layout, self.state.graph
        assert lay is not None and graph is not None
        before = None
        if anchor is not None and self.canvas.scene_data is not None:
            i = self.canvas.scene_data.index.get(anchor)
            if i is not None:
                b = self.canvas.scene_data.boxes[i]
                before = self.view.mapFromScene(QPointF(b.x, b.y))
        # 100k boxes: collections triggered by allocations would cost seconds
        with no_gc(freeze=True):
            scene = lay.scene()
            self.canvas.set_data(scene, graph, lay, self.palette())
        self.view.content_changed()
        if before is not None and anchor in scene.index:
            b = scene.boxes[scene.index[anchor]]
            now = self.view.mapFromScene(QPointF(b.x, b.y))
            d = now - before
            self.view.horizontalScrollBar().setValue(self.view.horizontalScrollBar().value()
                                                     + d.x())
            self.view.verticalScrollBar().setValue(self.view.verticalScrollBar().value() + d.y())
        self._restore_marks()

    def _box_of(self, key: str | None) -> int:
        """The box showing `key` now (itself or its collapsed group), or -1."""
        sc, lay = self.canvas.scene_data, self.state.layout
        if key is None or sc is None or lay is None:
            return -1
        return sc.index.get(lay.visible_key(key) if key in lay.parent_of else key, -1)

    def _restore_marks(self) -> None:
        """Selection, search hits and problem marks onto the boxes laid out now."""
        sc = self.canvas.scene_data
        lay = self.state.layout
        graph = self.state.graph
        if sc is None or lay is None:
            return
        self.canvas.selected = self._box_of(self.state.selection.key)
        search = self.state.search
        self.canvas.hits = {sc.index[k] for k in
                            (lay.visible_key(lay.node_key(i)) for i in search.hits)
                            if k in sc.index}
        hit = search.hit
        self.canvas.current_hit = self._box_of(lay.node_key(hit)) if hit is not None else -1
        marked: set[int] = set()
        marks = self.state.marks
        if marks and graph is not None:
            for i in (i for i, name in enumerate(graph.columns.names) if name in marks):
                k = lay.visible_key(lay.node_key(i))
                if k in sc.index:
                    marked.add(sc.index[k])
        self.canvas.marks = marked
        self.canvas.update()

    @property
    def crumb_buttons(self) -> list[QToolButton]:
        """The breadcrumb's buttons, the main graph's first."""
        return self.search_row.crumb_buttons

    def _update_crumbs(self) -> None:
        graph = self.state.graph
        assert graph is not None
        self.search_row.set_crumbs([g.title for g in graph.breadcrumb()])

    def _crumb_chosen(self, k: int) -> None:
        graph = self.state.graph
        if graph is not None:
            self.state.show(graph.breadcrumb()[k])

    def breadcrumb(self) -> list[str]:
        """Titles from the main graph down to the one shown."""
        return [g.title for g in self.model.breadcrumb()] if self.model else []

    # ------------------------------------------------------------------ expand / collapse
    def toggle_group(self, gid: str) -> None:
        """Expand or collapse one module group."""
        self._auto_view = False
        self.state.toggle(gid)

    def expand_all(self) -> None:
        """Expand every module group."""
        self.state.expand_all()

    def collapse_to_depth(self, depth: int) -> None:
        """Expand modules up to ``depth`` levels; 0 shows each top-level module as a box."""
        if self.state.layout is not None:
            self.state.collapse_to_depth(depth)
            self._initial_view()

    def _layout_changed(self, anchor: str | None) -> None:
        self._apply_layout(anchor)
        self.depth_combo.setCurrentIndex(min(self.state.depth, self.depth_combo.count() - 1))

    def _depth_chosen(self, index: int) -> None:
        lay = self.state.layout
        if lay is None:
            return
        if index >= lay.max_depth():
            self.expand_all()
            self._initial_view()
        else:
            self.collapse_to_depth(index)

    def _fill_depth_choices(self) -> None:
        """One entry per nesting level of the graph shown: what each one opens."""
        lay = self.state.layout
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
        self.depth_combo.setCurrentIndex(min(self.state.depth, deepest))
        self.depth_combo.setEnabled(deepest > 0)

    def set_left_to_right(self, across: bool) -> None:
        """Lay the graph out left to right (True) or top to bottom (False, the default)."""
        if self.direction_action.isChecked() != across:
            self.direction_action.setChecked(across)  # back here once
            return
        self.state.set_left_to_right(across)

    def set_fold_shape_ops(self, fold: bool) -> None:
        """Fold (default) or show constants and shape arithmetic as nodes of their own."""
        if self.fold_action.isChecked() != fold:
            self.fold_action.setChecked(fold)  # back here once
            return
        self.state.set_fold(fold)

    # ------------------------------------------------------------------ selection
    def _clicked(self, index: int) -> None:
        sc = self.canvas.scene_data
        if sc is not None:
            self.state.select(sc.boxes[index].key if index >= 0 else None)

    def _edge_clicked(self, index: int) -> None:
        sc = self.canvas.scene_data
        assert sc is not None
        self.state.select_tensor(sc.edges[index].tensors[0])

    def show_tensor(self, name: str) -> None:
        """Show a tensor's properties (type, shape, producer, consumers, values)."""
        self.state.select_tensor(name)

    def select_key(self, key: str) -> None:
        """Select a box by item key ("n12", "g:h.0", "i:x") and show its properties."""
        self.state.select(key)

    def select_node(self, index: int) -> None:
        """Reveal a node (expanding its modules), select and centre it, show its details."""
        self.state.select_node(index)

    def select_group(self, gid: str) -> None:
        """Reveal and select a module group."""
        self.state.select_group(gid)

    def _selection_changed(self, selection: Selection) -> None:
        self.canvas.selected = self._box_of(selection.key)
        self.canvas.update()
        key = selection.key or ""
        if selection.tensor is not None:
            self.properties.show_tensor(selection.tensor)
        elif selection.node is not None:
            self.properties.show_node(selection.node)
        elif key.startswith("g:"):
            self.properties.show_group(key[2:])
        else:
            self.properties.show_empty()

    def _bring_into_view(self, key: str) -> None:
        """Centre a box at a readable zoom (a search hit, a node chosen elsewhere)."""
        i = self._box_of(key)
        sc = self.canvas.scene_data
        if i < 0 or sc is None:
            return
        self._auto_view = False
        b = sc.boxes[i]
        self.view.center_on_rect(QRectF(b.x, b.y, b.w, b.h))

    def _double_clicked(self, index: int) -> None:
        sc = self.canvas.scene_data
        graph = self.state.graph
        assert sc is not None and graph is not None
        key = sc.boxes[index].key
        if key.startswith("g:"):
            self.toggle_group(key[2:])
        elif key.startswith("n"):
            ni = int(key[1:])
            subs = graph.nodes[ni].subgraph_attributes
            if subs:
                self.state.open_subgraph(ni, subs[0])
            elif graph.function_of(ni):
                self.state.open_function(ni)
            else:
                self.nodeActivated.emit(graph.nodes[ni].name)

    def _link(self, link: str) -> None:
        kind, _, rest = link.partition(":")
        if kind == "node":
            self.state.select_node(int(rest))
        elif kind == "tensor":
            self.state.select_tensor(rest)
        elif kind == "group":
            self.state.select_group(rest)
        elif kind == "sub":
            idx, _, attr = rest.partition(":")
            self.state.open_subgraph(int(idx), attr)
        elif kind == "func":
            self.state.open_function(int(rest))

    # ------------------------------------------------------------------ search
    def find_nodes(self, text: str) -> int:
        """Search by node name, op type or tensor name and bring the first match into view.
        Returns the number of matches."""
        self._search_timer.stop()
        found = self.state.find(text)
        if found:
            self.state.find_next()
        return found

    def _run_search(self) -> None:
        if self.state.graph is not None:
            self.state.find(self.search.text())

    def find_next(self, step: int = 1) -> None:
        """Bring the next search match into view (`step` -1: the previous one)."""
        self._search_now()
        (self.state.find_next if step > 0 else self.state.find_previous)()

    def find_previous(self) -> None:
        self.find_next(-1)

    def _search_now(self) -> None:
        """The text typed but not searched yet (the field waits for a pause): search it."""
        if self._search_timer.isActive() or self.search.text() != self.state.search.text:
            self._search_timer.stop()
            self._run_search()

    def _search_changed(self, search: Search) -> None:
        if self.search.text() != search.text:  # a new file cleared it
            self._search_timer.stop()
            self.search.blockSignals(True)
            self.search.setText(search.text)
            self.search.blockSignals(False)
        self.hit_label.setText(search.status)
        self._restore_marks()

    # ------------------------------------------------------------------ overlay
    def set_overlay(self, values: Mapping[str, float], label: str, *,
                    scale: colors.Scale | None = None, file: Path | None = None,
                    source: str = "") -> None:
        """Colour nodes by a value per ONNX node name, computed on `file` (None: the file
        shown); drawn while that file is shown. A collapsed group takes its largest value.

        ``scale`` None fits the ramp to the values (relative); a fixed `colors.Scale` colours
        on an absolute scale, e.g. ``Scale(0.01, 100, log=True, mark=1.0)`` for error against
        tolerance (values in [0, inf), 1.0 = at tolerance). The legend shows ``label``, the
        range and the mark. Nodes without a value are drawn grey.
        """
        target = file if file is not None else self.state.file
        self.state.set_overlay(Overlay.on(target if target is not None else Path(),
                                          values, label, source=source, scale=scale))

    def clear_overlay(self, source: str | None = None) -> None:
        """Back to colouring by op type (forget the overlays of `source`; None: all)."""
        self.state.clear_overlay(source)

    def _overlay_changed(self, overlay: Overlay | None, redraw: bool = True) -> None:
        self.properties.overlay = dict(overlay.values) if overlay is not None else None
        self.properties.overlay_label = overlay.label if overlay is not None else ""
        self.canvas.overlay = self.properties.overlay
        self.canvas.overlay_norm = overlay.ramp if overlay is not None else None
        if overlay is not None:
            self.view.legend.set_range(overlay.label, overlay.ramp)
        self.view.legend.setVisible(overlay is not None)
        if redraw:
            self.canvas.refresh_colors()
            self.view.minimap.rebuild()
            self.properties.refresh()

    def set_marks(self, reasons: Mapping[str, str]) -> None:
        """Outline nodes that have a problem: ONNX node name -> one sentence saying what.

        A collapsed group holding a marked node is outlined too; the properties panel of a
        marked node shows its sentence. Replaces earlier marks; names not in the graph are
        ignored; they leave when another file is loaded.
        """
        self.state.set_marks(reasons)

    def clear_marks(self) -> None:
        """Remove every problem outline."""
        self.state.set_marks({})

    def _marks_changed(self, marks: Mapping[str, str]) -> None:
        self.properties.marks = dict(marks)
        self._restore_marks()

    # ------------------------------------------------------------------ export
    def export_png(self, path: str | Path) -> None:
        """Save the whole laid-out graph as a PNG (scaled down when very large)."""
        save_png(self.view.scene(), self.canvas.boundingRect(),
                 self.palette().color(QPalette.ColorRole.Base), path)

    def export_svg(self, path: str | Path) -> None:
        """Save the whole laid-out graph as an SVG drawing."""
        save_svg(self.view.scene(), self.canvas.boundingRect(),
                 self.palette().color(QPalette.ColorRole.Base), path,
                 self.model.title if self.model else "graph")

    def _save_clicked(self, kind: str) -> None:
        """Ask where, then save the graph as a PNG ("png") or SVG ("svg")."""
        title, types = {"png": ("PNG", "PNG image (*.png)"),
                        "svg": ("SVG", "SVG drawing (*.svg)")}[kind]
        root = self.root
        name = str(root.path.with_suffix("." + kind)) if root and root.path else "graph." + kind
        path, _ = QFileDialog.getSaveFileName(self, f"Save graph as {title}", name, types)
        if path:
            (self.export_png if kind == "png" else self.export_svg)(path)

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
            QTimer.singleShot(0, self.properties, self.properties.refresh)
