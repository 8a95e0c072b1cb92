"""Model sources: turn a recipe's `model` table into a callable module.

`load_model` runs user code (it imports the .py, unpickles a trusted module) and needs torch,
imported inside functions so importing this module stays cheap. Telling what a source is without
running it (`parse`, `describe`) lives in onnx_studio.engine.source.describe; checkpoints
(state_dicts applied to the built module) in onnx_studio.engine.source.checkpoints.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import inspect
import itertools
import os
import re
import sys
import traceback
import warnings
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import StudioError, one_line
from onnx_studio.engine.recipe import ModelSpec, Recipe
from onnx_studio.engine.source.checkpoints import apply_checkpoint
from onnx_studio.engine.source.describe import (
    NO_TORCHVISION,
    default_name,
    find_candidates,
    missing_name_message,
    must_exist,
    unknown_example,
)
from onnx_studio.engine.source.device import check_device
from onnx_studio.engine.source.kinds import ParsedSource, parse

# Module-name prefix for imported user files; a counter makes each load a fresh module so a
# warm worker picks up edits and two files called model.py never collide.
_USER_PREFIX = "_studio_user_"
_counter = itertools.count()
# Sibling modules imported by earlier user files (e.g. `layers.py` next to `net.py`); evicted
# before the next load so an edited or same-named sibling in another folder is not reused.
_siblings: set[str] = set()
# The modules loaded before any user code ran: every path that runs user code (the model's
# import, unpickling, extension files) imports this module first. `forget_user_modules` keeps
# these whatever their files.
_BASELINE = frozenset(sys.modules)


@dataclass
class LoadedModel:
    # torch.nn.Module, in eval mode unless training = "preserve" (then in its own mode);
    # a ScriptModule for TorchScript, ep.module() for .pt2
    module: Any
    exported_program: Any | None
    kind: str
    source_file: Path | None
    forward_params: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------- load


def load_model(recipe: Recipe, device: str = "cpu") -> LoadedModel:
    """Build the recipe's model on `device`; raises StudioError("source").

    The model is put in eval mode, except with training = "preserve": then it keeps its own
    mode, as torch.onnx's TrainingMode.PRESERVE means (a freshly built nn.Module is in
    train mode, a pickled or TorchScript one in the mode it was saved in).
    """
    check_device(device)
    spec = recipe.model
    parsed = parse(spec.source, recipe.base_dir)
    if parsed.kind == "exported_program":
        with _working_folder(recipe):
            loaded = _load_exported_program(parsed.path, spec.checkpoint, spec.trust_pickle)
    else:
        with _seeded(recipe.export.seed), _working_folder(recipe):
            module, source_file, kind = _build(parsed, spec)
        if spec.checkpoint:
            apply_checkpoint(module, recipe.resolve(spec.checkpoint))
        if recipe.export.training != "preserve":
            module.eval()
        if spec.script and kind != "torchscript":
            module = _script(module)
        loaded = LoadedModel(module, None, kind, source_file, _forward_params(module))
    if device != "cpu":
        try:
            loaded.module = loaded.module.to(device)
        except Exception as exc:
            raise StudioError("source", f"Moving the model to {device} failed: {exc}.",
                              'Try device = "cpu".', details=traceback.format_exc()) from None
    return loaded


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Seed torch's RNG while the model is built, restoring it afterwards.

    Models without a checkpoint get random weights; seeding makes every load of a recipe give
    the same weights, so `onnx-studio validate` can rebuild the reference the export used.
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _build(parsed: ParsedSource, spec: ModelSpec) -> tuple[Any, Path | None, str]:
    """The module for every source kind except .pt2, with its source file and kind."""
    if parsed.kind == "python":
        assert parsed.path is not None
        return _load_python(parsed.path, parsed.name, spec.kwargs), parsed.path, "python"
    if parsed.kind == "example":
        module, source_file = _load_example(parsed.name, spec.kwargs)
        return module, source_file, "example"
    if parsed.kind == "torchvision":
        return _load_torchvision(parsed.name, spec.kwargs), None, "torchvision"
    assert parsed.path is not None
    kind, module = _load_archive(parsed.path, spec.trust_pickle)
    if spec.kwargs:
        raise StudioError("source", f"model.kwargs only apply to Python sources, but "
                          f"{parsed.path.name} is a saved module.",
                          "Remove model.kwargs from the recipe.")
    return module, None, kind


def _load_python(path: Path, name: str, kwargs: dict[str, Any]) -> Any:
    import torch

    must_exist(path, "Model file")
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise StudioError("source", f"{path.name}:{exc.lineno}: syntax error: {exc.msg}.",
                          f"Fix line {exc.lineno} of {path}.",
                          details=traceback.format_exc()) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StudioError("source", f"Cannot read {path}: {exc}.") from None
    candidates, _ = find_candidates(tree)
    name = name or default_name(path, candidates)
    module = _import_file(path)
    obj = getattr(module, name, None)
    if obj is None:
        raise StudioError("source", missing_name_message(path, name, candidates),
                          f"Write the source as {path.name}:Name with one of those names.")
    where = f"{path.name}:{name}"
    if isinstance(obj, torch.nn.Module):  # a module instance defined at top level
        if kwargs:
            raise StudioError("source", f"{where} is a module instance, so model.kwargs "
                              "cannot be applied.", "Remove model.kwargs from the recipe.")
        return obj
    if isinstance(obj, type) and not issubclass(obj, torch.nn.Module):
        raise StudioError("source", f"{where} is a class but not a torch.nn.Module.",
                          "Name an nn.Module subclass or a function that returns one.")
    if not callable(obj):
        raise StudioError("source", f"{where} is a {type(obj).__name__}, not a model class "
                          "or factory function.", "Name an nn.Module subclass or a factory.")
    built = _call_user(obj, kwargs, where, path)
    if not isinstance(built, torch.nn.Module):
        raise StudioError("source", f"{where}(...) returned a {type(built).__name__}, not a "
                          "torch.nn.Module.", "Make the factory return the model.")
    return built


def _call_user(obj: Any, kwargs: dict[str, Any], where: str, path: Path | None) -> Any:
    """Call a constructor or factory; a bad keyword becomes a message that shows the signature."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        try:
            signature.bind(**kwargs)
        except TypeError as exc:
            raise StudioError("source", f"model.kwargs do not fit {where}: {exc}.",
                              f"{where} takes {_signature_text(signature)}.") from None
    try:
        return obj(**kwargs)
    except (Exception, SystemExit) as exc:  # sys.exit() in user code must not end us
        line = _user_line(path)
        raise StudioError("source", f"Building {where} raised {type(exc).__name__}: "
                          f"{one_line(exc)}{line}.",
                          "Fix the constructor or the recipe's model.kwargs.",
                          details=traceback.format_exc()) from None


