"""Model sources: turn a recipe's `model` table into a callable module, or describe a source.

`load_model` runs user code (it imports the .py, unpickles a trusted module) and needs torch;
`describe` only reads files (ast for .py, the zip directory for .pt) so the window can call it
without importing torch and without running anything the user has not asked to run.
Torch is imported inside functions for the same reason.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import inspect
import itertools
import json
import re
import sys
import traceback
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import StudioError
from engine.recipe import ModelSpec, Recipe

KINDS = ("python", "exported_program", "torchscript", "pickle", "example", "torchvision")
PICKLE_SUFFIXES = (".pt", ".pth", ".pkl", ".bin")

# Module-name prefix for imported user files; a counter makes each load a fresh module so a
# warm worker picks up edits and two files called model.py never collide.
_USER_PREFIX = "_studio_user_"
_counter = itertools.count()
# Sibling modules imported by earlier user files (e.g. `layers.py` next to `net.py`); evicted
# before the next load so an edited or same-named sibling in another folder is not reused.
_siblings: set[str] = set()


@dataclass
class LoadedModel:
    module: Any  # torch.nn.Module in eval mode (ScriptModule for TorchScript, ep.module() for .pt2)
    exported_program: Any | None
    kind: str
    source_file: Path | None
    forward_params: list[str] = field(default_factory=list)


@dataclass
class Candidate:
    name: str
    kind: str  # "class" | "factory"
    params: list[str]  # forward params for a class, the factory's own params for a factory
    doc: str = ""


@dataclass
class SourceDescription:
    kind: str
    candidates: list[Candidate] = field(default_factory=list)
    forward_params: list[str] = field(default_factory=list)
    error: str | None = None


# ---------------------------------------------------------------------------- parsing


@dataclass
class ParsedSource:
    kind: str  # one of KINDS, or "unknown"
    path: Path | None = None
    name: str = ""  # class/factory for python, example or torchvision model name


_PY_SOURCE = re.compile(r"^(?P<path>.+\.py)(?::(?P<name>[^:/\\]*))?$")


def parse(source: str, base_dir: Path) -> ParsedSource:
    """Classify a source string without touching the file system beyond path joining."""
    text = source.strip()
    if not text:
        raise StudioError("source", "No model source given.",
                          "Name a .py file and class (net.py:Net), a .pt2/.pt file, or "
                          "an example such as example:alexnet.")
    for prefix in ("example", "torchvision"):
        if text.startswith(prefix + ":"):
            return ParsedSource(prefix, None, text[len(prefix) + 1:].strip())
    match = _PY_SOURCE.match(text)
    if match:
        name = (match["name"] or "").strip()
        if name and not name.isidentifier():
            raise StudioError("source", f"{name!r} is not a Python class or function name.",
                              "Write the source as file.py:Name, e.g. net.py:Net.")
        return ParsedSource("python", _resolve(match["path"], base_dir), name)
    path = _resolve(text, base_dir)
    suffix = path.suffix.lower()
    if suffix == ".pt2":
        return ParsedSource("exported_program", path)
    if suffix in PICKLE_SUFFIXES:
        return ParsedSource("torchscript_or_pickle", path)
    if suffix == ".onnx":
        raise StudioError("source", f"{path.name} is already an ONNX file; there is nothing "
                          "to export.", "Open it with `onnx-studio inspect` or the window, or "
                          "validate it with `onnx-studio validate`.")
    raise StudioError("source", f"Cannot tell what kind of model {text!r} is.",
                      "Use file.py:ClassName, a .pt2 ExportedProgram, a TorchScript or "
                      "pickled .pt/.pth file, example:NAME or torchvision:NAME.")


def _resolve(path: str, base_dir: Path) -> Path:
    recipe = Recipe(base_dir=base_dir)
    return recipe.resolve(path).resolve()


def _must_exist(path: Path, what: str) -> None:
    if not path.is_file():
        raise StudioError("source", f"{what} {path} does not exist.",
                          "Check the path; relative paths are resolved against the "
                          "recipe file's folder.")


# ---------------------------------------------------------------------------- describe


def describe(source: str, base_dir: Path) -> SourceDescription:
    """What a source offers (candidate classes/factories, forward parameters); never raises."""
    try:
        parsed = parse(source, base_dir)
    except StudioError as exc:
        return SourceDescription("unknown", error=exc.message)
    if parsed.kind == "example":
        return _describe_example(parsed.name)
    if parsed.kind == "torchvision":
        if importlib.util.find_spec("torchvision") is None:
            return SourceDescription("torchvision", error=_NO_TORCHVISION)
        return SourceDescription("torchvision", forward_params=["x"])
    assert parsed.path is not None
    if not parsed.path.is_file():
        return SourceDescription(parsed.kind if parsed.kind != "torchscript_or_pickle"
                                 else "torchscript", error=f"{parsed.path} does not exist.")
    if parsed.kind == "exported_program":
        return SourceDescription("exported_program", forward_params=_pt2_params(parsed.path))
    if parsed.kind == "torchscript_or_pickle":
        return SourceDescription(archive_kind(parsed.path))
    return _describe_python(parsed.path, parsed.name)


def archive_kind(path: Path) -> str:
    """TorchScript archives carry compiled code (`code/`, `constants.pkl`); torch.save's don't."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return "pickle"  # legacy (pre-1.6) torch.save format is a bare pickle
    return "torchscript" if any(n.endswith("/constants.pkl") or "/code/" in n
                                for n in names) else "pickle"


