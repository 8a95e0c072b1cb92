"""The window's settings: one versioned TOML file under the platformdirs config folder.

Qt-free on purpose (plain TOML, testable without a window), written with tomlkit, read with
tomllib. Writes are atomic (temp file + rename). A file that cannot be read is moved aside to
`settings.toml.bak` (never deleted: it may hold the user's recent list), defaults are used, and
`load()` returns a notice for the window to show once. The `settings.json` of earlier releases
is read when no `settings.toml` exists yet, and left in place.
"""

from __future__ import annotations

import contextlib
import json
import os
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import tomlkit

from engine import dirs
from engine.files import write_text_atomic

SETTINGS_VERSION = 1
MAX_RECENT = 10
THEMES = ("system", "light", "dark")


def settings_path() -> Path:
    return dirs.config_dir() / "settings.toml"


def _legacy_path() -> Path:
    """Where releases before the TOML file kept the settings (as JSON)."""
    return dirs.config_dir() / "settings.json"


@dataclass
class Settings:
    version: int = SETTINGS_VERSION
    recent_recipes: list[str] = field(default_factory=list)
    recent_models: list[str] = field(default_factory=list)
    last_folder: str = ""
    geometry: str = ""  # QMainWindow.saveGeometry() as base64
    window_state: str = ""  # QMainWindow.saveState() as base64
    splitter: str = ""
    theme: str = "system"

    def add_recent(self, kind: str, path: str | os.PathLike[str]) -> None:
        """Put `path` first in the recent recipes ("recipe") or models ("model") list."""
        items = self.recent_recipes if kind == "recipe" else self.recent_models
        text = os.fspath(path)
        if text in items:
            items.remove(text)
        items.insert(0, text)
        del items[MAX_RECENT:]
        self.last_folder = str(Path(text).parent)


def _from_data(data: Any) -> Settings:
    if not isinstance(data, dict):
        raise ValueError("the file does not hold a table of settings")
    version = data.get("version")
    if version != SETTINGS_VERSION:
        # Only one version exists so far; a later one gets a migration step here.
        raise ValueError(f"unknown settings version {version!r}")
    settings = Settings()
    for f in fields(Settings):
        if f.name not in data:
            continue
        value = data[f.name]
        default = getattr(settings, f.name)
        if isinstance(default, list):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{f.name} must be a list of paths")
            value = value[:MAX_RECENT]
        elif not isinstance(value, type(default)) or isinstance(value, bool) != isinstance(
            default, bool
        ):
            raise ValueError(f"{f.name} has the wrong type")
        setattr(settings, f.name, value)
    if settings.theme not in THEMES:
        settings.theme = "system"
    return settings


def load(path: Path | None = None) -> tuple[Settings, str | None]:
    """Return (settings, notice); notice is a sentence for the user when the file was bad."""
    path = path or settings_path()
    parse = tomllib.loads
    if not path.exists() and path == settings_path() and _legacy_path().exists():
        path, parse = _legacy_path(), json.loads
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Settings(), None
    except OSError as exc:
        return Settings(), f"Could not read the settings file {path} ({exc}); using defaults."
    try:
        return _from_data(parse(raw.decode("utf-8"))), None
    except ValueError as exc:  # the decode and both parsers raise ValueErrors
        backup = path.with_name(path.name + ".bak")
        with contextlib.suppress(OSError):
            os.replace(path, backup)
        return Settings(), (
            f"The settings file was damaged ({exc}). It was kept as {backup.name} and the "
            "defaults are used; your recent files list starts empty."
        )


def save(settings: Settings, path: Path | None = None) -> None:
    """Write the settings atomically (a crash mid-write leaves the old file)."""
    path = path or settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = tomlkit.document()
    for key, value in asdict(settings).items():
        if isinstance(value, list):  # one path a line: easy to read and to edit by hand
            paths = tomlkit.array()
            paths.extend(value)
            doc.add(key, paths.multiline(bool(value)))
        else:
            doc.add(key, value)
    write_text_atomic(path, doc.as_string())