def _signature_text(signature: inspect.Signature) -> str:
    params = [p for p in signature.parameters.values() if p.name != "self"]
    return "(" + ", ".join(str(p) for p in params) + ")" if params else "no arguments"


def _user_line(path: Path | None) -> str:
    """' (net.py:12)' for the innermost frame of the current exception in the user's file."""
    if path is None:
        return ""
    tb = sys.exc_info()[2]
    frames = [f for f in traceback.extract_tb(tb) if Path(f.filename) == path]
    return f" ({path.name}:{frames[-1].lineno})" if frames else ""


@contextlib.contextmanager
def _working_folder(recipe: Recipe) -> Iterator[None]:
    """While the model loads: the recipe's model.workdir first on sys.path and the current
    folder (siblings it imports, pickled modules whose classes live in a .py beside them);
    what it imported from there is forgotten afterwards, so the next job imports it afresh."""
    if not recipe.model.workdir:
        yield
        return
    folder = recipe.resolve(recipe.model.workdir).resolve()
    if not folder.is_dir():
        raise StudioError("source", f"model.workdir: {folder} is not a folder.",
                          "Choose the folder the model's files import from, or clear it.")
    before, cwd = set(sys.modules), os.getcwd()
    sys.path.insert(0, str(folder))
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(cwd)
        with contextlib.suppress(ValueError):
            sys.path.remove(str(folder))
        for name in set(sys.modules) - before:
            file = getattr(sys.modules.get(name), "__file__", None) or ""
            if file and Path(file).resolve().is_relative_to(folder):
                sys.modules.pop(name, None)


