"""The comparison as tables: the files' facts side by side, the operator histogram, and the
initializers that were added, removed or changed. Rows that differ are marked."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from onnx_studio.app.cell_tips import show_whole_text
from onnx_studio.engine.protocol import CompareDocument, TensorInfo

DIFFERS = QColor(255, 196, 0, 70)  # a translucent amber: readable in light and dark themes
SIDES = ("a", "b")  # the keys of a comparison's per-file values: file A, file B


def _table(headers: Sequence[str], parent: QWidget | None = None) -> QTableWidget:
    table = QTableWidget(0, len(headers), parent)
    table.setHorizontalHeaderLabels(list(headers))
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.horizontalHeader().setStretchLastSection(True)
    show_whole_text(table)
    return table


def _fill(table: QTableWidget, rows: list[tuple[list[str], bool]]) -> None:
    table.setRowCount(len(rows))
    for r, (cells, differs) in enumerate(rows):
        for c, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if differs:
                item.setBackground(QBrush(DIFFERS))
            table.setItem(r, c, item)


def _tensors(values: list[TensorInfo]) -> str:
    return ", ".join(f"{v.name}: {v.dtype}[{'x'.join(str(d) for d in v.shape or ['?'])}]"
                     for v in values)


def _number(value: float | None, unit: str = "") -> str:
    return "—" if value is None else f"{value:.3g}{unit}"


class FactsTable(QTableWidget):
    """What each file is: nodes, size, opsets, inputs and outputs, load time and latency."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setColumnCount(3)
        self.setHorizontalHeaderLabels(["", "A", "B"])
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.horizontalHeader().setStretchLastSection(True)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)

    def show_document(self, doc: CompareDocument) -> None:
        rows: list[tuple[list[str], bool]] = []

        def pair(label: str, a: str, b: str) -> None:
            rows.append(([label, a, b], a != b))

        pair("nodes", *(str(doc.nodes.get(s, "—")) for s in SIDES))
        pair("size", *(_size(doc.size_bytes.get(s)) for s in SIDES))
        pair("opsets", *(_opsets(doc.opset_imports.get(s, {})) for s in SIDES))
        pair("inputs", *(_tensors(doc.inputs.get(s, [])) for s in SIDES))
        pair("outputs", *(_tensors(doc.outputs.get(s, [])) for s in SIDES))
        spread = doc.spread_ms
        if doc.load_ms:  # each with the range it took over the rounds: a difference inside it
            rows.append((["session load (median)",  # is noise (the timing row says so)
                          *(_number(doc.load_ms[k], " ms") + _range(spread, "load", k)
                            for k in SIDES)], False))
        for key in ("p50", "p90"):
            if doc.latency_ms:
                rows.append(([f"latency {key}",
                              *(_number(getattr(doc.latency_ms[k], key), " ms")
                                + (_range(spread, "p50", k) if key == "p50" else "")
                                for k in SIDES)], False))

        if doc.parity is not None:
            torch = doc.parity.torch
            verdict = "equal outputs" if doc.parity.ok else "outputs DIFFER"
            rows.append(([f"B against A ({verdict})", "reference",
                          f"max abs diff {_number(doc.parity.max_abs_diff)}"],
                         not doc.parity.ok))
            if torch is not None:
                rows.append((["against PyTorch",
                              f"{'ok' if torch.a.ok else 'FAILED'}, max abs diff "
                              f"{_number(torch.a.max_abs_diff)}",
                              f"{'ok' if torch.b.ok else 'FAILED'}, max abs diff "
                              f"{_number(torch.b.max_abs_diff)}"], not torch.ok))
        if doc.matching is not None:
            m = doc.matching
            rows.append((["matched nodes", f"{m.matched} ({m.by_name} by name, "
                          f"{m.by_structure} by structure)",
                          f"unmatched: A {len(m.unmatched_a)}, B {len(m.unmatched_b)}"],
                         bool(m.unmatched_a or m.unmatched_b)))
        _fill(self, rows)


def _range(spread: dict[str, dict[str, list[float]]], what: str, side: str) -> str:
    """The range a time took over the rounds, " (lo–hi)"; "" when the document has none."""
    values = spread[what][side] if what in spread and side in spread[what] else []
    return f" ({values[0]:.3g}–{values[1]:.3g})" if len(values) == 2 else ""


def _size(value: int | None) -> str:
    if value is None:
        return "—"
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024  # type: ignore[assignment]
    return str(value)


def _opsets(imports: dict[str, int]) -> str:
    return ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in sorted(imports.items()))


class OpsTable(QTableWidget):
    """The operator histogram of both files; operators whose counts differ first."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setColumnCount(4)
        self.setHorizontalHeaderLabels(["operator", "A", "B", "B − A"])
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.horizontalHeader().setStretchLastSection(True)

    def show_document(self, doc: CompareDocument) -> None:
        a, b = (doc.ops.get(side, {}) for side in SIDES)
        ops = sorted(set(a) | set(b), key=lambda op: (a.get(op, 0) == b.get(op, 0), op))
        _fill(self, [([op, str(a.get(op, 0)), str(b.get(op, 0)),
                       f"{b.get(op, 0) - a.get(op, 0):+d}"], a.get(op, 0) != b.get(op, 0))
                     for op in ops])

    def differing(self) -> list[str]:
        """The operators whose counts differ, as listed."""
        items = [(self.item(r, 0), self.item(r, 3)) for r in range(self.rowCount())]
        return [op.text() for op, delta in items
                if op is not None and delta is not None and delta.text() != "+0"]


class InitializersTable(QTableWidget):
    """Initializers added (only in B), removed (only in A) and changed (largest difference)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setColumnCount(3)
        self.setHorizontalHeaderLabels(["initializer", "change", "max abs diff"])
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.horizontalHeader().setStretchLastSection(True)

    def show_document(self, doc: CompareDocument) -> None:
        init = doc.initializers
        rows = [([c.name, "changed" if c.reason is None else f"changed ({c.reason})",
                  _number(c.max_abs_diff)], True) for c in init.changed]
        rows += [([name, "only in B", ""], True) for name in init.added]
        rows += [([name, "only in A", ""], True) for name in init.removed]
        _fill(self, rows)
