"""Hugging Face models written as a user's model file (tests/corpus/model_files.py), exported
with the defaults through the command line (`onnx-studio export --recipe R.toml --validate
--json -v`, in process): each fails with its cause and fix, and the fix applied as the hint
says (added to model.kwargs) exports and validates with no warning. No colour code reaches the
JSON or standard error.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import pytest

from onnx_studio.engine import cli
from tests.corpus.model_files import MODEL_FILES, ModelFile

pytestmark = [
    pytest.mark.corpus,
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                       reason="transformers is not installed (pip install -e '.[test]')"),
    pytest.mark.timeout(600),  # two exports of a small model on two busy cores
]


def run_cli(row: ModelFile, folder: Path, attempt: int) -> tuple[int, dict[str, Any], str, str]:
    """(exit status, the JSON document, the JSON line, standard error)."""
    recipe = row.write(folder, attempt)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(["export", "--recipe", str(recipe), "--validate", "--json", "-v"])
    line = out.getvalue().strip().splitlines()[-1]
    return status, json.loads(line), line, err.getvalue()


# the default run exports the first (the cache's cause); the others run with -m corpus_full
@pytest.mark.parametrize("row", [pytest.param(row, id=row.slug, marks=[pytest.mark.corpus_full]
                                              if index else []) for index, row in
                                 enumerate(MODEL_FILES)])
def test_fails_with_its_cause_and_the_hint_applied_validates(
        row: ModelFile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    status, doc, line, stderr = run_cli(row, tmp_path, 0)
    error = doc["error"]
    assert status == 1 and not doc["ok"] and error is not None, row.name
    assert error["kind"] == row.fails.kind, error
    for word in row.fails.names:
        assert word in error["message"], (word, error["message"])
    for word in row.fails.hint:
        assert word in error["hint"], (word, error["hint"])
    assert "This is step" not in error["message"]  # the real message, not torch.onnx's
    assert "Traceback (most recent call last)" in error["details"]
    assert doc["validation"] is None
    runs = [(line, stderr)]

    status, doc, line, stderr = run_cli(row, tmp_path, 1)
    assert status == 0 and doc["ok"], doc["error"]
    assert doc["exporter"] == "dynamo"
    validation = doc["validation"]
    assert validation["ok"] and all(t["ok"] for t in validation["trials"])
    assert len(validation["trials"]) >= 1 + 3  # the export inputs and 3 random draws
    assert [i["name"] for i in doc["graph"]["inputs"]] == [s["name"] for s in row.inputs]
    assert doc["warnings"] + (validation.get("warnings") or []) == []
    runs.append((line, stderr))
    for line, stderr in runs:
        assert "\x1b[" not in line and "\\u001b" not in line
        assert "\x1b" not in stderr, [s for s in stderr.splitlines() if "\x1b" in s][:5]
