"""Window benchmarks: time to a painted window, against a bare PySide6 QMainWindow started
the same way in the same invocation (runs interleaved: app, bare, app, bare, ...), event-loop
stalls during an export, and the start latency of an export on the warm worker. Prints a table
(median of several runs) and the start ratio (the goal: at most 2x the bare window), and the
start against a second anchor: a plain PySide6 window showing the same kinds and number of
widgets as the studio's first frame, without application code.

    cd /work/main && QT_QPA_PLATFORM=offscreen python tests/benchmarks/bench_window.py \
        [--runs 5] [--start-only] [--instructions]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

BARE_WINDOW = (
    "import time; t = time.perf_counter()\n"
    "from PySide6.QtWidgets import QApplication, QMainWindow\n"
    "app = QApplication([]); w = QMainWindow(); w.setWindowTitle('bare'); w.show()\n"
    "app.processEvents(); w.repaint(); print(time.perf_counter() - t)\n"
)
# A second anchor: a plain PySide6 window holding what the studio's first frame shows (a menu
# bar, a splitter, a scrolled form of labelled fields, buttons, choices, check boxes, spin boxes,
# three tables and a list, an export bar, seven tabs, a status bar), with no application code:
# what any PySide6 window with this much on screen pays, fonts and styles included.
FORM_WINDOW = """\
import time; t = time.perf_counter()
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QApplication, QCheckBox, QComboBox, QFormLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit,
    QListWidget, QMainWindow, QProgressBar, QPushButton, QScrollArea, QSpinBox, QSplitter,
    QTableWidget, QTabWidget, QVBoxLayout, QWidget)
app = QApplication([]); w = QMainWindow(); w.setWindowTitle("form")
for title in ("File", "Export", "View", "Help"):
    menu = w.menuBar().addMenu(title)
    for i in range(6):
        menu.addAction(f"{title} action {i}")
left = QWidget(); column = QVBoxLayout(left)
area = QScrollArea(); area.setWidgetResizable(True); inner = QWidget(); rows = QVBoxLayout(inner)
for g in range(4):
    box = QGroupBox(f"Section {g}"); form = QFormLayout(box)
    for i in range(4):
        line = QHBoxLayout(); line.addWidget(QLineEdit(f"value {g}.{i}"))
        line.addWidget(QPushButton("Browse...")); form.addRow(QLabel(f"Field {g}.{i}"), line)
    choice = QComboBox(); choice.addItems([f"choice {k}" for k in range(8)])
    form.addRow("Choice", choice)
    form.addRow(QCheckBox(f"Option {g}a")); form.addRow(QCheckBox(f"Option {g}b"))
    form.addRow("Number", QSpinBox())
    rows.addWidget(box)
for _ in range(3):
    table = QTableWidget(2, 6)
    table.setHorizontalHeaderLabels(["Name", "Shape", "Dtype", "Fill", "Params", "Dynamic"])
    rows.addWidget(table)
listing = QListWidget(); listing.addItems(["TinyCNN(image): class", "tiny_cnn(): factory"])
rows.addWidget(listing); area.setWidget(inner); column.addWidget(area)
bar = QHBoxLayout(); bar.addWidget(QProgressBar())
for text in ("Export", "Validate", "Cancel"):
    bar.addWidget(QPushButton(text))
column.addLayout(bar)
tabs = QTabWidget()
for name in ("Summary", "Warnings", "Validation", "Graph", "Python", "Log", "Compare"):
    tabs.addTab(QLabel(f"<b>{name}</b><p>Nothing yet: export, or open an .onnx file.</p>"), name)
