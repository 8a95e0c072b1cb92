"""The Model group: source file or example, candidates found in a .py, kwargs, checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QWidget,
)

from app import marks
from app.recipes import ExampleRecipe, format_table, parse_table
from engine.recipe import Recipe

MODEL_FILTER = "Models (*.py *.pt2 *.pt *.pth);;All files (*)"
CHECKPOINT_FILTER = "Checkpoints (*.pt *.pth *.bin *.safetensors);;All files (*)"


class ModelForm(QGroupBox):
    """A view of `recipe.model`; edits write straight into it and emit `changed`."""

    changed = Signal()
    describeRequested = Signal(str)  # the source text, when it names a .py file
    exampleChosen = Signal(object)  # ExampleRecipe
    candidateChosen = Signal(object)  # candidate dict: {"name", "kind", "params", "doc"}

    def __init__(self, recipe: Recipe, parent: QWidget | None = None) -> None:
        super().__init__("Model", parent)
        self.recipe = recipe
        self.parse_errors: dict[str, str] = {}
        self.dark = False
        self._candidates: list[dict[str, Any]] = []

        self.source = QLineEdit()
        self.source.setPlaceholderText("net.py:Net, model.pt2, scripted.pt or example:alexnet")
        self.source.setToolTip("A .py file and the class or factory in it (file.py:Name), an "
                               "ExportedProgram .pt2, a TorchScript or pickled .pt, or an example")
        self.browse = QPushButton("Browse…")
        self.examples = QComboBox()
        self.examples.setToolTip("Load one of the example recipes (replaces the form)")
        self.candidates = QListWidget()
        self.candidates.setMaximumHeight(64)
        self.candidates.setToolTip("Classes and factories in the file; pick one to use it and "
                                   "to name the inputs after its forward() parameters")
        self.candidates_label = QLabel("Classes and factories in the file:")
        self.forward_label = QLabel()
        self.forward_label.setWordWrap(True)
        self.kwargs = QLineEdit()
        self.kwargs.setPlaceholderText('constructor arguments: num_classes = 10, name = "x"')
        self.checkpoint = QLineEdit()
        self.checkpoint.setPlaceholderText("optional state_dict (.pt, .pth, .safetensors)")
        self.checkpoint_browse = QPushButton("Browse…")
        self.trust = QCheckBox("Trust this pickle file (loading it runs its code)")
        self.script = QCheckBox("torch.jit.script the module first")

        grid = QGridLayout(self)
        grid.setContentsMargins(8, 6, 8, 6)
        grid.setVerticalSpacing(4)
        row = QHBoxLayout()
        row.addWidget(self.source, 1)
        row.addWidget(self.browse)
        source_label = QLabel("&Source")
        source_label.setBuddy(self.source)
        grid.addWidget(source_label, 0, 0)
        grid.addLayout(row, 0, 1)
        grid.addWidget(QLabel("Examples"), 1, 0)
        grid.addWidget(self.examples, 1, 1)
        grid.addWidget(self.candidates_label, 2, 0, 1, 2)
        grid.addWidget(self.candidates, 3, 0, 1, 2)
        grid.addWidget(self.forward_label, 4, 0, 1, 2)
        grid.addWidget(QLabel("Arguments"), 5, 0)
        grid.addWidget(self.kwargs, 5, 1)
        row = QHBoxLayout()
        row.addWidget(self.checkpoint, 1)
        row.addWidget(self.checkpoint_browse)
        grid.addWidget(QLabel("Checkpoint"), 6, 0)
        grid.addLayout(row, 6, 1)
        row = QHBoxLayout()
        row.addWidget(self.trust)
        row.addWidget(self.script)
        row.addStretch(1)
        grid.addLayout(row, 7, 0, 1, 2)

        self.source.editingFinished.connect(self._source_edited)
        self.browse.clicked.connect(self._browse_source)
        self.examples.activated.connect(self._example_activated)
        self.candidates.itemActivated.connect(self._candidate_activated)
        self.candidates.itemClicked.connect(self._candidate_activated)
        self.kwargs.editingFinished.connect(self._kwargs_edited)
        self.checkpoint.editingFinished.connect(self._checkpoint_edited)
        self.checkpoint_browse.clicked.connect(self._browse_checkpoint)
        self.trust.toggled.connect(self._flags_edited)
        self.script.toggled.connect(self._flags_edited)
        self.set_candidates([], [], None)

    # ----------------------------------------------------------------- recipe -> form

    def set_recipe(self, recipe: Recipe) -> None:
        self.recipe = recipe
        self.parse_errors.clear()
        self.refresh()

    def refresh(self) -> None:
        spec = self.recipe.model
        for widget, text in ((self.source, spec.source), (self.kwargs, format_table(spec.kwargs)),
                             (self.checkpoint, spec.checkpoint or "")):
            if widget.text() != text:
                widget.setText(text)
        for box, value in ((self.trust, spec.trust_pickle), (self.script, spec.script)):
            box.blockSignals(True)
            box.setChecked(value)
            box.blockSignals(False)

    def set_examples(self, examples: list[ExampleRecipe]) -> None:
        self.examples.clear()
        self.examples.addItem("Choose an example…", None)
        for example in examples:
            self.examples.addItem(example.title, example)
            self.examples.setItemData(self.examples.count() - 1, example.description,
                                      Qt.ItemDataRole.ToolTipRole)

    def set_candidates(self, candidates: list[dict[str, Any]], forward: list[str],
                       error: str | None) -> None:
        """Show what the describe job found in the source file."""
        self._candidates = candidates
        self.candidates.clear()
        for cand in candidates:
            params = ", ".join(cand.get("params", []))
            doc = (cand.get("doc") or "").strip().splitlines()
            text = f"{cand['name']}({params})  — {cand.get('kind', 'class')}"
            if doc:
                text += f" — {doc[0]}"
            item = QListWidgetItem(text)
            item.setData(Qt.ItemDataRole.UserRole, cand)
            self.candidates.addItem(item)
        chosen = self.recipe.model.source.rpartition(":")[2]
        for row in range(self.candidates.count()):
            if self._candidates[row]["name"] == chosen:
                self.candidates.setCurrentRow(row)
        shown = bool(candidates)
        self.candidates.setVisible(shown)
        self.candidates_label.setVisible(shown)
        if error:
            self.forward_label.setText(f"Could not read the file: {error}")
        elif forward:
            self.forward_label.setText("forward(" + ", ".join(forward) + ")")
        else:
            self.forward_label.setText("")
        self.forward_label.setVisible(bool(error or forward))

    # ----------------------------------------------------------------- form -> recipe

    def set_source(self, text: str) -> None:
        """Set the model source (from a dialog, a drop or a candidate) and describe it."""
        self.source.setText(text)
        self._source_edited()

    def _source_edited(self) -> None:
        text = self.source.text().strip()
        if text == self.recipe.model.source:
            return
        self.recipe.model.source = text
        self.changed.emit()
        self.request_describe()

    def request_describe(self) -> None:
        text = self.recipe.model.source
        file = text.rpartition(":")[0] if ".py:" in text else text
        if file.endswith(".py"):
            self.describeRequested.emit(file)
        else:
            self.set_candidates([], [], None)

    def _browse_source(self) -> None:
        start = str(self.recipe.base_dir)
        path, _ = QFileDialog.getOpenFileName(self, "Model file", start, MODEL_FILTER)
        if path:
            self.set_source(path)

    def _example_activated(self, index: int) -> None:
        example = self.examples.itemData(index)
        self.examples.setCurrentIndex(0)
        if example is not None:
            self.exampleChosen.emit(example)

    def _candidate_activated(self, item: QListWidgetItem) -> None:
        cand = item.data(Qt.ItemDataRole.UserRole)
        source = self.recipe.model.source
        file = source.rpartition(":")[0] if ".py:" in source else source
        new = f"{file}:{cand['name']}"
        if new != source:
            self.recipe.model.source = new
            self.source.setText(new)
            self.changed.emit()
        self.candidateChosen.emit(cand)

    def _kwargs_edited(self) -> None:
        try:
            values = parse_table(self.kwargs.text())
        except ValueError as exc:
            self.parse_errors["model.kwargs"] = f"Arguments: {exc}."
        else:
            self.parse_errors.pop("model.kwargs", None)
            self.recipe.model.kwargs = values
        self.changed.emit()

    def _checkpoint_edited(self) -> None:
        text = self.checkpoint.text().strip()
        self.recipe.model.checkpoint = text or None
        self.changed.emit()

    def _browse_checkpoint(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Checkpoint", str(self.recipe.base_dir),
                                              CHECKPOINT_FILTER)
        if path:
            self.checkpoint.setText(path)
            self._checkpoint_edited()

    def _flags_edited(self) -> None:
        self.recipe.model.trust_pickle = self.trust.isChecked()
        self.recipe.model.script = self.script.isChecked()
        self.changed.emit()

    # ----------------------------------------------------------------- problems

    def mark(self, problems: dict[str, str]) -> None:
        marks.mark(self.source, marks.problems_under(problems, "model.source"), self.dark,
                   "A .py file and the class or factory in it (file.py:Name), a .pt2, a .pt "
                   "or an example")
        marks.mark(self.kwargs, marks.problems_under(problems, "model.kwargs"), self.dark)
        marks.mark(self.checkpoint, marks.problems_under(problems, "model.checkpoint"),
                   self.dark)
        marks.mark(self.trust, problems.get("model.trust_pickle"), self.dark,
                   "Loading a pickled module runs code from the file")


def relative_source(path: Path, base: Path) -> str:
    """Show a path relative to the recipe folder when it is inside it."""
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)
