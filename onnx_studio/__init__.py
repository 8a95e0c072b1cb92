"""ONNX Export Studio from Python: export, validate, compare, profile, make variants, explain a
difference and run a zoo of recipes, each call answered with the typed document the command
line prints as JSON.

    import onnx_studio

    report = onnx_studio.export("recipes/net.toml", validate=True)
    if not report.ok:
        print(report.error.kind, report.error.message, report.error.hint)
    else:
        print(report.output, report.validation.outputs[0].max_abs_diff)

    summary = onnx_studio.batch(["bert.toml", "hf:models/gpt2"], "zoo-report", workers=2)
    print(summary.passed, "of", summary.total)

A recipe is a `Recipe` object (`load_recipe(path)`, or built in code) or the path of a recipe
file. Every job runs in a worker process of its own, as the CLI's do, so a model that crashes
its process (`os._exit`, a segmentation fault, running out of memory) comes back as an error
of kind `worker_crashed` and the caller goes on. The documents are engine.protocol's classes
(`ExportReport`, `CompareDocument`, `ProfileDocument`, `VariantReport`, `ExplainDocument`,
`BatchSummary`):
`doc.to_dict()` is the JSON the CLI prints. Importing this package loads no torch.
"""

from engine.errors import StudioError
from engine.protocol import (
    BatchRecord,
    BatchResult,
    BatchSummary,
    CompareDocument,
    Error,
    ExplainDocument,
    ExportReport,
    ProfileDocument,
    VariantReport,
)
from engine.recipe import Recipe
from onnx_studio.api import (
    ProgressCallback,
    RecipeLike,
    batch,
    compare,
    explain,
    export,
    load_recipe,
    profile,
    validate,
    variant,
)

__all__ = [
    "BatchRecord",
    "BatchResult",
    "BatchSummary",
    "CompareDocument",
    "Error",
    "ExplainDocument",
    "ExportReport",
    "ProfileDocument",
    "ProgressCallback",
    "Recipe",
    "RecipeLike",
    "StudioError",
    "VariantReport",
    "batch",
    "compare",
    "explain",
    "export",
    "load_recipe",
    "profile",
    "validate",
    "variant",
]
