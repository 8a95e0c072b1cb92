"""Shared fixtures: no test touches the real config folder, and Qt runs offscreen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _isolated_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Point platformdirs' config and cache folders at a temp dir for every test."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv("ONNX_STUDIO_CONFIG_DIR", str(home / "config" / "onnx-studio"))
    monkeypatch.setenv("ONNX_STUDIO_CACHE_DIR", str(home / "cache" / "onnx-studio"))