def _pt2_params(path: Path) -> list[str]:
    """User input names from a .pt2's serialized signature (models/model.json); best effort."""
    try:
        with zipfile.ZipFile(path) as archive:
            name = next(n for n in archive.namelist() if n.endswith("/models/model.json"))
            data = json.loads(archive.read(name))
        specs = data["graph_module"]["signature"]["input_specs"]
        names = []
        for spec in specs:
            if "user_input" in spec:
                arg = spec["user_input"]["arg"]
                names.append(next(iter(arg.values()))["name"])
        return names
    except (zipfile.BadZipFile, OSError, StopIteration, KeyError, TypeError, ValueError,
            AttributeError):
        return []


def _describe_example(name: str) -> SourceDescription:
    from engine.examples import EXAMPLES

    example = EXAMPLES.get(name)
    if example is None:
        return SourceDescription("example", error=_unknown_example(name).message)
    cand = Candidate(example.name, "class", list(example.forward_params), example.title)
    return SourceDescription("example", [cand], list(example.forward_params))


def _describe_python(path: Path, name: str) -> SourceDescription:
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        return SourceDescription("python", error=f"{path.name}:{exc.lineno}: syntax error: "
                                 f"{exc.msg}.")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return SourceDescription("python", error=f"Cannot read {path}: {exc}.")
    candidates, forward_of = _candidates(tree)
    desc = SourceDescription("python", candidates)
    if name:
        found = next((c for c in candidates if c.name == name), None)
        if found is None:
            desc.error = _missing_name_message(path, name, candidates)
        elif found.kind == "class":
            desc.forward_params = list(found.params)
        else:
            desc.forward_params = _factory_forward(tree, name, forward_of)
    elif candidates and candidates[0].kind == "class":
        desc.forward_params = list(candidates[0].params)
    return desc


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript):  # Generic[...] style bases
        return _base_name(node.value)
    return ""


def _params(func: ast.FunctionDef | ast.AsyncFunctionDef, skip_self: bool) -> list[str]:
    args = func.args
    names = [a.arg for a in [*args.posonlyargs, *args.args]]
    if skip_self and names:
        names = names[1:]
    names += [a.arg for a in args.kwonlyargs]
    return names


def _candidates(tree: ast.Module) -> tuple[list[Candidate], dict[str, list[str] | None]]:
    """Module classes and top-level functions, most likely models first."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    forward_of: dict[str, list[str] | None] = {}
    for cls in classes.values():
        fwd = next((f for f in cls.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                    and f.name == "forward"), None)
        forward_of[cls.name] = _params(fwd, skip_self=True) if fwd else None
    module_like = {
        name for name, cls in classes.items()
        if forward_of[name] is not None
        or any(_base_name(b).endswith("Module") for b in cls.bases)
    }
    # A subclass of a model class defined in the same file is a model too (fixpoint).
    changed = True
    while changed:
        changed = False
        for name, cls in classes.items():
            if name not in module_like and any(_base_name(b) in module_like for b in cls.bases):
                module_like.add(name)
                changed = True
    for name in module_like:  # inherit forward from a base in the same file
        seen: set[str] = set()
        current = name
        while forward_of.get(current) is None and current not in seen:
            seen.add(current)
            bases = [_base_name(b) for b in classes[current].bases]
            parent = next((b for b in bases if b in classes), None)
            if parent is None:
                break
            current = parent
        forward_of[name] = forward_of.get(current)
    out = [Candidate(name, "class", list(forward_of[name] or []),
                     _first_line(ast.get_docstring(classes[name])))
           for name in classes if name in module_like]
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    factories = [Candidate(f.name, "factory", _params(f, skip_self=False),
                           _first_line(ast.get_docstring(f))) for f in functions]
    # Model-looking factories first; the rest stay (any top-level function may build a model).
    factories.sort(key=lambda c: not _looks_like_factory(
        next(f for f in functions if f.name == c.name), module_like))
    return out + factories, forward_of


_FACTORY_WORDS = ("model", "net", "build", "create", "make", "get", "load")


def _looks_like_factory(func: ast.FunctionDef, module_like: set[str]) -> bool:
    returns = ast.unparse(func.returns) if func.returns is not None else ""
    if "Module" in returns or any(c in returns for c in module_like):
        return True
    lowered = func.name.lower()
    return not func.name.startswith("_") and any(w in lowered for w in _FACTORY_WORDS)


def _factory_forward(tree: ast.Module, name: str,
                     forward_of: dict[str, list[str] | None]) -> list[str]:
    """A factory's forward params, when its return annotation or `return Cls(...)` says."""
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    names = []
    if func.returns is not None:
        names.append(_base_name(func.returns))
    for node in ast.walk(func):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
            names.append(_base_name(node.value.func))
    for cls in names:
        if forward_of.get(cls) is not None:
            return list(forward_of[cls] or [])
    return []


