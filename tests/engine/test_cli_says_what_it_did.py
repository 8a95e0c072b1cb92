"""The command line says what it did and what to change (issue 36, paths 8 and 11): `validate`
in text mode writes nothing and says so; the variant document records its settings typed; a
missing file, a bad --input and an output without .onnx each come with a hint that works when
applied (each test applies it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from onnx_studio.engine.cli import main
from tests.engine.models import write_models

RECIPE = """
version = 1
[model]
source = "tiny.py:TinyNet"
[[inputs]]
name = "x"
shape = [2, 4]
[export]
output = "tiny.onnx"
exporter = "torchscript"
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny models, a recipe and its export, made once for the module."""
    folder = tmp_path_factory.mktemp("cli_says")
    write_models(folder)
    (folder / "r.toml").write_text(RECIPE)
    assert main(["export", "--recipe", str(folder / "r.toml")]) == 0
    return folder


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_validate_in_text_mode_writes_nothing_and_says_its_verdict(
        folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    onnx = folder / "tiny.onnx"
    before = onnx.stat().st_mtime_ns
    assert main(["validate", str(onnx), "--recipe", str(folder / "r.toml")]) == 0
    out = capsys.readouterr().out
    assert "wrote" not in out, out
    first = out.splitlines()[0]
    assert first.startswith(f"validated {onnx}: passed"), first
    assert "|diff| <= atol + rtol*|ref|" in first and re.search(r"\d+ of \d+ trials", first)
    assert onnx.stat().st_mtime_ns == before, "validate wrote nothing"
    # an export still says what it wrote
    assert main(["export", "--recipe", str(folder / "r.toml"), "-o",
                 str(folder / "again.onnx")]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {folder / 'again.onnx'}")


def test_the_fp16_variant_records_its_settings_typed(
        folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run(capsys, "variant", str(folder / "tiny.onnx"), "--recipe",
                    str(folder / "r.toml"), "--kind", "fp16", "--keep-fp32", "auto",
                    "-o", str(folder / "tiny.fp16.onnx"))
    assert code in (0, 1), doc
    settings = doc["variant"]["settings"]
    assert settings["keep_io_types"] is True, settings
    assert settings["keep_fp32"] == "auto", settings


def test_a_missing_file_names_the_files_that_are_there(
        folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run(capsys, "inspect", str(folder / "tiyn.onnx"))
    assert code == 2 and doc["error"]["hint"], doc
    named = re.findall(r"(/\S+?\.onnx)", doc["error"]["hint"])
    assert str(folder / "tiny.onnx") in named
    code, doc = run(capsys, "inspect", named[named.index(str(folder / "tiny.onnx"))])
    assert code == 0 and doc["ok"], doc

    code, doc = run(capsys, "export", "--recipe", str(folder / "recipe.toml"))
    assert code == 2 and str(folder / "r.toml") in doc["error"]["hint"], doc


def test_a_bad_input_and_an_output_without_onnx_say_what_to_write(
        folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = str(folder / "tiny.py") + ":TinyNet"
    code, doc = run(capsys, "export", source, "-o", str(folder / "f.onnx"), "--input", "x=2by4")
    assert code == 2 and "--input x=" in doc["error"]["hint"], doc
    code, doc = run(capsys, "export", source, "-o", str(folder / "f.onnx"), "--input", "2x4")
    assert code == 2 and "--input NAME=SHAPE" in doc["error"]["hint"], doc

    code, doc = run(capsys, "export", source, "-o", str(folder / "named"), "--input", "x=2x4")
    hint = doc["error"]["hint"]
    assert code == 2 and hint.startswith("Write the output as "), doc
    applied = hint.removeprefix("Write the output as ").rstrip(".")
    assert applied.endswith("named.onnx")
    code, doc = run(capsys, "export", source, "-o", applied, "--input", "x=2x4")
    assert code == 0 and Path(applied).is_file(), doc
