"""The window's settings: one versioned TOML file under the platformdirs config folder.

Qt-free on purpose (plain TOML, testable without a window), written with tomlkit, read with
tomllib. Writes are atomic (temp file + rename). The `settings.json` of earlier releases is
read when no `settings.toml` exists yet, and left in place.

A settings file never locks the user out, and nothing in it is ever deleted:

- A file that cannot be used at all (its bytes are not UTF-8, it is not valid TOML or nests
  too deeply to read, it holds no table, its `version` is not a whole number, it cannot be
  read, or a folder stands in its place) is moved aside under a timestamped name,
  `settings.toml.2026-11-23T18-40-12.bak` (`...-2.bak` for a second one in the same second;
  earlier backups are kept), and the defaults are used. A folder that cannot be moved is left
  alone: the defaults are used and nothing is saved until it is gone.
- A setting of the wrong type (or an unknown theme) is ignored, its default used, the other
  settings kept; the file as it was is copied aside the same way before it is rewritten.
- A file written by a newer version (`version` greater than ours) is read for the keys this
  version knows. It is not overwritten without a backup: the first `save()` copies it aside
  (timestamped) and then writes this version's file in its place. That is what a user who
  opens an older release expects: the changes made in it stick (the recent list, the theme),
  and the newer release's file is there to restore, unchanged. (Writing ours under another
  name instead would make this version forget its own changes at every start.)

`load()` returns a notice for each of these, and the window shows it once: the start-up saves
right after a notice (`onnx_studio.app.main.run`), so the next start finds a good file.
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from onnx_studio.engine import dirs
from onnx_studio.engine.files import write_text_atomic

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
    form_shown: bool = True  # False: the form side folded away (onnx_studio.app.fold)

    def add_recent(self, kind: str, path: str | os.PathLike[str]) -> None:
        """Put `path` first in the recent recipes ("recipe") or models ("model") list."""
        items = self.recent_recipes if kind == "recipe" else self.recent_models
        text = os.fspath(path)
        if text in items:
            items.remove(text)
        items.insert(0, text)
        del items[MAX_RECENT:]
        self.last_folder = str(Path(text).parent)


class _Unusable(Exception):
    """The whole file cannot be used; the message says why, as a phrase."""


def backup_path(path: Path, now: datetime | None = None) -> Path:
    """A free name beside `path` for a copy of it: `NAME.2026-11-23T18-40-12.bak`, then
    `NAME.2026-11-23T18-40-12-2.bak`, ... for more in the same second (local time)."""
    stamp = (now or datetime.now()).strftime("%Y-%m-%dT%H-%M-%S")
    candidate = path.with_name(f"{path.name}.{stamp}.bak")
    count = 2
    while os.path.lexists(candidate):
        candidate = path.with_name(f"{path.name}.{stamp}-{count}.bak")
        count += 1
    return candidate


def _kind(value: Any) -> str:
    return {bool: "true/false", int: "a number", float: "a number", str: "text",
            list: "a list", dict: "a table"}.get(type(value), type(value).__name__)


VERSION_KEY = "version"  # the settings file's own version, the one key read before the others


def _file_version(data: dict[str, Any]) -> Any:
    """The version a settings table says it is; a hand-written file may leave it out (then
    it is read as this version's)."""
    return data.get(VERSION_KEY, SETTINGS_VERSION)


def _from_data(data: Any) -> tuple[Settings, list[str], int]:
    """(settings, the keys not usable and why, the file's version); _Unusable for a file
    that cannot be read at all."""
    if not isinstance(data, dict):
        raise _Unusable("it does not hold a table of settings")
    version = _file_version(data)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise _Unusable(f"its version {version!r} is not a whole number from 1 up")
    settings = Settings()
    problems: list[str] = []
    for f in fields(Settings):
        if f.name == "version" or f.name not in data:
            continue  # the version written is always ours
        value = data[f.name]
        default = getattr(settings, f.name)
        if isinstance(default, list):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                problems.append(f"{f.name} (a list of paths, not {_kind(value)})")
                continue
            value = value[:MAX_RECENT]
        elif type(value) is not type(default):
            problems.append(f"{f.name} ({_kind(default)}, not {_kind(value)})")
            continue
        setattr(settings, f.name, value)
    if settings.theme not in THEMES:
        problems.append(f"theme ({settings.theme!r} is not one of {', '.join(THEMES)})")
        settings.theme = "system"
    return settings, problems, version


def _parse(raw: bytes, parse: Callable[[str], Any], kind: str) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Unusable("its bytes are not UTF-8 text") from None
    try:
        return parse(text)
    except ValueError as exc:  # tomllib.TOMLDecodeError and json.JSONDecodeError
        raise _Unusable(f"not valid {kind}: {exc}") from None
    except RecursionError:  # both parsers read nested arrays and tables recursively
        raise _Unusable(f"its {kind} nests arrays or tables too deeply to read") from None


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _move_aside(path: Path, what: str) -> str:
    """Rename the unusable file (or folder) at `path` to a backup name; the notice, which
    starts with `what` (a sentence without its full stop)."""
    backup = backup_path(path)
    try:
        os.rename(path, backup)
    except OSError as exc:
        then = ("settings are not saved until that folder is removed or renamed" if
                path.is_dir() else "the file is left as it is")
        return (f"{what}, and it could not be moved aside ({_why(exc)}). The defaults are "
                f"used; {then}.")
    return (f"{what}. It was kept as {backup} and the defaults are used; your recent files "
            "list starts empty.")


def load(path: Path | None = None) -> tuple[Settings, str | None]:
    """Return (settings, notice); notice is a sentence for the user (shown once by the
    window) when the file was set aside, partly ignored or written by a newer version."""
    path = path or settings_path()
    parse, kind, legacy = tomllib.loads, "TOML", False
    if not os.path.lexists(path) and path == settings_path() and _legacy_path().exists():
        path, parse, kind, legacy = _legacy_path(), json.loads, "JSON", True
    if path.is_dir():
        return Settings(), _move_aside(path, f"A folder was in the place of the settings "
                                             f"file {path}")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Settings(), None
    except OSError as exc:
        return Settings(), _move_aside(
            path, f"The settings file {path} could not be read ({_why(exc)})")
    try:
        settings, problems, version = _from_data(_parse(raw, parse, kind))
    except _Unusable as exc:
        return Settings(), _move_aside(path, f"The settings file {path} was damaged ({exc})")
    notes: list[str] = []
    if version > SETTINGS_VERSION:
        notes.append(
            f"{path.name} was written by a newer version of ONNX Export Studio (settings "
            f"version {version}; this one knows {SETTINGS_VERSION}). The settings this "
            "version knows are used, and before it saves its own the file is copied aside as "
            f"{path.name}.<date and time>.bak.")
    if problems:
        notes.append(f"Some settings in {path} were not usable and their defaults are used: "
                     f"{'; '.join(problems)}.")
        if not legacy and version <= SETTINGS_VERSION:  # a newer file is copied by save()
            backup = backup_path(path)
            try:
                shutil.copy2(path, backup)
                notes.append(f"The file as it was is kept as {backup}.")
            except OSError as exc:
                notes.append(f"(It could not be copied aside: {_why(exc)}.)")
    return settings, " ".join(notes) or None


def _keep_if_not_ours(path: Path) -> None:
    """Copy the file at `path` aside unless this version wrote it (or could have): a newer
    version's file, or one changed into something unreadable since it was loaded. Raises
    OSError when the copy fails, so nothing is overwritten without its backup."""
    try:
        raw = path.read_bytes()
    except OSError:
        return  # nothing there; a folder there makes the write fail and say so
    try:
        version = _file_version(tomllib.loads(raw.decode("utf-8")))
        ours = (isinstance(version, int) and not isinstance(version, bool)
                and 1 <= version <= SETTINGS_VERSION)
    except (ValueError, RecursionError):
        ours = False
    if not ours:
        shutil.copy2(path, backup_path(path))


def save(settings: Settings, path: Path | None = None) -> None:
    """Write the settings atomically (a crash mid-write leaves the old file).

    A file of a newer version in the way is copied aside first (once: what replaces it is
    this version's); see the module docstring.
    """
    import tomlkit  # loaded when the settings are first written (never to open the window)

    path = path or settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    _keep_if_not_ours(path)
    doc = tomlkit.document()
    data = asdict(settings)
    data["version"] = SETTINGS_VERSION
    for key, value in data.items():
        if isinstance(value, list):  # one path a line: easy to read and to edit by hand
            paths = tomlkit.array()
            paths.extend(value)
            doc.add(key, paths.multiline(bool(value)))
        else:
            doc.add(key, value)
    write_text_atomic(path, doc.as_string())
