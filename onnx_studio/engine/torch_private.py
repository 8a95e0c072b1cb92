"""Every private torch API the engine uses, in one place: what it is for, and what to do when a
torch release moves it.

The engine reaches into torch's privates only through the functions here (a test greps the
other modules for private torch access). Each one names the private it wraps and why no
public API serves; tests/engine/test_torch_private.py calls every one on the installed torch,
so a torch upgrade that moves one fails one named test instead of an export in a user's hands.
When that happens: find where the new release keeps the thing (or its public replacement),
change the one function here, and widen `TESTED_TORCH` (and pyproject.toml's torch line) only
once the whole suite passes on that release.

torch is imported inside the functions, never at module level: the window imports the engine
without torch, and the worker imports torch once, when it starts.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any, Final

# The torch releases this engine is tested with: pyproject.toml's `torch` requirement says the
# same (a test checks). Widen it only when the test suite has passed on the new release.
TESTED_TORCH: Final = ">=2.13,<2.14"

# ---------------------------------------------------------------------------- the tested range

_CLAUSE = re.compile(r"\s*(>=|<=|==|!=|>|<)\s*(\d+(?:\.\d+)*)\s*$")
_RELEASE = re.compile(r"\s*v?(\d+(?:\.\d+)*)(.*)$")
_PRE = re.compile(r"[.\-_]?(a|b|c|rc|alpha|beta|pre|preview|dev)\d*")
_POST = re.compile(r"[.\-_]?(post|rev|r)[.\-_]?(\d*)$")


def _release(text: str) -> tuple[tuple[int, ...], bool, int]:
    """The release numbers of a version, whether it is a pre- or development release, and its
    post-release number (0: none).

    "2.13.0+cpu" -> ((2, 13, 0), False, 0); "2.14.0.dev20250101" and "2.13.0rc1" are
    pre-releases; "2.13.0.post1" is the first post-release of 2.13.0. A local label ("+cpu",
    "+cu128") does not change the release.
    """
    match = _RELEASE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a version")
    numbers = tuple(int(n) for n in match.group(1).split("."))
    rest = match.group(2).split("+", 1)[0].lower()
    if _PRE.match(rest):
        return numbers, True, 0
    post = _POST.match(rest)
    return numbers, False, int(post.group(2) or 0) + 1 if post else 0


def _compare(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    width = max(len(a), len(b))
    a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return (a > b) - (a < b)


def torch_is_tested(version: str, tested: str = TESTED_TORCH) -> bool:
    """Whether torch `version` (e.g. "2.13.0+cpu") lies in the `tested` range.

    The range is comma-separated clauses (`>=`, `>`, `<=`, `<`, `==`, `!=` and a release), as
    in pyproject.toml, compared as packaging's SpecifierSet compares final releases: a local
    label is ignored, a post-release comes after its release (and `>` excludes the
    post-releases of its own release). A pre- or development release is never tested: it is
    not the build the suite ran on. Nor is a version that cannot be read. A tiny parser rather
    than `packaging`, which is not a guaranteed dependency of the installed engine.
    """
    try:
        release, pre, post = _release(version)
    except ValueError:
        return False
    if pre:
        return False
    for clause in tested.split(","):
        match = _CLAUSE.match(clause)
        if match is None:
            raise ValueError(f"{clause!r} in {tested!r} is not a version clause")
        op = match.group(1)
        order = _compare(release, tuple(int(n) for n in match.group(2).split(".")))
        after = order > 0 or (order == 0 and post > 0)  # a post-release follows its release
        ok = {">=": order >= 0, ">": order > 0, "<=": not after, "<": order < 0,
              "==": order == 0 and not post, "!=": order != 0 or bool(post)}[op]
        if not ok:
            return False
    return True


def installed_torch_version() -> str | None:
    """The installed torch's version, read without importing torch (None: not installed)."""
    import importlib.metadata
    import sys

    module = sys.modules.get("torch")
    if module is not None and isinstance(getattr(module, "__version__", None), str):
        return str(module.__version__)
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def untested_torch_sentence(version: str | None = None) -> str | None:
    """One sentence when the installed torch lies outside the tested range, else None."""
    version = installed_torch_version() if version is None else version
    if version is None or torch_is_tested(version):
        return None
    return (f"torch {version} is installed, but this release of ONNX Export Studio is tested "
            f"with torch {TESTED_TORCH}; exports may fail or differ. Install a tested torch "
            "(the README's install command names it).")


