"""A verdict that cannot tell says so (issue 24.6): when an output's comparison could not tell a
right file from a wrong one (every expected value within the tolerance of zero, or one constant
within the tolerance of every value of every trial), the validation warns (category
`Verdict`, with a hint); an output that varies never does. The Hugging Face side (MobileViT and
LeViT at their default initialisation) is in tests/corpus/test_verdict.py.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from onnx_studio.engine import recipe as recipe_mod
from onnx_studio.engine.validation.metrics import VERDICT, cannot_tell, compare
from onnx_studio.engine.validation.validator import verdict_warnings

RTOL, ATOL = 1e-3, 1e-5


def _trials(*references: np.ndarray, noise: float = 0.0) -> list[dict[str, Any]]:
    """compare() of each reference against itself plus `noise` (a right file's rounding)."""
    return [compare(ref, ref + np.asarray(noise, ref.dtype), RTOL, ATOL) for ref in references]


def test_zeros_and_vanishing_outputs_warn_with_a_hint() -> None:
    rng = np.random.default_rng(0)
    for scale in (0.0, 1e-9, 2e-6):  # exactly zero (MobileViT), ~1e-9 (LeViT), below atol
        refs = [(rng.standard_normal((2, 10)) * scale).astype(np.float32) for _ in range(3)]
        warning = cannot_tell("logits", _trials(*refs), RTOL, ATOL)
        assert warning is not None and warning["category"] == VERDICT == "Verdict"
        assert "'logits'" in warning["message"] and "returns zeros passes" in warning["message"]
        assert "cannot tell a right file from a wrong one" in warning["message"]
        assert "real weights" in warning["hint"]
        assert ("atol =" in warning["hint"]) == (scale > 0)  # zeros have no scale to go below


def test_a_constant_output_warns_within_the_tolerance_too() -> None:
    constant = np.full((4, 3), 5.0, np.float32)
    warning = cannot_tell("scale", _trials(constant, constant), RTOL, ATOL)
    assert warning is not None and "the same value (5)" in warning["message"]
    # 5.0 +- 0.002: one constant lies within atol + rtol*|expected| of every value
    wobble = constant + np.linspace(-0.002, 0.002, 12, dtype=np.float32).reshape(4, 3)
    warning = cannot_tell("scale", _trials(wobble), RTOL, ATOL)
    assert warning is not None and "within rtol" in warning["message"]
    # integers and booleans: the same value everywhere
    assert cannot_tell("index", _trials(np.full(6, 3, np.int64)), RTOL, ATOL) is not None
    assert cannot_tell("mask", _trials(np.ones(6, bool)), RTOL, ATOL) is not None


def test_outputs_that_vary_do_not_warn() -> None:
    rng = np.random.default_rng(1)
    varied = [rng.standard_normal((2, 8)).astype(np.float32) for _ in range(3)]
    assert cannot_tell("logits", _trials(*varied, noise=1e-7), RTOL, ATOL) is None
    # small but above the tolerance (logits of a tiny random model)
    assert cannot_tell("logits", _trials(*(v * 1e-3 for v in varied)), RTOL, ATOL) is None
    # constant within each trial, but different across trials (a per-batch statistic)
    per_trial = [np.full((3,), float(i), np.float32) for i in range(3)]
    assert cannot_tell("mean", _trials(*per_trial), RTOL, ATOL) is None
    assert cannot_tell("index", _trials(np.arange(6)), RTOL, ATOL) is None
    # a single number in a single trial says nothing about whether it could vary
    assert cannot_tell("loss", _trials(np.array([2.5], np.float32)), RTOL, ATOL) is None


def test_a_failed_comparison_told_and_does_not_warn() -> None:
    zeros = np.zeros((2, 4), np.float32)
    failed = [compare(zeros, zeros + 1.0, RTOL, ATOL)]
    assert not failed[0]["passed"]
    assert cannot_tell("logits", failed, RTOL, ATOL) is None


def test_every_trial_counts_for_each_output() -> None:
    rng = np.random.default_rng(2)
    varied = rng.standard_normal(5).astype(np.float32)
    zeros = np.zeros(5, np.float32)
    trials = [{"outputs": [{"name": "a", **compare(varied, varied, RTOL, ATOL)},
                           {"name": "b", **compare(zeros, zeros, RTOL, ATOL)}]},
              {"outputs": [{"name": "a", **compare(zeros, zeros, RTOL, ATOL)},
                           {"name": "b", **compare(zeros, zeros, RTOL, ATOL)}]}]
    found = verdict_warnings(trials, RTOL, ATOL)
    assert [w["message"].split("'")[1] for w in found] == ["b"]


# ---------------------------------------------------------------------------- end to end

MODELS = textwrap.dedent('''
    import torch
    from torch import nn


    class Vanishing(nn.Module):
        """Logits that vanish, as a deep random network's do at a narrow initialisation."""

        def __init__(self):
            super().__init__()
            self.body = nn.Linear(8, 4)

        def forward(self, x):
            return self.body(x) * 1e-9, torch.relu(self.body(x))


    class Saturated(nn.Module):
        """A sigmoid pushed to 1 everywhere: the same value in every element of every trial."""

        def forward(self, x):
            return torch.sigmoid(x * 0 + 40.0)


    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))

        def forward(self, x):
            return self.layers(x).softmax(-1), self.layers(x)
''')


def _recipe(folder: Path, cls: str, outputs: tuple[str, ...] = ()) -> recipe_mod.Recipe:
    path = folder / f"{cls.lower()}.toml"
    named = "".join(f'\n[[outputs]]\nname = "{name}"\n' for name in outputs)
    path.write_text(textwrap.dedent(f'''
        version = 1

        [model]
        source = "models.py:{cls}"

        [[inputs]]
        name = "x"
        shape = [3, 8]
        dynamic = {{ 0 = "batch" }}

        [export]
        output = "{cls.lower()}.onnx"
        ''') + named, encoding="utf-8")
    return recipe_mod.load(path)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cannot_tell")
    (path / "models.py").write_text(MODELS, encoding="utf-8")
    return path


def _verdicts(report: Any) -> list[Any]:
    assert report.ok, report.error and report.error.to_dict()
    assert report.validation is not None and report.validation.ok
    return [w for w in report.validation.warnings or [] if w.category == VERDICT]


@pytest.mark.timeout(600)  # three small exports; a loaded 2-core machine
def test_the_validator_warns_on_the_output_that_cannot_tell(folder: Path) -> None:
    from onnx_studio.engine.pipeline import export

    found = _verdicts(export(_recipe(folder, "Vanishing", ("logits", "features")),
                             validate=True))
    assert len(found) == 1, [w.message for w in found]  # the relu output varies: no warning
    assert found[0].message.startswith("Output 'logits' is within the tolerance of zero")
    assert found[0].hint and "atol" in found[0].hint
    found = _verdicts(export(_recipe(folder, "Saturated"), validate=True))
    assert len(found) == 1 and "the same value (1)" in found[0].message


@pytest.mark.timeout(600)
def test_the_atol_the_hint_names_makes_the_verdict_tell(folder: Path) -> None:
    """A hint is a claim: the file validated again at the atol the hint names passes and no
    longer warns, and a file returning zeros (the wrong file the warning feared) now fails."""
    import re

    import onnx
    from onnx import numpy_helper

    from onnx_studio.engine.pipeline import validate_file

    recipe = _recipe(folder, "Vanishing", ("logits", "features"))
    (hint,) = [w.hint for w in _verdicts(_export(recipe))]
    found = re.search(r"atol = ([0-9.e+-]+)\)", hint or "")
    assert found, hint
    recipe.validate.atol = float(found.group(1))
    assert _verdicts(validate_file(recipe, folder / "vanishing.onnx")) == []
    # zeros where the logits were: the comparison tells them apart now
    model = onnx.load(str(folder / "vanishing.onnx"))
    for tensor in model.graph.initializer:
        tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor) * 0, tensor.name))
    onnx.save(model, str(folder / "zeros.onnx"))
    zeros = validate_file(recipe, folder / "zeros.onnx").validation
    assert zeros is not None and not zeros.ok
    assert not any(o.passed for t in zeros.trials for o in t.outputs if o.name == "logits")


def _export(recipe: recipe_mod.Recipe) -> Any:
    from onnx_studio.engine.pipeline import export

    return export(recipe, validate=True)


def test_an_output_that_is_zero_everywhere_names_no_tolerance() -> None:
    """No atol tells zeros from zeros: the hint then names none (it once said atol = 0e+00)."""
    zeros = np.zeros((2, 4), np.float32)
    warning = cannot_tell("logits", _trials(zeros, zeros), RTOL, ATOL)
    assert warning is not None and "atol =" not in warning["hint"]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("example", ["inplace_scatter", "unbind", "lstm", "split_list"])
def test_no_false_alarm_on_models_whose_outputs_vary(example: str, folder: Path) -> None:
    from onnx_studio.engine.pipeline import export
    from onnx_studio.engine.source.examples import EXAMPLES

    recipe = recipe_mod.load(EXAMPLES[example].recipe)
    recipe.export.output = str(folder / f"{example}.onnx")
    assert _verdicts(export(recipe, validate=True)) == []


@pytest.mark.timeout(600)
def test_no_false_alarm_on_an_mlp(folder: Path) -> None:
    from onnx_studio.engine.pipeline import export

    assert _verdicts(export(_recipe(folder, "Mlp"), validate=True)) == []
