"""The Graph tab: hosts the GraphBrowser, built only when first needed.

The browser pulls in onnx and pyqtgraph, which would slow the window's first paint, so the tab
starts as a placeholder and builds the browser after the window is up (or on first use);
`preload_graph_modules` imports them on a background thread meanwhile. A view of the session:
it shows the graph of the file the last export wrote or the last validation checked. An export
that wrote a folder of files (a Hugging Face encoder and decoders) gets a row to pick the file
and to show two of them side by side, each in a browser of its own (onnx_studio.app.graph.files).
"""

from __future__ import annotations

import html
import importlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QLabel, QSplitter, QVBoxLayout, QWidget

from onnx_studio.app.graph.files import FileBar, export_files
from onnx_studio.app.outcomes import ExportOutcome, OpenedFile, ValidationOutcome
from onnx_studio.app.session import ExportSession

if TYPE_CHECKING:
    from collections.abc import Mapping

    from onnx_studio.app.graph.browser import GraphBrowser
    from onnx_studio.app.graph.colors import Scale
    from onnx_studio.engine.graph.model import GraphModel

# pyqtgraph too: the Validation tab's parity plots need it as soon as a result arrives
GRAPH_MODULES = ("numpy", "onnx", "onnx_studio.engine.graph", "onnx_studio.app.graph.browser",
                 "pyqtgraph")


def preload_graph_modules() -> threading.Thread:
    """Import the graph view's dependencies off the GUI thread (class definitions only)."""

    def work() -> None:
        for name in GRAPH_MODULES:
            try:
                importlib.import_module(name)
            except Exception:  # the Graph tab reports a missing piece when it is opened
                return

    thread = threading.Thread(target=work, name="preload-graph", daemon=True)
    thread.start()
    return thread

_EMPTY = ("The graph of the exported file appears here after an export, or open any .onnx "
          "file (Ctrl+O).")


def session_file(session: ExportSession) -> Path | None:
    """The file the Graph tab shows for `session`: of its export (written, also when its
    validation failed), its validation and the file opened, the one that came last."""
    found: list[tuple[float, Path]] = []
    export, validation, opened = (session.results.export, session.validation_result,
                                  session.results.opened)
    report = export.report if export is not None else None
    if export is not None and export.output is not None and report is not None and (
            report.ok or report.validation is not None):
        found.append((export.stamp.at, export.output))
    if validation is not None and validation.validation is not None and validation.onnx:
        found.append((validation.stamp.at, validation.onnx))
    if opened is not None and opened.error is None:
        found.append((opened.at, opened.path))
    return max(found, key=lambda pair: pair[0])[1] if found else None


