"""Where the studio keeps its files: the one place the app's name meets platformdirs.

Each folder can be moved with an environment variable (tests point them at temp folders).
"""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "onnx-studio"


def _folder(variables: tuple[str, ...], kind: str) -> Path:
    for variable in variables:
        if os.environ.get(variable):
            return Path(os.environ[variable])
    import platformdirs

    return Path(getattr(platformdirs, f"user_{kind}_dir")(APP_NAME, appauthor=False))


def config_dir() -> Path:
    """$ONNX_STUDIO_CONFIG_DIR, or the user config folder: the settings file."""
    return _folder(("ONNX_STUDIO_CONFIG_DIR",), "config")


def cache_dir() -> Path:
    """$ONNX_STUDIO_CACHE_DIR, or the user cache folder: per-job files of the worker."""
    return _folder(("ONNX_STUDIO_CACHE_DIR",), "cache")


def data_dir() -> Path:
    """$ONNX_STUDIO_DATA_DIR, or the user data folder: the runnable copies of the examples.

    $ONNX_STUDIO_OUTPUT_DIR, the name this folder had when it only held the window's example
    exports, still counts when $ONNX_STUDIO_DATA_DIR is not set.
    """
    return _folder(("ONNX_STUDIO_DATA_DIR", "ONNX_STUDIO_OUTPUT_DIR"), "data")
