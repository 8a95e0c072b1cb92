"""ResultTabs: the window's right side, one tab per result view, and which of them shows.

The tab shown follows the session's jobs: an export shows the Summary (a failed validation of
it the Validation tab), a validation its tab; the Validation tab's per-node errors go onto
the graph of the file that validation checked.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QProxyStyle, QStyle, QStyleOption, QTabWidget, QWidget

from app.compare import CompareTab
from app.graph import GraphTab, findings
from app.graph.colors import Scale
from app.outcomes import ExportOutcome, JobStart, OpenedFile, ValidationOutcome
from app.results import LogView, PythonView, SummaryView, WarningsView
from app.results.provenance import Shown
from app.session import Explanation, ExportSession
from app.validation import ValidationTab

MIN_WIDTH = 380
# per-node error against its tolerance, coloured the same in every graph: green well inside,
# the mark at 1.0 (at the tolerance), red from 100 times it
ERROR_SCALE = Scale(0.01, 100.0, log=True, mark=1.0)
TABS = ("Summary", "Warnings", "Validation", "Graph", "Python", "Log")


class SnugTabs(QProxyStyle):
    """The application's style with half its padding beside a tab's title: the seven titles,
    a warning count among them, fit the results' width beside the form on a 1024-pixel
    screen (Fusion's 24 pixels a tab would need 19 more there)."""

    def pixelMetric(self, metric: QStyle.PixelMetric, option: QStyleOption | None = None,
                    widget: QWidget | None = None) -> int:
        value = super().pixelMetric(metric, option, widget)
        return value // 2 if metric == QStyle.PixelMetric.PM_TabBarTabHSpace else value


def _file_of(shown: ExportOutcome | ValidationOutcome | OpenedFile) -> Path | None:
    if isinstance(shown, OpenedFile):
        return shown.path
    return shown.stamp.onnx.path if shown.stamp.onnx is not None else None


class ResultTabs(QTabWidget):
    """Summary, Warnings, Validation, Graph, Python and Log: views of one session."""

    statusMessage = Signal(str)  # a passing note for the status bar

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
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
        self.summary = SummaryView(session)
        self.warnings = WarningsView(session)
        self.validation = ValidationTab(session)
        self.graph = GraphTab(session)
        self.python = PythonView(session)
        self.log = LogView(session)
        for widget, name in zip((self.summary, self.warnings, self.validation, self.graph,
                                 self.python, self.log), TABS, strict=True):
            self.addTab(widget, name)
        self.compare = CompareTab(session)  # not in TABS: its shortcut is the menu's own
        self.addTab(self.compare, "Compare")
        self.compare.showOnGraph.connect(self.show_profile_on_graph)
        self.compare.clearGraph.connect(lambda: self.graph.clear_overlay("profile"))
        self.compare.markOnGraph.connect(self.mark_on_graph)
        self.warnings.statusMessage.connect(self.statusMessage)
        self.validation.showOnGraph.connect(self.show_on_graph)
        self.validation.clearGraph.connect(lambda: self.graph.clear_overlay("validation"))
        session.warningsChanged.connect(self._count_warnings)
        session.exportStarted.connect(self._export_started)
        session.exportFinished.connect(self._export_finished)
        session.validationStarted.connect(self._validation_started)
        session.validationFinished.connect(self._validation_finished)
        # Why? (issue 26): the graph opens at the first divergence; it goes with the answer
        session.explainer.explained.connect(self.show_divergence)
        session.explainer.changed.connect(self._explanation_changed)
        for why in (self.validation.why, self.summary.why):
            why.showOnGraph.connect(self.show_divergence)

    def provenance(self) -> Shown:
        """What the current tab shows: the result (or opened file) its content came from."""
        session, widget = self.session, self.currentWidget()
        if widget is self.python:
            return f"The script of the form as it is now ({session.recipe_label()})"
        if widget is self.log:
            return "Everything the worker and the window said, oldest first"
        if widget is self.validation:
            return session.validation_result
        latest = session.results.latest()
        if widget is self.graph:
            path = self.graph.loaded_path
            for shown in (latest, session.validation_result):
                file = _file_of(shown) if shown is not None else None
                if file is not None and path is not None and file.resolve() == path.resolve():
                    return shown
            return path
        return latest

    def _count_warnings(self) -> None:
        count = self.warnings.count()
        self.setTabText(self.indexOf(self.warnings),
                        f"Warnings ({count})" if count else "Warnings")

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
        if self.graph.set_overlay(values, label, file=onnx, source="profile"):
            return True
        self.statusMessage.emit(f"The profile overlay shows on the Graph tab while {onnx.name} "
                                "is the file shown there.")
        return False

    def show_on_graph(self, values: dict[str, float], label: str, node: str = "") -> bool:
        """Colour the Graph tab by per-node error of the session's last validation, switch to
        it and centre `node`; False when that graph cannot be shown."""
        result = self.session.validation_result
        onnx = result.onnx if result is not None else None
        if onnx is not None and self.graph.loaded_path != onnx and not self.graph.load_file(onnx):
            self.statusMessage.emit(f"The graph of {onnx.name} cannot be shown.")
            return False
        shown = self.graph.set_overlay(values, label, scale=ERROR_SCALE, file=onnx,
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
        if self.session.explainer.explanation is None:
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
