"""The `onnx-studio` console script: every engine command, plus `gui` (the default).

Kept free of Qt imports so `onnx-studio export` starts as fast as the engine alone; Qt loads
only when the window is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence


def _open_window(file: str | None, exit_after_paint: bool) -> int:
    from app.main import run

    return run(file, exit_after_paint)


def main(argv: Sequence[str] | None = None) -> int:
    from engine.cli import main as cli_main

    return cli_main(argv, open_window=_open_window)
