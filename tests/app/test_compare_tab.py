"""The Compare tab, driven offscreen on a real worker: two files compared (tables, linked
graphs, unmatched nodes outlined), file A profiled and shown as a heat overlay on the Graph
tab, and variants of the latest export made and judged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from onnx_studio.app.jobs import JobRunner
from onnx_studio.app.session import ExportSession
from onnx_studio.app.tabs import ResultTabs
from onnx_studio.engine import recipe as recipes
from tests.app.conftest import EXPORT_TIMEOUT_MS, leave_idle, write_mlp
from tests.engine.models import write_models


@pytest.fixture
def tabs(shared_runner: JobRunner, qtbot) -> Iterator[ResultTabs]:
    session = ExportSession(runner=shared_runner)
    view = ResultTabs(session)
    qtbot.addWidget(view)
    view.resize(1200, 800)
    view.show()
    yield view
    session.shutdown()
    leave_idle(shared_runner, qtbot)


def _run(qtbot, tab, start) -> tuple[str, object]:  # type: ignore[no-untyped-def]
    with qtbot.waitSignal(tab.analysis.finished, timeout=EXPORT_TIMEOUT_MS) as blocker:
        assert start()
    return blocker.args[0], blocker.args[1]


def test_compare_two_files_then_profile_onto_the_graph(tabs: ResultTabs, qtbot,
                                                       tmp_path: Path) -> None:
    tab = tabs.compare
    tab.set_files(write_mlp(tmp_path / "a.onnx", 1.0),
                  write_mlp(tmp_path / "b.onnx", 1.5, extra=True))
    assert tab.compare_button.isEnabled()
    with qtbot.waitSignal(tab.analysis.started), \
            qtbot.waitSignal(tab.analysis.finished, timeout=EXPORT_TIMEOUT_MS):
        qtbot.mouseClick(tab.compare_button, Qt.MouseButton.LeftButton)
    doc = tab.comparison
    assert doc is not None and not doc.ok
    # the tables: the extra operator, the changed weight, the verdict
    assert tab.ops.differing() == ["Identity"]
    assert tab.initializers.item(0, 0).text() == "w"
    assert "0.5" in tab.initializers.item(0, 2).text()
    assert "disagree" in tab.status.text() and "'w'" in tab.status.text()
    # the graphs side by side: B's extra node outlined, a click on A's MatMul selects B's
    assert tab.graphs.a.model is not None and tab.graphs.b.model is not None
    assert doc.matching is not None and doc.matching.unmatched_b == ["copy"]
    assert set(tab.graphs.b.marks) == {"copy"} and not tab.graphs.a.marks
    tab.graphs.select_in_a(0)
    assert tab.graphs.b.selected_key == "n0"
    tab.graphs.select_in_a(1)  # A's Sigmoid is B's node 2 (after the Identity)
    assert tab.graphs.b.selected_key == "n2"

    # profile A, then its overlay on the Graph tab
    assert not tab.overlay_check.isEnabled()
    _run(qtbot, tab, tab.start_profile)
    assert tab.profile is not None and tab.profile_table.rowCount() >= 1
    assert "p50" in tab.status.text() and "Slowest operators" in tab.status.text()
    assert tab.overlay_check.isEnabled()
    shown = tabs.currentWidget()
    tab.overlay_check.setChecked(True)  # no jump: the overlay waits for its file (issue 25.9)
    assert tabs.currentWidget() is shown and tabs.graph.loaded_path is None
    assert tabs.graph.load_file(tmp_path / "a.onnx")
    browser = tabs.graph.browser
    assert browser is not None and browser.overlay and set(browser.overlay) <= {"mm", "sigmoid"}
    assert browser.overlay_label == "ms of the p50 run" and browser.overlay
    tab.overlay_check.setChecked(False)
    assert not browser.overlay


def test_variants_of_the_latest_export(tabs: ResultTabs, qtbot, tmp_path: Path) -> None:
    session, tab = tabs.session, tabs.compare
    write_models(tmp_path)
    recipe = recipes.loads(
        'version = 1\n[model]\nsource = "tiny.py:TinyNet"\n[[inputs]]\nname = "x"\n'
        'shape = [2, 4]\n[[outputs]]\nname = "y"\n[export]\noutput = "tiny.onnx"\n',
        base_dir=tmp_path)
    session.set_recipe(recipe)
    with qtbot.waitSignal(session.exportFinished, timeout=EXPORT_TIMEOUT_MS) as blocker:
        assert session.start_export() is not None, session.problems
    assert blocker.args[0].ok
    assert tab.previous_button.isEnabled()
    tab.use_exports()  # one export: A and B are both the latest
    assert tab.file_a() == tmp_path / "tiny.onnx"
    assert tab.variants.make_button.isEnabled()
    for kind in ("fp16", "int8"):
        job, result = _run(qtbot, tab, lambda k=kind: tab.start_variant(k))
        assert job == "variant", result
        assert (tmp_path / f"tiny.{kind}.onnx").is_file()
    assert tab.variants.verdicts() == ["passed", "passed"]
    table = tab.variants.table
    assert table.item(0, 0).text() == "fp16" and table.item(1, 0).text() == "int8"
    assert float(table.item(1, 3).text()) > 0  # the size ratio
    assert tab.views.currentWidget() is tab.variants


def test_both_exporters_in_one_click(tabs: ResultTabs, qtbot, tmp_path: Path) -> None:
    session, tab = tabs.session, tabs.compare
    write_models(tmp_path)
    session.set_recipe(recipes.loads(
        'version = 1\n[model]\nsource = "tiny.py:TinyNet"\n[[inputs]]\nname = "x"\n'
        'shape = [2, 4]\n[[outputs]]\nname = "y"\n[export]\noutput = "tiny.onnx"\n',
        base_dir=tmp_path))
    assert tab.both_button.isEnabled()
    with qtbot.waitSignal(tab.analysis.finished, timeout=EXPORT_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(tab.both_button, Qt.MouseButton.LeftButton)
    assert blocker.args[0] == "compare"
    doc = tab.comparison
    assert doc is not None and doc.ok, doc
    assert tab.file_a() == tmp_path / "tiny.dynamo.onnx"
    assert tab.file_b() == tmp_path / "tiny.torchscript.onnx"
    assert doc.parity is not None and doc.parity.torch is not None and doc.parity.torch.ok
    assert doc.matching is not None and doc.matching.matched >= 2
    assert "Equal outputs" in tab.status.text()
