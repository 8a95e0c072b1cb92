"""Load a Hugging Face folder offline: the config (with the user's overrides), the model for a
task, the files to export. Code from the folder (`auto_map`) runs only when the user trusts it.

Model options (the recipe's `model.kwargs`, `--model-kwarg NAME=VALUE`) besides `task`:
`attn_implementation`, `experts_implementation` and `dtype` go to `from_pretrained`; any other
name sets that attribute of the config (`use_cache = false`; `text_config.use_cache` reaches a
sub-config) before the model is built.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import StudioError, one_line
from onnx_studio.engine.source.hf.tasks import (
    auto_class_name,
    files_of,
    model_class_name,
    resolve_task,
    with_past,
)

PREFIXES = ("hf:", "hf-config:")
TASK_OPTION = "task"
# options from_pretrained takes itself; every other option is a config attribute
LOADER_OPTIONS = ("attn_implementation", "experts_implementation", "dtype")
# a checkpoint loads in the type it was saved in (a bfloat16 one is not upcast to float32,
# twice the memory and the file); `dtype = "float32"` in the options asks for the upcast
CHECKPOINT_DTYPE = "auto"
DEFAULT_ATTENTION = "eager"  # exports everywhere; "sdpa" trips torch.onnx's decomposition
TRUST_HINT = ("Trust the folder's code only if you trust its author: --trust-remote-code on "
              "the command line, model.trust_remote_code = true in a recipe, or \"Run the "
              "folder's code\" in the window.")


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
    # onnx_studio.engine.source.hf.wrappers.ExportPart
    parts: list[Any] = field(default_factory=list)

    @property
    def files(self) -> str:
        """"plain", "decoder" or "seq2seq" (onnx_studio.engine.source.hf.tasks.files_of)."""
        return files_of(self.task, self.config)

    @property
    def generates(self) -> bool:
        return self.files != "plain"

    @property
    def seq2seq(self) -> bool:
        return self.files == "seq2seq"

    @property
    def with_past(self) -> bool:
        return with_past(self.task)


def _offline() -> None:
    # never a download: the folder is the whole model
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def config_dict(folder: Path) -> dict[str, Any]:
    """The folder's config.json as a JSON object; a `source` error (exit 2) naming the file when
    it cannot be read as one (missing, not UTF-8, malformed, nested too deeply to parse)."""
    import json

    path = folder / "config.json"
    problem = ""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        problem = "its JSON is nested too deeply to read"
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        problem = one_line(exc)
    else:
        if isinstance(data, dict):
            return data
        problem = f"it holds a JSON {type(data).__name__}, not an object"
    raise StudioError("source", f"Cannot read {path}: {problem}.",
                      "Name a folder written by save_pretrained: its config.json is one JSON "
                      "object of the model's settings.", exit_code=2)


def code_files(folder: Path) -> list[str]:
    """The Python files config.json's `auto_map` names (the folder's own code), once each."""
    try:
        data = config_dict(folder)
    except StudioError:
        return []
    auto_map = data.get("auto_map")
    found: list[str] = []
    for value in (auto_map or {}).values() if isinstance(auto_map, dict) else []:
        for ref in value if isinstance(value, list) else [value]:
            if isinstance(ref, str) and "." in ref:
                name = ref.split("--")[-1].rpartition(".")[0].replace(".", "/") + ".py"
                if name not in found:
                    found.append(name)
    return found


def _custom_code_error(folder: Path, exc: BaseException | None = None) -> StudioError:
    files = code_files(folder)
    named = ", ".join(files) if files else "Python files"
    return StudioError(
        "source", f"{folder} holds its own model code ({named}, named by auto_map in "
        "config.json), which runs only when you say you trust the folder.", TRUST_HINT,
        details=repr(exc) if exc else "", exit_code=2)


def load_config(folder: Path, trust_remote_code: bool = False) -> Any:
    """The folder's config.json as a transformers config; a `source` error (exit 2) if absent,
    unreadable, or needing the folder's own code without `trust_remote_code`."""
    _offline()
    if not (folder / "config.json").is_file():
        raise StudioError("source", f"{folder} has no config.json; name a folder written by "
                          "save_pretrained.", exit_code=2)
    config_dict(folder)  # what transformers' reader would fail on, named first
    from onnx_studio.engine.source.vision import ready_torchvision

    ready_torchvision()  # transformers imports it when installed (a CUDA build on a CPU torch)
    import transformers

    try:
        return transformers.AutoConfig.from_pretrained(
            str(folder), local_files_only=True, trust_remote_code=trust_remote_code)
    except Exception as exc:
        if not trust_remote_code and code_files(folder) and "trust_remote_code" in str(exc):
            raise _custom_code_error(folder, exc) from exc
        raise StudioError("source", f"Cannot read {folder / 'config.json'}: {one_line(exc)}.",
                          "Check the config's model_type is one transformers knows.",
                          details=repr(exc), exit_code=2) from exc


def split_options(kwargs: dict[str, Any]) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
    """(task, from_pretrained options, config overrides) of a recipe's `model.kwargs`."""
    task = kwargs.get(TASK_OPTION)
    loader = {k: v for k, v in kwargs.items() if k in LOADER_OPTIONS}
    overrides = {k: v for k, v in kwargs.items() if k != TASK_OPTION and k not in LOADER_OPTIONS}
    return (str(task) if task else None), loader, overrides


