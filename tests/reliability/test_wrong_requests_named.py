"""A wrong request is named for what it is (issue 33, cases 6, 8, 9 and 11): the right kind and
exit status, a sentence that names the file or the argument at fault, the full cause in
`details`, and the command's JSON line on every outcome, Ctrl+C included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, wait_until
from tests.engine import hf_tiny
from tests.engine.explain_models import RECIPE, exported, patched
from tests.reliability.test_keeps_user_files import cli


@pytest.mark.timeout(300)
def test_explain_with_the_recipe_of_another_model(tmp_path: Path) -> None:
    """Case 6: the recipe's model is not the file's (another output shape): kind `recipe`,
    exit 2, naming the output, not a KeyError from inside."""
    source, _ = exported(tmp_path, "Stack")
    bad = tmp_path / "patched.onnx"
    patched(source, bad, "layers.2.lin")
    other = tmp_path / "hot.toml"
    other.write_text(RECIPE.format(cls="Hot", width=16, name="hot"))
    code, doc = cli("explain", str(bad), "--recipe", str(other), "-o", str(tmp_path / "r"))
    assert code == 2, doc
    assert doc["error"]["kind"] == "recipe", doc["error"]
    assert "patched.onnx" in doc["error"]["message"] and "shape" in doc["error"]["message"]
    assert not (tmp_path / "r").exists()


@pytest.mark.timeout(300)
def test_a_config_nested_too_deeply_is_a_source_error_naming_it(tmp_path: Path) -> None:
    """Case 8: config.json nested 100,000 deep is kind `source`, exit 2, naming the file."""
    folder = tmp_path / "deep"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert", "x": ' + "[" * 100_000
                                        + "]" * 100_000 + "}")
    code, doc = cli("export", f"hf-config:{folder}", "-o", str(tmp_path / "out"))
    assert code == 2, doc
    assert doc["error"]["kind"] == "source"
    assert str(folder / "config.json") in doc["error"]["message"]
    assert "nested" in doc["error"]["message"] and doc["error"]["hint"]
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(300)
def test_truncated_weights_are_named(tmp_path: Path) -> None:
    """Case 8: a model.safetensors cut short is named, with what to do."""
    folder = hf_tiny.build("bert", tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    code, doc = cli("export", f"hf:{folder}", "-o", str(tmp_path / "out"))
    assert code == 2, doc
    assert doc["error"]["kind"] == "source"
    assert "model.safetensors" in doc["error"]["message"], doc["error"]
    assert "truncated" in doc["error"]["hint"] and doc["error"]["details"]


@pytest.mark.timeout(600)
def test_keep_fp32_names_the_unknown_file_of_a_folder(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Case 9: FILE:NODE with a FILE the folder does not have says so, and where the node is
    (the test run's export of the tiny Marian, three files, read only)."""
    import onnx

    from tests.engine.hf_models import shared_export, write_recipe

    marian = shared_export(tmp_path_factory, hf_tiny.build, "marian")
    assert marian.run[0] == 0, marian.run[2][-3000:]
    out = marian.output
    recipe = write_recipe(f"hf:{marian.model}", out, tmp_path / "marian.toml")
    node = onnx.load(str(out / "decoder_model.onnx"), load_external_data=False).graph.node[0]
    code, doc = cli("variant", str(out), "--recipe", str(recipe), "--kind", "fp16",
                    "-o", str(tmp_path / "fp16"), "--keep-fp32", f"ghost.onnx:{node.name}")
    assert code == 2, doc
    message = doc["error"]["message"]
    assert "ghost.onnx" in message and "no file" in message, message
    assert f"{node.name} is a node of " in message, message  # of each file that has it
    assert "decoder_model.onnx" in message.split(" is a node of ")[1], message
    assert not (tmp_path / "fp16").exists()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_at_any_moment_ends_the_command_with_its_json_line(
        tmp_path: Path, signum: int) -> None:
    """Case 11: SIGINT or SIGTERM while the command itself works, outside any job (here: it
    waits reading its recipe, a fifo the test holds open), ends it with the `cancelled`
    document and status 128 + the signal, not a death by the signal."""
    recipe = tmp_path / "r.toml"
    os.mkfifo(recipe)
    process = subprocess.Popen(
        [sys.executable, "-m", "onnx_studio", "export", "--recipe", str(recipe), "--json"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    writer = None
    try:
        def reader_waits() -> bool:  # a writer can open the fifo once its reader has
            nonlocal writer
            try:
                writer = os.open(recipe, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                return False
            return True

        wait_until(reader_waits, "the command to open its recipe", 120)
        process.send_signal(signum)
        out, err = process.communicate(timeout=120)
    finally:
        if writer is not None:
            os.close(writer)
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signum, (process.returncode, err[-2000:])
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["ok"] is False and doc["error"]["kind"] == "cancelled", doc
    assert signal.Signals(signum).name in doc["error"]["message"]
