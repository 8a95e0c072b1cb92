"""Vision models a user brings (issue 35), on real timm models at tiny sizes: the `timm:` source,
a batch-1 example exported with a dynamic batch, `auto` falling back to TorchScript, the
inconclusive verdict, the scale rule for float32 rounding, the CondConv failure, and every
concrete hint applied to its recipe and run again.

The models come from the vision zoo's draw (tests/zoo/vision_zoo.py: LCNet's logits are ~1e-8
at timm's default initialisation) or are the issue's own (ConvNeXt and MaxViT trip torch's batch
guard, CondConv's groups follow the batch); each runs at a small image size. MaxViT's fallback
takes minutes, so it runs with the zoo (`-m vision_zoo`); test_exporter_fallback.py covers the
fallback in seconds. Skipped where timm (with torchvision) is not installed: the `vision` extra.
"""

from __future__ import annotations

import copy
import io
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.pipeline import export, validate_file
from onnx_studio.engine.protocol import BatchRecord, BatchResult, ExportReport
from onnx_studio.engine.recipe import InputSpec, OutputSpec, Recipe
from tests.engine.hint_apply import apply_hint, concrete_changes, moved_on, unreadable


def _timm_ready() -> bool:
    try:
        from onnx_studio.engine.source.vision import import_timm

        import_timm()
    except StudioError:
        return False
    return True


pytestmark = pytest.mark.skipif(not _timm_ready(), reason="timm (the vision extra) is absent")


def vision_recipe(folder: Path, name: str, side: int, *, exporter: str = "auto",
                  **kwargs: object) -> Recipe:
    """timm:NAME as a user writes it: a batch-1 example, the batch dynamic, validation on."""
    recipe = Recipe(base_dir=folder)
    recipe.model.source = f"timm:{name}"
    recipe.model.kwargs = dict(kwargs)
    recipe.inputs = [InputSpec(name="x", shape=[1, 3, side, side], dynamic={0: "batch"})]
    recipe.outputs = [OutputSpec(name="logits", dynamic={0: "batch"})]
    recipe.export.output = f"out/{name}-{exporter}.onnx"
    recipe.export.exporter = exporter
    recipe.validate.enabled = True
    return recipe


