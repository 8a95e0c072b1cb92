"""The vision zoo (issue 35): >= 40 timm classifiers drawn by seed plus torchvision's, each as a
user writes it (batch-1 example, dynamic batch), through `onnx-studio batch`, every written
file confirmed by ONNX Runtime at batch 3 against eager PyTorch. Slow (an hour on two cores):
`python -m pytest -m vision_zoo tests/zoo/test_vision_zoo.py`; the table is
tests/benchmarks/bench_vision_zoo.py's.
"""

from __future__ import annotations

from pathlib import Path

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