def default_name(path: Path, candidates: list[Candidate]) -> str:
    """The model a bare `file.py` source means: its only model class; else StudioError."""
    classes = [c for c in candidates if c.kind == "class"]
    if len(classes) != 1:
        found = ", ".join(c.name for c in candidates) or "none"
        raise StudioError("source", f"{path.name} does not say which model to use.",
                          f"Write the source as {path.name}:Name; candidates: {found}.")
    return classes[0].name


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().split("\n", 1)[0]


def _missing_name_message(path: Path, name: str, candidates: list[Candidate]) -> str:
    found = ", ".join(c.name for c in candidates) or "no classes or functions"
    return f"{path.name} has no class or function named {name!r}; found: {found}."


# ---------------------------------------------------------------------------- load


def load_model(recipe: Recipe, device: str = "cpu") -> LoadedModel:
    """Build the recipe's model in eval mode on `device`; raises StudioError("source")."""
    from engine.inputs import check_device

    check_device(device)
    spec = recipe.model
    parsed = parse(spec.source, recipe.base_dir)
    if parsed.kind == "exported_program":
        loaded = _load_exported_program(parsed.path, spec.checkpoint)
    else:
        with _seeded(recipe.export.seed):
            module, source_file, kind = _build(parsed, spec)
        if spec.checkpoint:
            _apply_checkpoint(module, recipe.resolve(spec.checkpoint))
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

    _must_exist(path, "Model file")
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise StudioError("source", f"{path.name}:{exc.lineno}: syntax error: {exc.msg}.",
                          f"Fix line {exc.lineno} of {path}.",
                          details=traceback.format_exc()) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StudioError("source", f"Cannot read {path}: {exc}.") from None
    candidates, _ = _candidates(tree)
    name = name or default_name(path, candidates)
    module = _import_file(path)
    obj = getattr(module, name, None)
    if obj is None:
        raise StudioError("source", _missing_name_message(path, name, candidates),
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
                          f"{_one_line(exc)}{line}.",
                          "Fix the constructor or the recipe's model.kwargs.",
                          details=traceback.format_exc()) from None


def _signature_text(signature: inspect.Signature) -> str:
    params = [p for p in signature.parameters.values() if p.name != "self"]
    return "(" + ", ".join(str(p) for p in params) + ")" if params else "no arguments"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().split("\n", 1)[0]
    return text[:300] if text else type(exc).__name__


def _user_line(path: Path | None) -> str:
    """' (net.py:12)' for the innermost frame of the current exception in the user's file."""
    if path is None:
        return ""
    tb = sys.exc_info()[2]
    frames = [f for f in traceback.extract_tb(tb) if Path(f.filename) == path]
    return f" ({path.name}:{frames[-1].lineno})" if frames else ""


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
                          f"{_one_line(exc)}{_user_line(path)}.",
                          "Fix the error in the model file (or install the package it "
                          "imports).", details=traceback.format_exc()) from None
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)
        for new in set(sys.modules) - before - {name}:
            file = getattr(sys.modules.get(new), "__file__", None) or ""
            if file and Path(file).parent == path.parent:
                _siblings.add(new)
    return module


def _load_example(name: str, kwargs: dict[str, Any]) -> tuple[Any, Path]:
    from engine.examples import EXAMPLES

    example = EXAMPLES.get(name)
    if example is None:
        raise _unknown_example(name)
    try:
        factory = example.factory()
    except Exception as exc:
        raise StudioError("source", f"Example {name} failed to import: {_one_line(exc)}.",
                          details=traceback.format_exc()) from None
    return _call_user(factory, kwargs, f"example:{name}", None), example.source_file


def _unknown_example(name: str) -> StudioError:
    from engine.examples import EXAMPLES

    return StudioError("source", f"There is no example called {name!r}.",
                       f"Examples: {', '.join(sorted(EXAMPLES))}.")


_NO_TORCHVISION = "torchvision is not installed, so torchvision: models cannot be loaded."


