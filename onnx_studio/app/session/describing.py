"""Describer: what the model source offers, read by a describe job in the worker: the classes
and factories of a .py (the form picks one and names the inputs after its forward()), what a
.pt2 or TorchScript archive records, or a Hugging Face folder's tasks.

Without a worker (exit-after-paint, form tests) a file is described in this process, which
only parses it (ast) and never imports torch.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from onnx_studio.app.session.jobs import Jobs
from onnx_studio.app.session.recipe_edits import RecipeEdits
from onnx_studio.engine.recipe import is_folder_source
from onnx_studio.engine.source.kinds import PICKLE_SUFFIXES

if TYPE_CHECKING:  # the protocol loads with the first description, after the first paint
    from onnx_studio.engine.protocol import (
        Candidate,
        ErrorEvent,
        ForwardParam,
        Result,
        SourceDescription,
    )

__all__ = ["Describer"]


class Describer(QObject):
    """The description of the model source, kept current as the source changes."""

    descriptionChanged = Signal(object)  # SourceDescription of the model file, or None

    def __init__(self, edits: RecipeEdits, jobs: Jobs, use_worker: bool) -> None:
        super().__init__(edits)
        self.edits = edits
        self.jobs = jobs
        self.use_worker = use_worker
        self.description: SourceDescription | None = None
        self._name_after_describe = False  # a factory was chosen: name the inputs after it

    def set_description(self, description: SourceDescription | None) -> None:
        self.description = description
        self.descriptionChanged.emit(description)

    def describe(self) -> None:
        """Describe the model file when the source names a .py, or a Hugging Face folder's
        tasks (`descriptionChanged`)."""
        text = self.edits.recipe.model.source
        file = text.rpartition(":")[0] if ".py:" in text else text
        if is_folder_source(text):  # hf:DIR: its tasks, read from config.json by the worker
            file = text.strip()
            if not self.use_worker:
                self.set_description(None)
                return
        elif not file.endswith((".py", ".pt2", *PICKLE_SUFFIXES)):
            self.set_description(None)  # a .pt2 and a TorchScript archive record forward()
            return
        from onnx_studio.engine.protocol import DescribeRequest, SourceDescription

        if self.use_worker:
            recipe = self.edits.recipe
            # a Hugging Face folder's own code may run to describe it, once trusted
            trusted = recipe.model.trust_remote_code and is_folder_source(text)
            request = DescribeRequest(source=file, base_dir=str(recipe.base_dir),
                                      trust_remote_code=trusted)
            self.jobs.send(request, functools.partial(self._on_describe, file))
            return
        from onnx_studio.engine.source.describe import describe

        found = describe(file, self.edits.recipe.base_dir)
        self._described(file, SourceDescription.from_dict(dataclasses.asdict(found)))

    def _on_describe(self, file: str, final: Result | ErrorEvent) -> None:
        from onnx_studio.engine.protocol import DescribeResult, ErrorEvent, SourceDescription

        if isinstance(final, DescribeResult):
            self._described(file, final.description)
        else:
            error = final.error.message if isinstance(final, ErrorEvent) else str(final)
            self._described(file, SourceDescription(kind="unknown", error=error))

    def _described(self, file: str, description: SourceDescription) -> None:
        current = self.edits.recipe.model.source
        if not current.startswith(file):
            return  # the source changed meanwhile
        self.set_description(description)
        if is_folder_source(current):  # its files' inputs come from the task, not the form
            return
        name_inputs, self._name_after_describe = self._name_after_describe, False
        if ".py:" not in current and len(description.candidates) == 1:
            # One class in the file: pick it, and name the inputs after its forward().
            self.choose_candidate(description.candidates[0])
        elif (name_inputs or not self.edits.recipe.inputs) \
                and (params := _named_params(current, description))[0]:
            # a new model (a .pt2's signature, a named class): its inputs, named as it names them
            self.edits.name_inputs(*params)

    def choose_candidate(self, candidate: Candidate) -> None:
        """Use a class or factory of the model file, and name the inputs after forward()."""
        edits = self.edits
        source = edits.recipe.model.source
        file = source.rpartition(":")[0] if ".py:" in source else source
        if f"{file}:{candidate.name}" == source:
            return
        with edits.edit("model") as recipe:
            recipe.model.source = f"{file}:{candidate.name}"
        named = ".py:" in source
        edits.follow_model(source, clear=False, arguments=named)
        if named and edits.recipe.outputs:  # another model of the file: its own output names
            with edits.edit("outputs") as recipe:
                recipe.outputs = []
                edits.clear_parse_errors("outputs[")
        if candidate.kind != "class":
            # a factory's own parameters are not the inputs: the model it returns names them
            self._name_after_describe = True
            self.describe()
            return
        if self.description is not None:  # forward() shown is the chosen class's
            self.set_description(dataclasses.replace(
                self.description, forward_params=list(candidate.params), error=None))
        if candidate.params:
            edits.name_inputs(list(candidate.params), candidate.signature)


def _named_params(source: str, description: SourceDescription
                  ) -> tuple[list[str], list[ForwardParam]]:
    """forward()'s parameters of the model `source` names (`net.py:Beta`), and as the file
    writes them: the file was described whole, so its description's own are the first
    class's."""
    _, _, name = source.rpartition(":") if ".py:" in source else ("", "", "")
    named = next((c for c in description.candidates if c.name == name and c.kind == "class"),
                 None)
    if named is not None:
        return list(named.params), list(named.signature)
    return list(description.forward_params), list(description.forward_signature)
