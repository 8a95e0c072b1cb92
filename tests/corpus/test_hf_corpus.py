"""The corpus: real transformers architectures, as Hugging Face folders, exported as a user
would (`onnx-studio export hf:DIR -o OUT --validate --json`, in process; the job runs in its
own worker as always).

Every row of tests/corpus/architectures.py is one of:

- exported and validated: exit 0, every file's trials and (generation tasks) the greedy
  tokens agree, and no warning at all (a correct export of a stock architecture has nothing
  to warn about: a warning here is a false alarm). Then the studio's verdict is not trusted:
  tests/corpus/independent.py loads the files in ONNX Runtime and compares them with eager
  PyTorch at another batch and other lengths, the cache path against a forward without one;
- failed with its real cause: exit 1, the message names the cause and the hint the fix, and
  the fix applied on the command line (`Failure.fix`) exports and validates as above (a row
  no argument could fix, `fix=None`, would end at its failure);
- pending: an expected failure (strict) whose reason names the fix it waits for.

No colour code reaches the user: neither the JSON line nor standard error holds an escape
sequence. Each architecture is one test (tests/conftest.py keeps it in one test process). The
default run exports the rows of `DEFAULT_RUN`; the others are marked `corpus_full`
(`python -m pytest -m corpus_full tests/corpus`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from onnx_studio.engine import cli
from tests.corpus.architectures import ARCHITECTURES, BY_NAME, DEFAULT_RUN, Architecture
from tests.corpus.independent import check_folder, static_dims

pytestmark = [
    pytest.mark.corpus,
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                       reason="transformers is not installed (pip install -e '.[test]')"),
    # a seq2seq row on two busy cores: three files exported and validated, twice with a hint
    pytest.mark.timeout(600),
]


@dataclass
class Outcome:
    """One `onnx-studio export hf:DIR -o OUT --validate --json` run."""

    args: list[str]
    status: int
    doc: dict[str, Any]
    line: str      # the JSON line, as printed
    stderr: str    # progress, warnings, logs, as printed
    seconds: float


def run_cli(source: Path, out: Path, *args: str) -> Outcome:
    argv = ["export", f"hf:{source}", "-o", str(out), "--validate", "--json", *args]
    stdout, stderr = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = cli.main(argv)
    seconds = time.perf_counter() - started
    line = stdout.getvalue().strip().splitlines()[-1]
    return Outcome(argv, status, json.loads(line), line, stderr.getvalue(), seconds)


def export_row(arch: Architecture, folder: Path, runs: dict[Any, list[Outcome]],
               *args: str) -> list[Outcome]:
    """The row's runs, made once for the session: the defaults (and `args`), then (a failing
    row) its fix applied."""
    key = (arch.slug, args)
    if key not in runs:
        source = arch.build(folder)
        out = folder / "_".join(["out", arch.slug, *(a.strip("-") for a in args)])
        runs[key] = [run_cli(source, out, *arch.args, *args)]
        if arch.fails is not None and arch.fails.fix is not None:
            runs[key].append(run_cli(source, out.with_name(out.name + "_fixed"), *arch.args,
                                     *args, *arch.fails.fix))
    return runs[key]


def _row(arch: Architecture, default: frozenset[str] = DEFAULT_RUN) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=arch.pending)] if arch.pending else []
    if arch.name not in default:
        marks.append(pytest.mark.corpus_full)
    return pytest.param(arch, id=arch.slug, marks=marks)


# session fixtures: a test process runs other modules' tests between one architecture's tests
# (pytest-xdist's groups keep them in one process, not in a row), and a module fixture would
# be torn down in between and the row exported again
@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")  # no hub access, ever: configs only
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        yield tmp_path_factory.mktemp("corpus")


@pytest.fixture(scope="session")
def runs() -> dict[Any, list[Outcome]]:
    """Export runs by (architecture, extra arguments), made once for the session on first use:
    the tests of one architecture run in one test process (tests/conftest.py), so they share
    its exports."""
    return {}


def assert_no_colour(outcome: Outcome) -> None:
    assert "\x1b[" not in outcome.line and "\\u001b" not in outcome.line, outcome.line[:500]
    assert "\x1b" not in outcome.stderr, [
        line for line in outcome.stderr.splitlines() if "\x1b" in line][:5]


def assert_exported_and_validated(arch: Architecture, source: Path, outcome: Outcome) -> None:
    doc = outcome.doc
    error = doc["error"] or {}
    assert outcome.status == 0 and doc["ok"], (
        f"{arch.name} {outcome.args[6:]}: {error.get('kind')}: {error.get('message')} / "
        f"{error.get('hint')}")
    validation = doc["validation"]
    assert validation["ok"] and validation["outputs"], validation
    assert all(t["ok"] for t in validation["trials"]), validation["trials"]
    assert {t["kind"] for t in validation["trials"]} >= {"export-inputs"}
    assert len(validation["trials"]) >= 2 * len(doc["files"])  # other sizes for every file
    generation = validation.get("generation")
    if "generation" in doc["task"] or doc["task"].endswith("-with-past"):
        assert generation is not None
    if generation is not None:
        assert generation["passed"] and generation["steps"] == 20, generation
        assert generation["onnx_tokens"] == generation["torch_tokens"]
    # no false alarm: a stock architecture exported correctly has nothing to warn about
    warnings = doc["warnings"] + (validation.get("warnings") or [])
    assert warnings == [], warnings
    # the studio's verdict is not trusted: ONNX Runtime against eager PyTorch, other sizes
    files = [f["name"] for f in doc["files"]]
    problems = check_folder(source, Path(doc["output"]), doc["task"], files,
                            static_dims(outcome.args))
    assert problems == [], problems


def assert_fails_with_its_cause(arch: Architecture, outcome: Outcome) -> None:
    assert arch.fails is not None
    doc, error = outcome.doc, outcome.doc["error"]
    assert outcome.status == 1 and not doc["ok"] and error is not None, (
        f"{arch.name} was expected to fail: {arch.fails}")
    assert error["kind"] == arch.fails.kind, error
    for word in arch.fails.names:
        assert word in error["message"], (word, error["message"])
    for word in arch.fails.hint:
        assert word in (error["hint"] or ""), (word, error["hint"])
    assert "This is step" not in error["message"]  # the real cause, not torch.onnx's wrapper
    assert "Traceback (most recent call last)" in (error.get("details") or "") or \
        error["kind"] == "validation"


@pytest.mark.parametrize("arch", [_row(a) for a in ARCHITECTURES])
def test_exported_and_validated_or_failed_with_its_cause_and_fix(
        arch: Architecture, corpus_dir: Path, runs: dict[Any, list[Outcome]]) -> None:
    outcomes = export_row(arch, corpus_dir, runs)
    for outcome in outcomes:
        assert_no_colour(outcome)
    source = corpus_dir / arch.slug
    if arch.fails is None:
        assert_exported_and_validated(arch, source, outcomes[0])
    else:
        assert_fails_with_its_cause(arch, outcomes[0])
        if arch.fails.fix is not None:
            assert_exported_and_validated(arch, source, outcomes[1])


# Issue 24.3: transformers' generate stops at, or forces, the end token of their generation
# config (mBART, Pegasus, BlenderbotSmall and Marian force it at the last step); the ONNX loop
# does not. Judged teacher-forced, their correct files pass and a patched weight still fails.
# Each shares its row's export (tests/conftest.py runs both in one test process).
GENERATION = ["mBART", "Pegasus", "BlenderbotSmall", "Qwen3", "Marian"]
# the default run judges one decoder's generation (each costs its model loaded again and a
# validation of the patched copy); tests/engine/test_generation_judge.py covers the rules
GENERATION_DEFAULT = frozenset({"Qwen3"})


@pytest.mark.parametrize("arch", [_row(BY_NAME[name], GENERATION_DEFAULT)
                                  for name in GENERATION])
def test_generation_is_judged_fairly_and_a_patched_weight_fails(
        arch: Architecture, corpus_dir: Path, runs: dict[Any, list[Outcome]],
        tmp_path: Path) -> None:
    from onnx_studio.engine.events import Events
    from onnx_studio.engine.source.hf import load_hf
    from onnx_studio.engine.validation.hf_checks import check_generation, validate_hf

    outcome = export_row(arch, corpus_dir, runs)[0]
    doc = outcome.doc
    assert outcome.status == 0 and doc["ok"], doc["error"]
    generation = doc["validation"]["generation"]
    assert generation["passed"] and generation["teacher_forced"], generation
    assert generation["steps"] == len(generation["fed_tokens"]) == 20
    assert generation["onnx_tokens"] == generation["torch_tokens"]
    steps = generation["continuation"]  # the steps on a random continuation, which decide
    assert steps["passed"] and len(steps["steps"]) == 20 and steps["with_past"], steps

    folder = Path(doc["output"])
    hf = load_hf(f"hf:{corpus_dir / arch.slug}", corpus_dir, None)
    # generate's stopping rule made to bite at once: the end token is the first token it
    # picks, and forced tokens are set; the tokens fed change, the verdict does not
    first, bos = generation["torch_tokens"][0], (generation["torch_tokens"][0] + 1) % 50
    hf.model.generation_config.eos_token_id = first
    hf.model.generation_config.forced_eos_token_id = first
    hf.model.generation_config.forced_bos_token_id = bos
    forced = check_generation(hf, folder)
    assert forced["passed"] and forced["steps"] == 20, forced
    assert first not in forced["continuation"]["tokens"]  # an end token is never fed there
    assert forced["fed_tokens"][-1] == first  # forced at the last step
    if hf.seq2seq:  # forced at the first step
        assert forced["fed_tokens"][0] == bos, forced
    else:  # generate would have stopped here: the end token is held back instead
        assert forced["fed_tokens"][0] != first, forced

    # one initializer changed in the file the later steps run: the verdict fails
    patched = tmp_path / "patched"
    shutil.copytree(folder, patched)
    target = "decoder_with_past_model.onnx" if hf.seq2seq else "model.onnx"
    name = perturb_largest_initializer(patched / target)
    result = validate_hf(hf, patched, 1e-3, 1e-5, Events())
    assert not result["ok"], name
    assert not result["generation"]["passed"], (name, result["generation"])
    assert result["generation"]["message"]
    assert not result["generation"]["continuation"]["passed"], result["generation"]


@pytest.mark.parametrize("arch", [_row(BY_NAME["Funnel"])])
def test_a_file_that_runs_at_one_size_only_is_warned_and_a_failed_trial_with_a_hint(
        arch: Architecture, corpus_dir: Path, runs: dict[Any, list[Outcome]]) -> None:
    """Funnel's export fixes the sequence length: the export warns naming the axis (issue
    24.5), and the validation says which file could not run at which sizes and why, and what
    to change, instead of failing "unexpectedly"."""
    doc = export_row(arch, corpus_dir, runs)[0].doc
    baked = [w for w in doc["warnings"] if "input_ids" in w["message"]]
    assert baked and "axis 1" in baked[0]["message"], doc["warnings"]
    assert not doc["ok"] and doc["error"]["kind"] == "validation", doc["error"]
    assert doc["error"]["message"].startswith(
        "ONNX Runtime cannot run on model.onnx dynamic-size at batch_size=3, "
        "sequence_length=7"), doc["error"]["message"]
    assert "Expected: 5" in doc["error"]["message"]
    assert "fixed in it while exporting" in doc["error"]["hint"]
    assert "--static-dim DIM=SIZE" in doc["error"]["hint"]
    failed = [t for t in doc["validation"]["trials"] if not t["ok"]]
    assert [t["kind"] for t in failed] == ["dynamic-size"] and failed[0]["details"]


def perturb_largest_initializer(path: Path) -> str:
    """Add noise of its own spread to the file's largest float initializer; its name."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    floats = [t for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT]
    largest = max(floats, key=lambda t: int(np.prod(t.dims)))
    values = numpy_helper.to_array(largest)
    noise = np.random.default_rng(0).standard_normal(values.shape) * float(values.std())
    largest.CopyFrom(numpy_helper.from_array((values + noise).astype(values.dtype),
                                             largest.name))
    onnx.save(model, str(path))
    return largest.name


def test_the_corpus_covers_the_families() -> None:
    """At least 60 architectures: decoders (mixture of experts and sliding windows among them),
    encoders, seq2seq, vision, audio and two-tower models, each saved under its own name."""
    assert len(ARCHITECTURES) >= 60
    families = {a.family for a in ARCHITECTURES}
    assert families == {"decoder", "encoder", "seq2seq", "vision", "audio", "multimodal"}
    decoders = [a for a in ARCHITECTURES if a.family == "decoder"]
    assert any("num_local_experts" in a.config or "num_experts" in a.config for a in decoders)
    assert any(a.config.get("sliding_window") for a in decoders)
    assert len({a.slug for a in ARCHITECTURES}) == len(ARCHITECTURES)
    for arch in ARCHITECTURES:
        assert arch.pending is None or arch.fails is None, arch.name
