"""Which exporter an export runs, and why: `choose_exporter(recipe)`, the engine's one rule.

Apart from the exporter so that the window can ask it (its opset list follows the exporter
"auto" implies) without loading the export machinery: it reads the source file only, without
loading it or importing torch.
"""

from __future__ import annotations

from typing import Any

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import Recipe

__all__ = ["choose_exporter"]


def choose_exporter(recipe: Recipe, loaded: Any = None) -> tuple[str, str]:
    """The exporter that runs for this recipe, and why: (name, a sentence).

    A recipe that names one gets it. `exporter = "auto"` (the default) follows the source: a
    TorchScript archive, or a module scripted first (model.script = true), exports with the
    TorchScript exporter (dynamo cannot capture TorchScript); an operator export type other
    than ONNX is a TorchScript exporter option; everything else, .pt2 ExportedPrograms
    included, with dynamo. Without `loaded` the source kind is read from the file without
    loading it (onnx_studio.engine.source.describe), so the opset check can run before any work.
    """
    opts = recipe.export
    if opts.exporter != "auto":
        return opts.exporter, f'the recipe asks for it (exporter = "{opts.exporter}")'
    kind = getattr(loaded, "kind", None) or _source_kind(recipe)
    if kind == "torchscript":
        return "torchscript", "a TorchScript archive exports with the TorchScript exporter"
    if recipe.model.script:
        return "torchscript", ("model.script = true: a scripted module exports with the "
                               "TorchScript exporter")
    if opts.operator_export_type != "ONNX":
        return "torchscript", (f"operator_export_type = \"{opts.operator_export_type}\" is an "
                               "option of the TorchScript exporter")
    if kind == "exported_program":
        return "dynamo", "a .pt2 ExportedProgram exports with the dynamo exporter"
    return "dynamo", "the default exporter for a PyTorch module"


def _source_kind(recipe: Recipe) -> str:
    """The source's kind read from its file only ("unknown" when it cannot be read: loading
    reports why)."""
    from onnx_studio.engine.source.kinds import archive_kind, parse

    try:
        parsed = parse(recipe.model.source, recipe.base_dir)
    except StudioError:
        return "unknown"
    if parsed.kind == "torchscript_or_pickle" and parsed.path is not None:
        return archive_kind(parsed.path) if parsed.path.is_file() else "unknown"
    return parsed.kind
