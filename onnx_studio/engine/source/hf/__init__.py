"""Hugging Face model folders as a source: `hf:PATH` (weights) and `hf-config:PATH` (config only).

Public API: `is_hf_source`, `load_hf` / `load_for_recipe` (the model, its task and the files to
export), `TASKS`, `supported_tasks`, `default_task`, `input_names` (a task's first file's inputs,
from the config alone).
"""

from onnx_studio.engine.source.hf.loading import HfModel, is_hf_source, load_for_recipe, load_hf
from onnx_studio.engine.source.hf.tasks import TASKS, default_task, supported_tasks

__all__ = ["TASKS", "HfModel", "default_task", "is_hf_source", "load_for_recipe", "load_hf",
           "supported_tasks"]
