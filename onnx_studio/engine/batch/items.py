"""The items of a batch, read and checked: each one a recipe file or an `hf:`/`hf-config:`
folder, made the job that exports it, with the fingerprint that --resume compares.

The fingerprint of an item is "sha256:" and the SHA-256 of one JSON object holding
- `recipe`: the recipe as the engine reads it, written out again (`to_toml(recipe)`: its
  comments, key order and spelling do not count, its values do), and `validate`;
- `files`: the SHA-256 of every file the recipe names, by its absolute path: the model file
  (a .py, .pt2 or .pt), the checkpoint, the inputs' files, the extensions; for an `hf:` or
  `hf-config:` source every file in the folder, by its path inside the folder (a missing file
  counts as missing). Files a model file imports on its own, and `model.workdir`, do not count;
- `versions`: the installed versions of onnx-export-studio, torch, onnx, onnxruntime,
  onnxscript and transformers (an upgrade runs every item again).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine import shipped
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.paths import output_folder
from onnx_studio.engine.recipe import Recipe, check_recipe, split_source, to_toml

_HASHED_PACKAGES = ("onnx-export-studio", "torch", "onnx", "onnxruntime", "onnxscript",
                    "transformers")
_CHUNK = 1 << 20
FOLDER_PREFIXES = ("hf:", "hf-config:")


@dataclass(frozen=True)
class ItemJob:
    """What one item's worker is sent, in plain values (a Ray task carries it to its node)."""

    key: str  # the item: a recipe file's absolute path, or "hf:" and a folder's
    label: str  # a short name for the progress lines and the report
    recipe: str  # the recipe as TOML
    base_dir: str  # what the recipe's relative paths resolve against
    validate: bool | None  # None: as the recipe says
    folder: str  # the folder its output is written into (its temporary files go there too)
    output: str  # its output (.onnx file or folder), absolute and normalised
    fingerprint: str
    cpus: int  # CPUs a Ray task reserves for it
    gpus: int  # GPUs a Ray task reserves for it: 1 when the recipe's device is CUDA

    @classmethod
    def of(cls, key: str, label: str, recipe: Recipe, validate: bool | None) -> ItemJob:
        return cls(key=key, label=label, recipe=to_toml(recipe), base_dir=str(recipe.base_dir),
                   validate=validate, folder=str(output_folder(recipe)),
                   output=os.path.normpath(os.path.abspath(recipe.output_path)),
                   fingerprint=fingerprint(recipe, validate),
                   cpus=recipe.export.cpus or 1,
                   gpus=1 if recipe.export.device.startswith("cuda") else 0)


def read_items(texts: Sequence[str | Recipe], list_file: str | None, report_dir: Path
               ) -> list[ItemJob]:
    """The batch's items: the ones named, then those of `list_file` (one a line; `#` starts a
    comment; relative paths against the list's folder), each once, in that order. A Recipe
    object (the Python API's) is an item too, known by the file it writes.

    Raises StudioError kind `recipe` (exit status 2) naming every item that is missing or
    does not read, and every two items that would write the same file: nothing runs then.
    """
    named: list[tuple[str | Recipe, Path]] = [(text, Path.cwd()) for text in texts]
    if list_file:
        named += [(line, Path(list_file).resolve().parent) for line in _list_lines(list_file)]
    if not named:
        raise StudioError("recipe", "No items to run: name recipe files or hf:/hf-config: "
                          "folders, or a list of them with --from.", exit_code=2)
    jobs: list[ItemJob] = []
    problems: list[str] = []
    folders_used: set[str] = set()
    for text, base in named:
        try:
            job = _item(text, base, report_dir, folders_used)
        except StudioError as err:
            problems.append(f"{_name(text)}: {err.message}")
            continue
        if all(j.key != job.key for j in jobs):
            jobs.append(job)
    problems += _clashes(jobs)
    if problems:
        more = f" (and {len(problems) - 1} more; see the details)" if len(problems) > 1 else ""
        raise StudioError("recipe", problems[0] + more,
                          "Fix or leave out the items named; nothing was run.",
                          details="\n".join(problems), exit_code=2)
    return jobs


