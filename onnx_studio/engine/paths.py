"""Moving a recipe to another folder: every path it names keeps pointing at the same file; and
where a recipe may be saved at all.

One rule for the CLI (--save-recipe) and the window (Save recipe as): a path becomes
relative to the new folder when the two share a folder below the filesystem root, so a
project folder moved or checked out elsewhere keeps working; otherwise (only the root or a
different Windows drive in common) it stays absolute, because `../../../usr/...` would break
as soon as the recipe moves. A Hugging Face source keeps its prefix (`hf:DIR`,
`hf-config:DIR`): only its folder moves. Torch-free and Qt-free.
"""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.file_set import same_file
from onnx_studio.engine.recipe import Recipe, is_folder_source, split_source


def source_path(source: str) -> tuple[str, str, str] | None:
    """(prefix, path, suffix) of a source that names a file or a folder, its text being
    prefix + path + suffix: `hf:DIR` -> ("hf:", "DIR", ""), `net.py:Net` -> ("", "net.py",
    ":Net"), `model.pt` -> ("", "model.pt", ""); None for one that names neither
    (`example:alexnet`, `torchvision:resnet18`, nothing)."""
    text = source.strip()
    if is_folder_source(text):
        prefix, _, folder = text.partition(":")
        return (f"{prefix}:", folder.strip(), "") if folder.strip() else None
    file, name = split_source(text)
    return None if file is None else ("", file, f":{name}" if name else "")


def rebase_recipe_paths(recipe: Recipe, new_folder: Path, *, absolute: bool = False) -> Recipe:
    """A copy of `recipe` that lives in `new_folder`, its paths rewritten to point where they did.

    With `absolute` every path becomes absolute (a recipe copied out of a read-only folder
    whose files stay there).
    """
    folder = os.path.abspath(new_folder)

    def moved(path: str) -> str:
        # normpath, not resolve(): the new folder may not exist yet, and symlinks stay as named
        target = os.path.normpath(os.path.abspath(recipe.resolve(path)))
        return target if absolute else portable_path(target, folder)

    out = copy.deepcopy(recipe)
    located = source_path(recipe.model.source)
    if located is not None:
        prefix, path, suffix = located
        out.model.source = prefix + moved(path) + suffix
    if recipe.model.checkpoint:
        out.model.checkpoint = moved(recipe.model.checkpoint)
    if recipe.model.workdir:
        out.model.workdir = moved(recipe.model.workdir)
    for spec in out.inputs:
        if spec.file:
            spec.file = moved(spec.file)
    out.export.extensions = [moved(e) for e in recipe.export.extensions]
    out.export.output = moved(recipe.export.output)
    out.base_dir = Path(folder)
    return out


def portable_path(target: str, folder: str) -> str:
    """`target` relative to `folder` when they share a folder below the root, else absolute."""
    try:
        common = os.path.commonpath([target, folder])
        if os.path.dirname(common) == common:  # only "/" (or a drive's root) in common
            return target
        return os.path.relpath(target, folder)
    except ValueError:  # different drives on Windows
        return target


def check_recipe_target(recipe: Recipe, path: Path, advice: str) -> Path:
    """The real path `recipe` may be saved to, or a `write` StudioError (exit status 2) whose
    sentence ends in `advice` ("choose another --save-recipe path").

    A recipe is saved only to a `.toml` name in a folder that exists and takes new files, and
    never over a file the recipe itself reads or writes: its model source, checkpoint, input
    files and extensions, the export's output, or (a Hugging Face source's output being a
    folder the export replaces) anything inside that folder. Paths are compared with symlinks
    and `..` resolved, so no other spelling of a file gets past.
    """
    real = Path(os.path.realpath(path))

    def refuse(problem: str) -> StudioError:
        return StudioError("write", f"Cannot save the recipe to {path}: {problem}; {advice}.",
                           f"{advice[:1].upper()}{advice[1:]}: a new .toml name in a folder "
                           "you can write to.", exit_code=2)

    if path.suffix.lower() != ".toml":
        raise refuse(f"a recipe is a .toml file, name it {path.stem or 'recipe'}.toml")
    for field, named in _named_paths(recipe):
        if real == named or same_file(real, named):  # a hard link too
            raise refuse(f"that is the recipe's {field}, which the recipe would replace")
    output = Path(os.path.realpath(recipe.output_path))
    if is_folder_source(recipe.model.source) and real.is_relative_to(output):
        raise refuse(f"it is inside the export's output folder {output}, which an export "
                     "replaces")
    folder = real.parent
    if real.is_dir():
        raise refuse("that is a folder")
    if not folder.is_dir():
        raise refuse(f"its folder {folder} does not exist" if not folder.exists()
                     else f"{folder} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise refuse(f"{folder} does not accept new files ({exc.strerror or exc})") from None
    return real


def _named_paths(recipe: Recipe) -> list[tuple[str, Path]]:
    """(field, real path) of every file the recipe reads or writes."""
    named: list[tuple[str, str]] = []
    located = source_path(recipe.model.source)
    if located is not None:
        named.append(("model source", located[1]))
    if recipe.model.checkpoint:
        named.append(("checkpoint", recipe.model.checkpoint))
    named += [(f"input file of {spec.name!r}", spec.file) for spec in recipe.inputs if spec.file]
    named += [("extension", ext) for ext in recipe.export.extensions]
    named.append(("export output", recipe.export.output))
    return [(field, Path(os.path.realpath(recipe.resolve(p)))) for field, p in named]


def recipe_inputs(recipe: Recipe) -> list[Path]:
    """Every file or folder the recipe's model is read from (source, checkpoint, input files,
    extensions): what no output of the command that runs it may replace."""
    return [path for field, path in _named_paths(recipe) if field != "export output"]


def repro_folder(recipe: Recipe, explained: Path, repro_dir: Path | None,
                 inputs: list[Path]) -> Path:
    """The folder `onnx-studio explain` writes its repro into (`repro_dir`, else beside the
    explained file: `NAME.repro` for a Hugging Face export folder, `STEM.repro` for a file),
    checked as every folder output is (onnx_studio.engine.file_set.check_folder_output: a
    `write` error, exit 2, for a file, one of `inputs` or the recipe's, or a folder holding
    files the studio did not write there). Cheap: the command line checks it before a worker
    starts, and explain itself again with the data files the explained file reads."""
    from onnx_studio.engine.file_set import check_folder_output

    explained = Path(explained)
    default = explained.name + ".repro" if is_folder_source(recipe.model.source) \
        else explained.stem + ".repro"
    if explained.is_dir():
        inputs = [*inputs, *(p for p in explained.iterdir() if p.is_file())]
    return check_folder_output(repro_dir or explained.with_name(default), "repro",
                               [explained, *inputs, *recipe_inputs(recipe)], "The repro folder")


def output_folder(recipe: Recipe) -> Path:
    """Where the recipe's export writes (and stages its temporary files): the folder itself
    for a folder export (a Hugging Face source), else the .onnx file's folder."""
    if is_folder_source(recipe.model.source):
        return recipe.output_path
    return recipe.output_path.parent
