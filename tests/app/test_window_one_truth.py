"""One source of truth in the window (issue 25, findings 3, 4, 5, 6 and 9): every view says
what the session holds, after every action, on a real window driving a real worker.

- 3: the Python tab writes the script of a Hugging Face export (and it runs); a recipe it
  cannot write is said in a sentence that wraps, not in a cut-off code line.
- 4: a new tolerance judges the validation again everywhere (Validation tab, Summary, export
  bar) and offers Validate again, not Export again; re-judged trials show counts, not "—".
- 5: "Previous and latest export" after one export says there is only one.
- 6: the header's times are when the action ran, not the file's modification time.
- 9: what does not apply to a Hugging Face source is disabled with the reason; the status bar
  says what runs; the Log shows a progress bar's last state and no glyph boxes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QLabel, QWidget

from onnx_studio.app.validation.common import texts
from onnx_studio.app.validation.tab import TRIAL_OUTPUT_HEADERS
from onnx_studio.app.window import MainWindow
from onnx_studio.engine import recipe as recipes
from tests.app.conftest import EXPORT_TIMEOUT_MS, export_and_wait, write_slow_model
from tests.conftest import REPO
from tests.engine.hf_models import build

pytestmark = pytest.mark.usefixtures("shared_runner")

OLD = time.mktime((2001, 2, 3, 4, 5, 6, 0, 0, -1))  # a modification time long past
OLD_SHOWN = time.strftime("%H:%M:%S", time.localtime(OLD))
# a model whose loading says so the way libraries do: an emoji, and a tqdm bar on stderr
CHATTY_MODEL = '''
import sys
import time

import torch


class Chatty(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # a bar drawn as tqdm draws it (the worker switches tqdm's own off: TQDM_DISABLE)
        for done in range(5):
            bar = "\\u2588" * (done * 2) + " " * (8 - done * 2)
            print(f"\\rLoading shards: {done * 25}%|{bar}| {done}/4 [00:00<00:00]",
                  end="", file=sys.stderr, flush=True)
            time.sleep(0.05)
        print(file=sys.stderr, flush=True)
        print("\\u2705 weights ready \\U0001f917", file=sys.stderr, flush=True)
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
'''


@pytest.fixture(scope="module")
def hf_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hf_one_truth")


def set_text(edit, text: str) -> None:  # type: ignore[no-untyped-def]
    edit.setText(text)
    edit.editingFinished.emit()


def type_output(window: MainWindow, path: Path) -> None:
    """Type the output file into the export bar, as a user does."""
    set_text(window.form.export_bar.output, str(path))


def fact(window: MainWindow, name: str) -> str:
    """The Summary's value of the fact `name` (its table as plain text: name, then value)."""
    lines = window.tabs.summary.facts.toPlainText().splitlines()
    return lines[lines.index(name) + 1]


def seconds_shown(before: float, after: float) -> set[str]:
    """Every HH:MM:SS a clock shows between `before` and `after`."""
    return {time.strftime("%H:%M:%S", time.localtime(t))
            for t in range(int(before), int(after) + 2)}


def open_hf(window: MainWindow, qtbot, folder: Path) -> None:  # type: ignore[no-untyped-def]
    assert window.open_hf_folder(folder)
    qtbot.waitUntil(lambda: window.form.hf_task.task.count() > 0, timeout=EXPORT_TIMEOUT_MS)


# ---------------------------------------------------------------------------- finding 4