def _import_file(path: Path) -> Any:
    """Import a user's .py under a unique name, its folder on sys.path only while importing."""
    for name in list(_siblings):
        sys.modules.pop(name, None)
    _siblings.clear()
    folder = str(path.parent)
    stem = re.sub(r"\W", "_", path.stem)
    name = f"{_USER_PREFIX}{next(_counter)}_{stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise StudioError("source", f"Cannot import {path}.", "Is it a Python file?")
    module = importlib.util.module_from_spec(spec)
    before = set(sys.modules)
    sys.modules[name] = module  # dataclasses, pickling and TorchScript look the module up here
    sys.path.insert(0, folder)
    # No .pyc written for the user's files: one is trusted while the source keeps its size and
    # its mtime in whole seconds, so an edit within the same second would go unseen next time.
    writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:  # in a sibling module the file imports
        sys.modules.pop(name, None)
        where = f"{Path(exc.filename or path).name}:{exc.lineno}"
        raise StudioError("source", f"{where}: syntax error: {exc.msg}.",
                          f"Fix line {exc.lineno} of {exc.filename or path}.",
                          details=traceback.format_exc()) from None
    except BaseException as exc:
        sys.modules.pop(name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise StudioError("source", f"Importing {path.name} raised {type(exc).__name__}: "
                          f"{one_line(exc)}{_user_line(path)}.",
                          "Fix the error in the model file (or install the package it "
                          "imports).", details=traceback.format_exc()) from None
    finally:
        sys.dont_write_bytecode = writes_bytecode
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)
        for new in set(sys.modules) - before - {name}:
            file = getattr(sys.modules.get(new), "__file__", None) or ""
            if file and Path(file).parent == path.parent:
                _siblings.add(new)
    return module


def forget_user_modules() -> list[str]:
    """Remove from `sys.modules` every module imported from the user's files; returns their names.

    The warm worker calls this after every job, so the next job imports the user's files
    afresh: an edited model file or sibling is read again, and a `helper.py` in another folder
    is not mistaken for this one. Removed: the model files imported here (`_studio_user_*`),
    and each module whose top-level package appeared after `_BASELINE` and whose file lies
    outside the Python installation (prefixes, standard library, site-packages, user
    site-packages) and outside this engine package: the siblings and packages the user's files
    import from their folders. Kept: everything loaded before user code ran, whatever was
    loaded from the installation, such as torch's lazily imported submodules (they register
    kernels and ops once per process and must not be imported twice), and modules without a
    file (built in, or made in memory).
    """
    roots = _installation_roots()
    forgotten = []
    for name, module in sys.modules.copy().items():  # a copy: atomic under the GIL
        top = name.partition(".")[0]
        if not name.startswith(_USER_PREFIX):
            if top in _BASELINE:
                continue
            places = _module_places(module)
            if not places or any(_is_under(place, roots) for place in places):
                continue  # built in, made in memory, or installed
        if sys.modules.get(name) is module:
            del sys.modules[name]
            forgotten.append(name)
    _siblings.clear()
    importlib.invalidate_caches()  # the import system's folder listings are read afresh
    return forgotten


def _installation_roots() -> list[Path]:
    """Folders whose modules are Python's or installed packages', or this engine's own."""
    import site
    import sysconfig

    places = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              *(getattr(site, "getsitepackages", list)()), site.getusersitepackages()}
    places.update(path for key, path in sysconfig.get_paths().items()
                  if key in ("stdlib", "platstdlib", "purelib", "platlib"))
    places.add(str(Path(__file__).resolve().parents[1]))  # the engine package
    roots = []
    for place in places:
        with contextlib.suppress(OSError, ValueError, TypeError):
            roots.append(Path(place).resolve())
    return roots


def _module_places(module: Any) -> list[Path]:
    """The file of a module, or the folders of a namespace package; [] for none (built in).

    Read from the module's __dict__ directly: a lazily loaded module (importlib.util.
    LazyLoader) would otherwise be loaded by the very look at its attributes.
    """
    try:
        namespace = object.__getattribute__(module, "__dict__")
        file = namespace.get("__file__")
        found = [file] if isinstance(file, str) else list(namespace.get("__path__") or [])
        return [Path(place).resolve() for place in found if isinstance(place, str) and place]
    except Exception:  # not a module (sys.modules may hold anything): leave it be
        return []


def _is_under(path: Path, roots: list[Path]) -> bool:
    return any(path.is_relative_to(root) for root in roots)


def _load_example(name: str, kwargs: dict[str, Any]) -> tuple[Any, Path]:
    from onnx_studio.engine.source.examples import EXAMPLES

    example = EXAMPLES.get(name)
    if example is None:
        raise unknown_example(name)
    try:
        factory = example.factory()
    except Exception as exc:
        raise StudioError("source", f"Example {name} failed to import: {one_line(exc)}.",
                          details=traceback.format_exc()) from None
    return _call_user(factory, kwargs, f"example:{name}", None), example.source_file


