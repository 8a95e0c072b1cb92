"""Describe a model source without running it: what kind it is, its classes and factories.

`parse` classifies a source string (file.py:Name, .pt2, .pt/.pth, example:, torchvision:,
timm:);
`describe` reads the file only (ast for .py, the zip's entries for .pt/.pt2, through
onnx_studio.engine.source.signatures), so the window can call it without importing torch and without
running anything the user has not asked to run. Loading the model is
onnx_studio.engine.source.load's job.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.source.kinds import archive_kind, parse
from onnx_studio.engine.source.signatures import (
    ForwardParam,
    base_name,
    forward_signature,
    pt2_signature,
    torchscript_signature,
)
from onnx_studio.engine.source.vision import NO_TIMM, NO_TORCHVISION


@dataclass
class Candidate:
    name: str
    kind: str  # "class" | "factory"
    params: list[str]  # forward params for a class, the factory's own params for a factory
    doc: str = ""
    # the forward() of the class (or of the class a factory returns), kinds and defaults
    signature: list[ForwardParam] = field(default_factory=list)


@dataclass
class SourceDescription:
    kind: str
    candidates: list[Candidate] = field(default_factory=list)
    forward_params: list[str] = field(default_factory=list)
    error: str | None = None
    forward_signature: list[ForwardParam] = field(default_factory=list)



# ---------------------------------------------------------------------------- parsing


def must_exist(path: Path, what: str) -> None:
    """Raise StudioError("source") naming `what` when `path` is not a file."""
    if not path.is_file():
        raise StudioError("source", f"{what} {path} does not exist.",
                          "Check the path; relative paths are resolved against the "
                          "recipe file's folder.")


# ---------------------------------------------------------------------------- describe


def describe(source: str, base_dir: Path, *, trust_remote_code: bool = False) -> SourceDescription:
    """What a source offers (candidate classes/factories, forward parameters); never raises.
    `trust_remote_code`: a Hugging Face folder's own code may run (its config class)."""
    from onnx_studio.engine.source.hf.loading import is_hf_source  # the window's parse needs no hf

    if is_hf_source(source):
        return _describe_hf(source, base_dir, trust_remote_code)
    try:
        parsed = parse(source, base_dir)
    except StudioError as exc:
        return SourceDescription("unknown", error=exc.message)
    if parsed.kind == "example":
        return _describe_example(parsed.name)
    if parsed.kind in ("torchvision", "timm"):  # image models: forward(x)
        missing = {"torchvision": NO_TORCHVISION, "timm": NO_TIMM}
        for package in ("torchvision", parsed.kind):
            if importlib.util.find_spec(package) is None:
                return SourceDescription(parsed.kind, error=missing[package])
        return SourceDescription(parsed.kind, forward_params=["x"])
    assert parsed.path is not None
    if not parsed.path.is_file():
        return SourceDescription(parsed.kind if parsed.kind != "torchscript_or_pickle"
                                 else "torchscript", error=f"{parsed.path} does not exist.")
    if parsed.kind == "exported_program":
        signature = pt2_signature(parsed.path)
        return SourceDescription("exported_program", forward_params=_roots(signature),
                                 forward_signature=signature)
    if parsed.kind == "torchscript_or_pickle":
        kind = archive_kind(parsed.path)
        signature = torchscript_signature(parsed.path) if kind == "torchscript" else []
        return SourceDescription(kind, forward_params=_roots(signature),
                                 forward_signature=signature)
    return _describe_python(parsed.path, parsed.name)


def _roots(signature: list[ForwardParam]) -> list[str]:
    """forward()'s argument names, once each (a .pt2 lists the leaves of nested ones)."""
    return list(dict.fromkeys(p.name.split(".", 1)[0] for p in signature))


def _describe_hf(source: str, base_dir: Path, trust_remote_code: bool) -> SourceDescription:
    """A Hugging Face folder: one candidate per task its model class supports (kind "task"),
    the config's default first, each with its first file's inputs; read from config.json and
    transformers' tables (no weights loaded)."""
    from onnx_studio.engine.source.hf import supported_tasks
    from onnx_studio.engine.source.hf.inputs import input_names
    from onnx_studio.engine.source.hf.loading import load_config, split_hf_source

    folder, _ = split_hf_source(source, base_dir)
    try:
        config = load_config(folder, trust_remote_code)
    except StudioError as exc:
        return SourceDescription("hf", error=exc.message)
    tasks = supported_tasks(config)
    if not tasks:
        return SourceDescription("hf", error=f"transformers has no model class for the "
                                 f"{config.model_type} model under any task the studio exports.")
    candidates = [Candidate(task, "task", input_names(task, config)) for task in tasks]
    return SourceDescription("hf", candidates=candidates, forward_params=candidates[0].params)


