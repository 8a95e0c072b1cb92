"""Issue 23, item 8: an fp16 verdict on a CPU passed a file that overflows on float16 hardware.

ONNX Runtime's CPU provider computes a float16 Gemm in float32 (and drops the casts between
such nodes), so a Linear whose outputs exceed 65504 never meets float16 there and the
outputs agree. The verdict now also reads the float32 model's values on the validation inputs:
a value beyond float16's range at a node the variant computes in float16 fails it, by name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import onnx
import pytest

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.analysis.variants import make_variant
from tests.engine.explain_models import exported


def _node_of(path: Path, module: str) -> str:
    """The Gemm/MatMul node the export made for `module` (read from the file's metadata)."""
    for node in onnx.load(str(path)).graph.node:
        scopes = next((ast.literal_eval(p.value) for p in node.metadata_props
                       if p.key == "pkg.torch.onnx.name_scopes"), [])
        if node.op_type in ("Gemm", "MatMul") and module in scopes:
            return str(node.name)
    raise AssertionError(module)


@pytest.mark.timeout(300)
def test_an_fp16_variant_that_overflows_on_float16_hardware_fails_naming_the_node(
        tmp_path: Path) -> None:
    source, recipe_path = exported(tmp_path, "Hot")
    report = make_variant(source, recipes.load(recipe_path), "fp16", tmp_path / "hot16.onnx",
                          runs=2)
    facts = report.variant
    assert facts is not None
    overflowing = _node_of(source, "up")
    assert report.ok is False and report.error is not None
    assert report.error.kind == "validation"
    assert overflowing in report.error.message and "65504" in report.error.message
    assert "--keep-fp32" in report.error.hint
    assert facts.fp16_overflows is not None
    assert [o.node for o in facts.fp16_overflows] == [overflowing]
    assert facts.fp16_overflows[0].max_abs > 65504
    # the outputs on this CPU were within the tolerance: only the ranges show it
    assert report.validation is not None and report.validation.ok is True
    assert (tmp_path / "hot16.onnx").is_file()  # written, and reported failed


@pytest.mark.timeout(300)
def test_an_fp16_variant_within_range_still_passes(tmp_path: Path) -> None:
    source, recipe_path = exported(tmp_path, "Stack")
    report = make_variant(source, recipes.load(recipe_path), "fp16", tmp_path / "s16.onnx",
                          runs=2)
    assert report.ok, report.error
    assert report.variant is not None and report.variant.fp16_overflows == []
