"""Screenshots of the window's main states for the documentation (not a test).

    xvfb-run -s "-screen 0 1366x768x24" env QT_QPA_PLATFORM=xcb \\
        python tests/app/screenshots.py docs/images [--only validation,...]

Writes window_empty.png, window_running.png, window_success.png, window_graph.png,
window_validation.png, window_validation_failed.png and window_failure.png at 1366x768,
grabbing the screen so what a user sees (menus, status bar) is what is saved. `--only`
saves just the states named. The window takes the screen's size up to 1366x768, so
`-screen 0 1024x768x24` shows what a small screen shows.

`--only graph_expanded` saves the Graph tab with a 24-layer GPT-2 fully expanded
(window_graph_expanded.png; the file from tests/benchmarks/bench_graph.py's cache).

Issue 25's states, light and dark, are taken when named in `--only`: start, running, folded,
compare (window_NAME_WIDTH_THEME.png). Without a screen (QT_QPA_PLATFORM=offscreen) the
window is drawn into the PNG instead, at ONNX_STUDIO_SHOT_SIZE (1024x768, say).

Issue 13's states, light and dark, are taken when named in `--only`: form, stale,
warning_detail, validation, rejudged, graph (every module expanded, fitted); they are written
as window_NAME_WIDTH_THEME.png (docs/screenshots/ holds them at 1024 and 1366 wide). Every
PNG is shrunk with pngquant and optipng where they are installed.

The states of issue 11 (verdicts with their cause) are taken only when named in `--only`:
auto_exporter, fills, warnings, dropped_input, failure_details, shape_mismatch, sys_exit,
output_problem, batchnorm; they are written as issue11_NAME.png.
"""

from __future__ import annotations

import atexit
import os
import subprocess
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

    from onnx_studio.app.recipes import load_example
    from onnx_studio.app.window import MainWindow
    from onnx_studio.engine import shipped

    app = QApplication.instance() or QApplication(sys.argv[:1])
    window = MainWindow()
    # the script's edits are no one's unsaved work: no recovery file is left for the next run
    leftovers = (window.autosave.toml, window.autosave.meta)
    atexit.register(lambda: [path.unlink(missing_ok=True) for path in leftovers])
    window.load_initial(None)
    screen_size = app.primaryScreen().size()
    width, height = min(1366, screen_size.width()), min(768, screen_size.height())
    offscreen = app.platformName() == "offscreen"  # no screen to grab: the window is drawn
    if os.environ.get("ONNX_STUDIO_SHOT_SIZE"):  # 1024x768: the size, whatever the screen
        width, height = (int(n) for n in os.environ["ONNX_STUDIO_SHOT_SIZE"].split("x"))
    window.setGeometry(0, 0, width, height)
    window.show()
    out_dir.mkdir(parents=True, exist_ok=True)

    def pump(seconds: float, until=lambda: False) -> None:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline and not until():
            app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)

    def shoot(name: str, prefix: str = "window", chosen: bool = False) -> None:
        if only and name not in only and not chosen:
            return
        pump(0.3)
        screen = app.primaryScreen()
        image = window.grab() if offscreen else screen.grabWindow(0, 0, 0, width, height)
        image.save(str(out_dir / f"{prefix}_{name}.png"))
        shrink(out_dir / f"{prefix}_{name}.png")
        print("wrote", out_dir / f"{prefix}_{name}.png")

    if only == {"graph_expanded"}:
        graph_expanded(window, pump, out_dir)
        window.close()
        return 0
    pump(10, lambda: window.session.runner.ready_info is not None)
    pump(1.0)
    if only and only <= set(ISSUE13_STATES):
        def shoot13(name: str) -> None:  # window_NAME_WIDTH_THEME.png
            state, _, theme = name.rpartition("_")
            shoot(f"{state}_{width}_{theme}", "window", True)

        issue13(window, pump, shoot13, only)
        window.close()
        return 0
    if only and only <= set(ISSUE25_STATES):
        issue25(window, pump, lambda name: shoot(name, "window", True), width, only, tmp)
        window.close()
        return 0
    if only and only <= set(ISSUE11_STATES):
        issue11(window, pump, lambda name: shoot(name, "issue11"), only, tmp)
        window.close()
        return 0
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
    from onnx_studio.engine import recipe as recipes

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


