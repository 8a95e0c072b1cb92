"""The vision zoo (issue 35): >= 40 timm classifiers drawn by seed plus torchvision's, each as a
user writes it (batch-1 example, dynamic batch), through `onnx-studio batch`, every written
file confirmed by ONNX Runtime at batch 3 against eager PyTorch. Slow (an hour on two cores):
`python -m pytest -m vision_zoo tests/zoo/test_vision_zoo.py`; the table is
tests/benchmarks/bench_vision_zoo.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.zoo import vision_zoo

pytestmark = [pytest.mark.vision_zoo, pytest.mark.slow, pytest.mark.timeout(4 * 3600)]


def test_the_drawn_zoo_exports_and_is_confirmed_at_another_batch(tmp_path: Path) -> None:
    from onnx_studio.engine.errors import StudioError
    from onnx_studio.engine.source.vision import import_timm

    try:
        import_timm()  # torchvision first, guarded (a CUDA build beside a CPU torch)
    except StudioError as err:
        pytest.skip(err.message)
    rows = vision_zoo.run_zoo(tmp_path, timeout=900.0)
    assert len(rows) >= vision_zoo.COUNT
    wrong = [name for name, _, check in rows if check is not None and not check["ok"]]
    assert not wrong, f"files that passed but compute something else: {wrong}"
    confirmed = sum(1 for _, _, check in rows if check is not None and check["ok"])
    assert confirmed >= 0.95 * len(rows), [
        (name, record.report.error) for name, record, check in rows if check is None]
    for name, record, _ in rows:
        report = record.report
        if report.error is not None:  # every failure says what to do
            assert report.error.hint, name
    assert not hints_that_do_not_move_on(rows)


def hints_that_do_not_move_on(rows: list[tuple[str, Any, Any]]) -> list[str]:
    """Each failure's hint applied to its recipe and run again: the ones that neither pass nor
    fail further on (or name a change the applier cannot read), with why."""
    from onnx_studio.engine.pipeline import export
    from onnx_studio.engine.recipe import load
    from tests.engine.hint_apply import apply_hint, moved_on, unreadable

    stuck = []
    for name, record, _ in rows:
        before = record.report
        if before.error is None:
            continue
        if unreadable(before.error.hint):
            stuck.append(f"{name}: unreadable {unreadable(before.error.hint)}")
            continue
        applied = apply_hint(load(Path(record.recipe)), before.error.hint)
        if applied is None:  # names no change: it says what to look at instead
            continue
        after = export(applied)
        if not moved_on(before, after):
            stuck.append(f"{name}: {before.error.hint[:120]} -> {after.error}")
    return stuck
