"""Inputs and outputs tables: names, shapes, dtypes, fills and dynamic axes of a Recipe.

A dynamic dimension is identified by its name: every tensor axis with the same name is one
dimension, so shared names are tinted alike and listed under the tables. Both tables are views
of the session's recipe: a cell's edit goes through the session, and a cell whose text does not
parse keeps that text while the session holds why.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from onnx_studio.app import theme
from onnx_studio.app.cell_tips import show_whole_text
from onnx_studio.app.form import marks
from onnx_studio.app.session import ExportSession
from onnx_studio.engine.recipe import AUTO_FILL, DTYPES, FILLS, InputSpec, OutputSpec
from onnx_studio.engine.source.inputs import resolve_fill

if TYPE_CHECKING:
    from onnx_studio.app.form.dynamic_axes import DynamicAxesDialog

# The dtype list shows the canonical names; aliases in a loaded recipe are added on demand.
MAIN_DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8",
               "uint8", "bool", "complex64")


# a cell widget's tooltip when nothing is wrong with it (a mark replaces it while there is)
PLAIN_TIP = "plain_tip"
FILL_TIP = ("auto chooses by the input's name and dtype (masks: ones, token ids: randint, "
            "positions: arange, floats: randn); the Log says what each export drew")


def fill_label(spec: InputSpec) -> tuple[str, str]:
    """What the Fill cell shows for `spec`, and its tooltip: "auto → ones" and why, for the
    automatic fill (onnx_studio.engine.source.inputs.resolve_fill: by name and dtype, no model
    needed)."""
    if spec.fill != AUTO_FILL:
        return spec.fill, FILL_TIP
    resolved = resolve_fill(spec)
    reason = f" — {resolved.reason}" if resolved.reason else ""
    return (f"auto → {resolved.fill}",
            f"auto draws {resolved.text}{reason}.\n{FILL_TIP}")


def format_shape(shape: list[int]) -> str:
    return "x".join(str(d) for d in shape) if shape else "[]"


def parse_shape(text: str) -> list[int]:
    """'1x3x224x224', '1, 3, 224, 224', '[1,3]' or '[]' (a scalar) -> a list of ints."""
    cleaned = text.strip().strip("[]()").strip()
    if not cleaned or cleaned.lower() == "scalar":
        return []
    parts = [p for p in re.split(r"[x×,\s]+", cleaned) if p]
    try:
        return [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"{text!r} is not a shape; write sizes such as 1x3x224x224 "
                         "([] for a scalar).") from None


def format_dynamic(dynamic: dict[int, str]) -> str:
    return ", ".join(f"{axis}={name}" for axis, name in sorted(dynamic.items()))


def parse_dynamic(text: str) -> dict[int, str]:
    """'0=batch, 2=seq' -> {0: 'batch', 2: 'seq'}."""
    out: dict[int, str] = {}
    for part in filter(None, (p.strip() for p in re.split(r"[,;]", text))):
        axis, sep, name = (s.strip() for s in part.partition("="))
        if not sep or not name:
            raise ValueError(f"{part!r}: write axis=name, such as 0=batch.")
        try:
            index = int(axis)
        except ValueError:
            raise ValueError(f"{part!r}: the axis must be a number, such as 0=batch.") from None
        if not name.isidentifier():
            raise ValueError(f"{part!r}: the name may hold letters, digits and _ only.")
        out[index] = name
    return out


def format_params(spec: InputSpec) -> str:
    items = [(k, getattr(spec, k)) for k in ("low", "high", "value", "file")]
    return ", ".join(f"{k}={v}" for k, v in items if v is not None)


def parse_params(text: str) -> dict[str, float | str | None]:
    """'low=0, high=10' / 'value=5' / 'file=x.npy' -> field values (missing ones None)."""
    out: dict[str, float | str | None] = {"low": None, "high": None, "value": None, "file": None}
    for part in filter(None, (p.strip() for p in re.split(r"[,;]", text))):
        key, sep, value = (s.strip() for s in part.partition("="))
        if not sep or key not in out:
            raise ValueError(f"{part!r}: use low=, high=, value= or file=.")
        if key == "file":
            out[key] = value
            continue
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{part!r}: {key} must be a number.") from None
        out[key] = int(number) if number.is_integer() else number
    return out


class _TensorTable(QGroupBox):
    columns: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()  # per-column tooltip when the cell has no problem
    part = ""  # the recipe part this table shows (onnx_studio.app.session.PARTS)

    def __init__(self, title: str, session: ExportSession, parent: QWidget | None = None
                 ) -> None:
        super().__init__(title, parent)
        self.session = session
        self.dark = False
        self._filling = False
        self.table = QTableWidget(0, len(self.columns))
        self.table.setHorizontalHeaderLabels(list(self.columns))
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(26)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.AllEditTriggers)
        self.table.horizontalHeader().setStretchLastSection(True)
        show_whole_text(self.table)  # a cut cell (a long shape) shows it whole as its tip
        self.add_button = QPushButton("Add")
        self.remove_button = QPushButton("Remove")
        self.up_button = QPushButton("Up")
        self.down_button = QPushButton("Down")
        self.shared = QLabel()
        self.shared.setWordWrap(True)
        self.not_applicable = QLabel()  # why the table does not apply to the source, if so
        self.not_applicable.setWordWrap(True)
        self.not_applicable.hide()
        buttons = QHBoxLayout()
        for b in (self.add_button, self.remove_button, self.up_button, self.down_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        self.buttons_row = buttons
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.setSpacing(4)
        layout.addWidget(self.not_applicable)
        layout.addWidget(self.table)
        layout.addWidget(self.shared)
        layout.addLayout(buttons)
        self.table.itemChanged.connect(self._item_changed)
        self.table.horizontalScrollBar().rangeChanged.connect(
            lambda *_: self.table.setFixedHeight(self._table_height()))
        self.add_button.clicked.connect(self.add_row)
        self.remove_button.clicked.connect(self.remove_row)
        self.up_button.clicked.connect(lambda: self.move_row(-1))
        self.down_button.clicked.connect(lambda: self.move_row(1))
        session.recipeChanged.connect(self.refresh)
        session.recipeEdited.connect(self._recipe_edited)
        session.readinessChanged.connect(self._readiness_changed)
        # the inputs' reason says whether the Hugging Face group lists them yet
        session.descriptionChanged.connect(lambda _d: self._follow_source())

    def items(self) -> list[Any]:
        """The recipe's list this table shows (edited in place, inside the session's edit)."""
        raise NotImplementedError

    def prefix(self) -> str:
        raise NotImplementedError

    def _recipe_edited(self, part: str, origin: object) -> None:
        if part == self.part and origin is not self:
            self.refresh()  # another party rewrote this table's rows (inputs named, say)
        else:
            self.paint_dynamic()  # names shared with the other table may have changed
        if part == "model":
            self._follow_source()

    def _follow_source(self) -> None:
        """Disable the table, saying why, when it does not apply to the source (a Hugging
        Face folder's inputs and outputs come from its task)."""
        reason = self.session.not_applicable.get(self.part)
        self.not_applicable.setText(reason or "")
        self.not_applicable.setVisible(reason is not None)
        self.table.setToolTip(reason or "")
        items = (self.buttons_row.itemAt(i) for i in range(self.buttons_row.count()))
        buttons = [w for item in items if item is not None and (w := item.widget()) is not None]
        for widget in (self.table, *buttons):
            widget.setEnabled(reason is None)

    def _readiness_changed(self) -> None:
        self.mark(self.session.problems)

    def refresh(self) -> None:
        self._filling = True
        try:
            items = self.items()
            self.table.setRowCount(len(items))
            for row, spec in enumerate(items):
                self._fill_row(row, spec)
        finally:
            self._filling = False
        self.table.setFixedHeight(self._table_height())
        self.paint_dynamic()
        self._follow_source()

    def _table_height(self) -> int:
        rows = max(self.table.rowCount(), 1)
        return self.table.horizontalHeader().height() + 26 * min(rows, 5) + 4 + self._scroll()

    def _scroll(self) -> int:
        """The horizontal scroll bar's height while the columns are wider than the table (a
        narrow window): the rows keep their room above it."""
        bar = self.table.horizontalScrollBar()
        return bar.sizeHint().height() if bar.maximum() > 0 else 0

    def _set_text(self, row: int, col: int, text: str) -> None:
        item = self.table.item(row, col)
        if item is None:
            item = QTableWidgetItem(text)
            item.setToolTip(self.hints[col] if col < len(self.hints) else "")
            self.table.setItem(row, col, item)
        elif item.text() != text:
            item.setText(text)

    def _fill_row(self, row: int, spec: InputSpec | OutputSpec) -> None:
        raise NotImplementedError

    def _item_changed(self, item: QTableWidgetItem) -> None:
        if not self._filling:
            self.read_row(item.row())

    def read_row(self, row: int) -> None:
        """Read row `row`'s cells into the recipe (through the session)."""
        with self.session.edit(self.part, self):
            self._read_row(row)

    def _read_row(self, row: int) -> None:
        raise NotImplementedError

    def _error(self, key: str, sentence: str | None) -> None:
        self.session.set_parse_error(key, sentence)

    def _clear_row_errors(self) -> None:
        # Row numbers shift on add/remove/move; stale parse errors are re-read from the cells.
        self.session.clear_parse_errors(self.prefix() + "[")

    def add_row(self) -> None:
        raise NotImplementedError

    def remove_row(self) -> None:
        row = self.table.currentRow()
        items = self.items()
        if 0 <= row < len(items):
            with self.session.edit(self.part, self):
                del items[row]
                self._clear_row_errors()
                self.refresh()

    def move_row(self, step: int) -> None:
        row = self.table.currentRow()
        items = self.items()
        other = row + step
        if 0 <= row < len(items) and 0 <= other < len(items):
            with self.session.edit(self.part, self):
                items[row], items[other] = items[other], items[row]
                self._clear_row_errors()
                self.refresh()
                self.table.selectRow(other)

    # ----------------------------------------------------------------- marks

    def dynamic_column(self) -> int:
        return len(self.columns) - 1

    def paint_dynamic(self) -> None:
        """Tint dynamic names shared by several tensors alike and say who shares them."""
        users: dict[str, list[str]] = {}
        recipe = self.session.recipe
        specs: list[InputSpec | OutputSpec] = [*recipe.inputs, *recipe.outputs]
        for spec in specs:
            for axis, name in sorted(spec.dynamic.items()):
                users.setdefault(name, []).append(f"{spec.name}[{axis}]")
        col = self.dynamic_column()
        self._filling = True
        try:
            for row, spec in enumerate(self.items()):
                item = self.table.item(row, col)
                if item is None:
                    continue
                shared = [n for n in spec.dynamic.values() if len(users.get(n, [])) > 1]
                if shared:
                    item.setBackground(theme.dimension_tint(shared[0], self.dark))
                    item.setToolTip("\n".join(
                        f"{n} is one dimension shared by {', '.join(users[n])}" for n in shared))
                else:
                    item.setData(Qt.ItemDataRole.BackgroundRole, None)
                    item.setToolTip("axis=name pairs, such as 0=batch; the same name on "
                                    "several tensors is one dimension")
        finally:
            self._filling = False
        lines = [f"<b>{n}</b> = {', '.join(u)}" for n, u in users.items() if len(u) > 1]
        self.shared.setText(("Dimensions shared by name: " + "; ".join(lines)) if lines else "")
        self.shared.setVisible(bool(lines))

    def mark(self, problems: dict[str, str]) -> None:
        self._filling = True
        try:
            bad = QColor(theme.error_background(self.dark))
            for row in range(self.table.rowCount()):
                for col, key in enumerate(self.field_keys()):
                    field = f"{self.prefix()}[{row}].{key}"
                    sentence = next((s for f, s in problems.items()
                                     if f == field or (key == "params" and f in (
                                         f"{self.prefix()}[{row}].{k}"
                                         for k in ("low", "high", "value", "file")))), None)
                    widget = self.table.cellWidget(row, col)
                    item = self.table.item(row, col)
                    if widget is not None:
                        marks.mark(widget, sentence, self.dark,
                                   str(widget.property(PLAIN_TIP) or ""))
                    elif item is not None and sentence:
                        item.setBackground(bad)
                        item.setToolTip(sentence)
                    elif item is not None and key != "dynamic":
                        item.setData(Qt.ItemDataRole.BackgroundRole, None)
                        item.setToolTip(self.hints[col] if col < len(self.hints) else "")
        finally:
            self._filling = False
        self.paint_dynamic()
        self._filling = True
        try:
            col = self.dynamic_column()
            for row in range(self.table.rowCount()):
                sentence = problems.get(f"{self.prefix()}[{row}].dynamic")
                item = self.table.item(row, col)
                if sentence and item is not None:
                    item.setBackground(bad)
                    item.setToolTip(sentence)
        finally:
            self._filling = False

    def field_keys(self) -> tuple[str, ...]:
        raise NotImplementedError


class InputsTable(_TensorTable):
    """`recipe.inputs` in forward() order."""

    part = "inputs"

    # short headers: at 1024 px each text column gets ~70 px ("Dynamic axes" was cut)
    columns = ("Name", "Shape", "Dtype", "Fill", "Params", "Dynamic")
    hints = ("the graph input's name", "sizes such as 1x3x224x224; [] for a scalar", "", "",
             "low=, high= (rand, randint), value= (full), file= (file)")

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__("Inputs (in forward() order)", session, parent)
        self.axes_button = QPushButton("Dynamic axes…")
        self.axes_button.setToolTip("Toggle the selected input's axes dynamic and name them")
        self.axes_button.clicked.connect(lambda: self.edit_dynamic_axes(self.table.currentRow()))
        self.buttons_row.insertWidget(4, self.axes_button)
        # the text columns share the width the form has (no horizontal scrolling at 1024 px);
        # the two combo boxes keep the width their longest entry needs, Params a narrow one
        header = self.table.horizontalHeader()
        header.setStretchLastSection(False)
        for col in range(len(self.columns)):  # Shape: as wide as its shapes (`refresh`)
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive if col == 1
                                        else QHeaderView.ResizeMode.Stretch)
        for col, width in ((2, 76), (3, 122), (4, 58)):  # Params: rarely set, elided
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Fixed)
            self.table.setColumnWidth(col, width)

    def items(self) -> list[InputSpec]:
        return self.session.recipe.inputs

    def refresh(self) -> None:
        super().refresh()
        # each shape whole (2x3x32x32) up to 2/5 of the table; a longer one elided, whole in
        # its tooltip (cell_tips)
        texts = [i.text() for r in range(self.table.rowCount()) if (i := self.table.item(r, 1))]
        widest = max(map(self.table.fontMetrics().horizontalAdvance, texts), default=40) + 16
        self.table.setColumnWidth(1, min(widest, max(96, self._table_width() * 2 // 5)))

    def _table_width(self) -> int:
        """The width the table's cells have (its viewport's, scroll bars aside), read without
        asking for the viewport widget: PySide would load every widget class to type it."""
        return self.table.maximumViewportSize().width()

    def prefix(self) -> str:
        return "inputs"

    def field_keys(self) -> tuple[str, ...]:
        return ("name", "shape", "dtype", "fill", "params", "dynamic")

    def _combo(self, row: int, col: int, values: tuple[str, ...], current: str) -> None:
        combo = self.table.cellWidget(row, col)
        if not isinstance(combo, QComboBox):
            combo = QComboBox()
            combo.setFrame(False)
            combo.currentTextChanged.connect(lambda _t, c=combo: self._combo_changed(c))
            self.table.setCellWidget(row, col, combo)
        combo.blockSignals(True)
        combo.clear()
        combo.addItems(list(values) if current in values else [*values, current])
        combo.setCurrentText(current)
        combo.blockSignals(False)

    def _fill_combo(self, row: int, spec: InputSpec) -> None:
        """The Fill cell: every fill, "auto" labelled with what it resolves to for this row."""
        combo = self.table.cellWidget(row, 3)
        if not isinstance(combo, QComboBox):
            combo = QComboBox()
            combo.setFrame(False)
            combo.currentIndexChanged.connect(lambda _i, c=combo: self._combo_changed(c))
            self.table.setCellWidget(row, 3, combo)
        label, tip = fill_label(InputSpec(name=spec.name, dtype=spec.dtype, low=spec.low,
                                          high=spec.high))
        fills = list(FILLS) if spec.fill in FILLS else [*FILLS, spec.fill]
        combo.blockSignals(True)
        if [combo.itemData(i) for i in range(combo.count())] != fills:
            combo.clear()
            for fill in fills:
                combo.addItem(fill, fill)
        auto = combo.findData(AUTO_FILL)
        combo.setItemText(auto, label)
        combo.setItemData(auto, tip, Qt.ItemDataRole.ToolTipRole)
        combo.setCurrentIndex(combo.findData(spec.fill))
        combo.setProperty(PLAIN_TIP, fill_label(spec)[1])
        combo.setToolTip(str(combo.property(PLAIN_TIP)))
        combo.blockSignals(False)

    def read_row(self, row: int) -> None:
        super().read_row(row)
        items = self.items()
        if 0 <= row < len(items):  # the name or dtype may resolve "auto" to another fill
            self._fill_combo(row, items[row])
            self.mark(self.session.problems)

    def _combo_changed(self, combo: QComboBox) -> None:
        for row in range(self.table.rowCount()):
            if combo in (self.table.cellWidget(row, 2), self.table.cellWidget(row, 3)):
                self.read_row(row)
                return

    def _fill_row(self, row: int, spec: InputSpec | OutputSpec) -> None:
        assert isinstance(spec, InputSpec)
        self._set_text(row, 0, spec.name)
        self._set_text(row, 1, format_shape(spec.shape))
        self._combo(row, 2, MAIN_DTYPES, spec.dtype)
        self._fill_combo(row, spec)
        self._set_text(row, 4, format_params(spec))
        self._set_text(row, 5, format_dynamic(spec.dynamic))
        self._show_constant(row, spec)

    def _show_constant(self, row: int, spec: InputSpec) -> None:
        """A constant's tensor cells (shape, dtype, fill, parameters, axes) do not apply: they
        are disabled (onnx_studio.app.form.structured_inputs sets its kind and value)."""
        usable = Qt.ItemFlag.ItemIsEditable | Qt.ItemFlag.ItemIsEnabled
        for col in (1, 4, 5):
            item = self.table.item(row, col)
            if item is not None:
                flags = item.flags()
                item.setFlags(flags | usable if spec.is_tensor else flags & ~usable)
        for col in (2, 3):
            widget = self.table.cellWidget(row, col)
            if widget is not None:
                widget.setEnabled(spec.is_tensor)

    def _read_row(self, row: int) -> None:
        spec = self.session.recipe.inputs[row]
        where = f"inputs[{row}]"

        def text(col: int) -> str:
            item = self.table.item(row, col)
            return item.text() if item is not None else ""

        spec.name = text(0).strip()
        try:
            spec.shape = parse_shape(text(1))
            self._error(f"{where}.shape", None)
        except ValueError as exc:
            self._error(f"{where}.shape", str(exc))
        dtype = self.table.cellWidget(row, 2)
        if isinstance(dtype, QComboBox):
            spec.dtype = dtype.currentText()
        fill = self.table.cellWidget(row, 3)
        if isinstance(fill, QComboBox):
            spec.fill = str(fill.currentData() or fill.currentText())
        try:
            params = parse_params(text(4))
            low, high, value, file = (params[k] for k in ("low", "high", "value", "file"))
            spec.low, spec.high, spec.value = (None if isinstance(v, str) else v
                                               for v in (low, high, value))
            spec.file = file if isinstance(file, str) else None
            self._error(f"{where}.params", None)
        except ValueError as exc:
            self._error(f"{where}.params", str(exc))
        try:
            spec.dynamic = parse_dynamic(text(5))
            self._error(f"{where}.dynamic", None)
        except ValueError as exc:
            self._error(f"{where}.dynamic", str(exc))

    def add_row(self) -> None:
        with self.session.edit(self.part, self) as recipe:
            taken = {s.name for s in recipe.inputs}
            n = len(recipe.inputs)
            name = next(f"input_{i}" for i in range(n, n + 100) if f"input_{i}" not in taken)
            recipe.inputs.append(InputSpec(name=name, shape=[1]))
            self.refresh()
            self.table.selectRow(len(recipe.inputs) - 1)

    def edit_dynamic_axes(self, row: int) -> DynamicAxesDialog | None:
        """Open the per-axis toggles for input `row`; the recipe changes when it is accepted."""
        from onnx_studio.app.form.dynamic_axes import DynamicAxesDialog  # loaded when first opened

        recipe = self.session.recipe
        if not 0 <= row < len(recipe.inputs):
            row = 0 if recipe.inputs else -1
        if row < 0:
            return None
        spec = recipe.inputs[row]
        known = list(recipe.dynamic_dims())
        dialog = DynamicAxesDialog(spec.name, spec.shape, spec.dynamic, known, self)

        def apply() -> None:
            with self.session.edit(self.part, self):
                spec.dynamic = dialog.dynamic()
                self.session.set_parse_error(f"inputs[{row}].dynamic", None)
                self.refresh()

        dialog.accepted.connect(apply)
        dialog.open()
        return dialog


class OutputsTable(_TensorTable):
    """`recipe.outputs`: names and dynamic axes (the exporter names them output_N otherwise)."""

    part = "outputs"

    columns = ("Name", "Dynamic axes")
    hints = ("the graph output's name, in the order forward() returns them",)

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__("Outputs", session, parent)
        self.table.setColumnWidth(0, 160)

    def items(self) -> list[OutputSpec]:
        return self.session.recipe.outputs

    def prefix(self) -> str:
        return "outputs"

    def field_keys(self) -> tuple[str, ...]:
        return ("name", "dynamic")

    def _table_height(self) -> int:
        rows = max(self.table.rowCount(), 1)
        return self.table.horizontalHeader().height() + 26 * min(rows, 3) + 4 + self._scroll()

    def _fill_row(self, row: int, spec: InputSpec | OutputSpec) -> None:
        self._set_text(row, 0, spec.name)
        self._set_text(row, 1, format_dynamic(spec.dynamic))

    def _read_row(self, row: int) -> None:
        spec = self.session.recipe.outputs[row]
        name = self.table.item(row, 0)
        dyn = self.table.item(row, 1)
        spec.name = name.text().strip() if name else ""
        try:
            spec.dynamic = parse_dynamic(dyn.text() if dyn else "")
            self._error(f"outputs[{row}].dynamic", None)
        except ValueError as exc:
            self._error(f"outputs[{row}].dynamic", str(exc))

    def add_row(self) -> None:
        with self.session.edit(self.part, self) as recipe:
            taken = {s.name for s in recipe.outputs}
            n = len(recipe.outputs)
            name = next(f"output_{i}" for i in range(n, n + 100) if f"output_{i}" not in taken)
            recipe.outputs.append(OutputSpec(name=name))
            self.refresh()


__all__ = ["DTYPES", "InputsTable", "OutputsTable", "parse_dynamic", "parse_shape"]
