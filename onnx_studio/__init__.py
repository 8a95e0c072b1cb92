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

    # the model object itself, as torch.onnx.export takes it (a class from __main__ too)
    report = onnx_studio.export(model, args=(x,), output="model.onnx",
                                dynamic_shapes={"x": {0: "batch"}})

A recipe is a `Recipe` object (`load_recipe(path)`, or built in code) or the path of a recipe
file. Every job runs in a worker process of its own, as the CLI's do, so a model that crashes
its process (`os._exit`, a segmentation fault, running out of memory) comes back as an error
of kind `worker_crashed` and the caller goes on. The documents are typed classes
(`ExportReport`, `CompareDocument`, `ProfileDocument`, `VariantReport`, `ExplainDocument`,
`BatchSummary`):
`doc.to_dict()` is the JSON the CLI prints. Importing this package loads no torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from onnx_studio._version import __version__

# Every name is loaded on first use (PEP 562): `import onnx_studio.app` (the window) and the
# worker's `onnx_studio.engine` run this file first, and must not pay for the API's imports.
_WHERE = {
    "StudioError": "onnx_studio.engine.errors",
    "Recipe": "onnx_studio.engine.recipe",
    **dict.fromkeys(("BatchRecord", "BatchResult", "BatchSummary", "CompareDocument", "Error",
                     "ExplainDocument", "ExportReport", "ProfileDocument", "VariantReport"),
                    "onnx_studio.engine.protocol"),
    **dict.fromkeys(("ProgressCallback", "RecipeLike", "batch", "compare", "explain", "export",
                     "load_recipe", "loads_recipe", "profile", "validate", "variant"),
                    "onnx_studio.api"),
}

if TYPE_CHECKING:
    from onnx_studio.api import (
        ProgressCallback,
        RecipeLike,
        batch,
        compare,
        explain,
        export,
        load_recipe,
        loads_recipe,
        profile,
        validate,
        variant,
    )
    from onnx_studio.engine.errors import StudioError
    from onnx_studio.engine.protocol import (
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
    from onnx_studio.engine.recipe import Recipe

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
    "__version__",
    "batch",
    "compare",
    "explain",
    "export",
    "load_recipe",
    "loads_recipe",
    "profile",
    "validate",
    "variant",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'onnx_studio' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
