"""onnx_studio.engine.export.quick_match: the ONNX optimizer with the quicker matcher writes the
same file, byte for byte, as with onnxscript's own, on a tiny decoder with its cache (the
graph the optimizer's multi-output patterns are tried on); the matcher is put back after; and a
studio export through it still runs in ONNX Runtime like the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.engine.hf_models import build


@pytest.fixture(scope="module")
def unoptimized(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, Any]:
    """A tiny Llama with its cache exported by the dynamo exporter without the optimizer:
    (the serialized model, the part)."""
    import torch

    from onnx_studio.engine.export.hf_files import _dims
    from onnx_studio.engine.source.hf import load_hf

    folder = tmp_path_factory.mktemp("quick_match")
    part = load_hf(f"hf:{build('llama', folder)}", folder).parts[0]
    with torch.no_grad():
        program = torch.onnx.export(part.module, tuple(part.inputs.values()), dynamo=True,
                                    input_names=list(part.inputs),
                                    output_names=part.output_names, dynamic_shapes=_dims(part),
                                    opset_version=18, optimize=False, verbose=False)
    import onnx_ir as ir

    assert program is not None
    return ir.serde.serialize_model(program.model).SerializeToString(), part


def _optimized(serialized: bytes, quick: bool) -> bytes:
    import onnx
    import onnx_ir as ir
    from onnxscript._framework_apis.torch_2_8 import optimize

    from onnx_studio.engine.export.quick_match import quick_matching

    model = ir.serde.deserialize_model(onnx.ModelProto.FromString(serialized))
    with quick_matching(quick) as active:
        assert active is quick
        optimize(model)
    return ir.serde.serialize_model(model).SerializeToString()


@pytest.mark.timeout(600)  # a loaded 2-core machine; ~15 s when idle
def test_the_optimizer_writes_the_same_file_with_the_quick_matcher(
        unoptimized: tuple[bytes, Any]) -> None:
    serialized, _ = unoptimized
    assert _optimized(serialized, quick=True) == _optimized(serialized, quick=False)


@pytest.mark.timeout(600)
def test_the_matcher_is_put_back_after_the_block() -> None:
    from onnxscript.rewriter import _matcher

    from onnx_studio.engine.export.quick_match import quick_matching

    original = _matcher.SimplePatternMatcher.match
    with quick_matching() as active:
        assert active
        assert _matcher.SimplePatternMatcher.match is not original
        with quick_matching() as nested:  # an export inside an export: nothing stacks
            assert nested
    assert _matcher.SimplePatternMatcher.match is original
    with pytest.raises(RuntimeError), quick_matching():
        raise RuntimeError("an export that fails")
    assert _matcher.SimplePatternMatcher.match is original


@pytest.mark.timeout(600)
def test_an_export_through_it_runs_like_the_model(unoptimized: tuple[bytes, Any],
                                                   tmp_path: Path) -> None:
    import numpy as np
    import onnxruntime as ort
    import torch

    from onnx_studio.engine.events import Events
    from onnx_studio.engine.export.hf_files import export_part

    _, part = unoptimized
    export_part(part, tmp_path, 18, Events())
    session = ort.InferenceSession(str(tmp_path / part.file),
                                   providers=["CPUExecutionProvider"])
    inputs = part.make_inputs(7, 2, 3, 5)  # other sizes than the export's
    with torch.no_grad():
        expected = part.module(*inputs.values())
    got = session.run(None, {k: v.numpy() for k, v in inputs.items()})
    for mine, theirs in zip(got, expected, strict=True):
        np.testing.assert_allclose(mine, theirs.numpy(), rtol=1e-4, atol=1e-5)
