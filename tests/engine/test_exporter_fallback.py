"""`exporter = "auto"` falls back to the TorchScript exporter when dynamo cannot capture or
translate (issue 35), on tiny models that run in seconds; MaxViT, a real model that needs it,
is in test_vision_models.py. A recipe that names dynamo gets dynamo only; a branch on a tensor's
value does not fall back (a trace would bake the branch); when both exporters fail the error is
dynamo's with the TorchScript exporter's cause beside it, and its hint does not send the user
to an exporter that was tried."""

from __future__ import annotations

from pathlib import Path

import pytest

from onnx_studio.engine.pipeline import export
from onnx_studio.engine.recipe import InputSpec, OutputSpec, Recipe

NETS = '''
import torch


class Distances(torch.nn.Module):
    """Pairwise distances: torch.cdist has no dynamo translation here, a TorchScript symbolic."""

    def forward(self, x):
        return torch.cdist(x, x)


class Branches(torch.nn.Module):
    """Branches on a tensor's value: dynamo cannot capture it, TorchScript traces one branch."""

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


class Eigh(torch.nn.Module):
    """An operator neither exporter converts."""

    def forward(self, x):
        return torch.linalg.eigh(x @ x.transpose(-1, -2)).eigenvalues
'''


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fallback")
    (path / "nets.py").write_text(NETS)
    return path


def _recipe(folder: Path, name: str, exporter: str = "auto") -> Recipe:
    recipe = Recipe(base_dir=folder)
    recipe.model.source = f"nets.py:{name}"
    recipe.inputs = [InputSpec(name="x", shape=[2, 4, 4], dynamic={0: "batch"})]
    recipe.outputs = [OutputSpec(name="y", dynamic={0: "batch"})]
    recipe.export.output = f"out/{name}-{exporter}.onnx"
    recipe.export.exporter = exporter
    return recipe


def test_auto_falls_back_with_one_warning_and_records_the_exporter_that_ran(
        folder: Path) -> None:
    report = export(_recipe(folder, "Distances"), validate=True)
    assert report.ok, report.error
    assert report.exporter == "torchscript" and report.fallback is not None
    assert report.fallback.tried == "dynamo" and report.fallback.message
    fallbacks = [w for w in report.warnings if w.category == "ExporterFallback"]
    assert len(fallbacks) == 1 and report.fallback.message in fallbacks[0].message
    assert 'exporter = "torchscript"' in (fallbacks[0].hint or "")
    document = report.to_dict()
    assert document["exporter"] == "torchscript" and document["fallback"]["tried"] == "dynamo"
    assert report.validation is not None and report.validation.ok  # at batch 2, 3 and 4 too


def test_a_recipe_that_names_dynamo_gets_dynamo_only(folder: Path) -> None:
    report = export(_recipe(folder, "Distances", exporter="dynamo"), validate=False)
    assert not report.ok and report.exporter == "dynamo" and report.fallback is None
    assert not [w for w in report.warnings if w.category == "ExporterFallback"]
    assert not (folder / "out" / "Distances-dynamo.onnx").exists()


def test_a_branch_on_a_value_does_not_fall_back_to_a_trace_that_bakes_it(folder: Path) -> None:
    report = export(_recipe(folder, "Branches"), validate=False)
    assert not report.ok and report.exporter == "dynamo" and report.fallback is None
    assert report.error is not None and "branches on a tensor's value" in report.error.message
    assert "torch.cond" in report.error.hint


def test_when_both_fail_the_error_names_both_and_sends_nowhere_tried(folder: Path) -> None:
    report = export(_recipe(folder, "Eigh"), validate=False)
    assert not report.ok and report.error is not None and report.fallback is None
    assert report.error.kind == "unsupported_operator"
    assert "The TorchScript exporter (tried next" in report.error.message
    assert "exporter =" not in report.error.hint and "Neither exporter" in report.error.hint
    assert "TorchScript exporter:" in (report.error.details or "")
