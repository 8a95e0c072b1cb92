"""Large models: where `external_data = "auto"` puts the weights, progress while they are
written, per-node validation that never copies the weights, and (slow) a model over 2 GB
exported and validated end to end with real torch, onnx and onnxruntime."""

from __future__ import annotations

import textwrap
from pathlib import Path

import onnx
import pytest

from onnx_studio.engine import file_set
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.events import Events
from onnx_studio.engine.export import onnx_file
from onnx_studio.engine.export.onnx_file import AUTO_EXTERNAL_BYTES, wants_external_data
from onnx_studio.engine.pipeline import export

MODELS = textwrap.dedent('''
    import torch
    from torch import nn


    class Stack(nn.Module):
        def __init__(self, width: int = 64, layers: int = 3):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))

        def forward(self, x):
            for layer in self.layers:
                x = torch.relu(layer(x))
            return x


    def big():
        """About 2.1 GB of float32 weights: 32 layers of 4096 x 4096."""
        torch.manual_seed(0)
        model = Stack(4096, 32)
        return model
''')


def _recipe(folder: Path, name: str, external: str, *, source: str = "models.py:Stack",
            width: int = 64, intermediates: bool = False) -> recipes.Recipe:
    (folder / "models.py").write_text(MODELS)
    return recipes.loads(textwrap.dedent(f'''
        version = 1
        [model]
        source = "{source}"
        [[inputs]]
        name = "x"
        shape = [2, {width}]
        fill = "randn"
        [[outputs]]
        name = "y"
        [export]
        output = "{name}.onnx"
        exporter = "dynamo"
        external_data = "{external}"
        [validate]
        enabled = true
        random_trials = 1
        dynamic_sizes = false
        intermediates = {str(intermediates).lower()}
        '''), base_dir=folder)


def _data_files(onnx_path: Path) -> set[str]:
    model = onnx.load(str(onnx_path), load_external_data=False)
    return {entry.value for tensor in model.graph.initializer
            for entry in tensor.external_data if entry.key == "location"}


def test_auto_keeps_small_weights_inline_and_large_ones_outside() -> None:
    assert wants_external_data("auto", 10 * 2**20, available_bytes=8 * 2**30) is None
    assert wants_external_data("auto", AUTO_EXTERNAL_BYTES, available_bytes=64 * 2**30) is True
    # an inline write needs about 3.5x the weights: not there, so external data
    assert wants_external_data("auto", 300 * 2**20, available_bytes=2**30) is True
    assert wants_external_data("always", 1024) is True
    # "never" lets the exporter decide (external only above protobuf's 2 GB), refused after
    assert wants_external_data("never", 3 * 2**30, available_bytes=2**30) is None


def test_auto_export_writes_external_data_above_the_threshold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = export(_recipe(tmp_path, "small", "auto"), validate=True)
    assert small.ok and small.extra is not None and small.extra.external_data is None
    assert _data_files(tmp_path / "small.onnx") == set()

    # the same rule at a threshold below this model's 50 KB of weights
    monkeypatch.setattr(onnx_file, "AUTO_EXTERNAL_BYTES", 1024)
    large = export(_recipe(tmp_path, "large", "auto"), validate=True)
    assert large.ok and large.validation is not None and large.validation.ok
    assert large.extra is not None and large.extra.external_data == "large.onnx.data"
    assert _data_files(tmp_path / "large.onnx") == {"large.onnx.data"}
    assert (tmp_path / "large.onnx.data").stat().st_size >= 3 * 64 * 64 * 4  # the weights


def test_write_progress_reports_the_bytes_written(tmp_path: Path) -> None:
    seen: list[tuple[float, str]] = []
    chunk = b"\0" * 2**20
    def report(fraction: float, stage: str) -> None:
        seen.append((fraction, stage))

    with (onnx_file.write_progress(tmp_path, 128 * 2**20, report, interval=0.01),
          open(tmp_path / "w.data", "wb") as out):
        for _ in range(128):
            out.write(chunk)
            out.flush()
    fractions = [f for f, _ in seen]
    assert fractions and fractions == sorted(fractions) and fractions[-1] <= 1.0
    assert "Writing the weights" in seen[-1][1] and "of 0.1 GB" in seen[-1][1]


def test_intermediates_of_an_external_data_export(tmp_path: Path) -> None:
    report = export(_recipe(tmp_path, "ext", "always", intermediates=True), validate=True)
    assert report.ok and report.validation is not None and report.validation.ok
    intermediates = report.validation.intermediates
    assert intermediates is not None and intermediates.compared >= 3
    assert intermediates.first_divergent is None
    # the graph-only copy ONNX Runtime read the weights through is gone again
    # (the manifest of what the export wrote stays: onnx_studio.engine.file_set)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [file_set.MANIFEST]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_model_over_2_gb_exports_and_validates_with_external_data(tmp_path: Path) -> None:
    stages: list[str] = []
    events = Events(progress=lambda fraction, stage: stages.append(stage))
    recipe = _recipe(tmp_path, "big", "auto", source="models.py:big", width=4096)
    report = export(recipe, events, validate=True)
    assert report.ok, report.error
    assert report.validation is not None and report.validation.ok
    assert all(o.passed for o in report.validation.outputs)
    data = tmp_path / "big.onnx.data"
    assert report.extra is not None and report.extra.external_data == data.name
    assert data.stat().st_size > 2**31  # over protobuf's 2 GB limit
    assert (tmp_path / "big.onnx").stat().st_size < 2**20  # the graph alone
    assert _data_files(tmp_path / "big.onnx") == {data.name}
    onnx.checker.check_model(str(tmp_path / "big.onnx"))
    assert any(s.startswith("Writing the weights") for s in stages)
    # (the manifest of what the export wrote stays: onnx_studio.engine.file_set)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [file_set.MANIFEST]
