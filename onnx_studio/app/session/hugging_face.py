"""Hugging Face folders in the session: open one as the model (`hf:PATH`), pick its task, and
which of the form's fields do not apply to such a source (and why), so the form can say so.

The folder's tasks themselves come from the describe job (onnx_studio.app.session.describing).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from onnx_studio.app.session.recipe_edits import RecipeEdits
from onnx_studio.engine.recipe import Recipe, is_folder_source

__all__ = ["NOT_APPLICABLE", "TASK", "not_applicable", "open_folder", "set_task", "task_of"]

TASK = "task"  # the key of `model.kwargs` a Hugging Face source's task is written under

# field (or table) -> why it does not apply to a Hugging Face source
NOT_APPLICABLE = {
    "model.checkpoint": "A Hugging Face folder loads its own weights (from_pretrained): a "
                        "checkpoint does not apply.",
    "model.trust_pickle": "A Hugging Face folder is loaded by transformers, not unpickled: "
                          "there is no pickle file to trust.",
    "model.script": "A Hugging Face model is exported with dynamo, never torch.jit.script'ed.",
    "inputs": "A Hugging Face model's inputs come from its task (listed in the Hugging Face "
              "group above), not from this table.",
    "outputs": "A Hugging Face model's outputs are named after its task, not from this table.",
}


INPUTS_READING = ("A Hugging Face model's inputs come from its task, not from this table: the "
                  "folder is being read, and its tasks and their inputs are listed above once "
                  "it is.")
INPUTS_UNREAD = ("A Hugging Face model's inputs come from its task, not from this table; the "
                 "folder could not be read, so no task is listed (the banner says why).")


def not_applicable(recipe: Recipe, listed: bool | None = True) -> dict[str, str]:
    """The fields of the form that do not apply to the recipe's source, with the reason.
    `listed`: the Hugging Face group lists the folder's tasks (True), the folder is still being
    read (False), or could not be read (None): the inputs' reason never points at a group that
    is not shown."""
    if not is_folder_source(recipe.model.source):
        return {}
    found = dict(NOT_APPLICABLE)
    if not listed:
        found["inputs"] = INPUTS_READING if listed is False else INPUTS_UNREAD
    return found


def open_folder(edits: RecipeEdits, path: Path, forget: Callable[[], None]) -> str | None:
    """Export the folder `path` (written by save_pretrained) as `hf:PATH` into a folder
    beside it, NAME_onnx; its tasks are described for the task picker. Why not, or None.
    `forget`: forgets an .onnx the user opened (Results.forget_opened)."""
    if not (path / "config.json").is_file():
        return f"{path} has no config.json; open a folder written by save_pretrained."
    path = path.resolve()
    forget()  # an .onnx opened before is no part of a folder's export
    edits.set_source(f"hf:{path}")
    edits.set_output(str(path.with_name(f"{path.name}_onnx")))
    return None


def task_of(recipe: Recipe) -> str:
    """The task the recipe names for its Hugging Face source; "" when it names none (the
    config's default is exported)."""
    task = recipe.model.kwargs.get(TASK)
    return task if isinstance(task, str) else ""


def set_task(edits: RecipeEdits, task: str) -> None:
    """Export a Hugging Face source for `task` (written into the model's kwargs)."""
    if task_of(edits.recipe) != task:
        with edits.edit("model") as recipe:
            recipe.model.kwargs = {**recipe.model.kwargs, TASK: task}
