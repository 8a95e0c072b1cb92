"""Open at once (issue 25, item 6): the first paint imports only what it draws, and a tab
built later (on first show) draws the session as it is then (at 1024 its verdicts in view).

How long the start takes is measured by tests/benchmarks/bench_window.py, never asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtCore import Qt

from onnx_studio.app import settings as settings_mod
from onnx_studio.app.recipes import format_table, parse_table, written_table
from onnx_studio.app.session import ExportSession
from onnx_studio.app.validation.tab import OUTPUT_HEADERS
from onnx_studio.app.window import MainWindow
from tests.app.conftest import EXPORT_TIMEOUT_MS, export_and_wait
from tests.conftest import REPO

# what the first paint draws does not need these: they load when a tab or a job needs them
NOT_AT_FIRST_PAINT = ("numpy", "pyqtgraph", "onnx", "onnxruntime", "torch",
                      "onnx_studio.engine.cli",
                      "onnx_studio.engine.validation", "onnx_studio.app.validation",
                      "onnx_studio.app.compare", "onnx_studio.app.graph.browser",
                      "onnx_studio.app.graph.canvas", "onnx_studio.app.results.python",
                      # the Graph tab's own module (built on first show) and the session's
                      # analysis (compare, profile, variants: made on first use)
                      "onnx_studio.app.graph.tab", "onnx_studio.app.graph.files",
                      "onnx_studio.app.session.analysis",
                      "onnx_studio.app.results.warnings",
                      # a job's outcome and an opened file's: with the first of them
                      "onnx_studio.app.outcomes",
                      # the jobs, the worker and the protocol they speak: with the first job
                      "onnx_studio.app.jobs", "onnx_studio.app.worker_client",
                      "onnx_studio.engine.worker_process",
                      "onnx_studio.engine.process_tree", "psutil", "onnx_studio.engine.protocol",
                      # the export machinery, the loader and the source parser (the form asks only
                      # which exporter "auto" means: onnx_studio.engine.export.choice, from the
                      # source's kind, onnx_studio.engine.source.kinds)
                      "onnx_studio.engine.export.exporter", "onnx_studio.engine.source.load",
                      "onnx_studio.engine.source.hf",
                      "onnx_studio.engine.source.describe", "onnx_studio.engine.source.signatures",
                      # the example models: the gallery fills right after the first frame
                      "onnx_studio.engine.source.examples",
                      # dialogs and the log file: when first opened, with the first log line
                      "onnx_studio.app.form.dynamic_axes", "logging.handlers",
                      # the TOML writer: the example's recipe file is written after the first
                      # frame, the settings when they change
                      "tomlkit", "onnx_studio.engine.toml_writer")

# what was loaded when exit-after-paint closes the window, right after the paint it timed
PROBE = """
import gc, json, sys
from onnx_studio.app import window as window_mod
from onnx_studio.app.launcher import main

at_paint = []
collecting = []
close = window_mod.MainWindow.close


def closing(self):
    at_paint.extend(sorted(sys.modules))
    collecting.append(gc.isenabled())
    return close(self)


window_mod.MainWindow.close = closing
status = main(["gui", "--exit-after-paint"])
print(json.dumps({"status": status, "modules": at_paint, "collecting": collecting}))
"""


def fresh_process(script: str, tmp_path: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """`python -c SCRIPT` offscreen in a fresh process whose folders are under tmp_path; it
    must end well."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "QT_QPA_PLATFORM": "offscreen",
           "ONNX_STUDIO_CONFIG_DIR": str(tmp_path / "config"),
           "ONNX_STUDIO_CACHE_DIR": str(tmp_path / "cache"),
           "ONNX_STUDIO_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done


def test_the_first_paint_imports_only_what_it_draws(tmp_path: Path) -> None:
    done = fresh_process(PROBE, tmp_path, timeout=100)
    lines = done.stdout.strip().splitlines()
    timings, probe = json.loads(lines[-2]), json.loads(lines[-1])
    assert probe["status"] == 0 and timings["window_s"] > 0, "the window was painted"
    modules = set(probe["modules"])
    assert "onnx_studio.app.window" in modules and "PySide6.QtWidgets" in modules
    loaded = sorted(name for name in modules
                    if any(name == heavy or name.startswith(heavy + ".")
                           for heavy in NOT_AT_FIRST_PAINT))
    assert loaded == [], "imported before the first paint"
    assert probe["collecting"] == [False], "the cyclic collector waits for the first frame"


REAL_START = """
import json, os, sys
from pathlib import Path
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication
from onnx_studio.app import settings
from onnx_studio.app.window import MainWindow

app = QApplication([])
window = MainWindow(settings.Settings(), None)  # as `onnx-studio gui` opens it
window.load_initial(None)
at_paint = {}
copy = Path(os.environ["ONNX_STUDIO_DATA_DIR"]) / "examples" / "default" / "default.toml"


class FirstFrame(QObject):
    def eventFilter(self, watched, event):
        if event.type() == QEvent.Type.Paint and not at_paint:
            at_paint.update(jobs="onnx_studio.app.jobs" in sys.modules,
            protocol="onnx_studio.engine.protocol"
                            in sys.modules, described=window.session.description is not None,
                            copy=copy.is_file(),
                            model=(copy.parent / "models" / "tiny_cnn.py").is_file())
        return False


first = FirstFrame()
window.installEventFilter(first)
window.show()
while not at_paint:
    app.processEvents()
session = window.session
while session.runner.ready_info is None or session.description is None:
    app.processEvents()  # the test's timeout ends a hang
print(json.dumps({"at_paint": at_paint, "worker": session.runner.worker_pid is not None,
                  "copy": copy.is_file() and "TinyCNN" in copy.read_text(encoding="utf-8"),
                  "kind": session.description.kind,
                  "candidates": [c.name for c in session.description.candidates]}))
window.close()
"""


