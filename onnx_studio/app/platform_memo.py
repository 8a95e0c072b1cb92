"""`usable(command)`: `onnx_studio.app.platform_check.ensure_usable`, remembered. A check that
passed here before is not run again while nothing it read has changed, so a start does not pay for
it (~30 ms of importing and reading libraries, against a window that opens in ~0.6 s).

What is remembered, in the cache folder's `platform-check.json`: this Python (its executable
and prefix), the environment the check reads (the display variables, QT_QPA_PLATFORM,
LD_LIBRARY_PATH), and the size, modification time and inode of every file the answer rests on
(`platform_check.Resolver.read`: Qt's libraries and plugins, the system libraries found, the
ld.so cache). Another display or platform, another Python, a library removed, replaced or
upgraded, or an `ldconfig` run: the check runs again. Only a pass is remembered (a problem is
found and said afresh every time), and not one that only dlopen could vouch for.

Nothing here imports Qt or the check itself; a memo that cannot be read or written is as if
there were none.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from onnx_studio.engine import dirs

MEMO = "platform-check.json"
_ENV = ("DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE", "QT_QPA_PLATFORM", "LD_LIBRARY_PATH")

__all__ = ["MEMO", "usable"]


def usable(command: str, env: Mapping[str, str] | None = None,
           memo: Path | None = None) -> int:
    """0 when the window can open here (remembered, or checked now); else what
    `ensure_usable` returns, having said why. `memo` defaults to the cache folder's."""
    env = os.environ if env is None else env
    memo = memo or dirs.cache_dir() / MEMO
    key = _key(env)
    if _passed(memo, key):
        return 0
    from onnx_studio.app.platform_check import ensure_usable

    read: set[str] = set()
    status = ensure_usable(command, env=env, read=read)
    if status == 0 and read and not any(p.startswith("dlopen:") for p in read):
        _remember(memo, key, read)
    return status


def _key(env: Mapping[str, str]) -> dict[str, object]:
    return {"python": [sys.executable, sys.prefix],
            "env": {name: env.get(name) for name in _ENV}}


def _stamp(path: str) -> list[int]:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _passed(memo: Path, key: Mapping[str, object]) -> bool:
    try:
        seen = json.loads(memo.read_text(encoding="utf-8"))
        return bool(seen["key"] == key and seen["files"] and all(
            _stamp(path) == stamp for path, stamp in seen["files"].items()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _remember(memo: Path, key: Mapping[str, object], files: Iterable[str]) -> None:
    try:
        text = json.dumps({"key": key, "files": {p: _stamp(p) for p in sorted(files)}})
        memo.parent.mkdir(parents=True, exist_ok=True)
        partial = memo.with_name(f".{memo.name}.{os.getpid()}.tmp")
    except OSError:
        return
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, memo)  # whole or not at all
    except OSError:
        partial.unlink(missing_ok=True)
