"""The result tabs that show what a job produced: Summary, Warnings, Python and Log.

Each is a view of the session: the Summary shows the last export (or why it failed), the
Warnings tab the session's warnings (a row opens its source line in `SourceViewer`), the Python
tab the recipe as a script, the Log what the worker and the session said. `text_label` and
`mono` are shared with the Validation tab. Each name is imported from its module when first
looked up here (the window's first paint loads only the Summary and the Log).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onnx_studio.app.results.log import LogView
    from onnx_studio.app.results.python import PythonView
    from onnx_studio.app.results.summary import SummaryView, human_size, mono, text_label
    from onnx_studio.app.results.warnings import (
        SourceViewer,
        WarningsView,
        resolve_source,
        split_source,
    )

__all__ = ["LogView", "PythonView", "SourceViewer", "SummaryView", "WarningsView", "human_size",
           "mono", "resolve_source", "split_source", "text_label"]
_MODULES = {"LogView": "log", "PythonView": "python", "SummaryView": "summary",
            "human_size": "summary", "mono": "summary", "text_label": "summary",
            "SourceViewer": "warnings", "WarningsView": "warnings",
            "resolve_source": "warnings", "split_source": "warnings"}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return getattr(importlib.import_module(f"onnx_studio.app.results.{_MODULES[name]}"), name)
    raise AttributeError(f"module 'onnx_studio.app.results' has no attribute {name!r}")
