"""`onnx-studio variant` on a Hugging Face export: a tiny random-weight Marian (transformers'
config class, saved with save_pretrained) exported as a user would, three files (encoder,
decoder, decoder with past). Every file of the folder gets its variant, committed into the -o
folder, and the verdict is that folder's validation (each file against eager PyTorch, then
greedy generation): fp16 plainly, fp16 with `--keep-fp32 auto` (nodes named FILE:NODE, kept in
float32 in that file), int8; a weight patched in one source file fails the verdict; wrong
requests exit 2 and write nothing."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import onnx
import pytest

from onnx_studio.engine.analysis.ranges import fp16_holders
from onnx_studio.engine.cli import main
from tests.engine.explain_models import patched, scope_ending

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
FILES = ["decoder_model.onnx", "decoder_with_past_model.onnx", "encoder_model.onnx"]


@pytest.fixture(scope="module")
def marian(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the export folder, its recipe) of the tiny Marian: the test run's one export of it
    (`shared_export`), which these tests only read."""
    from tests.engine.hf_models import shared_export, write_recipe
    from tests.engine.hf_tiny import build

    marian = shared_export(tmp_path_factory, build, "marian")
    assert marian.run[0] == 0, marian.run[2][-3000:]
    out = marian.output
    recipe_path = write_recipe(f"hf:{marian.model}", out,
                               tmp_path_factory.mktemp("hf_variants") / "marian.toml")
    assert sorted(p.name for p in out.glob("*.onnx")) == FILES
    return out, recipe_path


def _variant(source: Path, recipe: Path, output: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["variant", str(source), "--recipe", str(recipe), "-o", str(output),
                     *extra, "--json"])
    return code, json.loads(out.getvalue().strip().splitlines()[-1])


def _float_types(path: Path) -> set[int]:
    return {t.data_type for t in onnx.load(str(path)).graph.initializer
            if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)}


def test_every_file_gets_its_fp16_variant_and_the_verdict_is_the_folders(
        marian: tuple[Path, Path], tmp_path: Path) -> None:
    source, recipe = marian
    code, plain = _variant(source, recipe, tmp_path / "plain", "--kind", "fp16")
    assert sorted(p.name for p in (tmp_path / "plain").glob("*.onnx")) == FILES
    for name in FILES:
        assert _float_types(tmp_path / "plain" / name) == {onnx.TensorProto.FLOAT16}
    validation = plain["validation"]
    # the folder's validation: each file's outputs, then greedy generation over the files
    assert {o["name"].split("/")[0] for o in validation["outputs"]} == {
        Path(n).stem for n in FILES}
    assert validation["generation"]["steps"] > 0
    assert [f["name"] for f in plain["files"]] == sorted(FILES, key=lambda n: (
        n != "encoder_model.onnx", n))
    facts = plain["variant"]
    assert facts["source"] == str(source) and facts["kind"] == "fp16"
    assert facts["size_bytes"] == sum((tmp_path / "plain" / n).stat().st_size for n in FILES)
    assert facts["size_ratio"] < 1.0
    # the attention masks' float32 minimum is beyond float16's range: named, with its file
    assert plain["ok"] is False and code == 1
    assert plain["error"]["kind"] == "validation"
    overflows = facts["fp16_overflows"]
    assert overflows and all(o["node"].split(":")[0] in FILES for o in overflows)

    code, auto = _variant(source, recipe, tmp_path / "auto", "--kind", "fp16",
                          "--keep-fp32", "auto")
    assert code == 0 and auto["ok"] is True, auto["error"]
    kept = auto["variant"]["kept_fp32"]
    assert {o["node"] for o in overflows} <= set(kept)
    assert auto["variant"]["fp16_overflows"] == []
    assert auto["validation"]["ok"] and auto["validation"]["generation"]["passed"]
    for item in overflows:  # in its own file, held in float16 plainly, not with auto
        file = item["node"].split(":")[0]
        assert item["value"] in fp16_holders(onnx.load(str(tmp_path / "plain" / file)))
        assert item["value"] not in fp16_holders(onnx.load(str(tmp_path / "auto" / file)))

    # the nodes auto named, given by hand as FILE:NODE, give the same files
    code, by_hand = _variant(source, recipe, tmp_path / "by_hand", "--kind", "fp16",
                             "--keep-fp32", ",".join(kept))
    assert code == 0 and by_hand["variant"]["kept_fp32"] == kept


def test_int8_of_the_folder_is_validated_as_a_folder(marian: tuple[Path, Path],
                                                     tmp_path: Path) -> None:
    source, recipe = marian
    code, doc = _variant(source, recipe, tmp_path / "int8", "--kind", "int8")
    assert doc["variant"]["kind"] == "int8" and doc["validation"] is not None
    assert sorted(p.name for p in (tmp_path / "int8").glob("*.onnx")) == FILES
    assert code == (0 if doc["ok"] else 1)
    assert doc["variant"]["size_ratio"] < 1.0


def test_a_weight_patched_in_one_file_fails_the_variants_verdict(
        marian: tuple[Path, Path], tmp_path: Path) -> None:
    source, recipe = marian
    bad = tmp_path / "bad"
    shutil.copytree(source, bad)
    decoder = bad / "decoder_model.onnx"
    patched(decoder, decoder, scope_ending(decoder, "lm_head"), scale=3.0)
    code, doc = _variant(bad, recipe, tmp_path / "out", "--kind", "fp16", "--keep-fp32",
                         "auto")
    assert code == 1 and doc["ok"] is False
    failed = [o["name"] for o in doc["validation"]["outputs"] if not o["passed"]]
    assert failed and all(name.startswith("decoder_model/") for name in failed)
    assert "misses its tolerance" in doc["error"]["message"]


def test_wrong_requests_exit_2_and_write_nothing(marian: tuple[Path, Path],
                                                 tmp_path: Path) -> None:
    source, recipe = marian
    before = sorted(p.name for p in source.iterdir())
    cases = [
        (source / "encoder_model.onnx", tmp_path / "a", ["--kind", "fp16"], "name the folder"),
        (source, source, ["--kind", "fp16"], "an input of this command"),
        (source, tmp_path / "b.onnx", ["--kind", "fp16"], "names a folder"),
        (source, tmp_path / "c", ["--kind", "fp16", "--keep-fp32", "encoder_model.onnx:nope"],
         "the folder's files do not have"),
        (source, tmp_path / "d", ["--kind", "int8", "--keep-fp32", "auto"], "fp16"),
    ]
    for model, output, extra, words in cases:
        code, doc = _variant(model, recipe, output, *extra)
        assert code == 2 and doc["ok"] is False, doc
        assert words in doc["error"]["message"], doc["error"]
        assert not output.exists() or output == source
    assert sorted(p.name for p in source.iterdir()) == before