def shrink(path: Path) -> None:
    """Fewer colours (pngquant, 256 at most) and a tighter PNG (optipng) where installed, so a
    screenshot stays around 100 KB; the file is left as Qt wrote it otherwise."""
    for command in (["pngquant", "--force", "--skip-if-larger", "--quality", "80-98",
                     "--output", str(path), str(path)], ["optipng", "-quiet", "-o2", str(path)]):
        try:
            subprocess.run(command, check=False, timeout=120)
        except FileNotFoundError:
            continue


def graph_expanded(window, pump, out_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """The Graph tab with every module of a 24-layer GPT-2 expanded (the graph benchmark's
    cached export, or the file in ONNX_STUDIO_SHOT_GRAPH), at 80 % on the second block,
    the minimap showing where that is; saved as window_graph_expanded.png."""
    from PySide6.QtCore import QPointF

    path = Path(os.environ.get("ONNX_STUDIO_SHOT_GRAPH", Path(tempfile.gettempdir())
                               / "onnx-studio-bench-graph" / "gpt2_24_dynamic.onnx"))
    tab = window.tabs.graph
    window.tabs.setCurrentWidget(tab)
    tab.load_file(path)
    browser = tab.browser
    browser.expand_all()
    pump(0.3)
    sc = browser.canvas.scene_data
    box = sc.boxes[sc.index["g:h.1"]]
    browser.view.set_zoom(0.8)
    browser.view.centerOn(QPointF(box.x + box.w / 2,
                                  box.y + browser.view.viewport().height() / 1.6))
    pump(0.5)
    target = out_dir / "window_graph_expanded.png"
    window.grab().save(str(target))
    print("wrote", target)


ISSUE13_STATES = ("form", "stale", "warning_detail", "validation", "rejudged", "graph")


def issue13(window, pump, shoot, only: set[str]) -> None:  # type: ignore[no-untyped-def]
    """Issue 13's states, each in the light and the dark theme (window_NAME_WIDTH_THEME.png):
    the form after an export, the stale banner, a warning's detail pane, the validation, the
    same validation judged again at another tolerance, and the Graph tab with every module
    expanded (the exported example, or the file in ONNX_STUDIO_SHOT_GRAPH), fitted, or at
    80 % from its top when fitting shrinks it further (labels show from about there)."""
    session, tabs = window.session, window.tabs
    finished: list[object] = []
    session.exportFinished.connect(finished.append)

    def both(name: str) -> None:
        for theme in ("light", "dark"):
            window.set_theme(theme)
            pump(0.5)
            shoot(f"{name}_{theme}")
        window.set_theme("light")

    def export() -> None:
        finished.clear()
        session.start_export()
        pump(120, lambda: bool(finished))
        pump(1.0)

    export()  # the default example, validated
    tabs.setCurrentWidget(tabs.summary)
    if "form" in only:
        both("form")
    if "graph" in only:
        graph = tabs.graph
        shown = os.environ.get("ONNX_STUDIO_SHOT_GRAPH")
        if shown:
            graph.load_file(Path(shown))
        tabs.setCurrentWidget(graph)
        pump(0.5)
        browser = graph.browser
        browser.expand_all()
        pump(0.5)
        browser.fit()
        if browser.view.scale_factor() < 0.8:  # labels show from about 80 %: the top of it
            from PySide6.QtCore import QPointF

            browser.view.set_zoom(0.8)
            browser.view.userMoved.emit()  # as a user's zoom: no longer fitted on a resize
            top = browser.canvas.boundingRect()
            browser.view.centerOn(QPointF(top.center().x(), top.top()
                                          + browser.view.viewport().height() / 2 / 0.8))
        both("graph")
    if "validation" in only:
        tabs.setCurrentWidget(tabs.validation)
        both("validation")
    if "rejudged" in only:
        tabs.setCurrentWidget(tabs.validation)
        window.form.options_form.atol.setText("0")
        window.form.options_form.atol.editingFinished.emit()
        window.form.options_form.rtol.setText("0")
        window.form.options_form.rtol.editingFinished.emit()
        both("rejudged")
    if "stale" in only:
        tabs.setCurrentWidget(tabs.summary)
        window.form.model_form.kwargs.setText("num_classes = 7")
        window.form.model_form.kwargs.editingFinished.emit()
        both("stale")
    if "warning_detail" in only:
        from onnx_studio.engine import shipped

        session.load_example(shipped.recipes_dir() / "item_reshape.toml")
        export()
        tabs.setCurrentWidget(tabs.warnings)
        view = tabs.warnings
        row = next((i for i in range(view.count())
                    if view.tree.topLevelItem(i).text(2)), 0)
        view.tree.setCurrentItem(view.tree.topLevelItem(row))
        both("warning_detail")


ISSUE25_STATES = ("start", "running", "folded", "compare")


def issue25(window, pump, shoot, width: int, only: set[str], tmp: Path) -> None:  # type: ignore[no-untyped-def]
    """Issue 25's states, light and dark (window_NAME_WIDTH_THEME.png): the window as it
    opens, an export running (the status bar says what), the form folded away after an
    export, and Compare's two graphs side by side without their properties panels."""
    from tests.app.conftest import write_mlp

    session, tabs = window.session, window.tabs
    finished: list[object] = []
    session.exportFinished.connect(finished.append)

    def both(name: str) -> None:
        for theme in ("light", "dark"):
            window.set_theme(theme)
            pump(0.5)
            shoot(f"{name}_{width}_{theme}")
        window.set_theme("light")

    if "start" in only:
        both("start")
    if "running" in only:
        session.start_export()
        pump(60, lambda: window.form.export_bar.progress.value() >= 250)
        shoot(f"running_{width}_light")
    pump(120, lambda: bool(finished) or not session.busy)
    if "folded" in only:
        if not finished:
            session.start_export()
            pump(120, lambda: bool(finished))
        window.fold.set_shown(False)
        tabs.setCurrentWidget(tabs.summary)
        both("folded")
        window.fold.set_shown(True)
    if "compare" in only:
        window.fold.set_shown(False)
        tab = tabs.compare
        tabs.setCurrentWidget(tab)
        a, b = write_mlp(tmp / "a.onnx", 1.0), write_mlp(tmp / "b.onnx", 1.5, extra=True)
        tab.set_files(a, b)
        finished.clear()
        tab.analysis.finished.connect(lambda *_: finished.append(True))
        tab.start_compare()
        pump(120, lambda: bool(finished))
        tab.views.setCurrentWidget(tab.graphs)
        tab.graphs.a.toolbar.properties_action.setChecked(False)
        pump(0.5)
        tab.graphs.a.fit()
        tab.graphs.b.fit()
        both("compare")
        window.fold.set_shown(True)


ISSUE11_STATES = ("auto_exporter", "fills", "warnings", "dropped_input", "failure_details",
                  "shape_mismatch", "sys_exit", "output_problem", "batchnorm")


def issue11(window, pump, shoot, only: set[str], tmp: Path) -> None:  # type: ignore[no-untyped-def]
    """The window showing each verdict of issue 11 (the models of test_window_verdicts)."""
    from onnx_studio.engine import recipe as recipes
    from tests.app.test_window_verdicts import MODELS, TOKENS

    (tmp / "nets.py").write_text(MODELS, encoding="utf-8")
    session, tabs = window.session, window.tabs
    finished: list[object] = []
    session.exportFinished.connect(finished.append)
    session.validationFinished.connect(finished.append)

    def load(body: str) -> None:
        session.set_recipe(recipes.loads("version = 1\n" + body, base_dir=tmp))
        pump(0.5)

    def run(start) -> None:  # type: ignore[no-untyped-def]
        finished.clear()
        start()
        pump(120, lambda: bool(finished))
        pump(1.0)

    if "auto_exporter" in only:
        subprocess.run([sys.executable, "-c",
                        "import sys, torch; sys.path.insert(0, sys.argv[1]); import nets; "
                        "torch.jit.script(nets.Net()).save(sys.argv[2])", str(tmp),
                        str(tmp / "scripted.pt")], check=True, timeout=120)
        load('[model]\nsource = "scripted.pt"\n[[inputs]]\nname = "x"\nshape = [2, 4]\n'
             '[export]\noutput = "scripted.onnx"\n')
        run(session.start_export)
        tabs.setCurrentWidget(tabs.summary)
        shoot("auto_exporter")
    if "fills" in only:
        (tmp / "tokens.py").write_text(TOKENS, encoding="utf-8")
        session.set_recipe(recipes.Recipe(base_dir=tmp))
        window.open_path(tmp / "tokens.py")
        pump(30, lambda: len(session.recipe.inputs) == 2)
        table = window.form.inputs_table.table
        for row in range(2):
            table.cellWidget(row, 2).setCurrentText("int64")
            table.item(row, 1).setText("2x16")
        pump(0.5)
        table.cellWidget(1, 3).showPopup()
        shoot("fills")
        table.cellWidget(1, 3).hidePopup()
    if "warnings" in only:
        load('[model]\nsource = "nets.py:FixedBatch"\n[[inputs]]\nname = "x"\n'
             'shape = [2, 8]\ndynamic = { 0 = "batch" }\n[[outputs]]\nname = "y"\n'
             'dynamic = { 0 = "batch" }\n[export]\noutput = "fixed.onnx"\n')
        run(session.start_export)
        tabs.setCurrentWidget(tabs.warnings)
        tabs.warnings.tree.setCurrentItem(tabs.warnings.tree.topLevelItem(0))
        shoot("warnings")
    if "dropped_input" in only:
        load('[model]\nsource = "nets.py:IgnoresMask"\n[[inputs]]\nname = "x"\nshape = [2, 4]\n'
             '[[inputs]]\nname = "mask"\nshape = [2, 4]\n[export]\noutput = "mask.onnx"\n'
             'exporter = "torchscript"\n')
        run(session.start_export)
        tabs.setCurrentWidget(tabs.warnings)
        shoot("dropped_input")
    if "failure_details" in only:
        load('[model]\nsource = "nets.py:Branchy"\n[[inputs]]\nname = "x"\nshape = [2, 4]\n'
             '[export]\noutput = "branchy.onnx"\n')
        run(session.start_export)
        tabs.setCurrentWidget(tabs.summary)
        tabs.summary.details_button.setChecked(True)
        shoot("failure_details")
    if "shape_mismatch" in only:
        load('[model]\nsource = "nets.py:Baked"\n[[inputs]]\nname = "x"\nshape = [4, 3]\n'
             'dynamic = { 0 = "batch" }\n[export]\noutput = "baked.onnx"\n'
             'exporter = "torchscript"\n')
        run(session.start_export)
        run(session.start_validation)
        tab = tabs.validation
        tab.sections.setCurrentWidget(tab.trials)
        shoot("shape_mismatch")
    if "sys_exit" in only:
        load('[model]\nsource = "nets.py:Quits"\n[[inputs]]\nname = "x"\nshape = [2, 4]\n'
             'dynamic = { 0 = "batch" }\n[export]\noutput = "quits.onnx"\n'
             'exporter = "torchscript"\n[validate]\nenabled = true\nrandom_trials = 1\n')
        run(session.start_export)
        tabs.setCurrentWidget(tabs.summary)
        shoot("sys_exit")
    if "output_problem" in only:
        (tmp / "a_file").write_text("x", encoding="utf-8")
        load('[model]\nsource = "nets.py:Net"\n[[inputs]]\nname = "x"\nshape = [2, 4]\n'
             '[export]\noutput = "a_file/out.onnx"\n')
        shoot("output_problem")
    if "batchnorm" in only:
        load('[model]\nsource = "nets.py:ConvBN"\n[[inputs]]\nname = "x"\n'
             'shape = [2, 3, 12, 12]\n[export]\noutput = "cnn.onnx"\n'
             '[validate]\nenabled = true\nrandom_trials = 1\n')
        run(session.start_export)
        tabs.setCurrentWidget(tabs.summary)
        shoot("batchnorm")


if __name__ == "__main__":
    args = sys.argv[1:]
    chosen = None
    if "--only" in args:
        at = args.index("--only")
        chosen = set(args[at + 1].split(","))
        del args[at:at + 2]
    raise SystemExit(main(Path(args[0] if args else "resources/screenshots"), chosen))
