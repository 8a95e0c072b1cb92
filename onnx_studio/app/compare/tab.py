"""CompareTab: pick two .onnx files (or the previous and the latest export), compare them in the
worker, and read the result as tables and as two linked graphs; profile file A (its slowest nodes,
operators and module groups, and a heat overlay on the Graph tab); make and judge its variants. The
tab is a view of the session's analysis model (onnx_studio.app.session.analysis), which runs the
jobs and keeps what they found; the tab keeps only the two file fields."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from onnx_studio.app.compare.graphs import SideBySideGraphs
from onnx_studio.app.compare.tables import FactsTable, InitializersTable, OpsTable
from onnx_studio.app.compare.variants import VariantsPanel
from onnx_studio.app.session import Comparison, ExportSession, Profile, Variant
from onnx_studio.engine.protocol import CompareDocument, Error, ProfileDocument

TOP_N = 25
# a node's part of a run: its share of the profiled run, and that share of the plain p50 (the
# times add up to a run the user measured; the profiler's own cost is said in the status)
OVERLAY_LABEL = "ms of the p50 run"  # the overlay's values: each node's part of a plain run
PROFILE_HEADERS = ("node", "kernel", "module group", "share", "ms at p50")
PROFILE_TIPS = ("the kernel onnxruntime ran, named after a node of the file (a fused one lists "
                "every node it ran)", "the operator of the kernel", "the module it counts in",
                "its share of a run with the profiler on", "that share of the plain run's p50: "
                "the column adds up to (at most) the p50")


class CompareTab(QWidget):
    """Compare, profile and variants of ONNX files; every long step is a worker job."""

    showOnGraph = Signal(object, object, str)  # (.onnx path, {node name: ms}, label)
    markOnGraph = Signal(object, object, object)  # (.onnx path, {node: why}, [to select])
    clearGraph = Signal()
    statusMessage = Signal(str)  # for the status bar: what the tab decided and why

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.analysis = session.analysis
        self._waiting = False  # the job waits behind another in the worker
        self._build()
        self.analysis.started.connect(self._started)
        self.analysis.progress.connect(self._progress)
        self.analysis.finished.connect(self._finished)
        self.analysis.failed.connect(self._failed)
        session.resultsChanged.connect(self._update_buttons)  # the exports' files
        session.recipeChanged.connect(self._update_buttons)
        session.recipeEdited.connect(lambda _part, _origin: self._update_buttons())
        self._update_buttons()

    @property
    def comparison(self) -> CompareDocument | None:
        """The analysis model's last comparison's document (None before the first)."""
        found = self.analysis.comparison
        return found.document if found is not None else None

    @property
    def profile(self) -> ProfileDocument | None:
        """The analysis model's last profile's document (None before the first)."""
        found = self.analysis.profile
        return found.document if found is not None else None

    # ------------------------------------------------------------------ layout
    def _build(self) -> None:
        self.a_edit, self.b_edit = QLineEdit(), QLineEdit()
        for edit, name in ((self.a_edit, "A"), (self.b_edit, "B")):
            edit.setPlaceholderText(f"file {name} (.onnx)")
            edit.textChanged.connect(self._update_buttons)
        browse_a = QPushButton("Browse…")
        browse_b = QPushButton("Browse…")
        browse_a.clicked.connect(lambda: self._browse(self.a_edit))
        browse_b.clicked.connect(lambda: self._browse(self.b_edit))
        self.previous_button = QPushButton("Previous and latest export")
        self.previous_button.setToolTip("A: the export before the latest one, B: the latest")
        self.previous_button.clicked.connect(self.use_exports)
        self.torch_check = QCheckBox("Against PyTorch")
        self.torch_check.setToolTip("Run the form's recipe: its inputs, and its eager model as "
                                    "a third reference; otherwise inputs come from file A's "
                                    "shapes")
        self.both_button = QPushButton("Both exporters")
        self.both_button.setToolTip("Export the form's recipe with dynamo and with TorchScript, "
                                    "then compare the two files and PyTorch")
        self.both_button.clicked.connect(self.start_both_exporters)
        self.compare_button = QPushButton("Compare")
        self.compare_button.clicked.connect(self.start_compare)
        self.profile_button = QPushButton("Profile A")
        self.profile_button.setToolTip("Time file A in ONNX Runtime, per node, operator and "
                                       "module group")
        self.profile_button.clicked.connect(self.start_profile)
        self.overlay_check = QCheckBox("Profile overlay on the graph")
        self.overlay_check.setToolTip("Colour file A's nodes on the Graph tab by their time")
        self.overlay_check.toggled.connect(self._overlay_toggled)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setVisible(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.analysis.cancel)
        self.cancel_button.setVisible(False)
        self.status = QLabel("Choose two .onnx files, or export twice and compare the two.")
        self.status.setWordWrap(True)

        grid = QGridLayout()
        grid.addWidget(QLabel("A"), 0, 0)
        grid.addWidget(self.a_edit, 0, 1)
        grid.addWidget(browse_a, 0, 2)
        grid.addWidget(QLabel("B"), 1, 0)
        grid.addWidget(self.b_edit, 1, 1)
        grid.addWidget(browse_b, 1, 2)
        # two rows, what to compare then what to run: one row needs ~900 px, more than the
        # tab gets beside the form on a 1024-pixel screen
        choose, run = QHBoxLayout(), QHBoxLayout()
        for row, widgets in ((choose, (self.previous_button, self.both_button, self.torch_check)),
                             (run, (self.compare_button, self.profile_button,
                                    self.overlay_check))):
            for w in widgets:
                row.addWidget(w)
            row.addStretch(1)
        running = QHBoxLayout()
        running.addWidget(self.progress, 1)
        running.addWidget(self.cancel_button)

        self.facts = FactsTable()
        self.ops = OpsTable()
        self.initializers = InitializersTable()
        self.graphs = SideBySideGraphs()
        self.profile_table = QTableWidget(0, len(PROFILE_HEADERS))
        self.profile_table.setHorizontalHeaderLabels(list(PROFILE_HEADERS))
        self.profile_table.verticalHeader().setVisible(False)
        self.profile_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        header = self.profile_table.horizontalHeader()
        for column, tip in enumerate(PROFILE_TIPS):  # at 1024 every column in view
            heading = QTableWidgetItem(PROFILE_HEADERS[column])
            heading.setToolTip(tip)
            self.profile_table.setHorizontalHeaderItem(column, heading)
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Stretch if column == 0
                                        else QHeaderView.ResizeMode.ResizeToContents)
        self.variants = VariantsPanel()
        self.variants.makeRequested.connect(self.start_variant)
        self.variants.showOnGraph.connect(self.markOnGraph)
        self.views = QTabWidget()
        for widget, name in ((self.facts, "Summary"), (self.ops, "Operators"),
                             (self.initializers, "Initializers"), (self.graphs, "Graphs"),
                             (self.profile_table, "Profile"), (self.variants, "Variants")):
            self.views.addTab(widget, name)

        layout = QVBoxLayout(self)
        layout.addLayout(grid)
        layout.addLayout(choose)
        layout.addLayout(run)
        layout.addLayout(running)
        layout.addWidget(self.status)
        layout.addWidget(self.views, 1)

    def _browse(self, edit: QLineEdit) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose an ONNX file", edit.text(),
                                              "ONNX files (*.onnx)")
        if path:
            edit.setText(path)

    # ------------------------------------------------------------------ inputs
    def set_files(self, a: Path | str, b: Path | str = "") -> None:
        self.a_edit.setText(str(a))
        self.b_edit.setText(str(b))

    def file_a(self) -> Path | None:
        text = self.a_edit.text().strip()
        return Path(text) if text else None

    def file_b(self) -> Path | None:
        text = self.b_edit.text().strip()
        return Path(text) if text else None

    def use_exports(self) -> bool:
        """A: the export before the latest, B: the latest; True when there are two. After one
        export (or two to the same file) A is the latest, B is left empty, and the status
        says there is only one."""
        found = self.session.results.previous_and_latest()
        if isinstance(found, tuple):
            self.set_files(*found)
            return True
        exports = self.session.results.exports
        if exports:
            self.set_files(exports[-1], "")
        self.status.setText(found)
        return False

    def _update_buttons(self) -> None:
        idle = not self.analysis.busy
        a, b = self.file_a(), self.file_b()
        has_model = bool(self.session.recipe.model.source)
        self.compare_button.setEnabled(idle and a is not None and b is not None)
        self.profile_button.setEnabled(idle and a is not None)
        self.variants.make_button.setEnabled(idle and a is not None and has_model)
        found = self.session.results.previous_and_latest()
        self.previous_button.setEnabled(bool(self.session.results.exports))
        self.previous_button.setToolTip(
            "A: the export before the latest one, B: the latest" if isinstance(found, tuple)
            else found)
        self.both_button.setEnabled(idle and has_model)
        profile = self.analysis.profile
        stale = profile.stale() if profile is not None else None
        self.overlay_check.setEnabled(profile is not None and stale is None)
        self.overlay_check.setToolTip(
            "Profile a file first" if profile is None else
            f"{stale.sentence} Profile it again to colour its graph." if stale is not None else
            f"Colour {profile.onnx.name}'s nodes on the Graph tab by their time")
        if stale is not None and self.overlay_check.isChecked():
            # its numbers are of bytes no longer on disk: they colour nothing, and say why
            self.overlay_check.setChecked(False)
            said = (f"{stale.sentence} The profile overlay is off: press Profile A to time "
                    "the file as it is now.")
            self.status.setText(said)
            self.statusMessage.emit(said)

    # ------------------------------------------------------------------ jobs
    def start_compare(self) -> bool:
        a, b = self.file_a(), self.file_b()
        if a is None or b is None:
            return False
        return self.analysis.compare(a, b, self.torch_check.isChecked())

    def start_both_exporters(self) -> bool:
        """Export the form's recipe with both exporters and compare them (A dynamo, B
        TorchScript), against PyTorch too."""
        if not self.session.recipe.model.source:
            return False
        files = self.analysis.both_exporters()
        if files is None:
            return False
        self.set_files(*files)
        return True

    def start_profile(self) -> bool:
        a = self.file_a()
        if a is None:
            return False
        return self.analysis.profile_file(a, self.torch_check.isChecked())

    def start_variant(self, kind: str) -> bool:
        a = self.file_a()
        if a is None or not self.session.recipe.model.source:
            self.status.setText("A variant is checked against the form's PyTorch model: "
                                "choose file A and fill in the model first.")
            return False
        return self.analysis.variant(a, kind, self.variants.keep_fp32())

    def _started(self, job: str) -> None:
        self.progress.setValue(0)
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        ahead = self.analysis.ahead
        self._waiting = bool(ahead)
        self.status.setText(f"The {job} starts once {' and '.join(ahead)} is done…" if ahead
                            else f"Running the {job}…")
        self._update_buttons()

    def _progress(self, fraction: float, stage: str) -> None:
        if self._waiting:  # what it waited for is done: it runs
            self._waiting = False
            self.status.setText(f"Running the {self.analysis.job}…")
        self.progress.setValue(int(fraction * 1000))
        self.progress.setFormat(f"{stage} %p%")

    def _done(self) -> None:
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)
        self._update_buttons()

    def _failed(self, job: str, error: Error) -> None:
        self._done()
        hint = f" {error.hint}" if error.hint else ""
        self.status.setText(f"The {job} did not run: {error.message}{hint}")

    def _finished(self, _job: str, result: object) -> None:
        self._done()
        if isinstance(result, Comparison):
            self.show_comparison(result)
        elif isinstance(result, Profile):
            self.show_profile(result)
        elif isinstance(result, Variant):
            report = result.report
            self.variants.show_variants(self.analysis.variants)
            self.views.setCurrentWidget(self.variants)
            self.status.setText(report.error.message if report.error else
                                f"Variant written to {report.output}; it passed.")

    # ------------------------------------------------------------------ results
    def show_comparison(self, comparison: Comparison) -> None:
        doc = comparison.document
        self.facts.show_document(doc)
        self.ops.show_document(doc)
        self.initializers.show_document(doc)
        if doc.matching is not None:
            self.graphs.show_files(comparison.a, comparison.b, doc.matching)
        parity = doc.parity
        diff = "" if parity is None or parity.max_abs_diff is None else (
            f"max abs diff {parity.max_abs_diff:.3g}")
        if parity is None:
            self.status.setText("Compared.")
        elif doc.ok:
            self.status.setText(f"Equal outputs ({diff or 'no difference measured'}); "
                                f"{len(self.ops.differing())} operator count(s) differ.")
        else:
            changed = doc.initializers.changed
            first = f" Initializer {changed[0].name!r} differs." if changed else ""
            self.status.setText(f"The files disagree{': ' + diff if diff else ''}." + first)
        if doc.timing_note:  # a difference of times inside their spread is noise: said so
            self.status.setText(f"{self.status.text()} {doc.timing_note}")
        self.views.setCurrentWidget(self.facts)

    def show_profile(self, profile: Profile) -> None:
        doc = profile.document
        nodes = doc.nodes[:TOP_N]
        self.profile_table.setRowCount(len(nodes))
        for r, n in enumerate(nodes):
            ran = f" ran {' + '.join(n.fused)};" if n.fused else ""
            share = "—" if n.share is None else f"{n.share:.1%}"
            ms = f"{n.p50_ms if n.p50_ms is not None else n.ms:.4f}"
            for c, text in enumerate((f"{n.name} (fused)" if n.fused else n.name, n.op_type,
                                      n.group, share, ms)):
                item = QTableWidgetItem(text)
                item.setToolTip(f"{n.name}:{ran} {n.ms:.4f} ms per run with the profiler on")
                self.profile_table.setItem(r, c, item)
        lat = doc.latency_ms
        eager = doc.torch_latency_ms
        slowest_ops = ", ".join(o.op_type for o in doc.ops[:3])
        slowest_groups = ", ".join(g.name for g in doc.groups[:3])
        self.status.setText(
            f"{profile.onnx.name}: "
            + (f"ONNX Runtime p50 {lat.p50:.3f} ms, p90 {lat.p90:.3f} ms" if lat else "")
            + (f"; eager PyTorch p50 {eager.p50:.3f} ms" if eager else "")
            + f". Slowest operators: {slowest_ops}; module groups: {slowest_groups}. "
            + doc.per_node_sentence())
        self.views.setCurrentWidget(self.profile_table)
        self._update_buttons()
        if self.overlay_check.isChecked():
            self._overlay_toggled(True)

    def _overlay_toggled(self, on: bool) -> None:
        profile = self.analysis.profile
        if on and profile is not None:
            self.session.check_files()  # a change no watcher heard yet: decided now
            self._update_buttons()
            if self.overlay_check.isChecked():
                self.showOnGraph.emit(profile.onnx, profile.node_ms(), OVERLAY_LABEL)
        else:
            self.clearGraph.emit()
