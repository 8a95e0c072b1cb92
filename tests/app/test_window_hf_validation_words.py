"""The Hugging Face Validation tab says what its numbers mean (issue 36, path 10): each output's
dtype, the rule an element passes by, the prompt of the generation check, its worst step, and,
when every greedy token is the same token, that equal tokens prove little."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from onnx_studio.app.validation.common import texts
from onnx_studio.app.validation.tab import OUTPUT_HEADERS
from onnx_studio.app.window import MainWindow
from tests.app.conftest import EXPORT_TIMEOUT_MS
from tests.engine.hf_models import build, shared_export

pytestmark = pytest.mark.usefixtures("shared_runner")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_hf_validation_tab_says_dtype_rule_prompt_and_what_tokens_prove(
        live_window: MainWindow, qtbot, tmp_path_factory: pytest.TempPathFactory) -> None:
    """On the test run's export of a tiny GPT-2 (`shared_export`, in the folder the window
    exports it to), validated from the window."""
    window, session = live_window, live_window.session
    shared = shared_export(tmp_path_factory, build, "gpt2")
    assert shared.run[0] == 0, shared.run[2][-3000:]
    assert window.open_hf_folder(shared.model)
    qtbot.waitUntil(lambda: window.form.hf_task.task.count() > 0, timeout=EXPORT_TIMEOUT_MS)
    assert session.validate_target == shared.output, session.validate_reason
    button = window.form.export_bar.validate_button
    qtbot.waitUntil(button.isEnabled, timeout=EXPORT_TIMEOUT_MS)
    with qtbot.waitSignal(session.validationFinished, timeout=300_000) as blocker:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    report = blocker.args[0]
    assert report.validation is not None and report.ok, blocker.args[0]
    tab = window.tabs.validation
    window.tabs.setCurrentWidget(tab)

    dtype = OUTPUT_HEADERS.index("dtype")
    rows = texts(tab.outputs)
    assert rows and all(row[dtype] == "float32" for row in rows), rows
    assert "|diff| ≤ atol + rtol·|ref|" in tab.facts.text(), tab.facts.text()

    generation = report.validation.generation
    assert generation is not None and generation.prompt_tokens, generation
    said = tab.generation.verdict.text()
    assert "Prompt: tokens " + ", ".join(map(str, generation.prompt_tokens)) in said
    repeats = len(set(generation.torch_tokens)) == 1
    assert ("prove little" in said) == repeats, (generation.torch_tokens, said)
    # what decides (issue 37.4): the steps on a random continuation, their worst step named
    steps = generation.continuation
    assert steps is not None and steps.passed and generation.greedy_constant == repeats
    assert f"worst step {steps.worst_step} " in said and "top-1 the same at every step" in said
    assert tab.generation.selected_step == steps.worst_step
