"""The Model group: source file or example, candidates found in a .py, kwargs, checkpoint.

A view of the session's `recipe.model`: it shows the model description the session found and
writes every edit back through the session.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
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

from onnx_studio.app.form import marks
from onnx_studio.app.recipes import ExampleRecipe, format_table, parse_table, relative_source
from onnx_studio.app.session import ExportSession
from onnx_studio.engine.recipe import is_folder_source

if TYPE_CHECKING:
    from onnx_studio.engine.protocol import Candidate, SourceDescription

MODEL_FILTER = "Models (*.py *.pt2 *.pt *.pth);;All files (*)"
TRUST = "model.trust_pickle"  # the field of the pickle-trust box (problems, not applicable)
CHECKPOINT_FILTER = "Checkpoints (*.pt *.pth *.bin *.safetensors);;All files (*)"
GALLERY_PROMPT = "Choose an example…"  # the gallery's first item, before its examples


class ModelForm(QGroupBox):
    """A view of the session's `recipe.model`; edits go through the session."""

    # an example picked: the window loads it, once unsaved edits are saved or let go
    exampleChosen = Signal(object)  # Path of the example recipe

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__("Model", parent)
        self.session = session
        self.dark = False
        self._candidates: list[Candidate] = []

        self.source = QLineEdit()
        self.source.setPlaceholderText("net.py:Net, model.pt2, scripted.pt or example:alexnet")
        self.source.setToolTip("A .py file and the class or factory in it (file.py:Name), an "
                               "ExportedProgram .pt2, a TorchScript or pickled .pt, or an example")
        self.browse = QPushButton("Browse…")
        self.examples = QComboBox()
        self.examples.setToolTip("Load one of the example recipes (replaces the form)")
        self.examples.addItem(GALLERY_PROMPT, None)  # the examples: set_examples
        self.candidates = QListWidget()
        self.candidates.setMaximumHeight(64)
        # a long signature wraps in the form's width: the list never scrolls sideways
        self.candidates.setWordWrap(True)
        self.candidates.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.candidates.setResizeMode(QListWidget.ResizeMode.Adjust)
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
        self.workdir = QLineEdit()
        self.workdir.setPlaceholderText("optional: the folder the model's files import from")
        self.workdir.setToolTip("On sys.path and the current folder while the model loads: for "
                                "a .py that imports its siblings, or a pickled module saved "
                                "next to its .py (relative to the recipe)")
        self.workdir_browse = QPushButton("Browse…")
        self.trust = QCheckBox("Trust this pickle file (loading it runs its code)")
        self.trust_code = QCheckBox("Run this folder's model code (config.json's auto_map)")
        self.trust_code.setToolTip("A Hugging Face folder that holds its own modeling files: "
                                   "loading it runs them. Tick only for a folder you trust")
        self.script = QCheckBox("torch.jit.script the module first")
        self._tips: dict[QWidget, str] = {
            self.trust: "Loading a pickled module runs code from the file",
            self.script: "Script the module with torch.jit.script before the export "
                         "(TorchScript exporter)",
            self.checkpoint: "An optional state_dict loaded into the model (weights_only)",
            self.checkpoint_browse: "Choose a checkpoint file"}
        for widget, tip in self._tips.items():
            widget.setToolTip(tip)
        # the form's fields a source may make meaningless (model.* of NOT_APPLICABLE)
        self._applies_to: tuple[tuple[QWidget, str], ...] = (
            (self.checkpoint, "model.checkpoint"), (self.checkpoint_browse, "model.checkpoint"),
            (self.trust, TRUST), (self.script, "model.script"))

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
        row.addWidget(self.workdir, 1)
        row.addWidget(self.workdir_browse)
        workdir_label = QLabel("&Working folder")
        workdir_label.setBuddy(self.workdir)
        grid.addWidget(workdir_label, 7, 0)
        grid.addLayout(row, 7, 1)
        # one per row: side by side they need more width than a 1024-pixel screen leaves
        grid.addWidget(self.trust, 8, 0, 1, 2)
        grid.addWidget(self.trust_code, 9, 0, 1, 2)  # shown for a Hugging Face folder only
        grid.addWidget(self.script, 10, 0, 1, 2)

        self.source.editingFinished.connect(self._source_edited)
        self.browse.clicked.connect(self._browse_source)
        self.examples.activated.connect(self._example_activated)
        self.candidates.itemActivated.connect(self._candidate_activated)
        self.candidates.itemClicked.connect(self._candidate_activated)
        self.kwargs.editingFinished.connect(self._kwargs_edited)
        self.checkpoint.editingFinished.connect(self._checkpoint_edited)
        self.checkpoint_browse.clicked.connect(self._browse_checkpoint)
        self.workdir.editingFinished.connect(self._workdir_edited)
        self.workdir_browse.clicked.connect(self._browse_workdir)
        self.trust.toggled.connect(self._flags_edited)
        self.trust_code.toggled.connect(self._trust_code_edited)
        self.script.toggled.connect(self._flags_edited)
        self.set_candidates([], [], None)
        session.recipeChanged.connect(self.refresh)
        session.recipeEdited.connect(self._recipe_edited)
        session.descriptionChanged.connect(self._description_changed)
        session.readinessChanged.connect(self._readiness_changed)

    # ----------------------------------------------------------------- session -> form

    def _recipe_edited(self, part: str, origin: object) -> None:
        if part == "model" and origin is not self:
            self.refresh()
        elif part == "model":
            self._follow_source()

    def _follow_source(self) -> None:
        """Disable, with the reason as the tooltip, what does not apply to the source (a
        Hugging Face folder: checkpoint, pickle trust, scripting)."""
        na = self.session.not_applicable
        for widget, field in self._applies_to:
            widget.setEnabled(field not in na)
            widget.setToolTip(self._tip(widget, field))

    def _tip(self, widget: QWidget, field: str) -> str:
        """A field's tooltip when nothing is wrong: why it does not apply, or what it is."""
        return self.session.not_applicable.get(field) or self._tips[widget]

    def _readiness_changed(self) -> None:
        self.mark(self.session.problems)

    def _description_changed(self, description: SourceDescription | None) -> None:
        if description is None:
            self.set_candidates([], [], None)
        elif description.kind == "hf":  # its tasks are picked in the Hugging Face group
            self.set_candidates([], [], description.error)
        else:
            self.set_candidates(list(description.candidates),
                                list(description.forward_params), description.error)

    def refresh(self) -> None:
        spec = self.session.recipe.model
        shown = [(self.source, spec.source), (self.checkpoint, spec.checkpoint or ""),
                 (self.workdir, spec.workdir or "")]
        if "model.kwargs" not in self.session.parse_errors:  # the text being fixed stays
            shown.append((self.kwargs, format_table(spec.kwargs)))
        for widget, text in shown:
            if widget.text() != text:
                widget.setText(text)
        for box, value in ((self.trust, spec.trust_pickle), (self.script, spec.script),
                           (self.trust_code, spec.trust_remote_code)):
            box.blockSignals(True)
            box.setChecked(value)
            box.blockSignals(False)
        self.trust_code.setVisible(is_folder_source(spec.source) or spec.trust_remote_code)
        self._follow_source()

    def set_examples(self, examples: list[ExampleRecipe]) -> None:
        self.examples.clear()
        self.examples.addItem(GALLERY_PROMPT, None)
        for example in examples:
            self.examples.addItem(example.title, example)
            self.examples.setItemData(self.examples.count() - 1, example.description,
                                      Qt.ItemDataRole.ToolTipRole)

    def set_candidates(self, candidates: list[Candidate], forward: list[str],
                       error: str | None) -> None:
        """Show what the describe job found in the source file."""
        self._candidates = candidates
        self.candidates.clear()
        for cand in candidates:
            params = ", ".join(cand.params)
            doc = (cand.doc or "").strip().splitlines()
            text = f"{cand.name}({params})  — {cand.kind or 'class'}"
            if doc:
                text += f" — {doc[0]}"
            item = QListWidgetItem(text)
            item.setData(Qt.ItemDataRole.UserRole, cand)
            self.candidates.addItem(item)
        chosen = self.session.recipe.model.source.rpartition(":")[2]
        for row in range(self.candidates.count()):
            if self._candidates[row].name == chosen:
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

    # ----------------------------------------------------------------- form -> session

    def set_source(self, text: str) -> None:
        """Set the model source (from a dialog, a drop or a candidate) and describe it."""
        self.source.setText(text)
        self._source_edited()

    def _source_edited(self) -> None:
        self.session.set_source(self.source.text().strip(), self)

    def _browse_source(self) -> None:
        from PySide6.QtWidgets import QFileDialog  # a dialog: loaded when first opened

        start = str(self.session.recipe.base_dir)
        path, _ = QFileDialog.getOpenFileName(self, "Model file", start, MODEL_FILTER)
        if path:
            self.set_source(path)

    def _example_activated(self, index: int) -> None:
        example = self.examples.itemData(index)
        self.examples.setCurrentIndex(0)
        if example is not None:
            self.exampleChosen.emit(example.path)

    def _candidate_activated(self, item: QListWidgetItem) -> None:
        self.session.choose_candidate(item.data(Qt.ItemDataRole.UserRole))

    def _kwargs_edited(self) -> None:
        with self.session.edit("model", self) as recipe:
            try:
                values = parse_table(self.kwargs.text())
            except ValueError as exc:
                self.session.set_parse_error("model.kwargs", f"Arguments: {exc}.")
            else:
                self.session.set_parse_error("model.kwargs", None)
                recipe.model.kwargs = values

    def _checkpoint_edited(self) -> None:
        with self.session.edit("model", self) as recipe:
            recipe.model.checkpoint = self.checkpoint.text().strip() or None

    def _browse_checkpoint(self) -> None:
        from PySide6.QtWidgets import QFileDialog

        path, _ = QFileDialog.getOpenFileName(self, "Checkpoint",
                                              str(self.session.recipe.base_dir),
                                              CHECKPOINT_FILTER)
        if path:
            self.checkpoint.setText(path)
            self._checkpoint_edited()

    def _workdir_edited(self) -> None:
        with self.session.edit("model", self) as recipe:
            recipe.model.workdir = self.workdir.text().strip() or None

    def _browse_workdir(self) -> None:
        from PySide6.QtWidgets import QFileDialog

        path = QFileDialog.getExistingDirectory(self, "Working folder",
                                                str(self.session.recipe.base_dir))
        if path:
            self.workdir.setText(relative_source(Path(path), self.session.recipe.base_dir))
            self._workdir_edited()

    def _flags_edited(self) -> None:
        with self.session.edit("model", self) as recipe:
            recipe.model.trust_pickle = self.trust.isChecked()
            recipe.model.script = self.script.isChecked()

    def _trust_code_edited(self) -> None:
        """The folder's own code may (not) run: its tasks are described again with it."""
        with self.session.edit("model", self) as recipe:
            recipe.model.trust_remote_code = self.trust_code.isChecked()
        self.session.describe()

    # ----------------------------------------------------------------- problems

    def mark(self, problems: dict[str, str]) -> None:
        marks.mark(self.source, marks.problems_under(problems, "model.source"), self.dark,
                   "A .py file and the class or factory in it (file.py:Name), a .pt2, a .pt "
                   "or an example")
        marks.mark(self.kwargs, marks.problems_under(problems, "model.kwargs"), self.dark)
        marks.mark(self.checkpoint, marks.problems_under(problems, "model.checkpoint"),
                   self.dark, self._tip(self.checkpoint, "model.checkpoint"))
        marks.mark(self.workdir, marks.problems_under(problems, "model.workdir"), self.dark)
        marks.mark(self.trust, problems.get(TRUST), self.dark, self._tip(self.trust, TRUST))
