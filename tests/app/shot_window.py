"""The window the screenshot scripts draw (tests/app/screenshots_*.py; not a test): a real
MainWindow offscreen at WIDTH×HEIGHT, its config, cache, data and output folders in a temporary
folder of its own; `pump` lets it work, `wait_for` runs a job to its signal and `shoot` saves
what it shows in each theme asked (256 colours, most compressed: ~40 KB a picture, text as
sharp).

    with shot_window("shots_x_", out_dir, width) as shots:
        shots.wait_for(shots.window.session.exportFinished, shots.window.session.start_export)
        shots.shoot("exported")
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def indexed(image: Any) -> Any:
    """`image` in 256 colours: its own when it has no more, else its 256 most frequent (the
    backgrounds, text and boxes exactly; an anti-aliased edge takes the nearest of them).
    Qt's own conversion of a picture of more colours maps them onto a fixed colour cube, which
    turned the dark theme's grey panels teal."""
    import numpy as np
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage

    rgb = image.convertToFormat(QImage.Format.Format_RGB32)
    pixels = np.frombuffer(rgb.constBits(), np.uint32, rgb.sizeInBytes() // 4)
    colours, counts = np.unique(pixels, return_counts=True)
    table = [int(c) for c in colours[np.argsort(counts)[::-1][:256]]]
    return rgb.convertToFormat(QImage.Format.Format_Indexed8, table,
                               Qt.ImageConversionFlag.ThresholdDither)


@contextlib.contextmanager
def shot_window(prefix: str, out_dir: Path, width: int, height: int = 768
                ) -> Iterator[Shots]:
    """The window, shown with its default example once its worker is ready; shut down, and
    its temporary folder removed, after the block."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    for name in ("CONFIG", "CACHE", "DATA", "OUTPUT"):
        os.environ.setdefault(f"ONNX_STUDIO_{name}_DIR", str(tmp / name.lower()))
    shots = Shots(tmp, out_dir, width, height)
    try:
        shots.pump(120, lambda: shots.window.session.runner.ready_info is not None)
        yield shots
    finally:
        shots.close()
        shutil.rmtree(tmp, ignore_errors=True)


class Shots:
    def __init__(self, tmp: Path, out_dir: Path, width: int, height: int) -> None:
        from PySide6.QtWidgets import QApplication

        from onnx_studio.app import settings as settings_mod
        from onnx_studio.app.window import MainWindow

        self.tmp, self.out_dir, self.width = tmp, out_dir, width
        self.app = QApplication.instance() or QApplication(sys.argv[:1])
        self.window = MainWindow(settings_mod.Settings(), None)
        self._leftovers = (self.window.autosave.toml, self.window.autosave.meta)
        self.window.load_initial(None)
        self.window.setGeometry(0, 0, width, height)
        self.window.resize(width, height)
        self.window.show()
        out_dir.mkdir(parents=True, exist_ok=True)

    def pump(self, seconds: float, until: Callable[[], object] = lambda: False) -> None:
        """Run the event loop for `seconds`, or until `until()` is true."""
        from PySide6.QtCore import QEventLoop

        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline and not until():
            self.app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)

    def wait_for(self, signal: Any, start: Callable[[], object], seconds: float = 300) -> None:
        """Call `start` and pump until `signal` is emitted (then a second more, to draw)."""
        heard: list[object] = []
        signal.connect(lambda *args: heard.append(args))
        start()
        self.pump(seconds, lambda: bool(heard))
        self.pump(1.0)

    def shoot(self, name: str, themes: tuple[str, ...] = ("light", "dark")) -> list[Path]:
        """window_NAME_WIDTH_THEME.png for each theme; the window is left light."""
        paths = []
        for theme in themes:
            self.window.set_theme(theme)
            self.pump(0.5)
            path = self.out_dir / f"window_{name}_{self.width}_{theme}.png"
            image = indexed(self.window.grab().toImage())
            image.save(str(path), "PNG", 0)
            print("wrote", path)
            paths.append(path)
        self.window.set_theme("light")
        return paths

    def close(self) -> None:
        self.window.session.shutdown()
        self.window.close()
        for path in self._leftovers:
            path.unlink(missing_ok=True)