def test_the_worker_starts_after_the_first_frame_and_describes_the_example(
        tmp_path: Path) -> None:
    """The first frame starts no process and loads no job machinery; right after it the
    worker starts, and the model the example names is described by it, and the example's
    recipe is written into its folder (its model file is there from the start)."""
    done = fresh_process(REAL_START, tmp_path, timeout=110)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["at_paint"] == {"jobs": False, "protocol": False, "described": False,
                                 "copy": False, "model": True}
    assert found["worker"] and found["copy"] and found["kind"] == "python"
    assert "TinyCNN" in found["candidates"], found


RUN = """
import gc, json
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from onnx_studio.app.main import run

app = QApplication([])
seen = []


def check():  # until the first frame is drawn the collector waits; then it runs again
    seen.append(gc.isenabled())
    if seen[-1]:
        for window in app.topLevelWidgets():
            window.close()
    else:
        QTimer.singleShot(10, check)


QTimer.singleShot(0, check)
status = run()
print(json.dumps({"status": status, "first": seen[0], "last": seen[-1]}))
"""


def test_the_collector_waits_for_the_first_frame_then_runs_again(tmp_path: Path) -> None:
    done = fresh_process(RUN, tmp_path, timeout=110)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"status": 0, "first": False, "last": True}, found


def test_only_the_shown_tabs_are_built_and_a_late_one_draws_the_session(
        shared_runner, qtbot) -> None:
    session = ExportSession(runner=shared_runner)
    window = MainWindow(settings_mod.Settings(), None, start_worker=False, session=session)
    qtbot.addWidget(window)
    session.start_worker()
    window.load_initial(None)
    window.show()
    window.resize(1024, 768)
    tabs = window.tabs
    qtbot.waitUntil(lambda: session.runner.ready_info is not None, timeout=60_000)
    assert [name for name in ("warnings", "validation", "graph", "python", "compare")
            if tabs.built(name)] == [], "only the Summary and the Log at start"
    session.recipe.validate.enabled = True
    outcome = export_and_wait(window, qtbot)
    assert outcome["report"]["ok"], outcome
    written = session.results.export.output
    assert written is not None and written.is_file()
    # a validated export shows the Summary; the Graph tab is built when clicked, on the file
    assert not tabs.built("graph")
    bar = tabs.tabBar()
    graph_index = next(i for i in range(tabs.count()) if tabs.tabText(i) == "Graph")
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(graph_index).center())
    assert tabs.built("graph") and tabs.currentIndex() == graph_index
    assert tabs.currentWidget() is tabs.graph
    qtbot.waitUntil(lambda: tabs.graph.loaded_path == written, timeout=EXPORT_TIMEOUT_MS)
    # the Validation tab, built after the validation ran, shows its verdict
    validation_index = next(i for i in range(tabs.count()) if tabs.tabText(i) == "Validation")
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(validation_index).center())
    view = tabs.validation
    assert tabs.currentWidget() is view
    result = session.validation_result
    assert result is not None and result.validation is not None
    assert view.verdict.text(), "the verdict of the validation that ran"
    # at 1024 beside the form: the outputs' numbers may scroll, their verdict stays in view
    qtbot.waitUntil(lambda: window.width() == 1024)
    table = view.outputs
    result = OUTPUT_HEADERS.index("Result")
    qtbot.waitUntil(lambda: table.topLevelItemCount() > 0 and table.viewport().width() > 0)
    header = table.header()
    left = header.sectionViewportPosition(result)
    assert left >= 0 and left + header.sectionSize(result) <= table.viewport().width(), (
        left, header.sectionSize(result), table.viewport().width())
    assert table.topLevelItem(0).text(result) == "✔ pass"
    window.close()


PLAIN = [{"num_classes": 10}, {"a": 1, "b-c_d": "x"}, {"neg": -5, "big": 10**20},
         {"f": 0.5, "g": 1e-05, "h": 1e20, "i": -0.0, "j": 3.0, "k": 1.5e-300},
         {"inf": float("inf"), "ninf": float("-inf")}, {"yes": True, "no": False},
         {"s": 'say "hi"', "t": "back\\slash", "u": "é ü 😀", "v": "", "w": "it's"},
         {"l": [1, 2, 3], "m": [], "n": [[1, 2], [3]], "o": ["a", 1.5, True]}]
WRITERS = [{"d": {"x": 1}}, {"k y": 1}, {"s": "tab\there"}, {"s": "a\u2028b"},
           {"s": "nb\u00a0sp"}, {"l": [{"x": 1}]}]


def test_the_kwargs_field_writes_plain_values_as_the_recipe_writer_does() -> None:
    """The form shows plain kwargs without loading tomlkit at the first paint: the same text
    the recipe writer (tomlkit) gives, read back as the same values; other values go to it."""
    for values in PLAIN + WRITERS:
        assert format_table(values) == written_table(values), values
    for values in PLAIN:
        assert parse_table(format_table(values)) == values
    assert format_table({"nan": float("nan")}) == written_table({"nan": float("nan")}) == \
        "nan = nan"
