"""The corpus: popular Hugging Face transformers architectures, exported as a user would.

Each architecture of tests/corpus/architectures.py is written as a model file (a factory that
builds the model from its config class: tiny, random weights, no download) and a recipe with
the defaults, and exported through the command line (`onnx-studio export --recipe R.toml
--validate --json -v`, in process). The verdict must be honest, every row one of:

- exported and validated: exit 0, ONNX Runtime agrees with PyTorch on every trial, every
  input of the recipe is an input of the file, and no warning (a correct export of a
  stock architecture has nothing to warn about: a warning here would be a false alarm);
- failed with its cause and its fix: exit 1, the message names the cause (e.g. DynamicCache)
  and the hint the fix (e.g. use_cache=False); the fix applied as the hint says (added to
  model.kwargs) makes it export and validate, possibly after the next cause is named.

No colour code reaches the user: neither the JSON nor standard error (progress, warnings,
logs and, with -v, the details) holds an escape sequence.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engine import cli
from tests.corpus.architectures import ARCHITECTURES, Architecture, Failure

pytestmark = [
    pytest.mark.corpus,
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                       reason="transformers is not installed (pip install -e '.[test]')"),
    # an architecture's fixture (all its attempts) runs inside its first test: up to three
    # exports and validations of a small model, ~5-25 s each on two busy cores
    pytest.mark.timeout(300),
]

FAILING = [a for a in ARCHITECTURES if a.fails]


@dataclass
class Outcome:
    """One `onnx-studio export ... --validate --json -v` run."""

    kwargs: dict[str, Any]
    status: int
    doc: dict[str, Any]
    line: str      # the JSON line, as printed
    stderr: str    # progress, warnings, logs and details, as printed
    seconds: float


def run_cli(arch: Architecture, folder: Path, attempt: int) -> Outcome:
    recipe = arch.write(folder, attempt)
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(["export", "--recipe", str(recipe), "--validate", "--json", "-v"])
    seconds = time.perf_counter() - started
    line = out.getvalue().strip().splitlines()[-1]
    return Outcome(arch.attempts()[attempt], status, json.loads(line), line, err.getvalue(),
                   seconds)


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")  # no hub access, ever: configs only
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        yield tmp_path_factory.mktemp("corpus")


@pytest.fixture(scope="module", params=ARCHITECTURES, ids=lambda a: a.slug)
def defaults(request: pytest.FixtureRequest, corpus_dir: Path) -> tuple[Architecture, Outcome]:
    """Each architecture exported with the defaults, once for the tests that read it."""
    arch: Architecture = request.param
    return arch, run_cli(arch, corpus_dir, 0)


@pytest.fixture(scope="module", params=FAILING, ids=lambda a: a.slug)
def hinted(request: pytest.FixtureRequest, corpus_dir: Path
           ) -> tuple[Architecture, list[Outcome]]:
    """Each architecture that fails with the defaults, exported again with each hint applied."""
    arch: Architecture = request.param
    return arch, [run_cli(arch, corpus_dir, i) for i in range(1, len(arch.attempts()))]


def assert_exported_and_validated(arch: Architecture, outcome: Outcome) -> None:
    doc = outcome.doc
    error = doc["error"] or {}
    assert outcome.status == 0 and doc["ok"], (
        f"{arch.name} {outcome.kwargs}: {error.get('message')} / {error.get('hint')}")
    assert doc["exporter"] == "dynamo"  # "auto" for a Python module; never TorchScript here
    assert doc["exporter_reason"]
    validation = doc["validation"]
    assert validation["ok"] and validation["outputs"], validation
    assert all(o["passed"] for o in validation["outputs"])
    trials = validation["trials"]
    assert len(trials) >= 1 + 3 and all(t["ok"] for t in trials), trials  # export + 3 random
    # every input the recipe gives is an input of the file: nothing dropped on the way
    graph_inputs = [i["name"] for i in doc["graph"]["inputs"]]
    assert graph_inputs == [spec["name"] for spec in arch.inputs], graph_inputs
    # no false alarm: a stock architecture exported correctly has nothing to warn about
    warnings = doc["warnings"] + (validation.get("warnings") or [])
    unexpected = [w for w in warnings
                  if not any(allowed in w["message"] for allowed in arch.allowed_warnings)]
    assert unexpected == [], unexpected


def assert_fails_with(arch: Architecture, outcome: Outcome, failure: Failure) -> None:
    doc = outcome.doc
    error = doc["error"]
    assert outcome.status == 1 and not doc["ok"] and error is not None, (
        f"{arch.name} {outcome.kwargs} was expected to fail: {failure}")
    assert error["kind"] == failure.kind, error
    for word in failure.names:
        assert word in error["message"], (word, error["message"])
    for word in failure.hint:
        assert word in error["hint"], (word, error["hint"])
    # the real message, never torch.onnx's wrapper; the whole chain one click away
    assert "This is step" not in error["message"]
    assert "Traceback (most recent call last)" in error["details"]
    assert doc["validation"] is None  # nothing was written, so nothing was validated


def assert_no_colour(outcome: Outcome) -> None:
    assert "\x1b[" not in outcome.line and "\\u001b" not in outcome.line, outcome.line[:500]
    assert "\x1b" not in outcome.stderr, [
        line for line in outcome.stderr.splitlines() if "\x1b" in line][:5]


def test_exported_and_validated_or_failed_with_its_cause_and_fix(
        defaults: tuple[Architecture, Outcome]) -> None:
    arch, outcome = defaults
    if arch.fails:
        assert_fails_with(arch, outcome, arch.fails[0])
    else:
        assert_exported_and_validated(arch, outcome)


def test_no_colour_code_reaches_the_user(defaults: tuple[Architecture, Outcome]) -> None:
    _, outcome = defaults
    assert_no_colour(outcome)


def test_the_hint_applied_exports_and_validates(
        hinted: tuple[Architecture, list[Outcome]]) -> None:
    """The fix each hint names, added to model.kwargs, leads to the next named cause or to a
    correct, validated file: never to an unexplained failure."""
    arch, outcomes = hinted
    *middle, last = outcomes
    for outcome, failure in zip(middle, arch.fails[1:], strict=True):
        assert_fails_with(arch, outcome, failure)
        assert_no_colour(outcome)
    assert_exported_and_validated(arch, last)
    assert_no_colour(last)


def test_the_corpus_covers_the_families() -> None:
    """At least 15 architectures: text encoders and decoders, vision with BatchNorm and
    without, audio, encoder-decoder."""
    assert len(ARCHITECTURES) >= 15
    families = {a.family.split(" (")[0] for a in ARCHITECTURES}
    assert {"text", "vision", "audio", "encoder-decoder"} <= families
    assert any("BatchNorm" in a.family for a in ARCHITECTURES)
    assert len({a.slug for a in ARCHITECTURES}) == len(ARCHITECTURES)