# ---------------------------------------------------------------------------- torch.onnx constants
# torch.onnx._constants: the opsets each exporter writes. torch.onnx has no public way to ask
# which opsets it supports. If the module moves, look for ONNX_DEFAULT_OPSET in torch/onnx/.


def _onnx_constants() -> Any:
    from torch.onnx import _constants

    return _constants


def onnx_default_opset() -> int:
    """The opset torch.onnx.export writes when none is given (torch.onnx._constants)."""
    return int(_onnx_constants().ONNX_DEFAULT_OPSET)


def onnx_opset_range() -> tuple[int, int]:
    """The lowest and highest opset torch.onnx knows (ONNX_MIN_OPSET, ONNX_MAX_OPSET)."""
    constants = _onnx_constants()
    return int(constants.ONNX_MIN_OPSET), int(constants.ONNX_MAX_OPSET)


def torchscript_max_opset() -> int:
    """The highest opset the TorchScript exporter writes (ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET).

    torch 2.13 has it; should a release drop the constant, 20 (its value since 2.5) stands.
    """
    return int(getattr(_onnx_constants(), "ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET", 20))


# ---------------------------------------------------------------------------- pytree
# torch.utils._pytree: flattening model outputs (tuples, lists, dicts, named tuples and the
# containers torch registers) in the order the exporters flatten them. torch 2.13 has no public
# pytree module; when torch.utils.pytree appears, switch both functions to it.


def tree_leaves(value: Any) -> list[Any]:
    """The leaves of a nested output, in the exporters' order (torch.utils._pytree)."""
    from torch.utils import _pytree

    return list(_pytree.tree_leaves(value))


def tree_flatten(value: Any) -> tuple[list[Any], Any]:
    """The leaves of a nested output and its structure (torch.utils._pytree.tree_flatten)."""
    from torch.utils import _pytree

    leaves, spec = _pytree.tree_flatten(value)
    return list(leaves), spec


def named_leaves(value: Any) -> list[tuple[str, Any]]:
    """The leaves of a nested output with dotted names, in the exporters' order:
    {"logits": t, "present": ((k, v),)} -> [("logits", t), ("present.0.0", k), ...].

    Dict keys and ModelOutput fields give their key, tuple/list items their index, dataclass
    fields their name (a dataclass torch does not know is opened field by field, in the order
    torch.export.register_dataclass flattens it); None leaves are dropped, as the exporters
    drop them. A bare tensor is named "" (the caller names it).
    """
    import dataclasses

    from torch.utils import _pytree

    out: list[tuple[str, Any]] = []
    for path, leaf in _pytree.tree_flatten_with_path(value)[0]:
        name = ".".join(_key_text(key) for key in path)
        if leaf is None:
            continue
        if dataclasses.is_dataclass(leaf) and not isinstance(leaf, type):
            for item in dataclasses.fields(leaf):
                for sub, inner in named_leaves(getattr(leaf, item.name)):
                    out.append((".".join(p for p in (name, item.name, sub) if p), inner))
            continue
        out.append((name, leaf))
    return out


def _key_text(key: Any) -> str:
    for attribute in ("key", "idx", "name"):  # MappingKey, SequenceKey, GetAttrKey
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)


def register_output_dataclasses(value: Any) -> list[type]:
    """Make torch.export flatten every dataclass found in `value` (a model's output) that
    pytree does not know yet; returns the classes registered. torch.export refuses an output
    of an unregistered class; registration is process-wide (the worker starts each job clean).
    """
    import dataclasses

    import torch
    from torch.utils import _pytree

    found: list[type] = []

    def visit(item: Any) -> None:
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            cls = type(item)
            if cls not in _pytree.SUPPORTED_NODES and cls not in found:
                torch.export.register_dataclass(cls)
                found.append(cls)
            for f in dataclasses.fields(item):
                visit(getattr(item, f.name))
            return
        if type(item) in _pytree.SUPPORTED_NODES:
            for child in _children(item):
                visit(child)

    def _children(item: Any) -> list[Any]:
        children, _ = _pytree.SUPPORTED_NODES[type(item)].flatten_fn(item)
        return list(children)

    visit(value)
    return found


