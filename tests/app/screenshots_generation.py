"""Screenshots of the Generation section (issue 37.4), not a test: a tiny GPT-2 with
transformers' default initialisation (its greedy decoding repeats one token) exported with its
cache and validated in the window, then the Validation tab's Generation section.

    QT_QPA_PLATFORM=offscreen python tests/app/screenshots_generation.py docs/screenshots [WIDTH]

Writes window_generation_WIDTH_THEME.png at WIDTH×768 (1024 unless told), light and dark: the
teacher-forced steps' verdict (worst step, top-1 at every step), the prompt and the
continuation, the sentence that the constant greedy tokens prove little, and the step table.
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


def _tiny_gpt2(folder: Path) -> Path:
    import torch
    import transformers

    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=500, n_embd=32, n_layer=2, n_head=4, n_positions=128)).save_pretrained(folder)
    return folder


def main(out_dir: Path, width: int = 1024, height: int = 768) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="shots_generation_"))
    for name in ("CONFIG", "CACHE", "DATA", "OUTPUT"):
        os.environ.setdefault(f"ONNX_STUDIO_{name}_DIR", str(tmp / name.lower()))
    from PySide6.QtCore import QEventLoop, Qt
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QApplication

    from onnx_studio.app import settings as settings_mod
    from onnx_studio.app.window import MainWindow

    folder = _tiny_gpt2(tmp / "gpt2")
    app = QApplication.instance() or QApplication(sys.argv[:1])
    window = MainWindow(settings_mod.Settings(), None)
    leftovers = (window.autosave.toml, window.autosave.meta)
    window.load_initial(None)
    window.setGeometry(0, 0, width, height)
    window.resize(width, height)
    window.show()
    out_dir.mkdir(parents=True, exist_ok=True)
    session, tabs = window.session, window.tabs

    def pump(seconds: float, until=lambda: False) -> None:  # type: ignore[no-untyped-def]
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

    pump(120, lambda: session.runner.ready_info is not None)
    assert window.open_hf_folder(folder)
    pump(120, lambda: window.form.hf_task.task.count() > 0)
    with session.edit("options") as recipe:
        recipe.validate.enabled = True
    heard: list[object] = []
    session.exportFinished.connect(lambda *args: heard.append(args))
    session.start_export()
    pump(600, lambda: bool(heard))
    pump(1.0)
    validation = tabs.validation
    tabs.setCurrentWidget(validation)
    validation.sections.setCurrentWidget(validation.generation)
    pump(1.0)
    shoot("generation")
    session.shutdown()
    window.close()
    for path in leftovers:
        path.unlink(missing_ok=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), *(int(a) for a in sys.argv[2:3])))
