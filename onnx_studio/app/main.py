"""Start the window: `python -m onnx_studio.app [FILE] [--exit-after-paint]`, or `onnx-studio gui`.

Only Qt and the light engine modules (recipe, errors) load before the window is shown; torch
lives in the worker process, and onnx/pyqtgraph load when the Graph tab first needs them.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import sys
import time
from pathlib import Path

_T0 = time.perf_counter()  # "launch" for window_s: this module starts loading


def _load_qt_free() -> None:
    """The window's Qt-free modules (the recipe and its TOML, the files, the settings, the
    recipe's fingerprints), loaded before Qt, so that PySide does not read their source
    (_load_qt)."""
    for name in ("onnx_studio.app.fingerprints", "onnx_studio.app.recipes",
                 "onnx_studio.app.settings"):
        importlib.import_module(name)


_FEATURE = "shibokensupport.feature"  # PySide's module of `from __feature__ import ...`


def _load_qt() -> None:
    """PySide6's widgets, told at once that the modules loaded before them do not use PySide.

    PySide reads the source of each module an import names after it loads, looking for its own
    name (shibokensupport.feature: a module that uses PySide may switch its `__feature__`s), and
    marks the module in a table, -1 for one that does not; typing, pathlib, dataclasses and the
    rest of what loaded first (none of it imports PySide6) would be read when a window module
    first imports from them (~1 MB of source, ~13 M instructions of a start). A PySide6
    without that table, or one loaded already, is left as it is."""
    before = None if "PySide6" in sys.modules else list(sys.modules)
    importlib.import_module("PySide6.QtWidgets")
    feature = sys.modules.get(_FEATURE)
    marks = getattr(feature, "pyside_feature_dict", None)
    if before is not None and isinstance(marks, dict):
        for name in before:
            marks.setdefault(name, -1)


def _collect_again() -> None:
    """After the first frame: what the start made stays out of the collector's sight
    (gc.freeze; still freed when its last reference goes), and it collects what comes next."""
    gc.freeze()
    gc.enable()


def run(path: str | None = None, exit_after_paint: bool = False,
        expand_all: bool = False) -> int:
    """Open the window on `path` (recipe, model or .onnx); returns the exit status.

    With `exit_after_paint`, paint once, print {"window_s", "graph_s", "nodes"} as one JSON
    line and return 0 (no worker is started); with `expand_all` too, `graph_s` runs until the
    graph is painted with every module expanded.
    """
    # The start makes ~30 000 objects that live as long as the window: the cyclic collector would
    # walk them again and again meanwhile (onnx_studio.engine.graph.model.no_gc does the same for a
    # graph). It collects again once the first frame is drawn.
    gc.disable()
    _load_qt_free()
    _load_qt()
    from PySide6.QtWidgets import QApplication

    from onnx_studio.app import settings as settings_mod
    from onnx_studio.app.session import ExportSession
    from onnx_studio.app.window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setApplicationName("ONNX Export Studio")
    app.setOrganizationName("onnx-studio")
    app.setDesktopFileName("onnx-studio")
    settings, notice = settings_mod.load()
    if notice:  # the user is told once: next start finds a good file
        with contextlib.suppress(OSError):  # unwritable: the notice says so, the window opens
            settings_mod.save(settings)
    # exit-after-paint paints what a start paints (the model is described by the worker once
    # it runs, after the first paint) and starts no worker
    session = ExportSession() if exit_after_paint else None
    window = MainWindow(settings, notice, start_worker=not exit_after_paint, session=session)
    file = Path(path).expanduser() if path else None
    window.load_initial(file if file is None or file.suffix.lower() == ".toml" else None)
    window.first_frame.after(_collect_again)
    window.show()
    if exit_after_paint:
        app.processEvents()
        window.repaint()
        window_s = time.perf_counter() - _T0
        graph_s: float | None = None
        nodes: int | None = None
        if file is not None and file.suffix.lower() != ".toml":
            window.tabs.setCurrentWidget(window.tabs.graph)
            graph_s, nodes = window.tabs.graph.time_load(file, expand_all=expand_all)
        print(json.dumps({"window_s": round(window_s, 4),
                          "graph_s": round(graph_s, 4) if graph_s is not None else None,
                          "nodes": nodes}), flush=True)
        window.close()
        _collect_again()  # as a start does after its first frame (its exit scans none of it)
        return 0
    if file is not None and file.suffix.lower() != ".toml":
        window.open_path(file)
    return int(app.exec())


def main(argv: list[str] | None = None, prog: str = "python -m onnx_studio.app") -> int:
    """`python -m onnx_studio.app [FILE] [--exit-after-paint] [--expand-all]` (`onnx-studio
    gui` too, as `prog`); the exit status."""
    args_list = sys.argv[1:] if argv is None else argv
    if args_list[:1] == ["--worker"]:  # the frozen build starts its worker this way
        from onnx_studio.engine.worker import main as worker_main

        return worker_main()
    parser = argparse.ArgumentParser(prog=prog, description="ONNX Export Studio")
    parser.add_argument("file", nargs="?", help="a recipe (.toml), model or .onnx file")
    parser.add_argument("--exit-after-paint", action="store_true",
                        help="paint once, print timings as JSON and exit")
    parser.add_argument("--expand-all", action="store_true",
                        help="with --exit-after-paint: time the graph painted fully expanded")
    args = parser.parse_args(args_list)
    from onnx_studio.app.platform_memo import usable  # before Qt: no display, missing libraries

    frozen = getattr(sys, "frozen", False)
    status = usable(Path(sys.executable).name if frozen else prog)
    if status:
        return status
    return run(args.file, args.exit_after_paint, args.expand_all)
