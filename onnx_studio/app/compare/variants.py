"""The Variants panel: make an fp16, int8 or ORT-optimized copy of file A in the worker, and
list every variant made with its size, latency, max error against PyTorch and verdict. fp16
can keep nodes in float32 ("auto": the studio finds a few that let it pass, on a CPU); the
nodes kept, and any value that overflows float16, are named under the table and outlined on
the variant's graph (Show on graph)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from onnx_studio.app.cell_tips import show_whole_text
from onnx_studio.app.compare.tables import DIFFERS
from onnx_studio.app.session import Variant

KINDS = ("fp16", "int8", "optimized")
COLUMNS = ("kind", "file", "size", "size ×", "latency p50", "latency ×", "max error",
           "tolerance", "fp32 kept", "verdict")
KEEP_CHOICES = {"none": None, "auto": "auto"}  # fp16: the nodes kept in float32
KEPT_MARK = "kept in float32 by the fp16 variant"
OVERFLOW_MARK = "{value} reaches |x| = {max_abs:.3g}, beyond float16's 65504: it overflows"


class VariantsPanel(QWidget):
    """A kind, a Make button, and the table of variants made (newest last)."""

    makeRequested = Signal(str)  # the kind (fp16: `keep_fp32()` says what stays in float32)
    showOnGraph = Signal(object, object, object)  # (.onnx path, {node: why}, [node to select])

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.kind = QComboBox()
        self.kind.addItems(KINDS)
        self.make_button = QPushButton("Make variant of A")
        self.make_button.setToolTip("Write the variant beside file A and validate it against "
                                    "the form's PyTorch model, with a tolerance fit for its "
                                    "precision")
        self.make_button.clicked.connect(lambda: self.makeRequested.emit(
            self.kind.currentText()))
        self.keep = QComboBox()
        self.keep.addItems(list(KEEP_CHOICES))
        self.keep.setToolTip("fp16: the nodes kept in float32. auto: the studio finds a small "
                             "set (value ranges beyond float16's, then bisection on the "
                             "per-node error) so the variant passes its verdict")
        self.kind.currentTextChanged.connect(
            lambda kind: self.keep.setEnabled(kind == "fp16"))
        self.graph_button = QPushButton("Show on graph")
        self.graph_button.setToolTip("Open the selected variant's graph with the nodes kept in "
                                     "float32 and the values overflowing float16 outlined")
        self.graph_button.setEnabled(False)
        self.graph_button.clicked.connect(self.show_on_graph)
        self.variants: list[Variant] = []  # the rows shown (the analysis model's)
        self.note = QLabel("")
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setStretchLastSection(True)
        show_whole_text(self.table)
        # the verdict beside the kind: a narrow tab scrolls the numbers, never the verdict
        self.table.horizontalHeader().moveSection(COLUMNS.index("verdict"), 1)
        row = QHBoxLayout()
        row.addWidget(QLabel("Variant:"))
        row.addWidget(self.kind)
        row.addWidget(QLabel("keep fp32:"))
        row.addWidget(self.keep)
        row.addStretch(1)
        # the buttons on a row of their own: one row is wider than the tab on a 1024 screen
        buttons = QHBoxLayout()
        buttons.addWidget(self.make_button)
        buttons.addWidget(self.graph_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addLayout(buttons)
        layout.addWidget(self.note)
        layout.addWidget(self.table)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableWidget.SelectionMode.SingleSelection)
        self.table.currentCellChanged.connect(lambda row, *_: self._describe(row))

    def keep_fp32(self) -> str | None:
        """What the next fp16 variant keeps in float32 ("auto", or None: nothing)."""
        return KEEP_CHOICES[self.keep.currentText()] if self.keep.isEnabled() else None

    def show_variants(self, variants: Sequence[Variant]) -> None:
        """One line per variant made (the analysis model's), the latest last: its numbers
        and whether it met its tolerance."""
        self.variants = list(variants)
        self.table.setRowCount(len(variants))
        for r, variant in enumerate(variants):
            self._fill_row(r, variant)
        if variants:
            self.table.setCurrentCell(len(variants) - 1, 0)
        self._describe(len(variants) - 1)

    def _fill_row(self, r: int, variant: Variant) -> None:
        report = variant.report
        facts = report.variant
        if facts is None:
            cells = ["?", report.output or "", "", "", "", "", "", "", "",
                     report.error.message if report.error else "failed"]
        else:
            lat = facts.latency_ms
            cells = [facts.kind, (report.output or "").rsplit("/", 1)[-1],
                     f"{facts.size_bytes / 1024:.1f} KB", f"{facts.size_ratio:.2f}",
                     f"{lat.p50:.3f} ms" if lat else "—",
                     f"{facts.latency_ratio:.2f}" if facts.latency_ratio else "—",
                     f"{facts.max_abs_diff:.3g}" if facts.max_abs_diff is not None else "—",
                     f"rtol {facts.rtol:g}, atol {facts.atol:g}",
                     str(len(facts.kept_fp32)) if facts.kept_fp32 is not None else "—",
                     "passed" if report.ok else
                     f"FAILED: {len(variant.overflows)} value(s) overflow float16"
                     if variant.overflows else "FAILED: outside its tolerance"
                     if report.validation is not None else "FAILED"]
        for c, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if not report.ok:
                item.setBackground(QBrush(DIFFERS))
            if report.error is not None:
                item.setToolTip(report.error.message)
            self.table.setItem(r, c, item)

    def verdicts(self) -> list[str]:
        items = [self.table.item(r, COLUMNS.index("verdict"))
                 for r in range(self.table.rowCount())]
        return [item.text() for item in items if item is not None]

    def selected(self) -> Variant | None:
        """The variant of the current row (the latest when none is chosen)."""
        row = self.table.currentRow()
        return self.variants[row] if 0 <= row < len(self.variants) else None

    def _describe(self, row: int) -> None:
        """Under the table: the selected variant's nodes kept in float32 and overflows."""
        variant = self.variants[row] if 0 <= row < len(self.variants) else None
        self.graph_button.setEnabled(variant is not None and variant.output is not None
                                     and bool(variant.kept_fp32 or variant.overflows))
        if variant is None or variant.kind != "fp16":
            self.note.setText("")
            return
        kept, overflows = variant.kept_fp32, variant.overflows
        parts = []
        if variant.report.variant is not None and variant.report.variant.kept_fp32 is not None:
            parts.append(f"Kept in float32 ({len(kept)}): {', '.join(kept) or 'none'}.")
        if overflows:
            parts.append("Overflows float16: " + "; ".join(
                f"{o.value} ({o.op_type} {o.node}) |x| = {o.max_abs:.3g}" for o in overflows)
                + (". Make it again with keep fp32 auto." if not kept else "."))
        elif variant.report.variant is not None:
            parts.append("No value overflows float16.")
        self.note.setText(" ".join(parts))

    def marks(self, variant: Variant) -> dict[str, str]:
        """The nodes to outline on `variant`'s graph: overflowing, then kept in float32."""
        reasons = {o.node: OVERFLOW_MARK.format(value=o.value, max_abs=o.max_abs)
                   for o in variant.overflows}
        reasons.update({name: KEPT_MARK for name in variant.kept_fp32 if name not in reasons})
        return reasons

    def show_on_graph(self) -> bool:
        """Ask for the selected variant's graph with its kept and overflowing nodes outlined;
        False when it has none or wrote no file."""
        variant = self.selected()
        if variant is None or variant.output is None:
            return False
        reasons = self.marks(variant)
        if not reasons:
            return False
        self.showOnGraph.emit(variant.output, reasons, list(reasons))
        return True
