"""The Hugging Face group: the task a `hf:` folder is exported for, its files' inputs, and the
dimensions exported at a fixed size (`[dims] NAME = { size = N }`, the CLI's --static-dim).

A view of the session's description of an `hf:` / `hf-config:` source (one candidate per task
the model's class supports in transformers' auto-model tables, the config's default first, each
with its first file's input names) and of the task in the
recipe's `model.kwargs`. The inputs are read-only: the task and the config choose them. The
key/value cache (`past_key_values.N.key/value`) is one row, "past_key_values × 2 × L layers",
that expands to the tensors.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QGroupBox,
    QLineEdit,
    QTreeWidget,
    QTreeWidgetItem,
    QWidget,
)

from onnx_studio.app.form import marks
from onnx_studio.app.session import ExportSession
from onnx_studio.app.session.hugging_face import task_of
from onnx_studio.engine.recipe import DimSpec

if TYPE_CHECKING:
    from onnx_studio.engine.protocol import Candidate, SourceDescription

__all__ = ["CACHE_PREFIX", "HfTaskForm", "fixed_sizes_text", "group_cache", "parse_fixed_sizes"]

FIXED = "dims"  # the recipe's table the fixed sizes are written to (its problems' prefix)
_FIXED_TIP = ("Dimensions exported at a fixed size instead of dynamic, e.g. "
              "sequence_length=128: for a model that fixes a size while exporting (the "
              "export warns naming it); the file then runs at that size only")


def parse_fixed_sizes(text: str) -> dict[str, int]:
    """"sequence_length=128, batch_size=1" -> {"sequence_length": 128, "batch_size": 1};
    ValueError naming the entry that is not NAME=SIZE with a size of 1 or more."""
    sizes: dict[str, int] = {}
    for entry in filter(None, (e.strip() for e in text.replace(";", ",").split(","))):
        name, eq, size = (part.strip() for part in entry.partition("="))
        if not re.fullmatch(r"[A-Za-z_]\w*", name) or not eq or not size.isdigit() \
                or int(size) < 1:
            raise ValueError(f"{entry!r} is not NAME=SIZE with a size of 1 or more "
                             "(e.g. sequence_length=128)")
        sizes[name] = int(size)
    return sizes


def fixed_sizes_text(dims: dict[str, DimSpec]) -> str:
    return ", ".join(f"{name}={dim.size}" for name, dim in dims.items() if dim.size is not None)

CACHE_PREFIX = "past_key_values"
_CACHE_NAME = re.compile(rf"^{CACHE_PREFIX}\.(\d+)\.(key|value)$")


def group_cache(names: list[str]) -> list[tuple[str, list[str]]]:
    """(row label, tensor names) per row: a name alone, or the cache's tensors under one
    label "past_key_values × 2 × L layers" where the first of them stood."""
    cache = [n for n in names if _CACHE_NAME.match(n)]
    layers = len({m.group(1) for n in cache if (m := _CACHE_NAME.match(n))})
    rows: list[tuple[str, list[str]]] = []
    for name in names:
        if name not in cache:
            rows.append((name, [name]))
        elif name == cache[0]:
            per_layer = len(cache) // layers
            rows.append((f"{CACHE_PREFIX} × {per_layer} × {layers} "
                         f"layer{'s' if layers != 1 else ''}", cache))
    return rows


class HfTaskForm(QGroupBox):
    """Task picker and read-only inputs of a Hugging Face source; hidden for other sources."""

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__("Hugging Face", parent)
        self.session = session
        self._candidates: list[Candidate] = []
        self.task = QComboBox()
        self.task.setToolTip("The task the model is exported for (Optimum's names): those "
                             "transformers has a class for; the first is the one its "
                             "config.json names")
        self.inputs = QTreeWidget()
        self.inputs.setHeaderHidden(True)
        self.inputs.setRootIsDecorated(True)
        self.inputs.setMaximumHeight(140)
        self.inputs.setToolTip("The first file's inputs, chosen by the task and the config")
        self.fixed = QLineEdit()
        self.fixed.setPlaceholderText("none: every dimension dynamic")
        self.fixed.setToolTip(_FIXED_TIP)
        self.dark = False
        layout = QFormLayout(self)
        layout.addRow("Task", self.task)
        layout.addRow("Inputs", self.inputs)
        layout.addRow("Fixed sizes", self.fixed)
        self.task.activated.connect(self._task_chosen)
        self.fixed.editingFinished.connect(self._fixed_edited)
        session.readinessChanged.connect(self._mark)
        session.descriptionChanged.connect(self._description_changed)
        session.recipeEdited.connect(self._recipe_edited)
        session.recipeChanged.connect(self.refresh)
        self._description_changed(session.description)

    def _description_changed(self, description: SourceDescription | None) -> None:
        hf = description is not None and description.kind == "hf" and not description.error
        self._candidates = list(description.candidates) if hf and description else []
        self.task.blockSignals(True)
        self.task.clear()
        for candidate in self._candidates:
            self.task.addItem(candidate.name)
        self.task.blockSignals(False)
        self.setVisible(hf)
        self.refresh()

    def _recipe_edited(self, part: str, origin: object) -> None:
        if part == "model" or (part == "inputs" and origin is not self):
            self.refresh()

    def _fixed_edited(self) -> None:
        if self.fixed.text() == fixed_sizes_text(self.session.recipe.dims):
            return
        with self.session.edit("inputs", self) as recipe:
            try:
                sizes = parse_fixed_sizes(self.fixed.text())
            except ValueError as exc:
                self.session.set_parse_error(FIXED, f"Fixed sizes: {exc}.")
            else:
                self.session.set_parse_error(FIXED, None)
                recipe.dims = {name: DimSpec(size=size) for name, size in sizes.items()}

    def _mark(self) -> None:
        marks.mark(self.fixed, marks.problems_under(self.session.problems, FIXED), self.dark,
                   _FIXED_TIP)

    def _task_chosen(self, index: int) -> None:
        if 0 <= index < len(self._candidates):
            self.session.set_task(self._candidates[index].name)

    def current_task(self) -> str:
        """The task the recipe names, else the config's default (the first); "" for none."""
        task = task_of(self.session.recipe)
        if task:
            return task
        return self._candidates[0].name if self._candidates else ""

    def refresh(self) -> None:
        """Show the recipe's task and that task's inputs, the cache as one expandable row."""
        task = self.current_task()
        index = self.task.findText(task)
        if index >= 0:
            self.task.setCurrentIndex(index)
        candidate = next((c for c in self._candidates if c.name == task), None)
        self.inputs.clear()
        for label, names in group_cache(list(candidate.params) if candidate else []):
            row = QTreeWidgetItem([label])
            if names != [label]:
                row.addChildren([QTreeWidgetItem([name]) for name in names])
            self.inputs.addTopLevelItem(row)
        if not self.fixed.hasFocus():  # never overwrite what the user is typing
            self.fixed.setText(fixed_sizes_text(self.session.recipe.dims))