def _load_torchvision(name: str, kwargs: dict[str, Any]) -> Any:
    if importlib.util.find_spec("torchvision") is None:
        raise StudioError("source", NO_TORCHVISION,
                          "Install it (pip install torchvision, the `vision` extra), or use "
                          "an example such as example:alexnet.")
    try:
        import torchvision.models as tvm
    except Exception as exc:
        raise StudioError("source", f"torchvision is installed but fails to import: "
                          f"{one_line(exc)}.", "Install a torchvision that matches torch.",
                          details=traceback.format_exc()) from None
    available = tvm.list_models()
    if name not in available:
        close = [m for m in available if name.lower() in m or m in name.lower()][:8]
        raise StudioError("source", f"torchvision has no model called {name!r}.",
                          f"Try one of: {', '.join(close or available[:8])}.")
    weights = _cached_torchvision_weights(tvm, name)
    return _call_user(lambda **kw: tvm.get_model(name, weights=weights, **kw), kwargs,
                      f"torchvision:{name}", None)


def _cached_torchvision_weights(tvm: Any, name: str) -> Any:
    """The default pretrained weights when already downloaded; None (random) otherwise.

    No network at run time: torchvision would download missing weights, so only weights whose
    file is in the torch hub cache are used.
    """
    import torch

    try:
        weights = tvm.get_model_weights(name).DEFAULT
    except Exception:
        return None
    cached = Path(torch.hub.get_dir()) / "checkpoints" / Path(weights.url).name
    return weights if cached.is_file() else None


def _load_archive(path: Path, trust_pickle: bool) -> tuple[str, Any]:
    """TorchScript first (no pickle; its own TorchScript runs, see docs/security.md);
    otherwise a pickle, loaded only when trusted."""
    import torch

    must_exist(path, "Model file")
    try:
        with warnings.catch_warnings():  # torch 2.9+ calls torch.jit deprecated; noise here
            warnings.simplefilter("ignore", DeprecationWarning)
            return "torchscript", torch.jit.load(str(path), map_location="cpu")
    except Exception:
        jit_error = traceback.format_exc()
    try:  # weights_only never runs code: tells a state_dict from a pickled module safely
        data = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception:
        data = None
    damage = _archive_damage(path)
    if damage:  # a cut-short or corrupt archive is neither TorchScript nor a pickle to trust
        raise StudioError("source", f"{path.name} is damaged (truncated or corrupt): {damage}.",
                          _DAMAGED_HINT, details=jit_error)
    if isinstance(data, dict):
        raise StudioError("source", f"{path.name} holds weights (a state_dict), not a model.",
                          f"Use a .py source for the model class and set checkpoint = "
                          f"\"{path.name}\".")
    if not trust_pickle:
        raise StudioError("source", f"{path.name} is a pickled model and loading it runs "
                          "code from the file, so it needs trust_pickle = true.",
                          "Set trust_pickle = true in [model] only if you trust this file.",
                          details=jit_error)
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=False)
    except Exception as exc:
        raise StudioError("source", f"Unpickling {path.name} failed: {one_line(exc)}.",
                          "A pickled module needs its class importable: run from the folder "
                          "of its code, or export it as TorchScript or .pt2 instead.",
                          details=traceback.format_exc()) from None
    if not isinstance(obj, torch.nn.Module):
        raise StudioError("source", f"{path.name} holds a {type(obj).__name__}, not a "
                          "torch.nn.Module.", "Save the model itself with torch.save(model).")
    return "pickle", obj


