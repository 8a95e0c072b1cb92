"""The generation check in the reports (issue 37.4): the window's saved validation report lists
every teacher-forced step beside the greedy tokens and says what constant greedy tokens prove;
the batch report's row and the CLI's text report say the check in one line. Qt-free."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from onnx_studio.app.validation.report import to_html
from onnx_studio.engine.protocol import (
    BatchRecord,
    BatchSummary,
    ExportReport,
    Validation,
)
from tests.app.test_generation_panel import example_generation


def _validation(failing: int | None) -> Validation:
    generation = example_generation(failing)
    return Validation(ok=failing is None, rtol=1e-3, atol=1e-5, generation=generation,
                      message=generation.message)


@pytest.mark.timeout(60)
def test_the_saved_report_lists_every_step_and_the_greedy_tokens() -> None:
    page = to_html(_validation(3), "out/model.onnx", "hf:gpt2")
    assert "<h2>Generation</h2>" in page
    assert ("generation FAILED from step 3: 6 steps teacher-forced on a random continuation, "
            "worst step 6 (max abs diff 0.45), top-1 not the same at every step; greedy tokens "
            "equal (all token 207: they prove little) over 6 steps") in page
    assert "from step 3 of 6 (the cache then holds 6 positions)" in page
    assert "<b>Prompt</b> 463, 451, 308, 61, 207" in page
    assert "<b>Continuation</b> (seed 37) 82, 352, 317, 331, 133, 37" in page
    # one row a step: step, passed, cache, diffs, top-1s, then the greedy tokens
    assert "<tr><td>3</td><td>False</td><td>6</td><td>0.3</td><td>3</td>" in page
    assert page.count("<td>207</td><td>207</td></tr>") == 6


@pytest.mark.timeout(60)
def test_the_batch_report_and_the_cli_say_the_check_in_one_line(tmp_path: Path) -> None:
    from onnx_studio.engine.batch.report_html import write_report
    from onnx_studio.engine.cli import _print_report

    report = ExportReport(ok=True, output=str(tmp_path / "gpt2_onnx"),
                          validation=_validation(None))
    record = BatchRecord(recipe="hf:/models/gpt2", fingerprint="sha256:0", seconds=1.0,
                         executor="local", node="here", finished="2026-12-07T20:00:00Z",
                         report=report)
    summary = BatchSummary(ok=True, total=1, passed=1, records=[record])
    page = write_report(tmp_path, summary).read_text(encoding="utf-8")
    line = ("generation passed: 6 steps teacher-forced on a random continuation, worst step 3 "
            "(max abs diff 7e-08), top-1 the same at every step; greedy tokens equal (all "
            "token 207: they prove little) over 6 steps")
    assert f"<small>{line}</small>" in page
    out = io.StringIO()
    _print_report(report, out)
    assert f"  {line}\n" in out.getvalue()
