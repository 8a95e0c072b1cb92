"""How each input reaches forward(): by keyword or not, tensor or constant; dimension bounds.

`ArgumentEditor` edits the input selected in the inputs table: passed by keyword, its kind
(tensor, or a bool/int/float/str/None constant fixed into the file) and the constant's value
with a widget fit for its type; "Use forward()'s default" reads the describe job's signature.
`DimBoundsTable` gives each named dynamic dimension an optional min and max (torch.export.Dim
bounds; validation stays inside them). Both are views of the session's recipe, like the tables.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from onnx_studio.app.cell_tips import show_whole_text
from onnx_studio.app.form import marks
from onnx_studio.app.form.tensor_tables import InputsTable
from onnx_studio.app.session import ExportSession
from onnx_studio.engine.recipe import (
    INPUT_KINDS,
    DimSpec,
    InputSpec,
    is_folder_source,
    split_source,
)

KIND_LABELS = {"tensor": "tensor", "bool": "bool constant", "int": "int constant",
               "float": "float constant", "str": "string constant", "none": "None"}
# a bound's spin box shows this at its lowest value: no bound on that side
UNBOUNDED = "none"
INT_RANGE = (-(2**31), 2**31 - 1)
FRESH_VALUES: dict[str, bool | int | float | str] = {"bool": False, "int": 0, "float": 0.0,
                                                   "str": ""}


class ArgumentEditor(QGroupBox):
    """The selected input: passed by keyword, tensor or constant, and the constant's value."""

    def __init__(self, session: ExportSession, table: InputsTable,
                 parent: QWidget | None = None) -> None:
        super().__init__("Selected input: how forward() gets it", parent)
        self.session = session
        self.inputs_table = table
        self.dark = False
        self._filling = False
        self.keyword = QCheckBox("Pass by keyword (name=value)")
        self.kind = QComboBox()
        for kind in INPUT_KINDS:
            self.kind.addItem(KIND_LABELS[kind], kind)
        self.bool_value = QCheckBox("True")
        self.int_value = QSpinBox()
        self.int_value.setRange(*INT_RANGE)
        self.float_value = QDoubleSpinBox()
        self.float_value.setDecimals(6)
        self.float_value.setRange(-1e12, 1e12)
        self.str_value = QLineEdit()
        self.none_label = QLabel("forward() gets None")
        self.tensor_label = QLabel("an input of the ONNX file (shape, dtype, fill above)")
        self.values = QStackedWidget()
        self._pages = {"tensor": self.tensor_label, "bool": self.bool_value,
                       "int": self.int_value, "float": self.float_value, "str": self.str_value,
                       "none": self.none_label}
        for widget in self._pages.values():
            self.values.addWidget(widget)
        self.from_forward = QPushButton("Use forward()'s default")
        self.from_forward.setToolTip("Set kind, value and keyword from forward()'s parameter "
                                     "of this name: its default, else its annotation")
        self.input_label = QLabel()
        form = QFormLayout()
        form.addRow("Input", self.input_label)
        form.addRow("Kind", self.kind)
        form.addRow("Value", self.values)
        row = QHBoxLayout()
        row.addWidget(self.keyword)
        row.addStretch(1)
        row.addWidget(self.from_forward)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.addLayout(form)
        layout.addLayout(row)

        table.table.itemSelectionChanged.connect(self.refresh)
        session.recipeChanged.connect(self.refresh)
        session.recipeEdited.connect(lambda part, origin: self.refresh()
                                     if part == "inputs" and origin is not self else None)
        session.descriptionChanged.connect(lambda _d: self.refresh())
        session.readinessChanged.connect(self._mark)
        self.keyword.toggled.connect(lambda _v: self._write())
        self.kind.currentIndexChanged.connect(lambda _i: self._write())
        self.bool_value.toggled.connect(lambda _v: self._write())
        self.int_value.valueChanged.connect(lambda _v: self._write())
        self.float_value.valueChanged.connect(lambda _v: self._write())
        self.str_value.textEdited.connect(lambda _t: self._write())
        self.from_forward.clicked.connect(self.use_forward_default)
        self.refresh()

    def row(self) -> int:
        """The selected input's row, or -1."""
        row = self.inputs_table.table.currentRow()
        return row if 0 <= row < len(self.session.recipe.inputs) else -1

    def spec(self) -> InputSpec | None:
        row = self.row()
        return self.session.recipe.inputs[row] if row >= 0 else None

    def forward_param(self) -> Any:
        """The describe job's forward() parameter named like the selected input, or None."""
        spec = self.spec()
        description = self.session.description
        if spec is None or description is None:
            return None
        # the session describes the file; the source names the class (or factory) used
        name = split_source(self.session.recipe.model.source)[1]
        chosen = next((c for c in description.candidates if c.name == name), None)
        signature = chosen.signature if chosen is not None else description.forward_signature
        return next((p for p in signature if p.name == spec.argument), None)

    def refresh(self) -> None:
        spec = self.spec()
        self.setEnabled(spec is not None)
        self._filling = True
        try:
            if spec is None:
                self.input_label.setText("select a row of the inputs")
                return
            self.input_label.setText(spec.name)
            self.keyword.setChecked(spec.keyword)
            self.kind.setCurrentIndex(max(self.kind.findData(spec.kind), 0))
            value = spec.const
            if spec.kind == "bool":
                self.bool_value.setChecked(bool(value))
            elif spec.kind == "int" and isinstance(value, int):
                self.int_value.setValue(max(INT_RANGE[0], min(INT_RANGE[1], value)))
            elif spec.kind == "float" and isinstance(value, int | float):
                self.float_value.setValue(float(value))
            elif spec.kind == "str":
                self.str_value.setText(str(value or ""))
            self.values.setCurrentWidget(self._pages.get(spec.kind, self.tensor_label))
            param = self.forward_param()
            self.from_forward.setEnabled(param is not None)
            if param is not None:
                default = "no default" if param.default is None else f"default {param.default}"
                annotation = f": {param.annotation}" if param.annotation else ""
                self.from_forward.setToolTip(f"forward() has {param.name}{annotation} "
                                             f"({param.kind}, {default})")
        finally:
            self._filling = False
        self._mark()

    def _write(self) -> None:
        spec = self.spec()
        if self._filling or spec is None:
            return
        row = self.row()
        with self.session.edit("inputs", self):
            spec.keyword = self.keyword.isChecked()
            kind = str(self.kind.currentData())
            changed = kind != spec.kind
            spec.kind = kind
            if kind == "tensor" or kind == "none":
                spec.const = None
            elif changed:  # a fresh value of the new type, not the old one's
                spec.const = FRESH_VALUES[kind]
            elif kind == "bool":
                spec.const = self.bool_value.isChecked()
            elif kind == "int":
                spec.const = self.int_value.value()
            elif kind == "float":
                spec.const = self.float_value.value()
            else:
                spec.const = self.str_value.text()
        self.inputs_table.refresh()
        self.inputs_table.table.selectRow(row)
        if changed:
            self.refresh()

    def use_forward_default(self) -> None:
        """Kind and value from forward()'s parameter; keyword when it is keyword-only."""
        spec, param = self.spec(), self.forward_param()
        if spec is None or param is None:
            return
        from onnx_studio.engine.source.arguments import constant_for  # ast: with a file's signature

        kind, value = constant_for(param)
        row = self.row()
        with self.session.edit("inputs", self):
            spec.kind, spec.const = kind, value
            if param.kind == "keyword":
                spec.keyword = True
        self.inputs_table.refresh()
        self.inputs_table.table.selectRow(row)
        self.refresh()

    def _mark(self) -> None:
        row = self.row()
        problems = self.session.problems
        sentence = problems.get(f"inputs[{row}].const") or problems.get(f"inputs[{row}].kind")
        shown = self.values.currentWidget()
        if shown is not None:
            marks.mark(shown, sentence, self.dark, "")
        structure = problems.get(self.inputs_table.part)  # the inputs' structure as a whole
        marks.mark(self.keyword, structure if structure and "keyword" in structure else None,
                   self.dark, "")