def test_a_new_tolerance_is_judged_again_everywhere_and_offers_validate_again(
        live_window: MainWindow, qtbot) -> None:
    window, session = live_window, live_window.session
    message = export_and_wait(window, qtbot)
    validation = message["report"]["validation"]
    assert validation is not None and validation["ok"], validation
    worst = max(o["max_abs_diff"] for o in validation["outputs"])
    assert worst > 0, "an export with nothing to judge proves nothing"
    started: list[object] = []
    session.exportStarted.connect(started.append)

    options = window.form.options_form
    set_text(options.rtol, "0")
    set_text(options.atol, f"{worst * 0.5:.6g}")
    assert not session.busy and started == [], "nothing was run"

    # the Validation tab, the Summary and the export bar give the same verdict
    tab, summary, bar = window.tabs.validation, window.tabs.summary, window.form.export_bar
    assert "Validation failed" in tab.verdict.text()
    assert "Validation failed" in summary.status.text()
    row = fact(window, "Validation")
    assert row.startswith("FAILED") and "judged again" in row, row
    assert bar.progress.format() == "Validation failed" and "fails" in bar.stage.text()

    # the banner, on the Summary as on the Validation tab: Validate again, never Export again
    for shown in (summary, tab):
        window.tabs.setCurrentWidget(shown)
        bar_ = window.provenance
        assert bar_.banner.isVisible() and bar_.again.text() == "Validate again", \
            bar_.stale_text.text()
        assert not bar_.stale, "judged at the form's tolerance: nothing is out of date"

    # every failing output of every trial says how many elements differ, or that no sample
    # counted them: never a bare "—"
    column = TRIAL_OUTPUT_HEADERS.index("mismatched")
    for index in range(len(tab.trials.trials)):
        tab.trials.select(index)
        for cells in texts(tab.trials.outputs):
            if cells[-1] == "✘ fail":
                assert cells[column] != "—", (index, cells)

    # Validate again runs the validation, not an export
    window.tabs.setCurrentWidget(tab)
    with qtbot.waitSignal(session.validationFinished, timeout=EXPORT_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(window.provenance.again, Qt.MouseButton.LeftButton)
    assert started == [] and blocker.args[0].validation is not None
    assert not blocker.args[0].validation.ok, "the run agrees with the judged verdict"
    assert not window.provenance.banner.isVisible(), "a run at the form's tolerance: current"


# ---------------------------------------------------------------------------- finding 5


def test_previous_and_latest_after_one_export_says_there_is_only_one(
        live_window: MainWindow, qtbot, tmp_path: Path) -> None:
    window = live_window
    first = export_and_wait(window, qtbot)
    assert first["report"]["ok"], first
    tab = window.tabs.compare
    window.tabs.setCurrentWidget(tab)
    assert "only one export" in tab.previous_button.toolTip()
    qtbot.mouseClick(tab.previous_button, Qt.MouseButton.LeftButton)
    assert tab.file_a() == Path(first["report"]["output"]) and tab.file_b() is None
    assert not tab.compare_button.isEnabled(), "a file is never compared with itself"
    assert "only one export" in tab.status.text()

    # another export to another file: now there are two
    type_output(window, tmp_path / "second.onnx")
    second = export_and_wait(window, qtbot)
    assert second["report"]["ok"], second
    qtbot.mouseClick(tab.previous_button, Qt.MouseButton.LeftButton)
    assert (tab.file_a(), tab.file_b()) == (Path(first["report"]["output"]),
                                            tmp_path / "second.onnx")
    assert tab.compare_button.isEnabled()


# ---------------------------------------------------------------------------- finding 6


def test_the_header_says_when_the_action_ran_not_the_files_time(
        live_window: MainWindow, qtbot) -> None:
    window, session = live_window, live_window.session
    message = export_and_wait(window, qtbot)
    output = Path(message["report"]["output"])
    os.utime(output, (OLD, OLD))  # the file says 2001

    before = time.time()
    assert window.open_path(output)
    after = time.time()
    window.tabs.setCurrentWidget(window.tabs.summary)
    header = window.provenance.origin.text()
    opened = re.search(r"opened (\d\d:\d\d:\d\d)", header)
    assert opened is not None, header
    assert opened.group(1) != OLD_SHOWN and opened.group(1) in seconds_shown(before, after)

    before = time.time()
    with qtbot.waitSignal(session.validationFinished, timeout=EXPORT_TIMEOUT_MS):
        assert session.start_validation() is not None, session.validate_reason
    after = time.time()
    window.tabs.setCurrentWidget(window.tabs.validation)
    header = window.provenance.origin.text()
    validated = re.search(r"validated (\d\d:\d\d:\d\d)", header)
    assert validated is not None, header
    assert validated.group(1) != OLD_SHOWN and validated.group(1) in seconds_shown(before,
                                                                                   after)


# ---------------------------------------------------------------------------- finding 3


@pytest.mark.timeout(400)
def test_the_python_tab_writes_a_hugging_face_export_that_runs(
        live_window: MainWindow, qtbot, hf_models: Path, tmp_path: Path) -> None:
    window, session = live_window, live_window.session
    open_hf(window, qtbot, build("bert", hf_models))
    type_output(window, tmp_path / "bert_onnx")
    # traced by TorchScript (what is tried is the tab's script, not the exporter): the
    # script must carry the choice
    window.form.options_form.exporter.setCurrentText("torchscript")
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message["report"]["error"]
    assert message["report"]["exporter"] == "torchscript"

    python = window.tabs.python
    window.tabs.setCurrentWidget(python)
    code = python.text.toPlainText()
    assert "cannot be written" not in code, code
    assert not python.reason.isVisible(), python.reason.text()
    assert session.recipe.model.source in code and "torchscript" in code, code
    compile(code, "export_model.py", "exec")
    # the script does the export: the same folder again, from a process of its own
    (tmp_path / "bert_onnx").rename(tmp_path / "by_the_window")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert (tmp_path / "bert_onnx" / "model.onnx").is_file(), ran.stdout

    # a recipe the script cannot be written for (a keyword input): a sentence that wraps,
    # not a code line cut off at the tab's edge
    window.load_default_recipe()
    with session.edit("inputs") as recipe:
        recipe.inputs[0].keyword = True
    python.update_code()
    assert python.reason.isVisible() and python.reason.wordWrap()
    assert "keyword" in python.reason.text() and not python.text.isVisible()
    assert python.reason.width() <= python.width(), "wrapped within the tab"


# ---------------------------------------------------------------------------- finding 9


def test_what_does_not_apply_to_a_hugging_face_source_is_disabled_with_the_reason(
        live_window: MainWindow, qtbot, hf_models: Path) -> None:
    window, form = live_window, live_window.form
    model = form.model_form
    for widget in (model.trust, model.script, model.checkpoint, form.inputs_table.table):
        assert widget.isEnabled(), "a Python model takes them"
    open_hf(window, qtbot, build("bert", hf_models))
    for widget in (model.trust, model.script, model.checkpoint, model.checkpoint_browse):
        assert not widget.isEnabled(), widget
        assert "Hugging Face" in widget.toolTip(), widget.toolTip()
    inputs = form.inputs_table
    assert not inputs.table.isEnabled() and not inputs.add_button.isEnabled()
    assert inputs.not_applicable.isVisibleTo(window) and "task" in inputs.not_applicable.text()
    window.load_default_recipe()  # a Python model again: they apply again
    for widget in (model.trust, model.script, model.checkpoint, inputs.table):
        assert widget.isEnabled(), widget
    assert not inputs.not_applicable.isVisibleTo(window)


def status_texts(window: MainWindow) -> list[str]:
    """What the status bar's permanent labels say."""
    bar: QWidget = window.statusBar()
    return [label.text() for label in bar.findChildren(QLabel) if label.isVisibleTo(window)]


def test_the_status_bar_says_what_runs(live_window: MainWindow, qtbot, tmp_path: Path) -> None:
    window, session = live_window, live_window.session
    write_slow_model(tmp_path)
    session.set_recipe(recipes.loads(
        'version = 1\n[model]\nsource = "slow_net.py:Slow"\n[[inputs]]\nname = "x"\n'
        'shape = [1, 4]\n[export]\noutput = "slow.onnx"\n', base_dir=tmp_path))
    qtbot.waitUntil(lambda: any(t.startswith("Worker ready") for t in status_texts(window)),
                    timeout=60_000)
    assert session.start_export() is not None, session.problems
    child = tmp_path / "slow_net.child"
    qtbot.waitUntil(child.exists, timeout=60_000)  # inside the model's constructor
    shown = status_texts(window)
    assert any(t.startswith("Exporting slow.onnx") for t in shown), shown
    assert not any("Worker ready" in t for t in shown), shown
    with qtbot.waitSignal(session.exportFinished, timeout=10_000):
        session.cancel()
    qtbot.waitUntil(lambda: any(t.startswith("Worker ready") for t in status_texts(window)),
                    timeout=60_000)


def test_the_log_shows_what_a_terminal_would(live_window: MainWindow, qtbot,
                                             tmp_path: Path) -> None:
    window, session = live_window, live_window.session
    (tmp_path / "chatty.py").write_text(CHATTY_MODEL, encoding="utf-8")
    session.set_recipe(recipes.loads(
        'version = 1\n[model]\nsource = "chatty.py:Chatty"\n[[inputs]]\nname = "x"\n'
        'shape = [1, 4]\n[export]\noutput = "chatty.onnx"\n', base_dir=tmp_path))
    message = export_and_wait(window, qtbot)
    assert message["report"]["ok"], message["report"]["error"]
    log = window.tabs.log
    qtbot.waitUntil(lambda: "weights ready" in log.toPlainText(), timeout=10_000)
    text = log.toPlainText()
    metrics = QFontMetrics(log.font())
    boxes = sorted({ch for ch in text if not ch.isspace() and not metrics.inFontUcs4(ord(ch))})
    assert boxes == [], f"characters the log's font cannot draw: {boxes}"
    assert "\r" not in text and "█" not in text, "a progress bar as its last state, no bar"
    bars = [line for line in text.splitlines() if line.startswith("Loading shards")]
    assert len(bars) == 1 and "100%" in bars[0] and "4/4" in bars[0], bars
    assert "✔ weights ready" in text
