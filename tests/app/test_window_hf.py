"""Hugging Face folders in the window (issue 14): open one, pick the task, see the cache inputs
grouped, export each of the issue's seven architectures with its default task and validation
(the text-generation ones with past, whose default that is; greedy tokens equal for 20 steps),
the encoder and decoders side by side in the Graph tab, and Validate of an export's folder.

One export per (architecture, task), tiny configs (tests/engine/hf_models.py); the folders a
test exported are kept for the module (`exported`), so Validate reuses one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from onnx_studio.app.outcomes import ValidationOutcome
from onnx_studio.app.validation.common import rows, texts
from onnx_studio.app.validation.generation import HEADERS
from onnx_studio.app.window import MainWindow
from tests.app.conftest import EXPORT_TIMEOUT_MS
from tests.engine.hf_models import build, studio_export

pytestmark = pytest.mark.usefixtures("shared_runner")

HF_TIMEOUT_MS = 300_000  # an encoder-decoder is three exports; a loaded 2-core machine
STEPS = 20  # onnx_studio.engine.validation.hf_checks.GENERATION_STEPS, the 20

# architecture -> (its config's task, the files its export writes)
ENC_DEC = ["encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx"]
DEFAULTS = {
    "bert": ("text-classification", ["model.onnx"]),
    "gpt2": ("text-generation-with-past", ["model.onnx"]),
    "llama": ("text-generation-with-past", ["model.onnx"]),
    "qwen2": ("text-generation-with-past", ["model.onnx"]),
    "t5": ("text2text-generation-with-past", ENC_DEC),
    "whisper": ("automatic-speech-recognition-with-past", ENC_DEC),
    "vit": ("image-classification", ["model.onnx"]),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny save_pretrained folders, built once for the module."""
    return tmp_path_factory.mktemp("hf_window")


@pytest.fixture(scope="module")
def exported() -> dict[str, dict[str, Any]]:
    """Architecture -> the report of its window export, for the tests after it."""
    return {}


def _open(window: MainWindow, qtbot, folder: Path) -> None:
    assert window.open_hf_folder(folder)
    form = window.form.hf_task  # its tasks described: the worker has read the config
    qtbot.waitUntil(lambda: form.task.count() > 0, timeout=EXPORT_TIMEOUT_MS)
    with window.session.edit("options") as recipe:
        recipe.validate.enabled = True


def _export(window: MainWindow, qtbot, name: str,
            exported: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Click Export, wait for the report; checked as every architecture's must be."""
    button = window.form.export_bar.export_button
    assert button.isEnabled(), button.toolTip()
    with qtbot.waitSignal(window.session.exportFinished, timeout=HF_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    report = blocker.args[0].final.to_dict()["report"]
    assert report["ok"], report.get("error")
    task, files = DEFAULTS[name]
    assert report["task"] == task
    assert [f["name"] for f in report["files"]] == files
    assert all(Path(f["path"]).is_file() for f in report["files"])
    validation = report["validation"]
    assert validation["ok"] and all(t["ok"] for t in validation["trials"])
    if "generation" in task or "recognition" in task:
        generation = validation["generation"]
        assert generation["steps"] == STEPS and len(generation["onnx_tokens"]) == STEPS
        assert generation["tokens_equal"], generation
        assert generation["onnx_tokens"] == generation["torch_tokens"]
    else:
        assert "generation" not in validation
    facts = window.tabs.summary.facts.toPlainText()
    for f in report["files"]:
        assert f"{f['name']} {f['graph']['nodes']} nodes" in facts
    exported[name] = report
    return report


def _generation_shown(window: MainWindow, generation: dict[str, Any] | None) -> None:
    panel = window.tabs.validation.generation
    sections = window.tabs.validation.sections
    assert sections.isTabVisible(sections.indexOf(panel)) == (generation is not None)
    if generation is not None:
        assert "Tokens equal" in panel.verdict.text()
        assert "✔ Every step agrees" in panel.verdict.text()
        shown = texts(panel.table)
        greedy = HEADERS.index("Greedy token")  # one token: both sides agree
        assert [int(r[greedy]) for r in shown] == generation["onnx_tokens"]
        assert generation["onnx_tokens"] == generation["torch_tokens"]
        assert {r[HEADERS.index("Result")] for r in shown} == {"ok"}
        assert panel.differs_at is None
        assert panel.selected_step == generation["continuation"]["worst_step"]


@pytest.mark.timeout(600)
def test_gpt2_folder_exports_with_past_and_generates_the_same_tokens(
        live_window: MainWindow, qtbot, tmp_path: Path, models: Path,
        exported: dict[str, dict[str, Any]]) -> None:
    window, session = live_window, live_window.session
    folder = build("gpt2", models)
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

    index = tasks.index("text-generation-with-past")  # the default, picked again
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
    report = _export(window, qtbot, "gpt2", exported)
    _generation_shown(window, report["validation"]["generation"])
    tab = window.tabs.graph  # one file: no file row
    qtbot.waitUntil(lambda: tab.shown[0] is not None, timeout=EXPORT_TIMEOUT_MS)
    assert tab.loaded_path == Path(report["output"])
    assert tab.shown[0] == Path(report["output"]) / "model.onnx"
    assert not tab.files.isVisibleTo(window)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", [  # one of each kind; more with -m corpus_full
    "bert", "llama", pytest.param("qwen2", marks=pytest.mark.corpus_full), "t5",
    pytest.param("whisper", marks=pytest.mark.corpus_full), "vit"])
