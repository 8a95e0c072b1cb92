"""Screenshots of the window's main states for the README (not a test).

    xvfb-run -s "-screen 0 1366x768x24" env QT_QPA_PLATFORM=xcb \\
        python tests/app/screenshots.py resources/screenshots [--only validation,...]

Writes window_empty.png, window_running.png, window_success.png, window_graph.png,
window_validation.png, window_validation_failed.png and window_failure.png at 1366x768,
grabbing the screen so what a user sees (menus, status bar) is what is saved. `--only`
saves just the states named.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main(out_dir: Path, only: set[str] | None = None) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="shots_"))
    os.environ.setdefault("ONNX_STUDIO_CONFIG_DIR", str(tmp / "config"))
    os.environ.setdefault("ONNX_STUDIO_CACHE_DIR", str(tmp / "cache"))
    os.environ.setdefault("ONNX_STUDIO_DATA_DIR", str(Path.home() / "onnx-studio"))
    from PySide6.QtCore import QEventLoop
    from PySide6.QtWidgets import QApplication

    from app.recipes import load_example
    from app.window import MainWindow
    from engine import shipped

    app = QApplication.instance() or QApplication(sys.argv[:1])
    window = MainWindow()
    window.load_initial(None)
    window.setGeometry(0, 0, 1366, 768)
    window.show()
    out_dir.mkdir(parents=True, exist_ok=True)

    def pump(seconds: float, until=lambda: False) -> None:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline and not until():
            app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)

    def shoot(name: str) -> None:
        if only and name not in only:
            return
        pump(0.3)
        screen = app.primaryScreen()
        image = screen.grabWindow(0, 0, 0, 1366, 768)
        image.save(str(out_dir / f"window_{name}.png"))
        print("wrote", out_dir / f"window_{name}.png")

    pump(10, lambda: window.session.runner.ready_info is not None)
    pump(1.0)
    shoot("empty")

    done: list[dict] = []
    window.session.exportFinished.connect(done.append)
    window.session.start_export()
    pump(60, lambda: window.form.export_bar.progress.value() >= 250)
    shoot("running")
    pump(120, lambda: bool(done))
    pump(1.0)
    shoot("success")
    window.tabs.setCurrentWidget(window.tabs.graph)
    shoot("graph")

    # one click on Validate, per-node numbers on: the tab shows outputs, trials and plots
    validated: list[dict] = []
    window.session.validationFinished.connect(validated.append)
    window.form.options_form.intermediates.setChecked(True)
    window.session.start_validation()
    pump(120, lambda: bool(validated))
    pump(1.0)
    window.tabs.setCurrentWidget(window.tabs.validation)
    shoot("validation")

    # a traced .item() is baked into the file: right for the export inputs only
    (tmp / "baked.py").write_text(
        "import torch\n\n\nclass Baked(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x * x.mean().item()\n", encoding="utf-8")
    from engine import recipe as recipes

    window.session.set_recipe(recipes.loads(
        'version = 1\n[model]\nsource = "baked.py:Baked"\n[[inputs]]\nname = "x"\n'
        'shape = [64, 32]\n[[outputs]]\nname = "y"\n[export]\noutput = "baked.onnx"\n'
        'exporter = "torchscript"\n[validate]\nenabled = true\nrandom_trials = 2\n',
        base_dir=tmp))
    done.clear()
    window.session.start_export()
    pump(120, lambda: bool(done))
    window.tabs.validation.sections.setCurrentWidget(window.tabs.validation.plots)
    pump(1.0)
    shoot("validation_failed")
    window.tabs.setCurrentWidget(window.tabs.summary)

    done.clear()
    window.session.set_recipe(load_example(shipped.recipes_dir() / "unconvertible.toml"))
    window.session.start_export()
    pump(120, lambda: bool(done))
    shoot("failure")
    window.close()
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    chosen = None
    if "--only" in args:
        at = args.index("--only")
        chosen = set(args[at + 1].split(","))
        del args[at:at + 2]
    raise SystemExit(main(Path(args[0] if args else "resources/screenshots"), chosen))
