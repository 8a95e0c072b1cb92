"""The `onnx-studio` console script: every engine command, plus `gui` (the default).

Kept free of Qt imports so `onnx-studio export` starts as fast as the engine alone; Qt loads only
when the window is asked for, and only after `onnx_studio.app.platform_check` has found that it can
open one here (else the reason and the fix are printed and the exit status is 2; a pass is
remembered while nothing it read changes: onnx_studio.app.platform_memo). The window (`onnx-studio`
alone, or `gui`) is served by onnx_studio.app.main without importing the engine's command line,
whose parsers and commands the window never uses: it opens at once. `export` and `validate` start
their worker first thing, so that its start (torch's import) overlaps the command line's own
(onnx_studio.engine.worker_process.start_early).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

# the commands that run one job in a worker of their own (onnx_studio.engine.cli)
_ONE_WORKER_JOB = ("export", "validate")


def _open_window(file: str | None, exit_after_paint: bool, expand_all: bool = False) -> int:
    from onnx_studio.app.platform_memo import usable  # Qt-free: no display, missing libraries

    status = usable("onnx-studio gui")
    if status:
        return status
    from onnx_studio.app.main import run

    return run(file, exit_after_paint, expand_all)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] == "gui":  # the window: onnx_studio.app.main parses gui's own options
        from onnx_studio.app.main import main as window_main

        return window_main(args[1:], prog="onnx-studio gui")
    from onnx_studio.engine.worker_process import end_unclaimed, start_early

    if args[0] in _ONE_WORKER_JOB and not {"-h", "--help"} & set(args):
        start_early()  # torch's import in the worker overlaps the CLI's own start
    try:
        from onnx_studio.engine.cli import main as cli_main

        return cli_main(args, open_window=_open_window)
    finally:
        end_unclaimed()
