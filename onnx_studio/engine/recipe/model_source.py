"""What a `model.source` string names, read without touching the disk: (file, name) of
"net.py:Net", the built-in `example:`/`torchvision:`/`timm:` sources, the folder sources (`hf:`).
"""

from __future__ import annotations

import re

_PY_SOURCE = re.compile(r"^(?P<path>.+\.py)(?::(?P<name>[^:/\\]*))?$")


def split_source(source: str) -> tuple[str | None, str]:
    """(file, name) of a source string, by parse's rules and without touching the disk.

    "net.py:Net" -> ("net.py", "Net"); "model.pt" or "C:\\m\\model.pt" -> (that path, "");
    "example:alexnet" -> (None, "alexnet"); "" -> (None, "").
    """
    text = source.strip()
    builtin = builtin_source(text)
    if builtin is not None:
        return None, builtin[2]
    if not text:
        return None, ""
    return python_source_parts(text) or (text, "")


def is_folder_source(source: str) -> bool:
    """True for the sources that export several files into a folder (`hf:`, `hf-config:`)."""
    return source.strip().startswith(("hf:", "hf-config:"))


def builtin_source(text: str) -> tuple[str, None, str] | None:
    """(kind, None, name) for the example:, torchvision: and timm: sources, which name no
    file."""
    for prefix in ("example", "torchvision", "timm"):
        if text.startswith(prefix + ":"):
            return prefix, None, text[len(prefix) + 1:].strip()
    return None


def python_source_parts(text: str) -> tuple[str, str] | None:
    """(file, name) when `text` names a .py file (a Windows drive colon is not a name's)."""
    match = _PY_SOURCE.match(text)
    return (match["path"], (match["name"] or "").strip()) if match else None
