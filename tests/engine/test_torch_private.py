"""onnx_studio.engine.torch_private: every private torch API the engine uses works on the installed
torch (one named test each), no other module reaches into torch's privates, and the tested torch
range is one range, said the same in pyproject.toml, the worker's ready and the CLI."""

from __future__ import annotations

import inspect
import json
import re
import tokenize
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from onnx_studio.engine import torch_private
from onnx_studio.engine.cli import main
from tests.conftest import REPO

# ---------------------------------------------------------------------------- every accessor


class _Pair(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return torch.relu(x), {"double": x * 2}


def _program() -> torch.export.ExportedProgram:
    return torch.export.export(_Pair(), (torch.randn(2, 3),), strict=False)


def _onnx_default_opset() -> None:
    low, high = torch_private.onnx_opset_range()
    assert low <= torch_private.onnx_default_opset() <= high


def _onnx_opset_range() -> None:
    low, high = torch_private.onnx_opset_range()
    assert 7 <= low < 18 <= high


def _torchscript_max_opset() -> None:
    assert 17 <= torch_private.torchscript_max_opset() <= torch_private.onnx_opset_range()[1]


def _tree_leaves() -> None:
    x = torch.ones(1)
    assert torch_private.tree_leaves((x, {"a": [x, None]}, 3)) == [x, x, None, 3]


def _tree_flatten() -> None:
    x = torch.ones(1)
    leaves, spec = torch_private.tree_flatten({"b": x, "a": (x, x)})
    assert len(leaves) == 3 and spec is not None


def _torchlib_opset() -> None:
    assert torch_private.torchlib_opset() >= 18


def _onnx_registry() -> None:
    registry = torch_private.onnx_registry()
    assert callable(registry.register_op)
    assert torch_private.onnx_registry(torch_private.torchlib_opset()) is not None


def _prepare_for_onnx() -> None:
    program = torch_private.prepare_for_onnx(_program(), torch_private.onnx_registry())
    assert any(node.op == "call_function" for node in program.graph.nodes)


def _capture_like_the_exporter() -> None:
    class Grows(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.relu() * 2

    batch = torch.export.Dim("batch")
    program = torch_private.capture_like_the_exporter(Grows(), (torch.ones(3, 4),),
                                                      ({0: batch},))
    assert any(node.op == "call_function" for node in program.graph.nodes)
    with pytest.raises(Exception):  # noqa: B017 (torch's own error, whichever it is)
        torch_private.capture_like_the_exporter(Grows(), (torch.ones(3, 4), 1), None)


def _dispatch() -> None:
    registry = torch_private.onnx_registry()
    program = torch_private.prepare_for_onnx(_program(), registry)
    found = [torch_private.dispatch(node, registry)[0]
             for node in program.graph.nodes if node.op == "call_function"]
    assert found and all(function is not None for function in found)


def _dynamo_registration_logger() -> None:
    import importlib

    module = importlib.import_module(torch_private.DYNAMO_REGISTRATION_LOGGER)
    assert module.__name__ == torch_private.DYNAMO_REGISTRATION_LOGGER


def _pytorch_file_reader(tmp_path: Path) -> None:
    path = tmp_path / "t.pt"
    torch.save({"w": torch.ones(2)}, path)
    reader = torch_private.pytorch_file_reader(str(path))
    records = reader.get_all_records()
    assert "data.pkl" in records
    assert all(reader.get_record_header_offset(name) >= 0 for name in records)


def _named_leaves() -> None:
    import dataclasses

    @dataclasses.dataclass
    class Out:
        logits: torch.Tensor
        past: tuple[torch.Tensor, ...] | None = None

    x = torch.ones(1)
    named = torch_private.named_leaves({"a": Out(x, (x, x)), "b": [x, None], "c": Out(x)})
    assert [n for n, _ in named] == ["a.logits", "a.past.0", "a.past.1", "b.0", "c.logits"]
    assert torch_private.named_leaves(x) == [("", x)]


def _register_output_dataclasses() -> None:
    import dataclasses

    @dataclasses.dataclass
    class Out:
        logits: torch.Tensor

    value = {"out": Out(torch.ones(1))}
    assert torch_private.register_output_dataclasses(value) == [Out]
    assert torch_private.register_output_dataclasses(value) == []  # once is enough
    assert len(torch_private.tree_leaves(value)) == 1  # pytree opens it now


def _reused_onnx_registry() -> None:
    from torch.onnx._internal.exporter import _registration

    with torch_private.reused_onnx_registry():
        first = _registration.ONNXRegistry().from_torchlib(opset_version=18)
        first.register_op(torch.ops.aten.relu.default, lambda x: x, is_complex=False)
        second = _registration.ONNXRegistry.from_torchlib(opset_version=18)
        assert second.opset_version == 18 and second.functions
        # a copy each: the first call's custom translation is not in the second's
        def count(registry: Any) -> int:
            return sum(len(metas) for metas in registry.functions.values())

        assert count(first) == count(second) + 1
    assert "from_torchlib" in vars(_registration.ONNXRegistry)  # the original is back
    fresh = _registration.ONNXRegistry.from_torchlib(opset_version=18)
    assert fresh.functions.keys() == second.functions.keys()


ACCESSORS: dict[str, Callable[..., None]] = {
    "onnx_default_opset": _onnx_default_opset,
    "onnx_opset_range": _onnx_opset_range,
    "torchscript_max_opset": _torchscript_max_opset,
    "tree_leaves": _tree_leaves,
    "tree_flatten": _tree_flatten,
    "torchlib_opset": _torchlib_opset,
    "onnx_registry": _onnx_registry,
    "prepare_for_onnx": _prepare_for_onnx,
    "capture_like_the_exporter": _capture_like_the_exporter,
    "dispatch": _dispatch,
    "DYNAMO_REGISTRATION_LOGGER": _dynamo_registration_logger,
    "pytorch_file_reader": _pytorch_file_reader,
    "named_leaves": _named_leaves,
    "register_output_dataclasses": _register_output_dataclasses,
    "reused_onnx_registry": _reused_onnx_registry,
}


def _public_torch_accessors() -> set[str]:
    """Every public function and constant of torch_private that stands for a torch private."""
    about_versions = {"TESTED_TORCH", "torch_is_tested", "installed_torch_version",
                      "untested_torch_sentence"}
    return {name for name, value in vars(torch_private).items()
            if not name.startswith("_") and name not in about_versions
            and (name.isupper() or (inspect.isfunction(value)
                                    and value.__module__ == torch_private.__name__))}


def test_every_accessor_has_a_test() -> None:
    assert _public_torch_accessors() == set(ACCESSORS)


@pytest.mark.parametrize("name", sorted(ACCESSORS))
def test_private_torch_api_works_on_the_installed_torch(name: str, tmp_path: Path) -> None:
    check = ACCESSORS[name]
    if "tmp_path" in check.__code__.co_varnames[:check.__code__.co_argcount]:
        check(tmp_path)
    else:
        check()


# ---------------------------------------------------------------------------- nowhere else

# Private access in code (strings and comments are left out: pt2_archive names torch's pickle
# globals as data): torch.x._y, torch._y, `from torch.x import _y`, `import torch._y`; dunders
# (torch.__version__) are public.
_PRIVATE_ACCESS = re.compile(
    r"\btorch(?:\.\w+)*\._(?!_)\w"
    r"|\bfrom\s+torch(?:\.\w+)*\s+import\s+(?:\(\s*)?(?:\w+\s*,\s*)*_(?!_)\w"
    r"|\bimport\s+torch(?:\.\w+)*\._(?!_)\w"
)
# ... and in the text itself: a private module named in a string (a logger, an import by name),
# or a private attribute fetched by name
_PRIVATE_BY_NAME = re.compile(r"[\"']torch(?:\.\w+)*\._internal\b"
                              r"|getattr\(\s*torch[\w.]*\s*,\s*[\"']_(?!_)")


def _code_lines(path: Path) -> dict[int, str]:
    """The file's code, line by line, with string literals and comments blanked out."""
    lines: dict[int, list[str]] = {}
    with path.open("rb") as stream:
        for token in tokenize.tokenize(stream.readline):
            if token.type in (tokenize.STRING, tokenize.COMMENT, tokenize.ENCODING):
                continue
            lines.setdefault(token.start[0], []).append(token.string)
    return {number: re.sub(r"\s*\.\s*", ".", " ".join(parts)).strip()
            for number, parts in lines.items()}


def test_the_scan_sees_private_access_but_not_strings(tmp_path: Path) -> None:
    path = tmp_path / "sample.py"
    path.write_text('import torch\nx = torch._C.thing  # torch._C in a comment\n'
                    'y = "torch._utils"\nfrom torch.onnx import _constants\n'
                    'from torch.onnx._internal.exporter import _core\n'
                    'import torch.utils._pytree as pytree\nz = torch.onnx.export\n'
                    'from torch.onnx import export, _constants\n'
                    'v = torch.__version__\nw = getattr(torch.backends, "mps", None)\n'
                    'logger = "torch.onnx._internal.exporter"\n'
                    'c = getattr(torch, "_C")\n', encoding="utf-8")
    found = [n for n, line in _code_lines(path).items() if _PRIVATE_ACCESS.search(line)]
    assert found == [2, 4, 5, 6, 8]
    text = path.read_text(encoding="utf-8")
    by_name = [text.count("\n", 0, m.start()) + 1 for m in _PRIVATE_BY_NAME.finditer(text)]
    assert by_name == [11, 12]


def test_no_private_torch_access_outside_torch_private() -> None:
    offenders = []
    for path in sorted((REPO / "onnx_studio" / "engine").rglob("*.py")):
        if path.name == "torch_private.py" and path.parent.name == "engine":
            continue
        for number, line in _code_lines(path).items():
            if _PRIVATE_ACCESS.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line}")
        text = path.read_text(encoding="utf-8")
        for match in _PRIVATE_BY_NAME.finditer(text):
            number = text.count("\n", 0, match.start()) + 1
            offenders.append(f"{path.relative_to(REPO)}:{number}: {match.group(0)}")
    assert not offenders, "use onnx_studio.engine.torch_private instead:\n" + "\n".join(offenders)


# ---------------------------------------------------------------------------- the tested range


def test_pyproject_requires_the_tested_range() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (torch_line,) = [d for d in project["dependencies"] if re.match(r"torch\b", d)]
    assert torch_line.removeprefix("torch").replace(" ", "") == torch_private.TESTED_TORCH


def test_the_installed_torch_is_tested() -> None:
    """The test command installs torch 2.13.0: the range includes what is tested."""
    assert torch_private.torch_is_tested(torch.__version__)
    assert torch_private.installed_torch_version() == torch.__version__
    assert torch_private.untested_torch_sentence() is None


VERSIONS = {
    "2.13.0": True, "2.13.0+cpu": True, "2.13.1+cu128": True, "2.13": True,
    "2.13.0.post1": True, "2.12.1": False, "2.14.0": False, "2.14.0+cpu": False,
    "3.0.0": False, "1.13.0": False, "2.13.0rc1": False, "2.13.0a0+git1234": False,
    "2.14.0.dev20260101+cpu": False, "2.13.1.dev0": False, "": False, "unknown": False,
}


@pytest.mark.parametrize(("version", "tested"), VERSIONS.items())
def test_torch_versions_in_and_out_of_the_tested_range(version: str, tested: bool) -> None:
    assert torch_private.torch_is_tested(version) is tested
    assert (torch_private.untested_torch_sentence(version) is None) is tested


@pytest.mark.parametrize("version", [v for v in VERSIONS if v[:1].isdigit() and not re.search(
    r"rc|a\d|dev", v)])
def test_the_tiny_parser_agrees_with_packaging(version: str) -> None:
    """On final and post releases (on pre-releases packaging's answer changed between its
    versions; torch_is_tested never counts them as tested)."""
    specifiers = pytest.importorskip("packaging.specifiers")
    expected = specifiers.SpecifierSet(torch_private.TESTED_TORCH).contains(version)
    assert torch_private.torch_is_tested(version) is expected
    for other in (">=2.6", "==2.13.0", "!=2.13.0", ">2.13,<=2.14"):
        assert torch_private.torch_is_tested(version, other) is (
            specifiers.SpecifierSet(other).contains(version)), other


def test_the_cli_warns_when_torch_is_not_tested(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.setattr(torch_private, "installed_torch_version", lambda: "2.99.0+cpu")
    code = main(["validate", str(tmp_path / "m.onnx"), "--recipe",
                 str(tmp_path / "missing.toml"), "--json"])
    captured = capsys.readouterr()
    doc: dict[str, Any] = json.loads(captured.out.strip().splitlines()[-1])
    assert code == 2 and doc["error"]["kind"] == "recipe", doc
    (warning,) = doc["warnings"]
    assert warning["category"] == "Environment"
    assert "2.99.0+cpu" in warning["message"] and torch_private.TESTED_TORCH in warning["message"]
    lines = [line for line in captured.err.splitlines() if "Environment" in line]
    assert lines == [f"warning: Environment: {warning['message']}"]


def test_the_cli_says_nothing_about_a_tested_torch(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    main(["validate", str(tmp_path / "m.onnx"), "--recipe", str(tmp_path / "missing.toml"),
          "--json"])
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1])["warnings"] == []
    assert "Environment" not in captured.err

