"""CompareTab: pick two .onnx files (or the previous and the latest export), compare them in
the worker, and read the result as tables and as two linked graphs; profile file A (its
slowest nodes, operators and module groups, and a heat overlay on the Graph tab); make and
judge its variants. The tab is a view of the session: it reads the recipe and the exports,
and asks the worker through the session's JobRunner."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
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

from app.compare.graphs import SideBySideGraphs
from app.compare.jobs import AnalysisJobs
from app.compare.tables import FactsTable, InitializersTable, OpsTable
from app.compare.variants import VariantsPanel
from app.outcomes import ExportOutcome
from app.session import ExportSession
from engine.protocol import (
    CompareDocument,
    CompareResult,
    Error,
    ProfileDocument,
    ProfileResult,
    VariantResult,
)

TOP_N = 25


class CompareTab(QWidget):
    """Compare, profile and variants of ONNX files; every long step is a worker job."""

    showOnGraph = Signal(object, object, str)  # (.onnx path, {node name: ms}, label)
    clearGraph = Signal()

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.jobs = AnalysisJobs(session, self)
        self._waiting = False  # the job waits behind another in the worker
        self.exports: list[Path] = []  # files of the successful exports, oldest first
        self.comparison: CompareDocument | None = None
        self.profile: ProfileDocument | None = None
        self.profiled: Path | None = None
        self._build()
        self.jobs.started.connect(self._started)
        self.jobs.progress.connect(self._progress)
        self.jobs.finished.connect(self._finished)
        self.jobs.failed.connect(self._failed)
        session.exportFinished.connect(self._export_finished)
        session.recipeChanged.connect(self._update_buttons)
        session.recipeEdited.connect(lambda _part, _origin: self._update_buttons())
        self._update_buttons()

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
        self.cancel_button.clicked.connect(self.jobs.cancel)
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
        self.profile_table = QTableWidget(0, 4)
        self.profile_table.setHorizontalHeaderLabels(["node", "operator", "module group",
                                                      "ms per run"])
        self.profile_table.verticalHeader().setVisible(False)
        self.profile_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.profile_table.horizontalHeader().setStretchLastSection(True)
        self.variants = VariantsPanel()
        self.variants.makeRequested.connect(self.start_variant)
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

    def _export_finished(self, outcome: ExportOutcome) -> None:
        onnx = outcome.stamp.onnx
        if outcome.ok and onnx is not None:
            self.exports.append(onnx.path)
            self._update_buttons()

    def use_exports(self) -> None:
        """A: the export before the latest (the latest itself if there was one), B: the
        latest."""
        if self.exports:
            latest = self.exports[-1]
            self.set_files(self.exports[-2] if len(self.exports) > 1 else latest, latest)

    def _recipe(self) -> tuple[str | None, Path]:
        recipe = self.session.recipe
        if self.torch_check.isChecked() and recipe.model.source:
            return recipe.to_toml(), recipe.base_dir
        return None, recipe.base_dir

    def _update_buttons(self) -> None:
        idle = not self.jobs.busy
        a, b = self.file_a(), self.file_b()
        self.compare_button.setEnabled(idle and a is not None and b is not None)
        self.profile_button.setEnabled(idle and a is not None)
        self.variants.make_button.setEnabled(idle and a is not None
                                             and bool(self.session.recipe.model.source))
        self.previous_button.setEnabled(bool(self.exports))
        self.both_button.setEnabled(idle and bool(self.session.recipe.model.source))
        self.overlay_check.setEnabled(self.profile is not None)

    # ------------------------------------------------------------------ jobs
    def start_compare(self) -> bool:
        a, b = self.file_a(), self.file_b()
        if a is None or b is None:
            return False
        recipe, base = self._recipe()
        return self.jobs.compare(a, b, recipe, base)

    def start_both_exporters(self) -> bool:
        """Export the form's recipe with both exporters and compare them (A dynamo, B
        TorchScript), against PyTorch too."""
        recipe = self.session.recipe
        if not recipe.model.source:
            return False
        out = recipe.output_path
        self.set_files(out.with_name(f"{out.stem}.dynamo.onnx"),
                       out.with_name(f"{out.stem}.torchscript.onnx"))
        return self.jobs.both_exporters(recipe)

    def start_profile(self) -> bool:
        a = self.file_a()
        if a is None:
            return False
        recipe, base = self._recipe()
        self.profiled = a
        return self.jobs.profile(a, recipe, base)

    def start_variant(self, kind: str) -> bool:
        a = self.file_a()
        recipe = self.session.recipe
        if a is None or not recipe.model.source:
            self.status.setText("A variant is checked against the form's PyTorch model: "
                                "choose file A and fill in the model first.")
            return False
        output = a.with_name(f"{a.stem}.{kind}.onnx")
        return self.jobs.variant(a, recipe.to_toml(), recipe.base_dir, kind, output)

    def _started(self, job: str) -> None:
        self.progress.setValue(0)
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        ahead = self.jobs.ahead
        self._waiting = bool(ahead)
        self.status.setText(f"The {job} starts once {' and '.join(ahead)} is done…" if ahead
                            else f"Running the {job}…")
        self._update_buttons()

    def _progress(self, fraction: float, stage: str) -> None:
        if self._waiting:  # what it waited for is done: it runs
            self._waiting = False
            self.status.setText(f"Running the {self.jobs.job}…")
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

    def _finished(self, job: str, result: object) -> None:
        self._done()
        if isinstance(result, CompareResult):
            self.show_comparison(result.comparison)
        elif isinstance(result, ProfileResult):
            self.show_profile(result.profile)
        elif isinstance(result, VariantResult):
            report = result.variant_report
            self.variants.add_report(report)
            self.views.setCurrentWidget(self.variants)
            self.status.setText(report.error.message if report.error else
                                f"Variant written to {report.output}; it passed.")

    # ------------------------------------------------------------------ results
    def show_comparison(self, doc: CompareDocument) -> None:
        self.comparison = doc
        self.facts.show_document(doc)
        self.ops.show_document(doc)
        self.initializers.show_document(doc)
        a, b = self.file_a(), self.file_b()
        if doc.matching is not None and a is not None and b is not None:
            self.graphs.show_files(a, b, doc.matching)
        parity = doc.parity
        if parity is None:
            self.status.setText("Compared.")
        elif doc.ok:
            self.status.setText(f"Equal outputs (max abs diff {parity.max_abs_diff:.3g}); "
                                f"{len(self.ops.differing())} operator count(s) differ.")
        else:
            changed = doc.initializers.changed
            first = f" Initializer {changed[0].name!r} differs." if changed else ""
            self.status.setText(f"The files disagree: max abs diff {parity.max_abs_diff}."
                                + first)
        self.views.setCurrentWidget(self.facts)

    def show_profile(self, doc: ProfileDocument) -> None:
        self.profile = doc
        nodes = doc.nodes[:TOP_N]
        self.profile_table.setRowCount(len(nodes))
        for r, n in enumerate(nodes):
            for c, text in enumerate((n.name, n.op_type, n.group, f"{n.ms:.4f}")):
                self.profile_table.setItem(r, c, QTableWidgetItem(text))
        lat = doc.latency_ms
        eager = doc.torch_latency_ms
        slowest_ops = ", ".join(o.op_type for o in doc.ops[:3])
        slowest_groups = ", ".join(g.name for g in doc.groups[:3])
        self.status.setText(
            (f"ONNX Runtime p50 {lat.p50:.3f} ms, p90 {lat.p90:.3f} ms" if lat else "")
            + (f"; eager PyTorch p50 {eager.p50:.3f} ms" if eager else "")
            + f". Slowest operators: {slowest_ops}; module groups: {slowest_groups}.")
        self.views.setCurrentWidget(self.profile_table)
        self._update_buttons()
        if self.overlay_check.isChecked():
            self._overlay_toggled(True)

    def overlay_values(self) -> dict[str, float]:
        """Milliseconds per run by the file's node names: a node onnxruntime fused counts
        under the node it is named after (engine.analysis.profile)."""
        values: dict[str, float] = {}
        for n in self.profile.nodes if self.profile else []:
            if n.node:
                values[n.node] = values.get(n.node, 0.0) + n.ms
        return values

    def _overlay_toggled(self, on: bool) -> None:
        if on and self.profile is not None and self.profiled is not None:
            self.showOnGraph.emit(self.profiled, self.overlay_values(), "ms per run")
        else:
            self.clearGraph.emit()
