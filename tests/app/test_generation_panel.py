"""The Generation panel (issue 37.4): the teacher-forced steps decide and are shown step by step
(the worst step, the top-1 token at every step, the first failing step selected); the greedy
tokens are a second view in the same rows; the prompt is shown; when every greedy token is the
same token the panel says they prove little."""

from __future__ import annotations

import pytest

from onnx_studio.app.validation.common import texts
from onnx_studio.app.validation.generation import HEADERS, GenerationPanel
from onnx_studio.engine.protocol import Generation

STEPS = 6
PROMPT = [463, 451, 308, 61, 207]
CONTINUATION = [82, 352, 317, 331, 133, 37]


def example_generation(failing: int | None) -> Generation:
    """A tiny GPT-2's check as the worker writes it (20 steps cut to 6): greedy tokens all
    207; the steps wrong from `failing` on (None: every step within the tolerance)."""
    steps = []
    for index in range(STEPS):
        wrong = failing is not None and index + 1 >= failing
        diff = 0.2 + 0.05 * index if wrong else 6e-8 + 1e-8 * (index == 2)
        top1 = CONTINUATION[(index + 1) % STEPS]
        steps.append({"step": index + 1, "position": 4 + index,
                      "past": 0 if index == 0 else 4 + index, "max_abs_diff": diff,
                      "max_rel_diff": diff * 10, "torch_top1": top1,
                      "onnx_top1": top1 + (1 if wrong and index == STEPS - 1 else 0),
                      "passed": not wrong})
    worst = max(range(STEPS), key=lambda i: steps[i]["max_abs_diff"]) + 1
    message = None if failing is None else (
        f"Teacher-forced on a fixed random continuation, the ONNX files give other logits "
        f"than the PyTorch model from step {failing} of {STEPS} (the cache then holds "
        f"{3 + failing} positions); the worst is step {worst} (max abs diff 0.45).")
    continuation = {"tokens": CONTINUATION, "seed": 37, "with_past": True, "steps": steps,
                    "worst_step": worst, "max_abs_diff": steps[worst - 1]["max_abs_diff"],
                    "max_rel_diff": steps[worst - 1]["max_rel_diff"],
                    "top1_agreed_every_step": failing is None,
                    "first_failing_step": failing, "passed": failing is None,
                    "message": message}
    return Generation.from_dict({
        "steps": STEPS, "tokens_equal": True, "onnx_tokens": [207] * STEPS,
        "torch_tokens": [207] * STEPS, "fed_tokens": [207] * STEPS, "teacher_forced": True,
        "max_abs_diff": 1.2e-7, "max_rel_diff": 1e-3, "passed": failing is None,
        "message": message, "prompt_tokens": PROMPT, "greedy_passed": True,
        "greedy_constant": True, "continuation": continuation,
        "note": "All 6 greedy tokens are token 207: ... prove little ..."})


@pytest.mark.timeout(60)
def test_the_panel_says_constant_tokens_prove_little_and_names_the_worst_step(qtbot) -> None:
    panel = GenerationPanel()
    qtbot.addWidget(panel)
    panel.set_generation(example_generation(None))
    said = panel.verdict.text()
    assert "✔ Every step agrees: 6 steps teacher-forced on a random continuation" in said
    assert "worst step 3 (max abs diff 7.00e-08" in said
    assert "top-1 the same at every step" in said
    assert "All 6 greedy tokens are the same token (207): equal tokens prove little" in said
    assert "the steps on a random continuation decide" in said
    assert "Prompt: tokens 463, 451, 308, 61, 207; continuation (seed 37): 82, 352" in said
    assert "Greedy view: Tokens equal over 6 greedy steps" in said
    rows = texts(panel.table)
    assert len(rows) == STEPS and {r[HEADERS.index("Greedy token")] for r in rows} == {"207"}
    assert rows[1][HEADERS.index("Top-1")] == "317"
    assert [r[HEADERS.index("Cache")] for r in rows] == ["0", "5", "6", "7", "8", "9"]
    assert {r[HEADERS.index("Result")] for r in rows} == {"ok"}
    assert panel.selected_step == 3  # the worst step's row
    current = panel.table.currentItem()
    assert current is not None and current.text(0) == "3"


@pytest.mark.timeout(60)
def test_the_panel_fails_at_the_step_the_cache_goes_wrong_with_equal_greedy_tokens(
        qtbot) -> None:
    panel = GenerationPanel()
    qtbot.addWidget(panel)
    panel.set_generation(example_generation(3))
    said = panel.verdict.text()
    assert "✘ The steps differ from step 3 of 6" in said
    assert "worst step 6 (max abs diff 0.45" in said
    assert "top-1 the same at 5 of 6 steps" in said
    assert "Greedy view: Tokens equal over 6 greedy steps" in said  # the greedy view missed it
    assert "prove little" in said
    rows = texts(panel.table)
    assert [r[HEADERS.index("Result")] for r in rows] == ["ok", "ok"] + ["FAILED"] * 4
    assert rows[5][HEADERS.index("Top-1")] == "83 ≠ 82"  # ONNX ≠ PyTorch
    assert panel.selected_step == 3  # the first failing step, not the worst
    current = panel.table.currentItem()
    assert current is not None and current.text(0) == "3"


@pytest.mark.timeout(60)
def test_a_validation_from_before_the_step_check_shows_the_greedy_view(qtbot) -> None:
    """A saved report written before `continuation` existed: the greedy tokens alone, their
    verdict bold as before, the step columns empty."""
    panel = GenerationPanel()
    qtbot.addWidget(panel)
    panel.set_generation(Generation(steps=3, tokens_equal=True, onnx_tokens=[4, 4, 4],
                                    torch_tokens=[4, 4, 4], max_abs_diff=1e-7,
                                    prompt_tokens=[9, 8]))
    said = panel.verdict.text()
    assert "✔ Tokens equal over 3 greedy steps" in said and "Greedy view" not in said
    assert "the logits compared at each step (max abs diff 1.00e-07)" in said
    assert texts(panel.table)[0] == ["1", "", "—", "—", "—", "4"]


@pytest.mark.timeout(60)
def test_no_step_ran_is_said_once(qtbot) -> None:
    """ONNX Runtime could not run the loop (a file whose length the export fixed): the steps'
    verdict says why in ONNX Runtime's words, the greedy view that it did not run either."""
    message = ("ONNX Runtime cannot run during the generation loop on input_ids[1, 6]: Got "
               "invalid dimensions for input: input_ids")
    continuation = {"tokens": CONTINUATION, "seed": 37, "with_past": False, "steps": [],
                    "worst_step": None, "max_abs_diff": None, "max_rel_diff": None,
                    "top1_agreed_every_step": False, "first_failing_step": None,
                    "passed": False, "message": message}
    panel = GenerationPanel()
    qtbot.addWidget(panel)
    panel.set_generation(Generation.from_dict({
        "steps": 3, "tokens_equal": False, "onnx_tokens": [], "torch_tokens": [4, 5, 6],
        "passed": False, "message": message, "greedy_passed": False,
        "greedy_constant": False, "continuation": continuation}))
    said = panel.verdict.text()
    assert said.count(message) == 1 and "Greedy view: No greedy step ran either" in said
    assert texts(panel.table)[0] == ["1", "", "—", "—", "—", "— ≠ 4"]
