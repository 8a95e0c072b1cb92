"""The files of a multi-file export in the Graph tab: a Hugging Face folder holds several .onnx
files (an encoder and its decoders); this row picks the one the graph shows and, side by side,
the one shown beside it. Light to import (Qt widgets only)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QWidget

# the order an export writes them (Optimum's names); other .onnx files follow by name
ORDER = ("model.onnx", "encoder_model.onnx", "decoder_model.onnx",
         "decoder_with_past_model.onnx", "decoder_model_merged.onnx")


def export_files(folder: Path) -> list[Path]:
    """The .onnx files in `folder`, in the order an export writes them."""
    rank = {name: i for i, name in enumerate(ORDER)}
    found = [p for p in folder.glob("*.onnx") if p.is_file()]
    return sorted(found, key=lambda p: (rank.get(p.name, len(ORDER)), p.name))


class FileBar(QWidget):
    """File: [left ▾]  [Side by side]  [right ▾] — shown when an export wrote several files.

    `fileChosen(side, path)`: the user picked the file of side 0 (the graph, on the left) or
    1 (the one beside it); `sideBySide(on)`: the toggle.
    """

    fileChosen = Signal(int, Path)
    sideBySide = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.files: list[Path] = []
        self.left = QComboBox()
        self.left.setToolTip("The file of the export the graph shows")
        self.right = QComboBox()
        self.right.setToolTip("The file shown beside it")
        self.toggle = QPushButton("Side by side")
        self.toggle.setCheckable(True)
        self.toggle.setToolTip("Show two of the export's files next to each other, each in "
                               "its own graph (an encoder beside its decoder)")
        row = QHBoxLayout(self)
        row.setContentsMargins(4, 2, 4, 0)
        row.addWidget(QLabel("File:"))
        row.addWidget(self.left)
        row.addWidget(self.toggle)
        row.addWidget(self.right)
        row.addStretch(1)
        self.right.setVisible(False)
        self.left.activated.connect(lambda i: self._chosen(0, i))
        self.right.activated.connect(lambda i: self._chosen(1, i))
        self.toggle.toggled.connect(self._toggled)
        self.setVisible(False)

    def set_files(self, files: list[Path]) -> None:
        """List `files` on both sides (the first on the left, the second on the right); the
        row is shown only for two or more."""
        self.files = list(files)
        for side, combo in enumerate((self.left, self.right)):
            combo.clear()
            combo.addItems([f.name for f in self.files])
            combo.setCurrentIndex(min(side, len(self.files) - 1))
        self.setVisible(len(self.files) > 1)

    def chosen(self, side: int) -> Path | None:
        """The file of `side` (0 left, 1 right) now chosen; None when there is none."""
        index = (self.left, self.right)[side].currentIndex()
        return self.files[index] if 0 <= index < len(self.files) else None

    def choose(self, side: int, name: str) -> None:
        """Pick the file called `name` on `side`, as the user would."""
        index = [f.name for f in self.files].index(name)
        combo = (self.left, self.right)[side]
        combo.setCurrentIndex(index)
        self._chosen(side, index)

    def _chosen(self, side: int, index: int) -> None:
        if 0 <= index < len(self.files):
            self.fileChosen.emit(side, self.files[index])

    def _toggled(self, on: bool) -> None:
        self.right.setVisible(on)
        self.sideBySide.emit(on)
