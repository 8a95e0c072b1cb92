"""Load a Hugging Face folder offline: the config, the model for a task, the files to export."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import StudioError, one_line
from engine.source.hf.tasks import GENERATION_TASKS, SEQ2SEQ_TASKS, TASKS, default_task, with_past

PREFIXES = ("hf:", "hf-config:")


def is_hf_source(source: str) -> bool:
    """True for `hf:PATH` and `hf-config:PATH`."""
    return source.strip().startswith(PREFIXES)


def split_hf_source(source: str, base_dir: Path) -> tuple[Path, bool]:
    """(folder, weights): the folder the source names and whether its weights are loaded."""
    text = source.strip()
    weights = text.startswith("hf:")
    folder = Path(text.split(":", 1)[1].strip())
    return (folder if folder.is_absolute() else base_dir / folder), weights


@dataclass
class HfModel:
    """A loaded Hugging Face model, the task it is exported for, and the parts to export."""

    model: Any
    config: Any
    task: str
    folder: Path
    parts: list[Any] = field(default_factory=list)  # engine.source.hf.wrappers.ExportPart

    @property
    def generates(self) -> bool:
        return self.task in GENERATION_TASKS

    @property
    def seq2seq(self) -> bool:
        return self.task in SEQ2SEQ_TASKS

    @property
    def with_past(self) -> bool:
        return with_past(self.task)


def _offline() -> None:
    # never a download: the folder is the whole model
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def load_config(folder: Path) -> Any:
    """The folder's config.json as a transformers config; a `source` error (exit 2) if absent."""
    _offline()
    if not (folder / "config.json").is_file():
        raise StudioError("source", f"{folder} has no config.json; name a folder written by "
                          "save_pretrained.", exit_code=2)
    import transformers

    try:
        return transformers.AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except Exception as exc:
        raise StudioError("source", f"Cannot read {folder / 'config.json'}: {one_line(exc)}.",
                          "Check the config's model_type is one transformers knows.",
                          details=repr(exc), exit_code=2) from exc


def load_hf(source: str, base_dir: Path, task: str | None = None, seed: int = 0) -> HfModel:
    """Load the model `source` names for `task` (None: the config's), in eval mode, eager
    attention, on the CPU; `hf-config:` builds random weights from `seed`."""
    from engine.source.hf.parts import export_parts

    folder, weights = split_hf_source(source, base_dir)
    if not folder.is_dir():
        raise StudioError("source", f"The folder {folder} does not exist; name a folder written "
                          "by save_pretrained.", exit_code=2)
    config = load_config(folder)
    task = task or default_task(config)
    if task not in TASKS:
        raise StudioError("recipe", f"Unknown task {task!r}; choose one of "
                          f"{', '.join(TASKS)}.", exit_code=2)
    import torch
    import transformers

    auto = getattr(transformers, TASKS[task])
    try:
        if weights:
            model = auto.from_pretrained(str(folder), local_files_only=True,
                                         attn_implementation="eager")
        else:
            torch.manual_seed(seed)
            model = auto.from_config(config, attn_implementation="eager")
    except Exception as exc:
        raise StudioError(
            "source", f"Cannot load {folder.name} for the task {task}: {one_line(exc)}.",
            f"Choose a task this model supports with --task (its config names "
            f"{', '.join(getattr(config, 'architectures', None) or ['no architecture'])}).",
            details=repr(exc), exit_code=2) from exc
    model.eval()
    loaded = HfModel(model=model, config=model.config, task=task, folder=folder)
    loaded.parts = export_parts(loaded)
    return loaded
