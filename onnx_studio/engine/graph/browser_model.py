"""BrowserModel: what the graph browser shows — the file and the (sub)graph, the expansion,
the selection, the search and the overlays — and the plain events it sends when they change.

napari's ViewerModel split: the model holds the state and knows no view; a view (the Qt
GraphBrowser) subscribes to `events`, draws what the model says, and writes back only
through the model's methods. So two views of one model agree, and the rules (a new file
clears the old search and marks; an overlay colours only the file it was computed on; a
search hit is revealed and brought into view) hold whatever view asks. Qt-free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Generic, TypeVar

from onnx_studio.engine.graph.layout import GraphLayout, Measure, NodeMeasure
from onnx_studio.engine.graph.model import GraphModel, no_gc
from onnx_studio.engine.graph.overlay import FileState, Overlay, file_state

T = TypeVar("T")


class Event(Generic[T]):
    """A plain event: its callbacks, called in the order they connected, with one value."""

    __slots__ = ("_callbacks",)

    def __init__(self) -> None:
        self._callbacks: list[Callable[[T], object]] = []

    def connect(self, callback: Callable[[T], object]) -> None:
        """Call `callback` on every emit from now on."""
        self._callbacks.append(callback)

    def disconnect(self, callback: Callable[[T], object]) -> None:
        """Stop calling `callback` (a callback never connected: nothing happens)."""
        if callback in self._callbacks:
            self._callbacks.remove(callback)

    def emit(self, value: T) -> None:
        """Call every connected callback with `value`."""
        for callback in list(self._callbacks):
            callback(value)


@dataclass(frozen=True)
class Search:
    """A search of the graph shown: the text, the nodes it found in graph order, and which
    of them was last brought into view (`current`, -1 before the first)."""

    text: str = ""
    hits: tuple[int, ...] = ()
    current: int = -1

    @property
    def status(self) -> str:
        """What the search field's counter says: "", "no match" or "2 / 5"."""
        if not self.text.strip():
            return ""
        if not self.hits:
            return "no match"
        return f"{self.current + 1} / {len(self.hits)}"

    @property
    def hit(self) -> int | None:
        """The node brought into view last, or None."""
        return self.hits[self.current] if 0 <= self.current < len(self.hits) else None


@dataclass(frozen=True)
class Selection:
    """What is selected: a box (`key`: "n12", "g:h.0", "i:x"), the node whose details show
    (a folded node selects the box of the node it feeds), a tensor whose details show (an
    edge clicked, a tensor searched by name). All None: the graph's summary."""

    key: str | None = None
    node: int | None = None
    tensor: str | None = None


@dataclass
class BrowserEvents:
    """The model's events; each sends the state it names (the model holds the rest)."""

    graph: Event[GraphModel] = field(default_factory=Event)  # another graph shown: draw all
    layout: Event[str | None] = field(default_factory=Event)  # expansion changed (anchor box)
    selection: Event[Selection] = field(default_factory=Event)
    focus: Event[str] = field(default_factory=Event)  # bring this box into view, centred
    search: Event[Search] = field(default_factory=Event)
    overlay: Event[Overlay | None] = field(default_factory=Event)  # the overlay drawn now
    marks: Event[Mapping[str, str]] = field(default_factory=Event)