def run_at(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def eager(recipe: Recipe, x: np.ndarray) -> np.ndarray:
    from onnx_studio.engine.source.load import load_model

    with torch.no_grad():
        return load_model(recipe).module(torch.from_numpy(x)).numpy()


def categories(report: ExportReport) -> list[str]:
    return [w.category for w in report.warnings]


# ---------------------------------------------------------------------------- the source


def test_timm_source_builds_seeded_random_weights_and_takes_a_checkpoint(tmp_path: Path) -> None:
    from onnx_studio.engine.source.load import load_model

    recipe = vision_recipe(tmp_path, "resnet10t", 32, num_classes=5)
    first, again = load_model(recipe), load_model(recipe)
    assert first.kind == "timm" and first.module.fc.out_features == 5
    assert torch.equal(first.module.fc.weight, again.module.fc.weight), "seeded: same weights"
    state = {k: v + 1.0 if k == "fc.bias" else v for k, v in first.module.state_dict().items()}
    torch.save(state, tmp_path / "weights.pt")
    recipe.model.checkpoint = "weights.pt"
    assert torch.equal(load_model(recipe).module.fc.bias, first.module.fc.bias + 1.0)
    recipe.model.source = "timm:resnet_ten"
    with pytest.raises(StudioError) as caught:
        load_model(recipe)
    assert caught.value.kind == "source" and "timm has no model called" in caught.value.message


# ---------------------------------------------------------------------------- batch 1


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_batch_one_example_exports_a_dynamic_batch_traced_at_two(tmp_path: Path) -> None:
    """ConvNeXt traced at batch 1 trips torch's guard (batch <= 2); traced at 2 it exports a
    batch that runs at 1, 2 and 3, and validation ran the example's own batch of 1."""
    recipe = vision_recipe(tmp_path, "convnext_atto", 64)
    report = export(recipe)
    assert report.ok, report.error
    assert report.traced_sizes == {"batch": 2}
    notes = [w.message for w in report.warnings if "traced the dynamic dimension" in w.message]
    assert len(notes) == 1 and "'batch' at 2 (the example has 1)" in notes[0]
    assert report.validation is not None
    trials = {(t.kind, (t.sizes or {}).get("batch")) for t in report.validation.trials}
    assert ("export-inputs", 1) in trials and any(size == 3 for _, size in trials)
    model = onnx.load(str(recipe.output_path), load_external_data=False)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    x = np.random.default_rng(3).standard_normal((3, 3, 64, 64)).astype(np.float32)
    np.testing.assert_allclose(run_at(recipe.output_path, x), eager(recipe, x),
                               rtol=1e-3, atol=1e-4)


# ---------------------------------------------------------------------------- auto falls back


@pytest.mark.slow
@pytest.mark.vision_zoo  # minutes: MaxViT exported twice
@pytest.mark.timeout(1200)
def test_auto_falls_back_to_torchscript_with_one_warning_and_dynamo_stays_dynamo(
        tmp_path: Path) -> None:
    """MaxViT's captured attention trips the dynamo exporter's decomposition; `auto` exports
    it with the TorchScript exporter and says why, once; `dynamo` gets dynamo only."""
    auto = vision_recipe(tmp_path, "maxvit_rmlp_pico_rw_256", 64, img_size=64)
    report = export(auto)
    assert report.ok, report.error
    assert report.exporter == "torchscript" and report.fallback is not None
    assert report.fallback.tried == "dynamo" and report.fallback.message
    assert categories(report).count("ExporterFallback") == 1
    document = report.to_dict()
    assert document["exporter"] == "torchscript" and document["fallback"]["tried"] == "dynamo"
    x = np.random.default_rng(4).standard_normal((3, 3, 64, 64)).astype(np.float32)
    np.testing.assert_allclose(run_at(auto.output_path, x), eager(auto, x),
                               rtol=1e-3, atol=1e-4)

    named = vision_recipe(tmp_path, "maxvit_rmlp_pico_rw_256", 64, exporter="dynamo",
                          img_size=64)
    failed = export(named, validate=False)
    assert not failed.ok and failed.exporter == "dynamo" and failed.fallback is None
    assert "ExporterFallback" not in categories(failed)


# ---------------------------------------------------------------------------- inconclusive


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_outputs_that_cannot_tell_make_an_inconclusive_verdict_everywhere(
        tmp_path: Path) -> None:
    """LCNet (drawn by the zoo) at timm's default initialisation: logits of ~1e-8, within atol
    of zero."""
    from onnx_studio.engine.batch.command import print_text
    from onnx_studio.engine.batch.runner import _summary
    from onnx_studio.engine.cli import _print_report

    recipe = vision_recipe(tmp_path, "lcnet_035", 64)
    report = export(recipe)
    assert report.ok and report.validation is not None, report.error
    assert report.validation.ok and report.validation.conclusive is False
    assert report.validation.verdict == "inconclusive"
    assert "cannot tell a right file from a wrong one" in (report.validation.message or "")
    assert "checkpoint" in (report.validation.hint or "")
    top = [w for w in report.warnings if w.category == "Verdict"]
    assert len(top) == 1 and top[0].message.startswith("Inconclusive")
    document = report.to_dict()
    assert document["validation"]["conclusive"] is False
    text = io.StringIO()
    _print_report(report, text)
    assert "validation INCONCLUSIVE" in text.getvalue()
    record = BatchRecord(recipe="lcnet.toml", fingerprint="sha256:0", seconds=1.0,
                         executor="local", node="here", finished="now", report=report)
    row = BatchResult.of(record)
    assert row.verdict == "inconclusive" and row.ok and "checkpoint" in (row.inconclusive or "")
    job = type("Job", (), {"key": "lcnet.toml"})()
    summary = _summary([job], {"lcnet.toml": record}, set(), 1.0, tmp_path)  # type: ignore
    assert (summary.passed, summary.inconclusive, summary.failed, summary.ok) == (0, 1, 0, True)
    lines = io.StringIO()
    print_text(summary, lines)
    assert "INCONCLUSIVE" in lines.getvalue() and "0 passed, 1 inconclusive" in lines.getvalue()


# ---------------------------------------------------------------------------- rounding


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_float32_rounding_passes_by_the_outputs_scale_and_a_real_error_names_its_tolerance(
        tmp_path: Path) -> None:
    """A strict element-wise tolerance (rtol 1e-5, atol 0) fails the elements near zero by
    rounding alone: the output passes by its scale, and says so. A file with one weight
    changed fails, its hint names the atol that would pass, and that atol passes."""
    recipe = vision_recipe(tmp_path, "resnet10t", 32)
    recipe.validate.rtol, recipe.validate.atol = 1e-5, 0.0
    report = export(recipe)
    assert report.ok and report.validation is not None, report.error
    logits = report.validation.outputs[0]
    assert logits.passed and logits.rule == "scale"
    assert logits.max_abs_diff is not None and logits.reference_scale is not None
    assert 0 < logits.max_abs_diff <= 64 * np.finfo(np.float32).eps * logits.reference_scale

    wrong = tmp_path / "out" / "wrong.onnx"
    model = onnx.load(str(recipe.output_path))
    bias = next(i for i in model.graph.initializer if i.name.endswith("fc.bias"))
    values = onnx.numpy_helper.to_array(bias).copy()
    values[0] += 0.05  # one class's logit moved: a real difference, not rounding
    bias.CopyFrom(onnx.numpy_helper.from_array(values, bias.name))
    onnx.save(model, str(wrong))
    checked = copy.deepcopy(recipe)
    checked.validate.rtol, checked.validate.atol = 1e-3, 1e-5
    failed = validate_file(checked, wrong)
    assert not failed.ok and failed.error is not None and failed.validation is not None
    out = failed.validation.outputs[0]
    assert not out.passed and out.needed_atol is not None and out.needed_atol >= 0.05 * 0.99
    assert "validate.atol = " in failed.error.hint and "more than rounding" in failed.error.hint
    loosened = apply_hint(checked, failed.error.hint)
    assert loosened is not None and loosened.validate.atol >= out.needed_atol
    assert validate_file(loosened, wrong).ok, "the tolerance the hint names passes"


# ---------------------------------------------------------------------------- hints applied


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_condconv_names_its_node_and_line_and_its_hint_exports_when_applied(
        tmp_path: Path) -> None:
    """CondConv's grouped convolution takes the batch as its group count: both exporters
    fail on a dynamic batch; the error names the node and timm's line, and its hint (a static
    batch), applied, exports a file that runs."""
    recipe = vision_recipe(tmp_path, "tf_efficientnet_cc_b0_4e", 32)
    failed = export(recipe, validate=False)
    assert not failed.ok and failed.error is not None
    assert "node conv2d" in failed.error.message and "cond_conv2d.py:" in failed.error.message
    assert "'group'" in failed.error.message and failed.fallback is None
    assert not unreadable(failed.error.hint), failed.error.hint
    applied = apply_hint(recipe, failed.error.hint)
    assert applied is not None and not applied.dynamic_dims()
    again = export(applied)
    assert moved_on(failed, again) and again.ok, again.error


def test_every_concrete_hint_is_readable_by_the_applier() -> None:
    """The hints this round writes name their changes in words the applier reads."""
    from onnx_studio.engine.export.fallback import fallback_warning
    from onnx_studio.engine.validation.failure_hints import values_hint

    hint = values_hint({"rtol": 1e-3, "atol": 1e-5, "outputs": [
        {"name": "logits", "passed": False, "max_abs_diff": 72.0, "needed_atol": 71.5,
         "needed_rtol": 5.5e-7, "scale_ratio": 5.5e-7, "reference_scale": 1.3e8}]})
    assert "float32 rounding" in hint and not unreadable(hint)
    recipe = Recipe()
    loosened = apply_hint(recipe, hint)
    assert loosened is not None and loosened.validate.atol >= 71.5
    warning = fallback_warning(StudioError("export", "dynamo failed."))
    assert [what for what, _ in concrete_changes(warning["hint"])] == ['exporter = "torchscript"']
