"""Hugging Face model folders as a source: `hf:PATH` (weights) and `hf-config:PATH` (config only).

Public API: `is_hf_source`, `load_hf` (the model, its task and the files to export),
`TASKS`, `default_task`.
"""

from engine.source.hf.loading import HfModel, is_hf_source, load_hf
from engine.source.hf.tasks import TASKS, default_task

__all__ = ["TASKS", "HfModel", "default_task", "is_hf_source", "load_hf"]
