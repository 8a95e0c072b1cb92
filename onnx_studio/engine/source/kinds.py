"""What kind of model a source is, from its string and its file's archive, without reading its code
or loading torch: `parse` (a .py file and its class, a .pt2, a TorchScript or pickle, an example, a
torchvision or timm model), `archive_kind` (a TorchScript archive or a pickle). Light enough for the
window's first paint, where the form asks which exporter "auto" means
(onnx_studio.engine.export.choice); onnx_studio.engine.source.describe, which parses the Python
source, loads with the first description."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import Recipe, builtin_source, python_source_parts

KINDS = ("python", "exported_program", "torchscript", "pickle", "example", "torchvision",
         "timm")
PICKLE_SUFFIXES = (".pt", ".pth", ".pkl", ".bin")


@dataclass
class ParsedSource:
    """A source string classified: its kind, its file (resolved) and the name in it."""

    kind: str  # one of KINDS, or "unknown"
    path: Path | None = None
    name: str = ""  # class/factory for python, example or torchvision model name


def parse(source: str, base_dir: Path) -> ParsedSource:
    """Classify a source string without touching the file system beyond path joining."""
    text = source.strip()
    if not text:
        raise StudioError("source", "No model source given.",
                          "Name a .py file and class (net.py:Net), a .pt2/.pt file, or "
                          "an example such as example:alexnet.")
    builtin = builtin_source(text)
    if builtin is not None:
        return ParsedSource(*builtin)
    python = python_source_parts(text)
    if python is not None:
        file, name = python
        if name and not name.isidentifier():
            raise StudioError("source", f"{name!r} is not a Python class or function name.",
                              "Write the source as file.py:Name, e.g. net.py:Net.")
        return ParsedSource("python", _resolve(file, base_dir), name)
    path = _resolve(text, base_dir)
    suffix = path.suffix.lower()
    if suffix == ".pt2":
        return ParsedSource("exported_program", path)
    if suffix in PICKLE_SUFFIXES:
        return ParsedSource("torchscript_or_pickle", path)
    if suffix == ".onnx":
        raise StudioError("source", f"{path.name} is already an ONNX file; there is nothing "
                          "to export.", "Open it with `onnx-studio inspect` or the window, or "
                          "validate it with `onnx-studio validate`.")
    raise StudioError("source", f"Cannot tell what kind of model {text!r} is.",
                      "Use file.py:ClassName, a .pt2 ExportedProgram, a TorchScript or "
                      "pickled .pt/.pth file, example:NAME, torchvision:NAME or timm:NAME.")


def _resolve(path: str, base_dir: Path) -> Path:
    recipe = Recipe(base_dir=base_dir)
    return recipe.resolve(path).resolve()


def archive_kind(path: Path) -> str:
    """TorchScript archives carry compiled code (`code/`, `constants.pkl`); torch.save's don't."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return "pickle"  # legacy (pre-1.6) torch.save format is a bare pickle
    return "torchscript" if any(n.endswith("/constants.pkl") or "/code/" in n
                                for n in names) else "pickle"