def test_each_architecture_exports_with_its_default_task(
        name: str, live_window: MainWindow, qtbot, models: Path,
        exported: dict[str, dict[str, Any]]) -> None:
    window = live_window
    _open(window, qtbot, build(name, models))
    assert "task" not in window.session.recipe.model.kwargs  # the config's
    report = _export(window, qtbot, name, exported)
    _generation_shown(window, report["validation"].get("generation"))
    if name == "t5":
        _check_side_by_side(window, qtbot, Path(report["output"]))


def _check_side_by_side(window: MainWindow, qtbot, out: Path) -> None:
    """The Graph tab of an encoder-decoder export: a file row, and the encoder beside a
    decoder, each in a browser of its own, each file picked on its side."""
    assert "two side by side" in window.tabs.summary.facts.toPlainText()
    tab = window.tabs.graph
    window.tabs.setCurrentWidget(tab)
    qtbot.waitUntil(lambda: tab.shown[0] is not None, timeout=EXPORT_TIMEOUT_MS)
    assert tab.loaded_path == out
    assert tab.files.isVisibleTo(window)
    assert [tab.files.left.itemText(i) for i in range(tab.files.left.count())] == ENC_DEC
    browser = tab.browser
    assert browser is not None and browser.root is not None
    assert browser.root.path == out / "encoder_model.onnx"
    assert tab.second is None or not tab.second.isVisibleTo(window)

    qtbot.mouseClick(tab.files.toggle, Qt.MouseButton.LeftButton)
    second = tab.second
    assert second is not None and second.isVisibleTo(window) and browser.isVisibleTo(window)
    assert [tab.graphs.widget(i) for i in range(tab.graphs.count())] == [browser, second]
    assert second.root is not None and second.root.path == out / "decoder_model.onnx"
    assert browser.root.path == out / "encoder_model.onnx"
    left, right = browser.geometry(), second.geometry()
    assert right.left() >= left.right() and min(left.width(), right.width()) > 100

    tab.files.choose(1, "decoder_with_past_model.onnx")
    assert second.root.path == out / "decoder_with_past_model.onnx"
    inputs = [value.name for value in second.root.proto.input]
    assert "past_key_values.0.decoder.key" in inputs and "input_ids" in inputs
    assert browser.root.path == out / "encoder_model.onnx"  # the left one stays
    tab.files.choose(0, "decoder_model.onnx")
    assert browser.root.path == out / "decoder_model.onnx"
    assert tab.shown == [out / "decoder_model.onnx", out / "decoder_with_past_model.onnx"]

    qtbot.mouseClick(tab.files.toggle, Qt.MouseButton.LeftButton)
    assert not second.isVisibleTo(window) and browser.isVisibleTo(window)