def _name(item: str | Recipe) -> str:
    return f"the recipe writing {item.export.output}" if isinstance(item, Recipe) else item


def _list_lines(list_file: str) -> list[str]:
    try:
        text = Path(list_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise StudioError("recipe", f"Cannot read the list {list_file}: {exc}.",
                          "Name a text file with one recipe or folder a line.",
                          exit_code=2) from None
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line]


def _item(text: str | Recipe, base: Path, report_dir: Path, folders_used: set[str]
          ) -> ItemJob:
    if isinstance(text, Recipe):
        recipe = text.copy()
        check_recipe(recipe)
        return ItemJob.of(f"recipe:{recipe.output_path}", recipe.output_path.stem, recipe,
                          validate=None)
    if text.startswith(FOLDER_PREFIXES):
        prefix, _, name = text.partition(":")
        folder = (base / Path(name).expanduser()).resolve()
        if not (folder / "config.json").is_file():
            raise StudioError("source", f"{folder} is not a Hugging Face model folder (no "
                              "config.json).")
        recipe = Recipe(base_dir=folder.parent)
        recipe.model.source = f"{prefix}:{folder}"
        recipe.export.output = str(_output_folder(report_dir, folder.name, folders_used))
        recipe.validate.enabled = True
        check_recipe(recipe)
        return ItemJob.of(recipe.model.source, folder.name, recipe, validate=True)
    path = (base / Path(text).expanduser()).resolve()
    if not path.is_file():
        raise StudioError("recipe", f"no recipe file {path}.")
    recipe = recipes.load(shipped.runnable(path))
    check_recipe(recipe)
    return ItemJob.of(str(path), path.stem, recipe, validate=None)


def _output_folder(report_dir: Path, name: str, used: set[str]) -> Path:
    """Where a folder item's export goes: REPORT_DIR/onnx/NAME (NAME_2, ... when taken)."""
    candidate, n = name, 1
    while candidate in used:
        n += 1
        candidate = f"{name}_{n}"
    used.add(candidate)
    return report_dir.resolve() / "onnx" / candidate


def _clashes(jobs: list[ItemJob]) -> list[str]:
    """Two items that write the same file would overwrite each other while both run."""
    found: list[str] = []
    seen: dict[str, str] = {}
    for job in jobs:
        recipe = recipes.loads(job.recipe, Path(job.base_dir))
        output = str(recipe.output_path.resolve())
        if output in seen:
            found.append(f"{job.key}: writes {output}, as {seen[output]} does; give each "
                         "recipe its own export.output.")
        seen.setdefault(output, job.key)
    return found


# ---------------------------------------------------------------------------- fingerprint


def fingerprint(recipe: Recipe, validate: bool | None = None) -> str:
    """The item's fingerprint (this module's docstring says what goes in)."""
    content = {"recipe": to_toml(recipe), "validate": validate,
               "files": {name: _file_hash(path) for name, path in named_files(recipe)},
               "versions": _versions()}
    text = json.dumps(content, sort_keys=True, ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def named_files(recipe: Recipe) -> list[tuple[str, Path]]:
    """(name, path) of every file the recipe names; a folder source's files by their path
    inside the folder."""
    source = recipe.model.source.strip()
    if recipes.is_folder_source(source):
        folder = recipe.resolve(source.partition(":")[2])
        return [(p.relative_to(folder).as_posix(), p) for p in sorted(folder.rglob("*"))
                if p.is_file()]
    names: list[str] = []
    file, _ = split_source(source)
    if file is not None:
        names.append(file)
    if recipe.model.checkpoint:
        names.append(recipe.model.checkpoint)
    names += [spec.file for spec in recipe.inputs if spec.file]
    names += recipe.export.extensions
    paths = [recipe.resolve(name).resolve() for name in names]
    return [(str(path), path) for path in paths]


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
    except OSError:
        return "missing"
    return digest.hexdigest()


def _versions() -> dict[str, str]:
    found = {}
    for name in _HASHED_PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "none"
    return found