def _describe_example(name: str) -> SourceDescription:
    from onnx_studio.engine.source.examples import EXAMPLES

    example = EXAMPLES.get(name)
    if example is None:
        return SourceDescription("example", error=unknown_example(name).message)
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
    candidates, forward_of = find_candidates(tree)
    desc = SourceDescription("python", candidates)
    model_class = ""
    if name:
        found = next((c for c in candidates if c.name == name), None)
        if found is None:
            desc.error = missing_name_message(path, name, candidates)
        elif found.kind == "class":
            desc.forward_params = list(found.params)
            model_class = name
        else:
            desc.forward_params = _factory_forward(tree, name, forward_of)
            model_class = _factory_class(tree, name, forward_of)
    elif candidates and candidates[0].kind == "class":
        desc.forward_params = list(candidates[0].params)
        model_class = candidates[0].name
    if model_class:
        desc.forward_signature = forward_signature(tree, model_class)
    return desc


def _params(func: ast.FunctionDef | ast.AsyncFunctionDef, skip_self: bool) -> list[str]:
    args = func.args
    names = [a.arg for a in [*args.posonlyargs, *args.args]]
    if skip_self and names:
        names = names[1:]
    names += [a.arg for a in args.kwonlyargs]
    return names


def find_candidates(tree: ast.Module) -> tuple[list[Candidate], dict[str, list[str] | None]]:
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
        or any(base_name(b).endswith("Module") for b in cls.bases)
    }
    # A subclass of a model class defined in the same file is a model too (fixpoint).
    changed = True
    while changed:
        changed = False
        for name, cls in classes.items():
            if name not in module_like and any(base_name(b) in module_like for b in cls.bases):
                module_like.add(name)
                changed = True
    for name in module_like:  # inherit forward from a base in the same file
        seen: set[str] = set()
        current = name
        while forward_of.get(current) is None and current not in seen:
            seen.add(current)
            bases = [base_name(b) for b in classes[current].bases]
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
    for candidate in out + factories:
        model_class = candidate.name if candidate.kind == "class" else _factory_class(
            tree, candidate.name, forward_of)
        candidate.signature = forward_signature(tree, model_class) if model_class else []
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
    cls = _factory_class(tree, name, forward_of)
    return list(forward_of.get(cls) or []) if cls else []


def _factory_class(tree: ast.Module, name: str,
                   forward_of: dict[str, list[str] | None]) -> str:
    """The class a factory returns, by its return annotation or `return Cls(...)`; ""."""
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    names = []
    if func.returns is not None:
        names.append(base_name(func.returns))
    for node in ast.walk(func):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
            names.append(base_name(node.value.func))
    for cls in names:
        if forward_of.get(cls) is not None:
            return cls
    return ""


def default_name(path: Path, candidates: list[Candidate]) -> str:
    """The model a bare `file.py` source means: its only model class; else StudioError."""
    classes = [c for c in candidates if c.kind == "class"]
    if len(classes) != 1:
        found = ", ".join(c.name for c in candidates if not c.name.startswith("_")) or "none"
        raise StudioError("source", f"{path.name} does not say which model to use.",
                          f"Write the source as {path.name}:Name; candidates: {found}.")
    return classes[0].name


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().split("\n", 1)[0]


def missing_name_message(path: Path, name: str, candidates: list[Candidate]) -> str:
    """The sentence for a source naming what its file does not define: the public classes and
    functions defined there (not `_helpers`, not names the file imports)."""
    public = [c.name for c in candidates if not c.name.startswith("_")]
    found = ", ".join(public) or "no public classes or functions"
    return f"{path.name} has no class or function named {name!r}; found: {found}."


def unknown_example(name: str) -> StudioError:
    from onnx_studio.engine.source.examples import EXAMPLES

    return StudioError("source", f"There is no example called {name!r}.",
                       f"Examples: {', '.join(sorted(EXAMPLES))}.")