split = QSplitter(Qt.Orientation.Horizontal); split.addWidget(left); split.addWidget(tabs)
w.setCentralWidget(split); w.statusBar().showMessage("Ready"); w.resize(1366, 768); w.show()
app.processEvents(); w.repaint(); print(time.perf_counter() - t)
"""
# `onnx-studio gui --exit-after-paint`, as the console script runs it
GUI = ("import sys; from onnx_studio.app.launcher import main; "
       "sys.exit(main(['gui', '--exit-after-paint']))")


def launch_times(runs: int, env: dict[str, str]) -> tuple[list[float], list[float], list[float],
                                                       list[float]]:
    """(wall seconds to the JSON line, the app's own window_s, a bare QMainWindow, the plain
    form window) per run, each a fresh process, interleaved."""
    wall, inside, bare, form = [], [], [], []
    for _ in range(runs):
        started = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", GUI], cwd=REPO,
                             env=env, capture_output=True, text=True, check=True,
                             timeout=120).stdout
        wall.append(time.perf_counter() - started)
        inside.append(json.loads(out.strip().splitlines()[-1])["window_s"])
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", BARE_WINDOW], env=env, capture_output=True,
                       check=True, timeout=120)
        bare.append(time.perf_counter() - started)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", FORM_WINDOW], env=env, capture_output=True,
                       check=True, timeout=120)
        form.append(time.perf_counter() - started)
    return wall, inside, bare, form


def instructions(env: dict[str, str]) -> dict[str, float] | None:
    """Millions of CPU instructions of one start of each (valgrind's callgrind, when installed):
    the same on every run whatever else the machine does, where a loaded machine moves the
    wall-clock medians by half. None without valgrind."""
    import re
    import shutil

    if shutil.which("valgrind") is None:
        return None
    counts = {}
    # valgrind adds /usr/lib/debug to LD_LIBRARY_PATH, which the platform check's memo keys on
    # (onnx_studio.app.platform_memo): one start under valgrind first, uncounted, so the counted
    # one finds the check remembered, as the timed starts above and a user's every start do
    subprocess.run(["valgrind", "--tool=none", sys.executable, "-c", GUI], cwd=REPO, env=env,
                   capture_output=True, check=True, timeout=600)
    for name, code in (("studio", GUI), ("bare", BARE_WINDOW), ("form", FORM_WINDOW)):
        with tempfile.TemporaryDirectory() as out:
            done = subprocess.run(["valgrind", "--tool=callgrind",
                                   f"--callgrind-out-file={out}/cg.out", sys.executable, "-c",
                                   code], cwd=REPO, env=env, capture_output=True, text=True,
                                  check=True, timeout=600)
        found = re.search(r"Collected : (\d+)", done.stderr)
        assert found, done.stderr[-2000:]
        counts[name] = int(found.group(1)) / 1e6
    return counts


def export_measurements(runs: int) -> tuple[list[float], list[float], float]:
    """Longest event-loop stall per export and first-event latency per warm export."""
    from PySide6.QtCore import QElapsedTimer, QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from onnx_studio.app.window import MainWindow

    app = QApplication.instance() or QApplication([])
    window = MainWindow()
    window.load_initial(None)
    window.session.recipe.validate.enabled = True  # a longer job: export + validation
    window.show()

    def wait(predicate, timeout_s: float = 180.0) -> None:
        deadline = time.perf_counter() + timeout_s
        while not predicate() and time.perf_counter() < deadline:
            app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 5)
        if not predicate():
            raise TimeoutError("benchmark step did not finish")

    wait(lambda: window.session.runner.ready_info is not None)
    stalls, latencies = [], []
    first_event = {"t": 0.0}

    def progressed(_fraction: float, _stage: str) -> None:
        if not first_event["t"]:
            first_event["t"] = time.perf_counter()

    window.session.exportProgress.connect(progressed)
    export_seconds = 0.0
    for run in range(runs + 1):  # the first export warms the worker's lazy imports
        # Let the previous result's graph finish loading (the Graph tab's own cost, measured
        # by bench_graph) so it is not counted as a stall of this export.
        settle = time.perf_counter() + 0.5
        while time.perf_counter() < settle:
            app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 5)
        first_event["t"] = 0.0
        ticks = QElapsedTimer()
        worst = {"gap": 0}
        timer = QTimer()
        timer.setInterval(5)

        def tick(worst: dict[str, int] = worst, ticks: QElapsedTimer = ticks) -> None:
            worst["gap"] = max(worst["gap"], ticks.restart())

        timer.timeout.connect(tick)
        ticks.start()
        timer.start()
        started = time.perf_counter()
        window.session.start_export()
        loop = QEventLoop()
        window.session.exportFinished.connect(loop.quit)
        loop.exec()
        window.session.exportFinished.disconnect(loop.quit)
        timer.stop()
        if run == 0:
            export_seconds = time.perf_counter() - started
            continue
        stalls.append(max(worst["gap"] - 5, 0) / 1000)
        latencies.append(first_event["t"] - started)
    window.close()
    return stalls, latencies, export_seconds


def row(name: str, values: list[float], target: str) -> str:
    med = statistics.median(values)
    return (f"| {name:<46} | {med * 1000:8.1f} | {min(values) * 1000:8.1f} | "
            f"{max(values) * 1000:8.1f} | {target:>8} |")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--start-only", action="store_true",
                        help="only the start against the bare window (no export)")
    parser.add_argument("--instructions", action="store_true",
                        help="also count each start's CPU instructions (valgrind's callgrind)")
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    tmp = Path(tempfile.mkdtemp(prefix="bench_window_"))
    os.environ["ONNX_STUDIO_CONFIG_DIR"] = str(tmp / "config")
    os.environ["ONNX_STUDIO_CACHE_DIR"] = str(tmp / "cache")
    os.environ["ONNX_STUDIO_OUTPUT_DIR"] = str(tmp / "out")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # as installed: modules read from compiled bytecode (kept in a temp cache when the source
    # folder is read-only or PYTHONDONTWRITEBYTECODE is set), compiled by one run first
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    launch_times(1, env)

    wall, inside, bare, form = launch_times(args.runs, env)
    ratios = [app / ref for app, ref in zip(wall, bare, strict=True)]
    form_ratios = [app / ref for app, ref in zip(wall, form, strict=True)]
    stalls, latencies, first_export = ([], [], 0.0) if args.start_only else \
        export_measurements(args.runs)
    print(f"\nbench_window ({args.runs} runs each; times in ms)\n")
    print(f"| {'measure':<46} | {'median':>8} | {'min':>8} | {'max':>8} | {'target':>8} |")
    print(f"|{'-' * 48}|{'-' * 10}|{'-' * 10}|{'-' * 10}|{'-' * 10}|")
    print(row("launch -> window painted (process wall time)", wall, "<= 500"))
    print(row("launch -> window painted (window_s, in-app)", inside, "<= 500"))
    print(row("bare PySide6 QMainWindow, same measure", bare, "ref"))
    print(row("plain PySide6 window, the same widgets", form, "ref"))
    if not args.start_only:
        print(row("longest event-loop stall during an export", stalls, "<= 20"))
        print(row("warm worker: click Export -> first progress", latencies, "<= 200"))
    print(f"\nstart ratio, `onnx-studio gui --exit-after-paint` / bare QMainWindow: "
          f"{statistics.median(wall) / statistics.median(bare):.2f}x of the medians, "
          f"{statistics.median(ratios):.2f}x median of the pairs (goal <= 2x)")
    print(f"against a plain PySide6 window with the same widgets and no application code: "
          f"{statistics.median(wall) / statistics.median(form):.2f}x of the medians, "
          f"{statistics.median(form_ratios):.2f}x median of the pairs (that window itself: "
          f"{statistics.median(form) / statistics.median(bare):.2f}x the bare one)")
    if not args.start_only:
        print(f"(one export + validation of the default recipe took {first_export:.1f} s cold)")
    counts = instructions(env) if args.instructions else None
    if counts is not None:
        print(f"\nCPU instructions of one start (callgrind; load-independent): studio "
              f"{counts['studio']:.1f} M, bare QMainWindow {counts['bare']:.1f} M "
              f"({counts['studio'] / counts['bare']:.2f}x), plain window with the same widgets "
              f"{counts['form']:.1f} M ({counts['studio'] / counts['form']:.2f}x)")
    elif args.instructions:
        print("\n(--instructions: valgrind is not installed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
