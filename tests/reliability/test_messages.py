"""The right cause in the message: a truncated TorchScript archive, a custom operator without
its symbolic, a damaged .pt2 (with torch's own log kept off stderr unless --verbose)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import pytest
import torch

from onnx_studio.engine.cli import main
from tests.conftest import REPO


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines, "no JSON line printed"
    return code, json.loads(lines[-1])


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A TorchScript archive cut in half, and .pt2 files damaged three ways."""
    folder = tmp_path_factory.mktemp("damaged")
    scripted = folder / "scripted.pt"
    with warnings.catch_warnings():  # torch 2.9+ calls torch.jit deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(torch.nn.Linear(3, 2)).save(str(scripted))
    data = scripted.read_bytes()
    (folder / "truncated.pt").write_bytes(data[: len(data) // 2])

    good = folder / "good.pt2"
    program = torch.export.export(torch.nn.Linear(3, 2), (torch.randn(2, 3),))
    torch.export.save(program, str(good))
    raw = good.read_bytes()
    flipped = bytearray(raw)  # bytes inside a compressed entry: its CRC no longer matches
    with zipfile.ZipFile(good) as archive:
        info = archive.getinfo(next(n for n in archive.namelist()
                                    if n.endswith("models/model.json")))
    # the entry's data follows its local header, whose name and extra field lengths (torch
    # pads entries for alignment) are at bytes 26 and 28 of that header
    header = info.header_offset
    name_len = int.from_bytes(raw[header + 26:header + 28], "little")
    extra_len = int.from_bytes(raw[header + 28:header + 30], "little")
    start = header + 30 + name_len + extra_len + 8
    for i in range(start, start + 16):
        flipped[i] ^= 0xFF
    (folder / "crc.pt2").write_bytes(bytes(flipped))

    def rewrite(target: str, change: dict[str, bytes]) -> None:
        with zipfile.ZipFile(good) as source, zipfile.ZipFile(folder / target, "w") as out:
            for item in source.infolist():
                key = next((k for k in change if item.filename.endswith(k)), None)
                out.writestr(item, change[key] if key else source.read(item))

    with zipfile.ZipFile(good) as source:
        program_json = next(source.read(n) for n in source.namelist()
                            if n.endswith("models/model.json"))
    document = json.loads(program_json)
    document["graph_module"]["graph"]["nodes"] = "garbage"
    rewrite("schema.pt2", {"models/model.json": json.dumps(document).encode()})
    rewrite("no_version.pt2", {".data/version": b"", "archive_version": b""})
    return {p.stem: p for p in folder.iterdir()}


def test_a_truncated_torchscript_archive_is_called_truncated(
        archives: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, "export", str(archives["truncated"]), "-o",
                         str(archives["truncated"].with_suffix(".onnx")), "--input", "x=2x3")
    assert code == 2, doc
    error = doc["error"]
    assert error["kind"] == "source"
    assert error["message"].startswith("truncated.pt is damaged (truncated or corrupt): "), error
    assert "pickle" not in error["message"] and "trust_pickle" not in error["hint"]
    assert not archives["truncated"].with_suffix(".onnx").exists()


def test_a_custom_op_without_symbolic_names_the_operator(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The seed's custom op (example:custom_op) exported without its extension file."""
    out = tmp_path / "foo.onnx"
    code, doc = run_json(capsys, "export", "example:custom_op", "-o", str(out),
                         "--input", "input1=2x3", "--input", "input2=2x3",
                         "--exporter", "torchscript")
    assert code == 1, doc
    error = doc["error"]
    assert error["kind"] == "unsupported_operator"
    assert error["message"] == ("The torchscript exporter cannot convert 1 operator: "
                                "custom_ops::foo_forward."), error
    assert "0 operators" not in error["message"]
    assert error["unsupported_ops"] == ["custom_ops::foo_forward"]
    assert "custom operator" in error["hint"]
    assert 'register_custom_op_symbolic("custom_ops::foo_forward"' in error["hint"]
    assert "custom_translation_table" in error["hint"]  # the dynamo way too
    assert not out.exists()


@pytest.mark.parametrize("name", ["crc", "schema", "no_version"])
def test_a_damaged_pt2_says_so_and_keeps_stderr_clean(
        name: str, archives: dict[str, Path]) -> None:
    """The real CLI: one error line and its hint on stderr, torch's logged traceback only in
    the JSON details (and on stderr with --verbose)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    path = archives[name]
    argv = [sys.executable, "-m", "onnx_studio.engine.cli", "export", str(path), "-o",
            str(path.with_suffix(".onnx")), "--input", "x=2x3", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=110)
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stdout.strip().splitlines()[-1])["error"]
    assert error["kind"] == "source"
    assert error["message"].startswith(f"{name}.pt2 is damaged (truncated or corrupt): "), error
    assert "warnings above" not in error["message"]
    noise = [line for line in done.stderr.splitlines()
             if not line.startswith(("onnx-studio:", "error:", "hint:", "(run with"))]
    assert noise == [], done.stderr
    assert "Traceback" not in done.stderr
    if name == "schema":  # torch's logged cause went into the details
        assert "Ran into the following error when deserializing" in error["details"]
        verbose = subprocess.run([*argv, "--verbose"], capture_output=True, text=True,
                                 env=env, timeout=110)
        assert "Ran into the following error when deserializing" in verbose.stderr
