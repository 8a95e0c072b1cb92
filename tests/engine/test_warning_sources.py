"""A warning raised from Python's own files or an installed package names no source: torch's
context managers warn from contextlib.py, which is no line of the model's (issue 35: tiny_vit's
only warning named contextlib.py:144)."""

from __future__ import annotations

import contextlib
import sysconfig
from pathlib import Path

from onnx_studio.engine.export.capture import _in_library


def test_python_s_own_files_and_packages_are_library_files(tmp_path: Path) -> None:
    assert _in_library(contextlib.__file__)
    assert _in_library(str(Path(sysconfig.get_paths()["purelib"]) / "timm" / "models" / "x.py"))
    assert not _in_library(str(tmp_path / "net.py")), "a model's own file keeps its line"