def apply_overrides(config: Any, overrides: dict[str, Any]) -> None:
    """Set each config attribute `overrides` names (a dotted name, or a table, reaches a
    sub-config: `text_config.use_cache = false` or `text_config = { use_cache = false }`); a
    `recipe` error (exit 2) naming an attribute the config does not have."""
    for name, value in _flat(overrides).items():
        target, _, attribute = name.rpartition(".")
        holder = config
        for part in target.split(".") if target else []:
            holder = getattr(holder, part, None)
        known = holder is not None and hasattr(holder, "to_dict") and \
            attribute in holder.to_dict()
        if not known:
            where = holder.to_dict() if holder is not None and hasattr(holder, "to_dict") else {}
            close = difflib.get_close_matches(attribute, list(where), n=3)
            also = f"; did you mean {', '.join(close)}" if close else ""
            raise StudioError(
                "recipe", f"The model option {name!r} is neither a loading option "
                f"({', '.join(LOADER_OPTIONS)}) nor an attribute of the model's config"
                f"{also}.", "Name a config attribute (as in config.json; text_config.NAME for "
                "a sub-config) with --model-kwarg NAME=VALUE or in model.kwargs.",
                exit_code=2)
        setattr(holder, attribute, value)


def _flat(options: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"text_config": {"use_cache": False}} -> {"text_config.use_cache": False}."""
    flat: dict[str, Any] = {}
    for name, value in options.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


def _loader_kwargs(loader: dict[str, Any]) -> dict[str, Any]:
    kwargs = {"attn_implementation": DEFAULT_ATTENTION, **loader}
    if isinstance(kwargs.get("dtype"), str):
        import torch

        kwargs["dtype"] = getattr(torch, str(kwargs["dtype"]))
    return kwargs


def _model_class(config: Any, task: str, trust_remote_code: bool) -> tuple[Any, bool]:
    """(the class or auto class that builds the model, whether it is an auto class)."""
    import transformers

    name = model_class_name(config, task)
    if name is not None and "." not in name and hasattr(transformers, name):
        return getattr(transformers, name), False
    return getattr(transformers, auto_class_name(config, task)), True


def load_hf(source: str, base_dir: Path, task: str | None = None, seed: int = 0, *,
            options: dict[str, Any] | None = None, trust_remote_code: bool = False,
            static: dict[str, int] | None = None) -> HfModel:
    """Load the model `source` names for `task` (None: the config's default), in eval mode, on
    the CPU, eager attention unless `options` say otherwise; `options` are the recipe's other
    model.kwargs (see the module); `hf-config:` builds random weights from `seed`; `static`
    names dimensions exported at a fixed size (the recipe's [dims] sizes)."""
    from onnx_studio.engine.source.hf.parts import export_parts

    folder, weights = split_hf_source(source, base_dir)
    if not folder.is_dir():
        raise StudioError("source", f"The folder {folder} does not exist; name a folder written "
                          "by save_pretrained.", exit_code=2)
    _, loader, overrides = split_options(options or {})
    config = load_config(folder, trust_remote_code)
    task = resolve_task(config, task)
    apply_overrides(config, overrides)
    import torch

    cls, auto = _model_class(config, task, trust_remote_code)
    code = {"trust_remote_code": trust_remote_code} if auto else {}
    kwargs = _loader_kwargs(loader)
    try:
        if weights:  # in the checkpoint's own type unless the options name one
            model = cls.from_pretrained(str(folder), config=config, local_files_only=True,
                                        **code, **{"dtype": CHECKPOINT_DTYPE, **kwargs})
        else:
            torch.manual_seed(seed)
            model = (cls.from_config(config, **code, **kwargs) if auto
                     else cls._from_config(config, **kwargs))
    except Exception as exc:
        if not trust_remote_code and "trust_remote_code" in str(exc) and code_files(folder):
            raise _custom_code_error(folder, exc) from exc
        broken = _broken_weights(folder) if weights else None
        if broken is not None:
            raise StudioError(
                "source", f"Cannot load {folder.name}: {broken[0]} is not a whole safetensors "
                f"file ({broken[1]}).", f"Copy {broken[0].name} again (it may be truncated), "
                "or export with random weights (hf-config:).", details=repr(exc),
                exit_code=2) from exc
        raise StudioError(
            "source", f"Cannot load {folder.name} for the task {task}: {one_line(exc)}.",
            "Check the model options (--model-kwarg), or choose another task with --task.",
            details=repr(exc), exit_code=2) from exc
    model.eval()
    loaded = HfModel(model=model, config=model.config, task=task, folder=folder)
    loaded.parts = export_parts(loaded, static or {})
    return loaded


def _broken_weights(folder: Path) -> tuple[Path, str] | None:
    """The first .safetensors file of `folder` whose header cannot be read (truncated, not
    safetensors), with the reader's complaint; None when every one reads."""
    from safetensors import safe_open

    for path in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(path), framework="pt") as weights:
                names = list(weights.keys())
                if names:
                    weights.get_slice(names[-1])  # the last tensor's bytes lie within the file
        except Exception as exc:  # SafetensorError and what a bad header raises
            return path, one_line(exc)
    return None


def load_for_recipe(recipe: Any) -> HfModel:
    """The Hugging Face model a recipe names: its task and options from `model.kwargs`, its
    trust from `model.trust_remote_code`, random weights seeded by `export.seed`."""
    task, _, _ = split_options(recipe.model.kwargs)
    return load_hf(recipe.model.source, recipe.base_dir, task, seed=recipe.export.seed,
                   options=recipe.model.kwargs,
                   trust_remote_code=bool(getattr(recipe.model, "trust_remote_code", False)),
                   static={name: dim.size for name, dim in recipe.dims.items()
                           if dim.size is not None})

