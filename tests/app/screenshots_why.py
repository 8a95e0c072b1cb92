"""Screenshots of Why? for the documentation (not a test): a real export of a tiny stack of Linear
blocks with layers.2's weight patched in the file, validated (it fails), then Why?.

    QT_QPA_PLATFORM=offscreen python tests/app/screenshots_why.py docs/screenshots [WIDTH]

Writes window_why_validation_WIDTH_light.png (the Validation tab with the answer and Save
repro…) and window_why_graph_WIDTH_light.png (the Graph tab opened at the first divergent
node, its properties); then the Variants panel on a model with a constant above 65504:
window_fp16_overflow_* (plain fp16, its overflows), window_fp16_keep_* (keep fp32 auto) and
window_fp16_keep_graph_* (its kept nodes outlined); WIDTH×768 (1024 unless told), grabbed
from the window itself.
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
    tmp = Path(tempfile.mkdtemp(prefix="shots_why_"))
    for name in ("CONFIG", "CACHE", "DATA", "OUTPUT"):
        os.environ.setdefault(f"ONNX_STUDIO_{name}_DIR", str(tmp / name.lower()))
    from PySide6.QtCore import QEventLoop
    from PySide6.QtWidgets import QApplication

    from onnx_studio.app import settings as settings_mod
    from onnx_studio.app.window import MainWindow
    from tests.engine.explain_models import exported, patched

    folder = tmp / "model"
    folder.mkdir()
    onnx_file, recipe = exported(folder, "Stack", "net")
    good = onnx_file.with_name("good.onnx")
    shutil.copy(onnx_file, good)
    patched(good, onnx_file, "layers.2.lin")

    app = QApplication.instance() or QApplication(sys.argv[:1])
    window = MainWindow(settings_mod.Settings(), None)
    leftovers = (window.autosave.toml, window.autosave.meta)
    window.load_initial(None)
    window.setGeometry(0, 0, width, height)
    window.resize(width, height)
    window.show()
    out_dir.mkdir(parents=True, exist_ok=True)

    def pump(seconds: float, until=lambda: False) -> None:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline and not until():
            app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)

    def shoot(name: str) -> Path:
        pump(0.5)
        path = out_dir / f"window_{name}_{width}_light.png"
        window.grab().save(str(path))
        print("wrote", path)
        return path

    pump(120, lambda: window.session.runner.ready_info is not None)
    window.open_path(recipe)
    validated: list[object] = []
    window.session.validationFinished.connect(validated.append)
    window.session.start_validation()
    pump(180, lambda: bool(validated))
    explained: list[object] = []
    window.session.explainer.explained.connect(explained.append)
    window.tabs.validation.why.why_button.click()
    pump(180, lambda: bool(explained))
    pump(1.0)
    shoot("why_graph")
    window.tabs.setCurrentWidget(window.tabs.validation)
    shoot("why_validation")

    # the Variants panel: fp16 of a model with a constant above 65504, plain then auto
    scaled, scaled_recipe = exported(folder, "Scaled")
    window.open_path(scaled_recipe)
    compare = window.tabs.compare
    compare.set_files(scaled, "")
    made: list[object] = []
    window.session.analysis.finished.connect(lambda _job, result: made.append(result))
    for keep in ("none", "auto"):
        compare.variants.kind.setCurrentText("fp16")
        compare.variants.keep.setCurrentText(keep)
        before = len(made)
        compare.variants.make_button.click()
        pump(300, lambda: len(made) > before)  # noqa: B023 (called within the loop)
    window.tabs.setCurrentWidget(compare)
    compare.variants.table.setCurrentCell(0, 0)
    shoot("fp16_overflow")
    compare.variants.table.setCurrentCell(1, 0)
    shoot("fp16_keep")
    compare.variants.graph_button.click()
    shoot("fp16_keep_graph")
    window.session.shutdown()
    window.close()
    for path in leftovers:
        path.unlink(missing_ok=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if explained else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), *(int(a) for a in sys.argv[2:3])))