def _load_exported_program(path: Path | None, checkpoint: str | None,
                           trust_pickle: bool) -> LoadedModel:
    """A .pt2, refused without trust_pickle when loading it would run code from the file.

    onnx_studio.engine.source.pt2_archive reads the archive first without loading anything; an
    untrusted file that passes is loaded with every torch.load forced to weights_only=True.
    """
    import torch

    from onnx_studio.engine.source import pt2_archive

    assert path is not None
    must_exist(path, "ExportedProgram file")
    if checkpoint:
        raise StudioError("source", "A checkpoint cannot be applied to an ExportedProgram; its "
                          "weights are inside the .pt2.", "Remove model.checkpoint.")
    try:
        findings = pt2_archive.scan(path) + pt2_archive.reader_disagreements(path)
    except pt2_archive.NotAnArchive as exc:
        raise StudioError("source", f"{path.name} is not a readable ExportedProgram: {exc}.",
                          "Save it with torch.export.save(ep, path).") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:  # an entry unreadable
        raise StudioError("source", f"{path.name} is damaged (truncated or corrupt): "
                          f"{one_line(exc)}.", _DAMAGED_HINT,
                          details=traceback.format_exc()) from None
    if findings and not trust_pickle:
        raise StudioError("source", pt2_archive.refusal(path.name, findings),
                          pt2_archive.REFUSAL_HINT, details=pt2_archive.details(findings))
    locked = contextlib.nullcontext() if trust_pickle else pt2_archive.weights_only_loads()
    logged: list[str] = []
    try:
        # torch logs a failed read (with its traceback) on stderr and then raises a sentence
        # that points at "the warnings above": the log goes into the details instead
        with locked, _torch_log_into(logged, "torch.export"):
            program = torch.export.load(str(path))
        # ep.module() refuses .eval()/.train() in recent torch; it is built for inference
        module = program.module()
    except Exception as exc:
        cause = _last_logged_error(logged) or one_line(exc)
        damaged = bool(logged) or isinstance(exc, zipfile.BadZipFile | zlib.error | EOFError)
        raise StudioError(
            "source", f"{path.name} is damaged (truncated or corrupt): {cause}." if damaged
            else f"{path.name} is not a readable ExportedProgram: {one_line(exc)}.",
            _DAMAGED_HINT if damaged else "Save it with torch.export.save(ep, path).",
            details="\n".join([*logged, traceback.format_exc()])) from None
    from torch.export.graph_signature import InputKind

    params = [spec.arg.name for spec in program.graph_signature.input_specs
              if spec.kind == InputKind.USER_INPUT and hasattr(spec.arg, "name")]
    return LoadedModel(module, program, "exported_program", None, params)


_DAMAGED_HINT = ("Copy or save the file again (torch.export.save(ep, path) for a .pt2, "
                 "torch.jit.save for TorchScript); a partial download or copy cuts it short.")
_ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.+)$")


def _archive_damage(path: Path) -> str:
    """Why a file that starts like a zip archive (TorchScript, torch.save's format) cannot be
    read as one: its directory missing (cut short) or an entry failing its CRC; "" when it
    reads whole or is no zip at all (a legacy pickle)."""
    try:
        with path.open("rb") as handle:
            if handle.read(4) != b"PK\x03\x04":
                return ""
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except zipfile.BadZipFile as exc:
        if "not a zip file" in str(exc):  # no end-of-archive directory: the end is missing
            return "it starts as a zip archive but its end is missing"
        return f"its zip archive is broken ({one_line(exc)})"
    except (zlib.error, EOFError, OSError) as exc:
        return f"its zip archive is broken ({one_line(exc)})"
    return f"entry {bad} fails its checksum" if bad else ""


@contextlib.contextmanager
def _torch_log_into(lines: list[str], name: str) -> Iterator[None]:
    """Records of torch's logger `name` (and its children) appended to `lines`, as text with
    their tracebacks, instead of reaching stderr; the logger is as it was afterwards."""
    import logging

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(logging.Formatter("%(levelname)s %(name)s: %(message)s")
                         .format(record))

    logger = logging.getLogger(name)
    # torch._logging gives its loggers stderr handlers of their own: set aside, not only the
    # propagation to "torch"
    handlers, propagate = list(logger.handlers), logger.propagate
    logger.handlers = [_Keep()]
    logger.propagate = False
    try:
        yield
    finally:
        logger.handlers = handlers
        logger.propagate = propagate


def _last_logged_error(lines: list[str]) -> str:
    """"SerializeError: Failed deserializing node g": the last exception line of the logged
    tracebacks, "" when there is none."""
    found = ""
    for text in lines:
        for line in text.splitlines():
            match = _ERROR_LINE.match(line.strip())
            if match:
                said = match[2].split("  (Could this error message be improved?")[0]
                found = f"{match[1]}: {said.strip().rstrip('.')}"
    return found


def _script(module: Any) -> Any:
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.script(module)
    except Exception as exc:
        raise StudioError("source", f"torch.jit.script failed: {one_line(exc)}.",
                          "TorchScript compiles a subset of Python; fix the line it names, or "
                          "set script = false to export by tracing.",
                          details=traceback.format_exc()) from None


def _forward_params(module: Any) -> list[str]:
    forward = getattr(module, "forward", None)
    schema = getattr(forward, "schema", None)
    if schema is not None:  # ScriptModule methods: the TorchScript schema has the names
        return [a.name for a in schema.arguments if a.name != "self"]
    try:
        params = inspect.signature(forward).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return []
    return [p.name for p in params
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self"]
