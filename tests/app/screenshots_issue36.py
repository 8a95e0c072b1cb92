"""Screenshots of issue 36's paths (not a test): the window's default example exported, then its
file changed on disk, validated again, profiled, compared with a copy of itself; the Log.

    QT_QPA_PLATFORM=offscreen python tests/app/screenshots_issue36.py docs/screenshots [WIDTH]

Writes window_NAME_WIDTH_THEME.png at WIDTH×768 (1024 unless told), light and dark, drawn from
the window itself: file_changed (the Summary of the file read again after it changed on disk:
the banner offers Validate it), file_failed (the same file validated: every view says it
failed), profile (per-node shares of a run that add up, a fused Conv+Relu named), compare_self
(the file against its copy: the graphs one at a time or side by side, the timing said to be
noise), and log (light only: torch's lines as sentences, long lines wrapped).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main(out_dir: Path, width: int = 1024, height: int = 768) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="shots_36_"))
    for name in ("CONFIG", "CACHE", "DATA", "OUTPUT"):
        os.environ.setdefault(f"ONNX_STUDIO_{name}_DIR", str(tmp / name.lower()))
    from PySide6.QtCore import QEventLoop, Qt
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QApplication

    from onnx_studio.app import settings as settings_mod
    from onnx_studio.app.window import MainWindow
    from tests.app.test_window_file_truth import change_one_weight

    app = QApplication.instance() or QApplication(sys.argv[:1])
    window = MainWindow(settings_mod.Settings(), None)
    leftovers = (window.autosave.toml, window.autosave.meta)
    window.load_initial(None)
    window.setGeometry(0, 0, width, height)
    window.resize(width, height)
    window.show()
    out_dir.mkdir(parents=True, exist_ok=True)
    session, tabs = window.session, window.tabs

    def pump(seconds: float, until=lambda: False) -> None:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline and not until():
            app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)

    def shoot(name: str, themes: tuple[str, ...] = ("light", "dark")) -> None:
        for theme in themes:
            window.set_theme(theme)
            pump(0.5)
            path = out_dir / f"window_{name}_{width}_{theme}.png"
            # 256 colours, most compressed: ~40 KB a screenshot, text as sharp
            image = window.grab().toImage().convertToFormat(
                QImage.Format.Format_Indexed8, Qt.ImageConversionFlag.ThresholdDither)
            image.save(str(path), "PNG", 0)
            print("wrote", path)
        window.set_theme("light")

    def wait_for(signal, start) -> None:  # type: ignore[no-untyped-def]
        heard: list[object] = []
        signal.connect(lambda *args: heard.append(args))
        start()
        pump(300, lambda: bool(heard))
        pump(1.0)

    pump(120, lambda: session.runner.ready_info is not None)
    wait_for(session.exportFinished, session.start_export)
    output = session.recipe.output_path
    tabs.setCurrentWidget(tabs.graph)
    pump(1.0)

    change_one_weight(output)
    pump(10, lambda: session.results.opened is not None and session.results.opened.reread)
    tabs.setCurrentWidget(tabs.summary)
    shoot("file_changed")
    wait_for(session.validationFinished, session.start_validation)
    tabs.setCurrentWidget(tabs.summary)
    shoot("file_failed")

    compare = tabs.compare
    tabs.setCurrentWidget(compare)
    compare.set_files(output)
    wait_for(session.analysis.finished, compare.start_profile)
    shoot("profile")
    copy = tmp / "copy.onnx"
    shutil.copyfile(output, copy)
    compare.set_files(output, copy)
    wait_for(session.analysis.finished, compare.start_compare)
    compare.views.setCurrentWidget(compare.graphs)
    pump(1.0)
    for browser in (compare.graphs.a, compare.graphs.b):
        browser.fit()
    shoot("compare_self")

    tabs.setCurrentWidget(tabs.log)
    tabs.log.verticalScrollBar().setValue(0)
    shoot("log", ("light",))
    session.shutdown()
    window.close()
    for path in leftovers:
        path.unlink(missing_ok=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), *(int(a) for a in sys.argv[2:3])))
