"""A Hugging Face folder in the window (issue 14 item 6): open it, pick the task, see the cache
inputs grouped, export with validation, read the files written and the generation check."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.validation.common import rows, texts
from app.window import MainWindow
from tests.app.conftest import EXPORT_TIMEOUT_MS, export_and_wait
from tests.engine.hf_models import build

pytestmark = pytest.mark.usefixtures("shared_runner")


@pytest.mark.timeout(600)
def test_gpt2_folder_exports_with_past_and_generates_the_same_tokens(
        live_window: MainWindow, qtbot, tmp_path: Path) -> None:
    window, session = live_window, live_window.session
    folder = build("gpt2", tmp_path)
    assert not window.open_hf_folder(tmp_path / "nowhere")  # no config.json: said, not opened
    assert window.open_hf_folder(folder)
    assert session.recipe.model.source == f"hf:{folder.resolve()}"
    assert Path(session.recipe.export.output) == folder.resolve().with_name("gpt2_onnx")

    form = window.form.hf_task
    qtbot.waitUntil(lambda: form.task.count() > 0, timeout=EXPORT_TIMEOUT_MS)
    assert form.isVisibleTo(window)
    tasks = [form.task.itemText(i) for i in range(form.task.count())]
    assert tasks[0] == "text-generation-with-past"  # GPT2LMHeadModel's default comes first
    assert "task" not in session.recipe.model.kwargs  # until one is picked: the config's
    index = tasks.index("text-generation")
    form.task.setCurrentIndex(index)
    form.task.activated.emit(index)
    assert session.recipe.model.kwargs["task"] == "text-generation"
    # without past: no cache row
    assert [r.text(0) for r in rows(form.inputs)] == ["input_ids", "attention_mask"]

    index = tasks.index("text-generation-with-past")
    form.task.setCurrentIndex(index)
    form.task.activated.emit(index)
    assert session.recipe.model.kwargs["task"] == "text-generation-with-past"
    shown_rows = rows(form.inputs)
    assert [r.text(0) for r in shown_rows] == ["input_ids", "attention_mask", "position_ids",
                                         "past_key_values × 2 × 2 layers"]
    cache = shown_rows[-1]
    assert [cache.child(i).text(0) for i in range(cache.childCount())] == [  # type: ignore[union-attr]
        "past_key_values.0.key", "past_key_values.0.value",
        "past_key_values.1.key", "past_key_values.1.value"]
    form.inputs.expandItem(cache)
    assert cache.isExpanded()

    with session.edit("options") as recipe:
        recipe.validate.enabled = True
    message = export_and_wait(window, qtbot)
    report = message["report"]
    assert report["ok"], report.get("error")
    files = report["files"]
    assert files and all(Path(f["path"]).is_file() for f in files)

    facts = window.tabs.summary.facts.toPlainText()
    for f in files:
        assert f"{f['name']} {f['graph']['nodes']} nodes" in facts

    generation = report["validation"]["generation"]
    assert generation["tokens_equal"] and generation["steps"] > 0
    panel = window.tabs.validation.generation
    assert "Tokens equal" in panel.verdict.text()
    shown = texts(panel.table)
    assert [int(r[1]) for r in shown] == generation["onnx_tokens"]
    assert [int(r[2]) for r in shown] == generation["torch_tokens"]
    assert panel.differs_at is None
    sections = window.tabs.validation.sections
    assert sections.isTabVisible(sections.indexOf(panel))


def test_generation_panel_highlights_the_first_differing_step(qtbot) -> None:
    from app.validation.generation import GenerationPanel

    panel = GenerationPanel()
    qtbot.addWidget(panel)
    panel.set_generation({"steps": 4, "tokens_equal": False, "onnx_tokens": [5, 7, 9, 9],
                          "torch_tokens": [5, 7, 8, 9]})
    assert panel.differs_at == 2
    assert "differ from step 3 of 4" in panel.verdict.text()
    current = panel.table.currentItem()
    assert current is not None and current.text(0) == "3"
    assert texts(panel.table)[2] == ["3", "9", "8"]
