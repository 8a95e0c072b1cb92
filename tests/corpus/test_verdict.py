"""A verdict that cannot tell says so, on Hugging Face exports (issue 24.6): MobileViT and LeViT
at their default initialisation produce logits of exactly 0 and ~1e-10, which any file would
match; `onnx-studio export hf:DIR --validate --json` still passes them (the files are right)
but warns, category `Verdict`, naming the output and what to change. The corpus rows of the
same architectures, initialised wider, validate with no warning (tests/corpus/test_hf_corpus.py),
as do all its other rows: no false alarm.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from tests.corpus.architectures import BY_NAME
from tests.corpus.test_hf_corpus import run_cli

pytestmark = [
    pytest.mark.corpus,
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                       reason="transformers is not installed (pip install -e '.[test]')"),
    pytest.mark.timeout(600),
]


# corpus_full: the default run's time goes to the corpus rows; the warning itself is tested on
# small models in tests/engine/test_verdict_cannot_tell.py
@pytest.mark.corpus_full
@pytest.mark.parametrize("name", ["MobileViT", "LeViT"])
def test_logits_that_vanish_at_the_default_initialisation_warn(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    row = BY_NAME[name]
    config = {k: v for k, v in row.config.items() if k != "initializer_range"}
    source = replace(row, name=f"{name} default init", config=config).build(tmp_path)
    outcome = run_cli(source, tmp_path / "out")
    doc = outcome.doc
    assert outcome.status == 0 and doc["ok"], doc["error"]  # the files are right
    warnings = [w for w in doc["validation"]["warnings"] if w["category"] == "Verdict"]
    assert len(warnings) == 1, doc["validation"]["warnings"]
    assert warnings[0]["message"].startswith("Output 'logits' is within the tolerance of zero")
    assert "cannot tell a right file from a wrong one" in warnings[0]["message"]
    assert "real weights" in warnings[0]["hint"] and "atol" in warnings[0]["hint"]
    # said on standard error too, with what to change
    assert "Verdict: Output 'logits'" in outcome.stderr and "what to change" in outcome.stderr