class GraphTab(QWidget):
    """The GraphBrowser of one .onnx file (of a folder's files: the one picked, and another
    beside it when side by side), or a placeholder that says why there is none."""

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.browser: GraphBrowser | None = None
        self.second: GraphBrowser | None = None  # side by side: the file beside the first
        self.shown: list[Path | None] = [None, None]  # the file each browser shows
        self.files = FileBar()
        self.files.fileChosen.connect(self.show_file)
        self.files.sideBySide.connect(self.set_side_by_side)
        self.graphs = QSplitter(Qt.Orientation.Horizontal)
        self.graphs.setChildrenCollapsible(False)
        self.graphs.hide()
        self.placeholder = QLabel(_EMPTY)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        # what onnx_studio.engine.graph.file_check found in the shown file; its nodes are outlined
        self.problems = QLabel("")
        self.problems.setWordWrap(True)
        self.problems.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.problems.hide()
        self._problem_marks: dict[str, str] = {}
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.addWidget(self.problems)
        self._layout.addWidget(self.files)
        self._layout.addWidget(self.placeholder)
        self._layout.addWidget(self.graphs, 1)
        self.loaded_path: Path | None = None
        self.session = session
        session.exportFinished.connect(self._export_finished)
        session.validationFinished.connect(self._validation_finished)
        session.fileOpened.connect(self._file_opened)
        session.resultsChanged.connect(self._follow_disk)  # a file shown changed on disk
        shown = session_file(session)  # built late (on first show): the session's file now
        if shown is not None:
            self.load_file(shown)

    def _export_finished(self, outcome: ExportOutcome) -> None:
        report = outcome.report
        # a file that was written, also one whose validation failed (it computes something else)
        if outcome.output is not None and report is not None and (
                report.ok or report.validation is not None):
            QTimer.singleShot(0, lambda p=outcome.output: self.load_file(p))

    def _validation_finished(self, outcome: ValidationOutcome) -> None:
        onnx = outcome.onnx
        if outcome.validation is not None and onnx is not None and self.loaded_path != onnx:
            QTimer.singleShot(0, lambda: self.load_file(onnx))  # for "Show on graph"

    def _follow_disk(self) -> None:
        """Read a file shown again when it changed on disk: the graph is of the file as it
        is now, never a copy of what it was (an overlay of the old bytes is not drawn)."""
        for side, browser in enumerate((self.browser, self.second)):
            path = self.shown[side]
            if browser is not None and path is not None and browser.state.changed_on_disk() \
                    and path.is_file():
                self.show_file(side, path)

    def _file_opened(self, opened: OpenedFile) -> None:
        if opened.error is None:
            self.load_file(opened.path)

    def ensure_browser(self) -> GraphBrowser:
        """The GraphBrowser, created (and its heavy imports done) on first call."""
        if self.browser is None:
            from onnx_studio.app.graph.browser import GraphBrowser

            self.browser = GraphBrowser()
            self.browser.loadFailed.connect(self._show_failure)
            self.browser.problemsChanged.connect(
                lambda: self._show_problems(self.browser.root if self.browser else None))
            self.graphs.insertWidget(0, self.browser)
        return self.browser

    def load_file(self, path: Path) -> bool:
        """Show the graph of `path`; a folder (a multi-file export): its first file, the
        others one pick away; False (and the reason in the tab) when it cannot."""
        self.loaded_path = path
        self.shown = [None, None]
        files = export_files(path) if path.is_dir() else [path]
        self.files.set_files(files if path.is_dir() else [])
        if len(files) < 2:
            self.files.toggle.setChecked(False)
        if not files:
            self._show_problems(None)
            self._show_failure("the folder has no .onnx file")
            return False
        if not self.show_file(0, files[0]):
            return False
        if self.files.toggle.isChecked():
            right = self.files.chosen(1)
            return right is None or self.show_file(1, right)
        return True

    def show_file(self, side: int, path: Path) -> bool:
        """Show `path` in the first browser (side 0) or the one beside it (side 1); False (and
        why in the tab) when it cannot."""
        self.shown[side] = path
        if side == 1:
            return self._ensure_second().load_file(str(path))
        self._show_problems(None)
        if not self.ensure_browser().load_file(str(path)):
            return False
        self._show_browser()
        self._show_problems(self.browser.root if self.browser is not None else None)
        return True

    def set_side_by_side(self, on: bool) -> None:
        """Show the file chosen on the right beside the first one (or hide it)."""
        if self.files.toggle.isChecked() != on:
            self.files.toggle.setChecked(on)  # emits sideBySide: back here once
            return
        if not on:
            if self.second is not None:
                self.second.hide()
            return
        second = self._ensure_second()
        second.show()
        right = self.files.chosen(1)
        if right is not None and right != self.shown[1]:
            self.show_file(1, right)
        self.graphs.setSizes([1, 1])

    def _ensure_second(self) -> GraphBrowser:
        if self.second is None:
            from onnx_studio.app.graph.browser import GraphBrowser

            first = self.ensure_browser()
            self.second = GraphBrowser()
            self.second.state.overlays = list(first.state.overlays)  # each with its file
            self.graphs.addWidget(self.second)
        return self.second

    def _show_problems(self, model: GraphModel | None) -> None:
        """The file's errors and warnings above the graph, their nodes outlined."""
        problems = model.problems if model is not None else []
        self.problems.setVisible(bool(problems))
        if self.browser is not None and self._problem_marks and \
                self.browser.marks == self._problem_marks:  # the last file's outlines
            self.browser.clear_marks()
        self._problem_marks = {}
        if not problems:
            self.problems.setText("")
            return
        errors = sum(p.severity == "error" for p in problems)
        title = ("This file is not a valid ONNX model" if errors
                 else "The ONNX checks have warnings")
        lines = "".join(f"<li>{html.escape(p.severity)}: {html.escape(p.message)}</li>"
                        for p in problems)
        color = "#d02828" if errors else "#b07000"
        self.problems.setText(f"<b style='color:{color}'>{title}:</b><ul>{lines}</ul>")
        assert model is not None
        self._problem_marks = model.problem_marks()
        if self._problem_marks:
            self.set_marks(self._problem_marks)

    def time_load(self, path: Path, expand_all: bool = False) -> tuple[float, int]:
        """Load `path` (every module expanded if asked) and wait for the first paint:
        (seconds, nodes), for --exit-after-paint [--expand-all]."""
        from onnx_studio.app.graph.timing import time_first_paint

        self.loaded_path = path
        self.shown[0] = path
        browser = self.ensure_browser()
        self._show_browser()
        return time_first_paint(browser, path, expand_all=expand_all)

    def node_count(self) -> int | None:
        return self.browser.node_count() if self.browser is not None else None

    def set_overlay(self, values: Mapping[str, float], label: str, *,
                    scale: Scale | None = None, file: Path | None = None,
                    source: str = "") -> bool:
        """Colour the nodes of `file` (None: the file shown) by `values` (per ONNX node name),
        on `scale` (None: fitted to the values; see GraphBrowser.set_overlay), whenever that
        file is shown here; nothing else changes (no other file is opened). A newer overlay
        from the same `source` ("profile", "validation") replaces the older. True when it is
        drawn now (its file is shown)."""
        from onnx_studio.engine.graph.overlay import Overlay

        target = file if file is not None else self.shown[0]
        if target is not None and target.is_dir():  # a folder's export: its first file
            target = next(iter(export_files(target)), None)
        if target is None:
            return False
        overlay = Overlay.on(target, values, label, source=source, scale=scale)
        for browser in self._browsers():
            browser.state.set_overlay(overlay)
        return any(b.state.overlay is overlay for b in self._browsers())

    def clear_overlay(self, source: str | None = None) -> None:
        """Forget the overlays from `source` (None: every one); their colours go."""
        for browser in self._browsers():
            browser.clear_overlay(source)

    def _browsers(self) -> list[GraphBrowser]:
        return [b for b in (self.ensure_browser(), self.second) if b is not None]

    def set_marks(self, reasons: Mapping[str, str]) -> bool:
        """Outline the nodes named in `reasons` (node name -> its problem); False when no
        graph is loaded."""
        browser = self.ensure_browser()
        if browser.model is None:
            return False
        browser.set_marks(reasons)
        return True

    def select_node(self, name: str) -> None:
        """Select and centre the node called `name` ("" or an unknown name: nothing)."""
        browser = self.browser
        index = browser.model.node_by_name(name) if name and browser and browser.model else None
        if browser is not None and index is not None:
            browser.select_node(index)

    def clear(self) -> None:
        self.loaded_path = None
        self.shown = [None, None]
        self._show_problems(None)
        self.files.set_files([])
        self.graphs.hide()
        self.placeholder.setText(_EMPTY)
        self.placeholder.show()

    def _show_browser(self) -> None:
        assert self.browser is not None
        self.graphs.show()
        self.placeholder.hide()

    def _show_failure(self, reason: str) -> None:
        shown = self.shown[0] or self.loaded_path
        name = shown.name if shown else "the file"
        self.placeholder.setText(f"Could not show the graph of {name}: {reason}")
        self.placeholder.show()
        self.graphs.hide()
