"""ResultTabs: the window's right side, one tab per result view, and which of them shows.

The tab shown follows the session's jobs: an export shows the Summary (a failed validation of
it the Validation tab), a validation its tab; the Validation tab's per-node errors go onto
the graph of the file that validation checked. A tab is built when it is first shown or asked
for (its module imported then too), so the window's first paint builds only the Summary and the
Log; a view built later draws the session as it is then (views keep no copies).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QProxyStyle, QStyle, QStyleOption, QTabWidget, QWidget

from onnx_studio.app.graph import findings
from onnx_studio.app.results.log import LogView
from onnx_studio.app.results.summary import SummaryView
from onnx_studio.app.session import Explanation, ExportSession

if TYPE_CHECKING:
    from onnx_studio.app.compare import CompareTab
    from onnx_studio.app.graph import GraphTab
    from onnx_studio.app.outcomes import ExportOutcome, JobStart, OpenedFile, ValidationOutcome
    from onnx_studio.app.results import PythonView, WarningsView
    from onnx_studio.app.results.provenance import Shown
    from onnx_studio.app.validation import ValidationTab

MIN_WIDTH = 380
TABS = ("Summary", "Warnings", "Validation", "Graph", "Python", "Log", "Compare")
# each tab's view: (attribute, title, module, class); built on first show or use
PAGES = (("summary", "Summary", "onnx_studio.app.results.summary", "SummaryView"),
         ("warnings", "Warnings", "onnx_studio.app.results.warnings", "WarningsView"),
         ("validation", "Validation", "onnx_studio.app.validation.tab", "ValidationTab"),
         ("graph", "Graph", "onnx_studio.app.graph.tab", "GraphTab"),
         ("python", "Python", "onnx_studio.app.results.python", "PythonView"),
         ("log", "Log", "onnx_studio.app.results.log", "LogView"),
         ("compare", "Compare", "onnx_studio.app.compare.tab", "CompareTab"))


def _error_scale() -> Any:
    """Per-node error against its tolerance, coloured the same in every graph: green well
    inside, the mark at 1.0 (at the tolerance), red from 100 times it."""
    from onnx_studio.app.graph.colors import Scale

    return Scale(0.01, 100.0, log=True, mark=1.0)


class SnugTabs(QProxyStyle):
    """The application's style with half its padding beside a tab's title: the seven titles,
    a warning count among them, fit the results' width beside the form on a 1024-pixel
    screen (Fusion's 24 pixels a tab would need 19 more there)."""

    def pixelMetric(self, metric: QStyle.PixelMetric, option: QStyleOption | None = None,
                    widget: QWidget | None = None) -> int:
        value = super().pixelMetric(metric, option, widget)
        return value // 2 if metric == QStyle.PixelMetric.PM_TabBarTabHSpace else value


def _file_of(shown: ExportOutcome | ValidationOutcome | OpenedFile) -> Path | None:
    from onnx_studio.app.outcomes import OpenedFile  # loaded with the first result

    if isinstance(shown, OpenedFile):
        return shown.path
    return shown.stamp.onnx.path if shown.stamp.onnx is not None else None


class ResultTabs(QTabWidget):
    """Summary, Warnings, Validation, Graph, Python, Log and Compare: views of one session,
    each built on first show or use (`summary`, `graph`, ... build it when read)."""

    statusMessage = Signal(str)  # a passing note for the status bar

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._built: dict[str, QWidget] = {}
        # an explicit minimum: a page that asks for more width is cut, never the window made
        # wider than a 1024-pixel screen (the form keeps its own minimum beside it)
        self.setMinimumWidth(MIN_WIDTH)
        # Every tab stays in view: narrower than the titles (the splitter dragged towards the
        # minimum), the titles are elided rather than some tabs scrolled out of sight.
        bar = self.tabBar()
        style = SnugTabs()
        style.setParent(bar)  # lives as long as the bar: setStyle does not own it
        bar.setStyle(style)
        bar.setUsesScrollButtons(False)
        bar.setElideMode(Qt.TextElideMode.ElideRight)
        # the Summary is what the window shows first; the Log hears every line from the start
        eager = {"summary": SummaryView(session), "log": LogView(session)}
        for name, title, _module, _cls in PAGES:
            page = eager.get(name) or QWidget()  # a placeholder until first shown
            if name in eager:
                self._built[name] = page
            self.addTab(page, title)
        self.currentChanged.connect(self._shown)
        session.warningsChanged.connect(self._count_warnings)
        session.exportStarted.connect(self._export_started)
        session.exportFinished.connect(self._export_finished)
        session.validationStarted.connect(self._validation_started)
        session.validationFinished.connect(self._validation_finished)
        # Why? (issue 26): the graph opens at the first divergence; it goes with the answer
        session.explainer.explained.connect(self.show_divergence)
        session.explainer.changed.connect(self._explanation_changed)
        self.summary.why.showOnGraph.connect(self.show_divergence)  # the Validation tab's
        # Why? bar is connected when that tab is built (_connect)

    # ================================================================= built on first use

    def page(self, name: str) -> QWidget:
        """The view `name` of PAGES, built (and its module imported) on first call, in its tab
        in place of the placeholder; the tab shown stays the one shown."""
        built = self._built.get(name)
        if built is not None:
            return built
        index = [p[0] for p in PAGES].index(name)
        _name, title, module, cls = PAGES[index]
        view: QWidget = getattr(importlib.import_module(module), cls)(self.session)
        self._built[name] = view
        placeholder, current = self.widget(index), self.currentIndex()
        text = self.tabText(index)  # the Warnings tab's count
        blocked = self.blockSignals(True)  # the same tab stays shown: no one is told otherwise
        try:
            self.removeTab(index)
            self.insertTab(index, view, text or title)
            self.setCurrentIndex(current)
        finally:
            self.blockSignals(blocked)
        if placeholder is not None:
            placeholder.deleteLater()
        self._connect(name, view)
        return view

    def built(self, name: str) -> bool:
        """True once the view `name` exists (shown or used)."""
        return name in self._built

    def _connect(self, name: str, view: Any) -> None:
        if name == "warnings":
            view.statusMessage.connect(self.statusMessage)
        elif name == "validation":
            view.showOnGraph.connect(self.show_on_graph)
            view.clearGraph.connect(self._clear_validation_overlay)
            view.why.showOnGraph.connect(self.show_divergence)
        elif name == "compare":
            view.showOnGraph.connect(self.show_profile_on_graph)
            view.clearGraph.connect(self._clear_profile_overlay)
            view.markOnGraph.connect(self.mark_on_graph)
            view.statusMessage.connect(self.statusMessage)

    def _clear_validation_overlay(self) -> None:
        if self.built("graph"):
            self.graph.clear_overlay("validation")

    def _clear_profile_overlay(self) -> None:
        self.clear_overlay_of("profile")

    def clear_overlay_of(self, source: str) -> None:
        """Forget the Graph tab's overlay from `source` (when the tab is built)."""
        if self.built("graph"):
            self.graph.clear_overlay(source)

    def _shown(self, index: int) -> None:
        if 0 <= index < len(PAGES):
            self.page(PAGES[index][0])

    @property
    def summary(self) -> SummaryView:
        return self._built["summary"]  # type: ignore[return-value]

    @property
    def log(self) -> LogView:
        return self._built["log"]  # type: ignore[return-value]

    @property
    def warnings(self) -> WarningsView:
        return self.page("warnings")  # type: ignore[return-value]

    @property
    def validation(self) -> ValidationTab:
        return self.page("validation")  # type: ignore[return-value]

    @property
    def graph(self) -> GraphTab:
        return self.page("graph")  # type: ignore[return-value]

    @property
    def python(self) -> PythonView:
        return self.page("python")  # type: ignore[return-value]

    @property
    def compare(self) -> CompareTab:
        return self.page("compare")  # type: ignore[return-value]

    def provenance(self) -> Shown:
        """What the current tab shows: the result (or opened file) its content came from."""
        session = self.session
        index = self.currentIndex()
        name = PAGES[index][0] if 0 <= index < len(PAGES) else ""
        if name == "python":
            return f"The script of the form as it is now ({session.recipe_label()})"
        if name == "log":
            return "Everything the worker and the window said, oldest first"
        if name == "validation":
            return session.validation_result
        latest = session.results.latest()
        if name == "graph":
            path = self.graph.loaded_path
            for shown in (latest, session.validation_result):
                file = _file_of(shown) if shown is not None else None
                if file is not None and path is not None and file.resolve() == path.resolve():
                    return shown
            return path
        return latest

    def _count_warnings(self) -> None:
        count = len(self.session.warnings)  # what the Warnings tab lists, built or not
        index = [p[0] for p in PAGES].index("warnings")
        self.setTabText(index, f"Warnings ({count})" if count else "Warnings")

    def _export_started(self, _start: JobStart) -> None:
        self.setCurrentWidget(self.summary)

    def _export_finished(self, outcome: ExportOutcome) -> None:
        if outcome.ok:
            return
        report = outcome.report
        exported = report is not None and report.validation is not None  # computes otherwise
        self.setCurrentWidget(self.validation if exported else self.summary)

    def _validation_started(self, _start: JobStart) -> None:
        self.setCurrentWidget(self.validation)

    def _validation_finished(self, _outcome: ValidationOutcome) -> None:
        self.setCurrentWidget(self.validation)

    def show_profile_on_graph(self, onnx: Path, values: dict[str, float], label: str) -> bool:
        """Colour `onnx`'s nodes on the Graph tab by its profile (ms per node) whenever that
        file is shown there; the tab and the file shown stay as they are (the box ticked is
        no request to go elsewhere). True when the overlay shows now."""
        profile = self.session.analysis.profile
        stale = profile.stale() if profile is not None and profile.onnx == onnx else None
        if stale is not None:  # its numbers are of bytes no longer there: nothing to colour
            self.clear_overlay_of("profile")
            self.statusMessage.emit(f"{stale.sentence} The profile overlay is not shown: "
                                    "profile it again (Compare ▸ Profile A).")
            return False
        if self.graph.set_overlay(values, label, file=onnx, source="profile"):
            return True
        shown = self.graph.loaded_path
        self.statusMessage.emit(f"The profile overlay of {onnx.name} is drawn once the Graph "
                                "tab shows that file" + (f" ({shown.name} is shown now)."
                                                         if shown is not None else "."))
        return False

    def show_on_graph(self, values: dict[str, float], label: str, node: str = "") -> bool:
        """Colour the Graph tab by per-node error of the session's last validation, switch to
        it and centre `node`; False when that graph cannot be shown."""
        result = self.session.validation_result
        onnx = result.onnx if result is not None else None
        if onnx is not None and self.graph.loaded_path != onnx and not self.graph.load_file(onnx):
            self.statusMessage.emit(f"The graph of {onnx.name} cannot be shown.")
            return False
        shown = self.graph.set_overlay(values, label, scale=_error_scale(), file=onnx,
                                       source="validation")
        if not shown:
            return False
        self.setCurrentWidget(self.graph)
        self.graph.select_node(node)
        return True

    def show_divergence(self, found: Explanation) -> bool:
        """Open the Graph tab at the first divergent node Why? found (outlined, selected,
        centred; its module, source line and differences in the properties); False (the
        status says why) when there is none or it cannot be shown."""
        if found.divergence is None:
            return False
        # the file first, then the tab: the provenance above the tabs names the file shown
        findings.show_file(self.graph, found.file, found.onnx)
        self.setCurrentWidget(self.graph)
        if findings.show_divergence(self.graph, found):
            return True
        self.statusMessage.emit(f"Node {found.divergence.node} of {found.file.name} cannot be "
                                "shown on the graph.")
        return False

    def _explanation_changed(self) -> None:
        if self.session.explainer.explanation is None and self.built("graph"):
            findings.clear_divergence(self.graph)

    def mark_on_graph(self, onnx: Path, reasons: dict[str, str], select: list[str]) -> bool:
        """Open `onnx` on the Graph tab with the nodes in `reasons` outlined (an fp16
        variant's nodes kept in float32, its overflows), the first of `select` selected."""
        findings.show_file(self.graph, onnx)  # before the tab: the provenance names it
        self.setCurrentWidget(self.graph)
        if findings.mark_nodes(self.graph, onnx, reasons, select):
            return True
        self.statusMessage.emit(f"The graph of {onnx.name} cannot be shown.")
        return False