# ---------------------------------------------------------------------------- dynamo exporter
# torch.onnx._internal.exporter: the dynamo exporter's registry of ONNX translations, the
# decomposition it runs before translating, and its dispatcher. Public torch.onnx.export only fails
# at the first operator without a translation; these let onnx_studio.engine.export.diagnose list all
# of them, and onnx_studio.engine.validation.nodes decompose exactly as the exporter does so that
# node names match the ONNX values'. If they move, search torch/onnx/_internal/exporter/ for
# `ONNXRegistry`, `_prepare_exported_program_for_export` and `def dispatch`.

# The logger the dynamo exporter's registry speaks through (onnx_studio.engine.export filters its
# noise).
DYNAMO_REGISTRATION_LOGGER: Final = "torch.onnx._internal.exporter._registration"


def torchlib_opset() -> int:
    """The opset the dynamo exporter's translations (torchlib) are written for."""
    from torch.onnx._internal.exporter import _constants

    return int(_constants.TORCHLIB_OPSET)


def onnx_registry(opset_version: int | None = None) -> Any:
    """A fresh registry of the dynamo exporter's translations (ONNXRegistry.from_torchlib).

    `register_op(torch_op, function, is_complex=False)` adds a custom translation to it.
    """
    from torch.onnx._internal.exporter import _registration

    if opset_version is None:
        return _registration.ONNXRegistry.from_torchlib()
    return _registration.ONNXRegistry.from_torchlib(opset_version=opset_version)


def capture_like_the_exporter(model: Any, args: tuple[Any, ...], dynamic_shapes: Any) -> Any:
    """The ExportedProgram torch.onnx.export(dynamo=True) captures from `model`: its capture
    strategies in its order (torch.export non-strict, retried with the dynamic shapes it
    suggests, then strict); the last failure is raised."""
    from torch.onnx._internal.exporter import _capture_strategies

    failure: BaseException | None = None
    for strategy in _capture_strategies.CAPTURE_STRATEGIES:
        result = strategy(verbose=False)(model, args, None, dynamic_shapes=dynamic_shapes)
        if result.success and result.exported_program is not None:
            return result.exported_program
        failure = result.exception or failure
    raise failure or RuntimeError("torch.export could not capture the model")


@contextlib.contextmanager
def reused_onnx_registry() -> Iterator[None]:
    """Within the block, every torch.onnx.export gets a copy of one registry built once per
    opset, instead of building its own (ONNXRegistry.from_torchlib walks every torchlib
    function: 1-2 s a call, paid for each file of a multi-file export).

    A copy per call, so a custom translation registered by one export stays its own; the
    cache lives for the block only, so translations that a later extension adds to torchlib
    are never missed.
    """
    from torch.onnx._internal.exporter import _registration

    registry_class = _registration.ONNXRegistry
    original = registry_class.__dict__["from_torchlib"]
    built: dict[int, Any] = {}

    def from_torchlib(cls: Any, opset_version: int = torchlib_opset()) -> Any:
        if opset_version not in built:
            built[opset_version] = original.__func__(cls, opset_version=opset_version)
        copy = cls()
        copy._opset_version = built[opset_version]._opset_version
        copy.functions = {op: list(metas) for op, metas in built[opset_version].functions.items()}
        return copy

    setattr(registry_class, "from_torchlib", classmethod(from_torchlib))  # noqa: B010
    try:
        yield
    finally:
        setattr(registry_class, "from_torchlib", original)  # noqa: B010


def prepare_for_onnx(program: Any, registry: Any) -> Any:
    """The ExportedProgram decomposed as the dynamo exporter does before translating it."""
    from torch.onnx._internal.exporter import _core

    return _core._prepare_exported_program_for_export(program, registry=registry)


def dispatch(node: Any, registry: Any) -> tuple[Any, str]:
    """The translation the dynamo exporter picks for an FX node: (function or None, message)."""
    from torch.onnx._internal.exporter import _dispatching

    function, message = _dispatching.dispatch(node, registry)
    return function, message


# ---------------------------------------------------------------------------- archives
# torch._C.PyTorchFileReader: torch's own zip reader (miniz), which torch.load and torch.export.load
# use. onnx_studio.engine.source.pt2_archive compares its view of an archive with Python's zipfile,
# so a zip crafted to look different to the two cannot slip past the safety scan.
# torch.serialization has no public reader; if it moves, look for `PyTorchFileReader` in
# torch/serialization.py.


def pytorch_file_reader(path: str) -> Any:
    """torch's zip reader on `path`: get_all_records(), get_record_header_offset(name)."""
    import torch

    return torch._C.PyTorchFileReader(path)