@pytest.mark.timeout(900)
def test_validate_checks_an_existing_export_folder(
        live_window: MainWindow, qtbot, models: Path,
        exported: dict[str, dict[str, Any]]) -> None:
    """Validate of a folder an export wrote earlier (not in this window): each file and the
    greedy tokens, as the export validated them; a patched weight makes it fail."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    window, session = live_window, live_window.session
    source = build("t5", models)
    out = source.resolve().with_name("t5_onnx")  # where the window exports it
    if "t5" not in exported:  # run alone: the command line exports it first
        code, _, err = studio_export(f"hf:{source}", out)
        assert code == 0, err

    _open(window, qtbot, source)
    assert session.recipe.output_path == out and session.export_result is None
    assert session.validate_target == out, session.validate_reason
    outcome = _validate(window, qtbot)
    assert outcome.ok and outcome.onnx == out, outcome.error
    validation = outcome.validation
    assert validation is not None
    assert {t.message for t in validation.trials} == set(ENC_DEC)
    assert validation.generation is not None and validation.generation.tokens_equal
    assert validation.generation.steps == STEPS
    _generation_shown(window, validation.generation.to_dict())
    assert "Validation passed" in window.tabs.validation.verdict.text()

    # the check can fail: the decoder's largest weight replaced by a constant
    path = out / "decoder_with_past_model.onnx"
    model = onnx.load(str(path))
    biggest = max(model.graph.initializer, key=lambda t: int(np.prod(t.dims)))
    patched = numpy_helper.to_array(biggest).copy()
    patched[...] = 0.5
    biggest.CopyFrom(numpy_helper.from_array(patched, biggest.name))
    onnx.save(model, str(path))
    try:
        failed = _validate(window, qtbot)
        assert failed.validation is not None and not failed.ok
        assert "disagrees" in (failed.validation.message or "")
        bad = {t.message for t in failed.validation.trials if not t.ok}
        assert bad == {"decoder_with_past_model.onnx"}
    finally:  # the next test may reuse the folder
        exported.pop("t5", None)


def _validate(window: MainWindow, qtbot) -> ValidationOutcome:
    button = window.form.export_bar.validate_button
    qtbot.waitUntil(button.isEnabled, timeout=EXPORT_TIMEOUT_MS)
    with qtbot.waitSignal(window.session.validationFinished, timeout=HF_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    outcome: ValidationOutcome = blocker.args[0]
    return outcome


def test_generation_panel_highlights_the_first_differing_step(qtbot) -> None:
    from onnx_studio.app.validation.generation import GenerationPanel
    from onnx_studio.engine.protocol import Generation

    panel = GenerationPanel()
    qtbot.addWidget(panel)
    panel.set_generation(Generation(steps=4, tokens_equal=False, onnx_tokens=[5, 7, 9, 9],
                                    torch_tokens=[5, 7, 8, 9]))
    assert panel.differs_at == 2
    assert "differ from step 3 of 4" in panel.verdict.text()
    current = panel.table.currentItem()
    assert current is not None and current.text(0) == "3"
    assert texts(panel.table)[2] == ["3", "", "—", "—", "—", "9 ≠ 8"]


def test_generation_panel_says_why_no_step_ran(qtbot) -> None:
    """ONNX Runtime could not run the loop (a file whose length the export fixed): the panel
    says so in ONNX Runtime's words, and lists PyTorch's tokens with none for ONNX."""
    from onnx_studio.app.validation.generation import GenerationPanel
    from onnx_studio.engine.protocol import Generation

    panel = GenerationPanel()
    qtbot.addWidget(panel)
    message = ("ONNX Runtime cannot run during the generation loop on input_ids[1, 6]: Got "
               "invalid dimensions for input: input_ids")
    panel.set_generation(Generation(steps=3, tokens_equal=False, onnx_tokens=[],
                                    torch_tokens=[4, 5, 6], passed=False, message=message))
    assert message in panel.verdict.text()
    assert "differ from" not in panel.verdict.text()
    assert texts(panel.table)[0] == ["1", "", "—", "—", "—", "— ≠ 4"]