def _load_torchvision(name: str, kwargs: dict[str, Any]) -> Any:
    if importlib.util.find_spec("torchvision") is None:
        raise StudioError("source", _NO_TORCHVISION,
                          "Install it (pip install torchvision, the `vision` extra), or use "
                          "an example such as example:alexnet.")
    try:
        import torchvision.models as tvm
    except Exception as exc:
        raise StudioError("source", f"torchvision is installed but fails to import: "
                          f"{_one_line(exc)}.", "Install a torchvision that matches torch.",
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
    """TorchScript first (no code runs); otherwise a pickle, loaded only when trusted."""
    import torch

    _must_exist(path, "Model file")
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
        raise StudioError("source", f"Unpickling {path.name} failed: {_one_line(exc)}.",
                          "A pickled module needs its class importable: run from the folder "
                          "of its code, or export it as TorchScript or .pt2 instead.",
                          details=traceback.format_exc()) from None
    if not isinstance(obj, torch.nn.Module):
        raise StudioError("source", f"{path.name} holds a {type(obj).__name__}, not a "
                          "torch.nn.Module.", "Save the model itself with torch.save(model).")
    return "pickle", obj


def _load_exported_program(path: Path | None, checkpoint: str | None) -> LoadedModel:
    import torch

    assert path is not None
    _must_exist(path, "ExportedProgram file")
    if checkpoint:
        raise StudioError("source", "A checkpoint cannot be applied to an ExportedProgram; its "
                          "weights are inside the .pt2.", "Remove model.checkpoint.")
    try:
        program = torch.export.load(str(path))
    except Exception as exc:
        raise StudioError("source", f"{path.name} is not a readable ExportedProgram: "
                          f"{_one_line(exc)}.", "Save it with torch.export.save(ep, path).",
                          details=traceback.format_exc()) from None
    from torch.export.graph_signature import InputKind

    params = [spec.arg.name for spec in program.graph_signature.input_specs
              if spec.kind == InputKind.USER_INPUT and hasattr(spec.arg, "name")]
    # ep.module() refuses .eval()/.train() in recent torch; it is built for inference already.
    return LoadedModel(program.module(), program, "exported_program", None, params)


def _apply_checkpoint(module: Any, path: Path) -> None:
    import torch

    _must_exist(path, "Checkpoint")
    try:
        if path.suffix.lower() == ".safetensors":
            from safetensors.torch import load_file

            state: Any = load_file(str(path), device="cpu")
        else:
            state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:
        hint = ("Checkpoints load with weights_only=True: save model.state_dict(), not the "
                "whole model." if "weights_only" in str(exc) or "Unpickl" in str(exc)
                else "Is it a .pt/.pth state_dict or a .safetensors file?")
        raise StudioError("source", f"Cannot read checkpoint {path.name}: {_one_line(exc)}.",
                          hint, details=traceback.format_exc()) from None
    if isinstance(state, dict):
        for key in ("state_dict", "model_state_dict", "model"):  # common trainer layouts
            if isinstance(state.get(key), dict):
                state = state[key]
                break
    if not isinstance(state, dict):
        raise StudioError("source", f"Checkpoint {path.name} holds a {type(state).__name__}, "
                          "not a state_dict.", "Save it with torch.save(model.state_dict()).")
    expected = set(module.state_dict())
    if state and all(k.startswith("module.") for k in state) and not expected & set(state):
        state = {k[len("module."):]: v for k, v in state.items()}  # saved from DataParallel
    missing = sorted(expected - set(state))
    unexpected = sorted(set(state) - expected)
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {_few(missing)}")
        if unexpected:
            parts.append(f"unexpected {_few(unexpected)}")
        raise StudioError("source", f"Checkpoint {path.name} does not fit the model: "
                          f"{'; '.join(parts)}.",
                          "Check model.kwargs (layer sizes) and that the checkpoint belongs "
                          "to this model.",
                          details="missing: " + ", ".join(missing)
                          + "\nunexpected: " + ", ".join(unexpected)) from None
    try:
        module.load_state_dict(state, strict=True)
    except Exception as exc:
        raise StudioError("source", f"Checkpoint {path.name} does not fit the model: "
                          f"{_mismatch(exc)}.",
                          "Check model.kwargs (layer sizes) against the checkpoint.",
                          details=traceback.format_exc()) from None


def _few(keys: list[str]) -> str:
    shown = ", ".join(keys[:5])
    return f"{shown} and {len(keys) - 5} more" if len(keys) > 5 else shown


def _mismatch(exc: Exception) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if "size mismatch" in ln]
    return lines[0].rstrip(".") if lines else _one_line(exc)


def _script(module: Any) -> Any:
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.script(module)
    except Exception as exc:
        raise StudioError("source", f"torch.jit.script failed: {_one_line(exc)}.",
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
