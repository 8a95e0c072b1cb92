"""The tolerance hull decides a validation's verdict at any tolerance exactly as a run does."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_studio.engine.validation.metrics import compare, judge_hull

TOLERANCES = [0.0, 1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_hull_judges_as_compare_does(dtype) -> None:
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(60):
        n = int(rng.integers(1, 3000))
        ref = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 100.0])).astype(dtype)
        noise = rng.standard_normal(n) * rng.choice([1e-7, 1e-5, 1e-3])
        cand = (ref + noise).astype(dtype)
        hull = compare(ref, cand, 1e-3, 1e-5)["tolerance_hull"]
        assert hull is not None and len(hull) <= n
        for rtol in TOLERANCES:
            for atol in TOLERANCES:
                run = compare(ref, cand, rtol, atol)["passed"]
                assert judge_hull(hull, rtol, atol, str(ref.dtype)) == run, (rtol, atol)
                checked += 1
    assert checked == 60 * len(TOLERANCES) ** 2


def test_exact_and_empty_outputs() -> None:
    ints = np.arange(6)
    assert compare(ints, ints, 0.0, 0.0)["tolerance_hull"] is None, "exact: no tolerance"
    empty = np.zeros(0, np.float32)
    assert compare(empty, empty, 0.0, 0.0)["tolerance_hull"] == []
    assert judge_hull([], 0.0, 0.0)
