"""A dynamic axis whose example size is 0 or 1 is traced at 2 (issue 35), on tiny models in
seconds; the real models that need it (ConvNeXt's batch guard) are in test_vision_models.py."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from onnx_studio.engine.pipeline import export
from onnx_studio.engine.recipe import InputSpec, OutputSpec, Recipe

NETS = '''
import torch


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


class OnlyOne(torch.nn.Module):
    """Runs only at batch 1: the example's size is the only one there is."""

    def forward(self, x):
        return x.view(4) * 2
'''


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace_sizes")
    (path / "nets.py").write_text(NETS)
    return path


def _recipe(folder: Path, name: str) -> Recipe:
    recipe = Recipe(base_dir=folder)
    recipe.model.source = f"nets.py:{name}"
    recipe.inputs = [InputSpec(name="x", shape=[1, 4], dynamic={0: "batch"})]
    recipe.outputs = [OutputSpec(name="y")]
    recipe.export.output = f"out/{name}.onnx"
    return recipe


def test_a_batch_of_one_is_traced_at_two_and_validated_at_one(folder: Path) -> None:
    recipe = _recipe(folder, "Scale")
    report = export(recipe, validate=True)
    assert report.ok, report.error
    assert report.traced_sizes == {"batch": 2} and report.to_dict()["traced_sizes"] == {
        "batch": 2}
    said = [w for w in report.warnings if "traced the dynamic dimension" in w.message]
    assert len(said) == 1 and said[0].category == "DynamicShape"
    assert report.validation is not None
    assert [t.sizes for t in report.validation.trials if t.kind == "export-inputs"] == [
        {"batch": 1}]
    dim = onnx.load(str(recipe.output_path)).graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.dim_param == "batch"


def test_a_model_that_runs_only_at_the_example_size_is_traced_at_it(folder: Path) -> None:
    report = export(_recipe(folder, "OnlyOne"), validate=False)
    assert report.traced_sizes is None
    assert not [w for w in report.warnings if "traced the dynamic dimension" in w.message]
