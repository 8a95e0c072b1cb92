"""A Hugging Face validation judged again at another tolerance (onnx_studio.app.session.rejudge)
keeps its generation check's verdict where it holds: a failed check fails at a tighter
tolerance, a passed one passes at a looser; otherwise nothing is claimed (None: validate
again). Before, a failed generation check turned into "passed" once the files' trials did."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_studio.app.session.rejudge import rejudge
from onnx_studio.engine.protocol import Trial, TrialOutput, Validation
from onnx_studio.engine.validation.metrics import compare
from tests.app.test_generation_panel import example_generation

RTOL, ATOL = 1e-3, 1e-5


def _run(failing: int | None) -> Validation:
    """A validation whose one trial passed, with a generation check (wrong from `failing`)."""
    reference = np.linspace(-1.0, 1.0, 64, dtype=np.float32)
    output = TrialOutput.from_dict({"name": "logits",
                                    **compare(reference, reference + 1e-7, RTOL, ATOL)})
    generation = example_generation(failing)
    return Validation(ok=failing is None, rtol=RTOL, atol=ATOL, message=generation.message,
                      trials=[Trial(kind="export-inputs", ok=True, outputs=[output])],
                      generation=generation)


@pytest.mark.timeout(60)
def test_a_failed_generation_check_stays_failed_at_a_tighter_tolerance() -> None:
    run = _run(3)
    judged = rejudge(run, RTOL / 10, ATOL)
    assert judged is not None and not judged.ok and judged.verdict == "failed"
    assert run.generation is not None and judged.message == run.generation.message
    assert rejudge(run, RTOL * 10, ATOL) is None  # it might pass there: not claimed


@pytest.mark.timeout(60)
def test_a_passed_generation_check_stays_passed_at_a_looser_tolerance() -> None:
    run = _run(None)
    judged = rejudge(run, RTOL * 10, ATOL * 10)
    assert judged is not None and judged.ok
    assert rejudge(run, RTOL, ATOL / 10) is None  # it might fail there: not claimed
