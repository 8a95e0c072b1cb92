"""The Variants panel: make an fp16, int8 or ORT-optimized copy of file A in the worker, and
list every variant made with its size, latency, max error against PyTorch and verdict."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
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

from app.compare.tables import DIFFERS
from app.session import Variant
from engine.protocol import VariantReport

KINDS = ("fp16", "int8", "optimized")
COLUMNS = ("kind", "file", "size", "size ×", "latency p50", "latency ×", "max error",
           "tolerance", "verdict")


class VariantsPanel(QWidget):
    """A kind, a Make button, and the table of variants made (newest last)."""

    makeRequested = Signal(str)  # the kind

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
        self.note = QLabel("")
        self.note.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setStretchLastSection(True)
        row = QHBoxLayout()
        row.addWidget(QLabel("Variant:"))
        row.addWidget(self.kind)
        row.addWidget(self.make_button)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.note)
        layout.addWidget(self.table)

    def show_variants(self, variants: Sequence[Variant]) -> None:
        """One line per variant made (the analysis model's), the latest last: its numbers
        and whether it met its tolerance."""
        self.table.setRowCount(len(variants))
        for r, variant in enumerate(variants):
            self._fill_row(r, variant.report)

    def _fill_row(self, r: int, report: VariantReport) -> None:
        facts = report.variant
        if facts is None:
            cells = ["?", report.output or "", "", "", "", "", "", "",
                     report.error.message if report.error else "failed"]
        else:
            lat = facts.latency_ms
            cells = [facts.kind, (report.output or "").rsplit("/", 1)[-1],
                     f"{facts.size_bytes / 1024:.1f} KB", f"{facts.size_ratio:.2f}",
                     f"{lat.p50:.3f} ms" if lat else "—",
                     f"{facts.latency_ratio:.2f}" if facts.latency_ratio else "—",
                     f"{facts.max_abs_diff:.3g}" if facts.max_abs_diff is not None else "—",
                     f"rtol {facts.rtol:g}, atol {facts.atol:g}",
                     "passed" if report.ok else "FAILED: outside its tolerance"
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
