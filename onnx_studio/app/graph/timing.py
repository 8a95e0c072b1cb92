"""Open → painted timing of the graph tab, for `--exit-after-paint` and the benchmarks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEventLoop, QTimer

if TYPE_CHECKING:
    from onnx_studio.app.graph.browser import GraphBrowser


def time_first_paint(browser: GraphBrowser, path: str | Path, timeout_s: float = 10.0,
                     expand_all: bool = False) -> tuple[float, int]:
    """Load ``path`` into a shown browser (with every module expanded and the whole graph
    fitted when ``expand_all``) and wait for the view's first paint.

    Returns ``(graph_s, nodes)``: seconds from the call to the painted view, and the number
    of nodes in the main graph (0 when the file could not be shown). A browser that is not
    on screen (a hidden tab) is painted into an offscreen picture instead of waited for.
    """
    t0 = time.perf_counter()
    loop = QEventLoop()
    browser.view.painted.connect(loop.quit)
    try:
        ok = browser.load_file(path, expand_all=expand_all)
        if ok and expand_all:
            browser.view.fit()
        if ok and browser.view.isVisible():
            browser.view.viewport().update()
            QTimer.singleShot(int(timeout_s * 1000), loop.quit)
            loop.exec()
        elif ok:
            browser.view.grab()
    finally:
        browser.view.painted.disconnect(loop.quit)
    seconds = time.perf_counter() - t0
    return seconds, len(browser.root.nodes) if ok and browser.root is not None else 0
