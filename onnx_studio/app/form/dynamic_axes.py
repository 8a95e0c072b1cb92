"""A dialog with one toggle per axis of an input, each with a dimension name.

The names of dimensions already used elsewhere in the recipe are offered in each axis's list,
so sharing a dimension between tensors is a choice from the list rather than retyping a name.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

DEFAULT_NAMES = ("batch", "sequence", "height", "width", "channels")


class DynamicAxesDialog(QDialog):
    """Toggle axes of `shape` dynamic and name them; `dynamic()` is the result."""

    def __init__(self, tensor: str, shape: list[int], dynamic: dict[int, str],
                 known_names: list[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Dynamic axes of {tensor}")
        self.toggles: list[QCheckBox] = []
        self.names: list[QComboBox] = []
        grid = QGridLayout()
        grid.addWidget(QLabel("Axis"), 0, 0)
        grid.addWidget(QLabel("Dimension name (the same name = the same dimension)"), 0, 1)
        offered = list(dict.fromkeys([*known_names, *DEFAULT_NAMES]))
        for axis, size in enumerate(shape):
            toggle = QCheckBox(f"{axis}  (example size {size})")
            name = QComboBox()
            name.setEditable(True)
            name.addItems(offered)
            current = dynamic.get(axis)
            name.setCurrentText(current or (offered[0] if axis == 0 and offered else
                                            f"dim_{axis}"))
            toggle.setChecked(current is not None)
            name.setEnabled(current is not None)
            toggle.toggled.connect(name.setEnabled)
            grid.addWidget(toggle, axis + 1, 0)
            grid.addWidget(name, axis + 1, 1)
            self.toggles.append(toggle)
            self.names.append(name)
        if not shape:
            grid.addWidget(QLabel("A scalar has no axes."), 1, 0, 1, 2)
        self.error = QLabel()
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(grid)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)

    def dynamic(self) -> dict[int, str]:
        return {axis: name.currentText().strip()
                for axis, (toggle, name) in enumerate(zip(self.toggles, self.names, strict=True))
                if toggle.isChecked()}

    def _accept(self) -> None:
        bad = [n for n in self.dynamic().values() if not n.isidentifier()]
        if bad:
            self.error.setText(f"{bad[0]!r}: a name holds letters, digits and _ only.")
            return
        self.accept()
