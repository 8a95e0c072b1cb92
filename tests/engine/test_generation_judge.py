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
