"""The greedy-generation verdict, teacher-forced
(onnx_studio.engine.validation.hf_checks.judge_steps): the tokens generate fed (its stopping and
forced-token rules included) never decide it; the argmax of each side's logits at every step, and
the logits within the tolerance, do. The real models (mBART, Pegasus, BlenderbotSmall, Qwen3,
Marian) are in tests/corpus/test_hf_corpus.py."""

from __future__ import annotations

import numpy as np

from onnx_studio.engine.validation.hf_checks import judge_steps

RTOL, ATOL = 1e-3, 1e-5


def _logits(steps: int = 6, vocab: int = 11) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((steps, vocab)).astype(np.float32)


def test_forced_and_held_back_tokens_do_not_decide() -> None:
    expected = _logits()
    argmax = [int(t) for t in expected.argmax(-1)]
    # generate forced a start token, held the end token back and forced it at the end: the
    # tokens fed differ from the argmax at three steps, the file is right
    fed = [5, *argmax[1:-2], (argmax[-2] + 1) % 11, 2]
    result = judge_steps(expected, expected + 1e-7, fed, RTOL, ATOL)
    assert result["passed"] and result["tokens_equal"] and result["message"] is None
    assert result["onnx_tokens"] == result["torch_tokens"] == argmax
    assert result["fed_tokens"] == fed and result["steps"] == 6 and result["teacher_forced"]


def test_a_step_whose_argmax_differs_fails_naming_it() -> None:
    expected = _logits()
    got = expected.copy()
    token = int(expected[3].argmin())
    got[3, token] = expected[3].max() + 1.0
    result = judge_steps(expected, got, [0] * 6, RTOL, ATOL)
    assert not result["passed"] and not result["tokens_equal"]
    assert f"picks token {token} at step 4 of 6" in result["message"]


def test_logits_beyond_the_tolerance_fail_with_the_same_tokens() -> None:
    expected = _logits()
    got = expected * 1.01  # same argmax everywhere, logits 1% off
    result = judge_steps(expected, got, [0] * 6, RTOL, ATOL)
    assert result["tokens_equal"] and not result["passed"]
    assert result["message"].startswith("The ONNX logits differ")
    assert result["max_abs_diff"] > 1e-3


def test_the_steps_verdict_names_the_first_failing_and_the_worst_step() -> None:
    """judge_continuation: every step judged on its own (the worst step is the largest
    |diff|, 1-based), the top-1 token compared at each, the first failing step named with
    the cache it read."""
    from onnx_studio.engine.validation.hf_checks import judge_continuation

    expected = _logits()
    got = expected + 1e-7
    got[2] += 0.05  # step 3 a little off, its argmax the same
    got[4] = expected[4] * 3.0  # step 5 far off
    result = judge_continuation(expected, got, list(range(4, 10)), RTOL, ATOL,
                                pasts=[0, 5, 6, 7, 8, 9])
    assert not result["passed"] and result["first_failing_step"] == 3
    assert result["worst_step"] == 5 and result["with_past"]
    assert [s["passed"] for s in result["steps"]] == [True, True, False, True, False, True]
    assert result["steps"][2]["past"] == 6 and result["steps"][2]["position"] == 6
    assert result["max_abs_diff"] == result["steps"][4]["max_abs_diff"]
    assert "from step 3 of 6 (the cache then holds 6 positions)" in result["message"]
    assert "the worst is step 5" in result["message"]


def test_another_top1_passes_as_a_tie_only() -> None:
    """A top-1 that differs fails the step, even with every logit within the tolerance,
    unless PyTorch's own logits of the two tokens are within the tolerance of each other (a
    tie: a file within the tolerance may pick either); `top1_agreed_every_step` says it."""
    from onnx_studio.engine.validation.hf_checks import judge_continuation

    expected = _logits()
    expected[1, :2] = [5.0, 4.994]  # 0.006 apart: more than atol + rtol*5
    got = expected.copy()
    got[1, :2] = [4.9975, 4.9985]  # each within atol + rtol*|ref|, the order swapped
    result = judge_continuation(expected, got, list(range(6)), RTOL, ATOL)
    assert not result["top1_agreed_every_step"] and result["first_failing_step"] == 2
    assert "pick token 1 where the PyTorch model picks 0" in result["message"]
    assert "past" not in result["steps"][0] and not result["with_past"]
    expected[1, :2] = [5.0, 4.999]  # a tie at this tolerance
    got[1, :2] = [4.9995, 4.9996]
    tie = judge_continuation(expected, got, list(range(6)), RTOL, ATOL)
    assert tie["passed"] and not tie["top1_agreed_every_step"] and tie["message"] is None
    same = judge_continuation(expected, expected.copy(), list(range(6)), RTOL, ATOL)
    assert same["passed"] and same["top1_agreed_every_step"] and same["message"] is None
    assert same["first_failing_step"] is None and same["worst_step"] == 1
