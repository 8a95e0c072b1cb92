"""Shared by the Validation tab's parts: number formats, pass/fail colours, a sortable table.

Colours are chosen per palette (light or dark) so pass/fail reads on both; the tab asks
`is_dark(widget)` whenever the palette changes and fills its tables again.
"""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont, QPalette
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTreeWidget, QTreeWidgetItem, QWidget

from onnx_studio.app import theme
from onnx_studio.app.cell_tips import show_whole_text

PASS_LIGHT, PASS_DARK = "#2b8a3e", "#8ce99a"
FAIL_LIGHT, FAIL_DARK = "#c92a2a", "#ff8787"
SORT_ROLE = Qt.ItemDataRole.UserRole + 1


def is_dark(widget: QWidget) -> bool:
    return widget.palette().color(QPalette.ColorRole.Window).lightness() < 128


def verdict_color(ok: bool, dark: bool) -> str:
    if ok:
        return PASS_DARK if dark else PASS_LIGHT
    return FAIL_DARK if dark else FAIL_LIGHT


def number(value: Any) -> str:
    """A metric for a table cell: '—' when absent, 3 significant digits, exponent when tiny."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    value = float(value)
    if value == 0:
        return "0"
    if not math.isfinite(value):
        return str(value)
    if abs(value) < 1e-3 or abs(value) >= 1e5:
        return f"{value:.2e}"
    return f"{value:.4g}"


def seconds(value: Any) -> str:
    if value is None:
        return "—"
    value = float(value)
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def cosine(value: Any) -> str:
    """Cosine similarity with enough digits to see 0.9999 vs 1 (the interesting range)."""
    return "—" if value is None else f"{float(value):.6f}"


def mismatched(count: Any, fraction: Any, estimated: Any = False, passed: bool = True,
               rejudged: bool = False) -> str:
    """'—' unknown, '0', or the count and its share ('≈' first when estimated from a sample);
    a failing output of a re-judged validation whose count no sample gives: 'not counted'."""
    if count is None:
        return "not counted" if rejudged and not passed else "—"
    if not count:
        return "0"
    return f"{'≈' if estimated else ''}{count:,} ({float(fraction or 0):.1%})"


def nan_inf(nan: int | None, inf: int | None, matched: int | None) -> str:
    """'agree', or which of NaN/Inf the two sides disagree on and how often."""
    if nan is None and inf is None:
        return "—"
    parts = [f"{what} ×{n}" for what, n in (("NaN", nan), ("Inf", inf)) if n]
    if parts:
        return "differ: " + ", ".join(parts)
    return f"agree (NaN ×{matched} on both sides)" if matched else "agree"


def sizes_text(sizes: dict[str, Any] | None, changed: str | None = None) -> str:
    if not sizes:
        return "—"
    # the dimension this trial moved off its export size is marked
    return ", ".join(f"{k}={v}" + ("*" if k == changed else "") for k, v in sizes.items())


class Item(QTreeWidgetItem):
    """A row that sorts by the number stored under SORT_ROLE (text otherwise)."""

    def __lt__(self, other: QTreeWidgetItem) -> bool:
        tree = self.treeWidget()
        column = tree.sortColumn() if tree is not None else 0
        a, b = self.data(column, SORT_ROLE), other.data(column, SORT_ROLE)
        if a is not None and b is not None:
            return bool(a < b)
        return self.text(column) < other.text(column)


def make_table(headers: list[str], stretch: int | None = None) -> QTreeWidget:
    """A flat, read-only, sortable table; `stretch` is the column that takes spare width.

    A "Result" column (the verdict) is shown second, beside the name it judges, so a narrow
    window scrolls the numbers, never the verdict, out of view (its column index, for
    `item.text(i)`, stays where `headers` puts it)."""
    tree = QTreeWidget()
    tree.setHeaderLabels(headers)
    tree.setRootIsDecorated(False)
    tree.setUniformRowHeights(True)
    tree.setAlternatingRowColors(True)
    tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    tree.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    header = tree.header()
    header.setStretchLastSection(stretch is None)
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    if stretch is not None:
        header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    if "Result" in headers:
        header.moveSection(headers.index("Result"), 1)
    show_whole_text(tree)
    return tree


def add_row(tree: QTreeWidget, cells: list[str], sort_keys: dict[int, float] | None = None,
            tooltip: str = "") -> Item:
    item = Item(cells)
    for column in range(1, len(cells)):
        if cells[column] and cells[column][0] in "-0123456789—":
            item.setTextAlignment(column, Qt.AlignmentFlag.AlignRight |
                                  Qt.AlignmentFlag.AlignVCenter)
    for column, key in (sort_keys or {}).items():
        item.setData(column, SORT_ROLE, key)
    if tooltip:
        for column in range(len(cells)):
            item.setToolTip(column, tooltip)
    tree.addTopLevelItem(item)
    return item


def rows(tree: QTreeWidget) -> list[QTreeWidgetItem]:
    items = (tree.topLevelItem(i) for i in range(tree.topLevelItemCount()))
    return [item for item in items if item is not None]


def texts(tree: QTreeWidget) -> list[list[str]]:
    """Every cell's text, row by row (tests and screenshots read tables this way)."""
    return [[item.text(c) for c in range(tree.columnCount())] for item in rows(tree)]


def paint_verdict(item: QTreeWidgetItem, column: int, ok: bool, dark: bool,
                  whole_row: bool = True) -> None:
    """Colour the verdict cell; a failed row also gets the error tint across."""
    item.setForeground(column, QBrush(QColor(verdict_color(ok, dark))))
    font = QFont(item.font(column))
    font.setBold(True)
    item.setFont(column, font)
    if not ok and whole_row:
        tint = QBrush(QColor(theme.error_background(dark)))
        for c in range(item.columnCount()):
            item.setBackground(c, tint)


def sort_key(value: Any, missing: float = math.inf) -> float:
    """Numbers sort by value; a missing one (a shape mismatch) sorts as the worst."""
    return missing if value is None else float(value)