class DimBoundsTable(QGroupBox):
    """Optional min/max of each named dynamic dimension (the recipe's [dims])."""

    columns = ("Dimension", "Min", "Max")

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__("Dynamic dimension bounds (optional)", parent)
        self.session = session
        self.dark = False
        self._filling = False
        self.table = QTableWidget(0, len(self.columns))
        self.table.setHorizontalHeaderLabels(list(self.columns))
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setStretchLastSection(True)
        show_whole_text(self.table)
        self.note = QLabel("Validation tries sizes inside the bounds and lists the others as "
                           "not tried.")
        self.note.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.addWidget(self.table)
        layout.addWidget(self.note)
        session.recipeChanged.connect(self.refresh)
        session.recipeEdited.connect(lambda _p, origin: self.refresh()
                                     if origin is not self else None)
        session.readinessChanged.connect(self._mark)
        self.refresh()

    def names(self) -> list[str]:
        """The dimensions the inputs name, then bounded ones no axis uses (marked wrong); none
        for a Hugging Face source (its fixed sizes are in the Hugging Face group)."""
        recipe = self.session.recipe
        if is_folder_source(recipe.model.source):
            return []
        used = list(recipe.dynamic_dims())
        return used + [name for name in recipe.dims if name not in used]

    def spin(self, row: int, col: int) -> QSpinBox:
        widget = self.table.cellWidget(row, col)
        assert isinstance(widget, QSpinBox)
        return widget

    def refresh(self) -> None:
        names = self.names()
        self.setVisible(bool(names))
        self._filling = True
        try:
            self.table.setRowCount(len(names))
            for row, name in enumerate(names):
                item = self.table.item(row, 0)
                if item is None:
                    item = QTableWidgetItem()
                    self.table.setItem(row, 0, item)
                item.setText(name)
                bounds = self.session.recipe.dims.get(name, DimSpec())
                for col, value in ((1, bounds.min), (2, bounds.max)):
                    spin = self.table.cellWidget(row, col)
                    if not isinstance(spin, QSpinBox):
                        spin = QSpinBox()
                        spin.setRange(-1, INT_RANGE[1])
                        spin.setSpecialValueText(UNBOUNDED)  # shown at -1
                        spin.valueChanged.connect(lambda _v, s=spin: self._changed(s))
                        self.table.setCellWidget(row, col, spin)
                    spin.setValue(-1 if value is None else value)
            self.table.setFixedHeight(self.table.horizontalHeader().height()
                                      + 26 * min(max(len(names), 1), 4) + 4)
        finally:
            self._filling = False
        self._mark()

    def _changed(self, spin: QSpinBox) -> None:
        if self._filling:
            return
        for row, name in enumerate(self.names()):
            if spin in (self.table.cellWidget(row, 1), self.table.cellWidget(row, 2)):
                self.set_bounds(name, self.spin(row, 1).value(), self.spin(row, 2).value())
                return

    def set_bounds(self, name: str, low: int, high: int) -> None:
        """Bound dimension `name` (-1: no bound on that side; both -1 removes the entry)."""
        with self.session.edit("inputs", self) as recipe:
            if low < 0 and high < 0:
                recipe.dims.pop(name, None)
            else:
                recipe.dims[name] = DimSpec(min=low if low >= 0 else None,
                                            max=high if high >= 0 else None)
            for stale in [n for n in recipe.dims if n not in recipe.dynamic_dims()]:
                del recipe.dims[stale]  # a dimension no axis uses any more

    def _mark(self) -> None:
        problems = self.session.problems
        for row, name in enumerate(self.names()):
            sentence = problems.get(f"dims.{name}")
            for col in (1, 2):
                widget = self.table.cellWidget(row, col)
                if widget is not None:
                    marks.mark(widget, sentence, self.dark, "")


__all__ = ["ArgumentEditor", "DimBoundsTable"]