class BrowserModel:
    """The state of one graph browser, changed through its methods, announced by `events`.

    `measure` and `measure_nodes` size the boxes (a view passes its fonts' measures); the
    layouts of the graphs shown (main graph, subgraphs, functions) are kept per graph until
    another file is loaded or a layout option changes.
    """

    def __init__(self, measure: Measure | None = None,
                 measure_nodes: NodeMeasure | None = None) -> None:
        self.events = BrowserEvents()
        self.measure = measure
        self.measure_nodes = measure_nodes
        self.root: GraphModel | None = None  # the file's main graph
        self.graph: GraphModel | None = None  # the graph shown: root, a subgraph, a function
        self.layout: GraphLayout | None = None  # the shown graph's layout and expansion
        self.fold = True  # constants and shape arithmetic folded into the node they feed
        self.left_to_right = False
        self.depth = 0  # the expansion level last chosen for the whole graph
        self.selection = Selection()
        self.search = Search()
        self.overlays: list[Overlay] = []  # each with its file; `overlay` is the one drawn
        self.marks: dict[str, str] = {}  # ONNX node name -> what is wrong with it
        self._file_state: FileState | None = None  # the file as it was when loaded
        self._layouts: dict[int, GraphLayout] = {}

    # ------------------------------------------------------------------ file and graph
    @property
    def file(self) -> Path | None:
        """The .onnx file shown (None: nothing, or a graph built in memory)."""
        return self.root.path if self.root is not None else None

    def load_file(self, path: str | Path, expand_all: bool = False) -> None:
        """Read and show an .onnx file (its checks left for `GraphModel.run_checks`).
        Raises FileNotFoundError, or ValueError with a sentence for a file that is no ONNX
        model; the graph shown before stays then."""
        state = file_state(Path(path))
        with no_gc(freeze=True):
            model = GraphModel.load(path, checks_now=False)
        self.load(model, expand_all, state=state)

    def changed_on_disk(self) -> bool:
        """True when the file shown is no longer as it was read (rewritten, replaced, gone)."""
        file = self.file
        return file is not None and self._file_state is not None \
            and file_state(file) != self._file_state

    def load(self, model: GraphModel, expand_all: bool = False, *,
             state: FileState | None = None) -> None:
        """Show another file's graph (every module expanded when `expand_all`): the old
        file's search, selection and marks go; its overlays stay with it, unseen."""
        self.root = model
        self._file_state = state if state is not None else (
            file_state(model.path) if model.path is not None else None)
        self._layouts.clear()
        self.search = Search()
        self.marks = {}
        self._show(model, expand_all)

    def show(self, graph: GraphModel) -> None:
        """Show another graph of the same file (a subgraph, a function, one up the
        breadcrumb); the search runs again on it."""
        self._show(graph)

    def open_subgraph(self, node_index: int, attribute: str) -> None:
        """Show the subgraph of an If/Loop/Scan node of the graph shown."""
        assert self.graph is not None
        self._show(self.graph.subgraph(node_index, attribute))

    def open_function(self, node_index: int) -> None:
        """Show the body of the local function a node calls (nothing when it calls none)."""
        assert self.graph is not None
        key = self.graph.function_of(node_index)
        if key is not None:
            self._show(self.graph.function_graph(key))

    def set_fold(self, fold: bool) -> None:
        """Fold (default) or show constants and shape arithmetic as nodes of their own."""
        if fold != self.fold:
            self.fold = fold
            if self.graph is not None:
                self._layouts.pop(id(self.graph), None)
                self._show(self.graph)

    def set_left_to_right(self, across: bool) -> None:
        """Lay graphs out left to right (True) or top to bottom (False, the default)."""
        if across != self.left_to_right:
            self.left_to_right = across
            if self.graph is not None:
                self._layouts.clear()
                self._show(self.graph)

    def _show(self, graph: GraphModel, expand_all: bool = False) -> None:
        lay = self._layouts.get(id(graph))
        if lay is None:
            with no_gc(freeze=True):
                lay = GraphLayout(graph, measure=self.measure, measure_nodes=self.measure_nodes,
                                  fold=self.fold, left_to_right=self.left_to_right)
            self._layouts[id(graph)] = lay
        if expand_all:
            lay.expand_all()
        self.graph, self.layout = graph, lay
        self.depth = lay.max_depth() if expand_all else 0
        self.selection = Selection()
        text = self.search.text
        self.search = Search(text, tuple(graph.search(text)) if text.strip() else ())
        self.events.graph.emit(graph)

    # ------------------------------------------------------------------ expansion
    def toggle(self, gid: str) -> None:
        """Expand or collapse one module group."""
        assert self.layout is not None
        self.layout.toggle(gid)
        self.events.layout.emit("g:" + gid)

    def expand_all(self) -> None:
        """Expand every module group."""
        if self.layout is not None:
            self.layout.expand_all()
            self.depth = self.layout.max_depth()
            self.events.layout.emit(None)

    def collapse_to_depth(self, depth: int) -> None:
        """Expand modules up to `depth` levels; 0 shows each top-level module as a box."""
        if self.layout is not None:
            self.layout.collapse_to_depth(depth)
            self.depth = min(depth, self.layout.max_depth())
            self.events.layout.emit(None)

    def reveal(self, key: str) -> None:
        """Expand the groups above a box so it has a box of its own."""
        lay = self.layout
        assert lay is not None
        if lay.visible_key(key) != key:
            lay.reveal(key)
            self.events.layout.emit(None)

    # ------------------------------------------------------------------ selection
    def select(self, key: str | None) -> None:
        """Select a box by key ("n12", "g:h.0", "i:x"; None: nothing) without moving it."""
        node = int(key[1:]) if key is not None and key[0] == "n" else None
        tensor = key[2:] if key is not None and key[:2] in ("i:", "o:") else None
        self._select(Selection(key, node, tensor))

    def select_node(self, index: int, tensor: str | None = None) -> None:
        """Reveal a node (expanding its modules), select it and bring it into view; a folded
        node selects the node it feeds and shows its own details. `tensor`: show that
        tensor's details instead."""
        lay = self.layout
        assert lay is not None
        key = lay.node_key(index)
        self.reveal(key)
        self._select(Selection(key, index, tensor))
        self.events.focus.emit(key)

    def select_group(self, gid: str) -> None:
        """Reveal a module group, select it and bring it into view."""
        key = "g:" + gid
        self.reveal(key)
        self._select(Selection(key))
        self.events.focus.emit(key)

    def select_tensor(self, name: str) -> None:
        """Show a tensor's details (an edge was clicked)."""
        self._select(Selection(tensor=name))

    def _select(self, selection: Selection) -> None:
        self.selection = selection
        self.events.selection.emit(selection)

    # ------------------------------------------------------------------ search
    def find(self, text: str) -> int:
        """Search the graph shown by node name, op type or tensor name; nothing is brought
        into view yet (`find_next`). Returns the number of matches."""
        hits = tuple(self.graph.search(text)) if self.graph is not None else ()
        self.search = Search(text, hits)
        self.events.search.emit(self.search)
        return len(hits)

    def find_next(self) -> None:
        """Bring the next match into view (revealed, selected, centred)."""
        self._step(1)

    def find_previous(self) -> None:
        """Bring the previous match into view."""
        self._step(-1)

    def _step(self, d: int) -> None:
        s, graph = self.search, self.graph
        if not s.hits or graph is None:
            return
        current = (s.current + d) % len(s.hits) if s.current >= 0 or d > 0 else len(s.hits) - 1
        self.search = replace(s, current=current)
        query = s.text.strip()
        names_tensor = query in graph.producer or query in graph.consumers
        self.select_node(s.hits[current], tensor=query if names_tensor else None)
        self.events.search.emit(self.search)

    # ------------------------------------------------------------------ overlays and marks
    @property
    def overlay(self) -> Overlay | None:
        """The overlay drawn now: the latest one computed on the file shown, as it is."""
        return next((o for o in reversed(self.overlays)
                     if o.belongs_to(self.file, self._file_state)), None)

    def set_overlay(self, overlay: Overlay) -> None:
        """Keep an overlay with its file (replacing the one from the same source); it is
        drawn whenever that file is shown."""
        def replaced(o: Overlay) -> bool:  # a named source has one overlay at a time
            return o.source == overlay.source and bool(overlay.source or o.file == overlay.file)

        self.overlays = [o for o in self.overlays if not replaced(o)]
        self.overlays.append(overlay)
        self.events.overlay.emit(self.overlay)

    def clear_overlay(self, source: str | None = None) -> None:
        """Forget the overlays from `source` (None: every overlay)."""
        self.overlays = [o for o in self.overlays if source is not None and o.source != source]
        self.events.overlay.emit(self.overlay)

    def set_marks(self, reasons: Mapping[str, str]) -> None:
        """Outline the nodes named (ONNX node name -> one sentence saying what is wrong),
        replacing earlier marks; they leave when another file is loaded."""
        self.marks = dict(reasons)
        self.events.marks.emit(self.marks)
