"""What a .pt2 archive would unpickle or run, read without loading it.

`torch.export.load` is not a safe reader: the torch docs say it "uses pickle under the hood"
and warn never to load untrusted files. `scan` reads the archive with `zipfile`, `json`,
`ast` and `pickletools` only (nothing is unpickled, evaluated or imported) and lists every
entry through which loading it, or calling the loaded module, could run code from the file.
onnx_studio.engine.source.load refuses such a file unless the recipe says `trust_pickle = true`.

What torch 2.13 does with a .pt2 (torch/export/__init__.py `load`,
torch/export/pt2_archive/_package.py `load_pt2`, torch/_export/serde/serialize.py):

- The archive is a zip whose entries sit under one root folder; torch's reader looks names
  up case-insensitively (miniz), so every lookup here is case-insensitive, and a name that
  occurs twice is itself a finding (which copy torch reads is not knowable from Python).
- For each `models/<m>.json`:
  - `data/weights/<m>_weights_config.json` lists the weights. A weight with `use_pickle`
    true is read with `torch.load(weights_only=False)`: full unpickling. Others are raw
    bytes (`tensor_meta`), never unpickled. torch.export.save marks tensor subclasses so.
  - `data/constants/<m>_constants_config.json`: `tensor_*` entries likewise (`use_pickle`
    means weights_only=False); `custom_obj_*` entries go to TorchScript's unpickler
    (`torch._C._pickle_load_obj`, torchbind objects and their `__setstate__`);
    `opaque_obj_*` entries go to plain `pickle.loads`. All three kinds are findings.
  - `data/sample_inputs/<m>.pt` (and the legacy `data/weights/<m>.pt` and
    `data/constants/<m>.pt`) go through `deserialize_torch_artifact`: `torch.load` with
    weights_only=True first and, when that fails, weights_only=False: full unpickling.
  - The program JSON itself carries code as text: `guards_code` entries are compiled with
    `exec` into the module's input guards by `ep.module()` and run on every call; every
    `expr_str` (a symbolic size) goes through `sympy.sympify`, i.e. `eval`, during
    `torch.export.load`; names from the JSON (forward_arg_names, the keys of the input
    spec, keyword names) are pasted into the generated `forward` source. The first two run
    a payload with torch 2.13 (tests/engine/test_security.py), so these texts must have the
    form torch writes (checked with `ast`), and the names must be identifiers.
- Anything under `data/aotinductor/` makes `load_pt2` load the AOTInductor compiled model:
  a shared library whose constructor runs on load, native code.
- When the new format cannot be read, `torch.export.load` falls back to the pre-2.7 layout
  (`serialized_exported_program.json`, `serialized_state_dict.pt`,
  `serialized_constants.pt`, `serialized_example_inputs.pt`), again through
  `deserialize_torch_artifact`; those entries are checked the same way.

A normal `torch.export.save(torch.export.export(model, args), path)` of a plain module does
pickle one thing: the example inputs, `data/sample_inputs/model.pt`, a `torch.save` of
`(args, kwargs)`. torch reads it with weights_only=True, which succeeds, so no code runs;
refusing it would refuse every .pt2. So an entry that goes through torch.load is judged by
its content, read with `pickletools` without executing it: it passes when it is a zip-format
`torch.save` whose pickles reference only tensor-rebuilding globals (torch._utils rebuild
functions, storage and dtype names, OrderedDict, torch.Size, torch.device, ...), hold no
quotes or backslashes in their strings (dict keys of the inputs end up quoted in the guard
code torch generates) and are not a TorchScript archive (torch.load hands those to
torch.jit.load). Such a pickle cannot call anything but those globals, with weights_only
true or false. Entries that torch never unpickles (raw weight bytes, `extra/` text) are not
judged by content: raw tensor bytes often start with the pickle marker 0x80.

`weights_only_loads` is the second lock: while an untrusted file loads, every `torch.load`
runs with weights_only=True whatever its caller asked (torch reads
TORCH_FORCE_WEIGHTS_ONLY_LOAD at each call), so torch's fallback to full unpickling cannot
happen even for an entry this scan missed. The other unpicklers (`pickle.loads`,
TorchScript's) and the JSON's code are reached only through the entries checked above, and
`reader_disagreements` makes sure torch's own zip reader sees the same entries at the same
places as the `zipfile` the scan reads with.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickletools
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from onnx_studio.engine import torch_private
from onnx_studio.engine.source.pt2_program import PLAIN, program_problems


class NotAnArchive(ValueError):
    """The file is not a zip archive, so torch cannot read it as a .pt2 either."""


@dataclass(frozen=True)
class Finding:
    entry: str  # the name inside the archive, under its root folder
    reason: str  # what loading it does, for the details
    pickle: bool  # True: unpickled; False: other code (graph text, native code)


def unsafe_entries(path: Path | str) -> list[str]:
    """The names of the entries that loading `path` would unpickle or run as code."""
    return list(dict.fromkeys(f.entry for f in scan(path)))


def scan(path: Path | str) -> list[Finding]:
    """Every entry through which torch.export.load (or the loaded module) runs file content."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise NotAnArchive(f"not a zip archive ({exc})") from None
    with archive:
        infos = archive.infolist()
        if not infos:
            raise NotAnArchive("the archive is empty")
        found = _duplicates(infos)
        first = infos[0].filename
        if "/" in first:  # torch's reader needs a root folder; else only the legacy path
            found += _scan_pt2(_Archive(archive, first.split("/", 1)[0] + "/"))
        found += _scan_legacy(archive)
    return list(dict.fromkeys(found))


def reader_disagreements(path: Path | str) -> list[Finding]:
    """Where torch's own zip reader (miniz) sees the archive differently from `zipfile`.

    `scan` reads with Python's zipfile, torch with miniz; a zip crafted so that the two find
    different entries would show the scan one file and torch another. This compares torch's
    list of entries and where each begins, reading the zip directory only (imports torch).
    When torch's reader cannot open the file, torch falls back to the legacy layout, which it
    reads with zipfile itself: nothing to compare then.
    """
    try:
        reader: Any = torch_private.pytorch_file_reader(str(path))
        records = reader.get_all_records()
        offsets = {name: reader.get_record_header_offset(name) for name in records}
    except Exception:
        return []
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        prefix = infos[0].filename.split("/", 1)[0] + "/"
        python = {i.filename[len(prefix):]: i.header_offset for i in infos
                  if i.filename.startswith(prefix)}
    if sorted(records) != sorted(python):
        return [Finding("(the zip directory)", "torch's zip reader lists other entries than "
                        "Python's", False)]
    return [Finding(name, "torch's zip reader finds this entry elsewhere than Python's", False)
            for name in records if offsets[name] != python[name]]


def refusal(file_name: str, findings: list[Finding]) -> str:
    """The one-sentence refusal for an untrusted file with findings."""
    names = list(dict.fromkeys(f.entry for f in findings))
    count = f"{len(names)} entr{'y' if len(names) == 1 else 'ies'} ({', '.join(names)})"
    if all(f.pickle for f in findings):
        return (f"{file_name} would unpickle {count} and unpickling runs code from the file, "
                "so it needs trust_pickle = true.")
    doing = ("unpickle or run code from" if any(f.pickle for f in findings)
             else "run code stored in")
    return f"{file_name} would {doing} {count}, so it needs trust_pickle = true."


REFUSAL_HINT = ("Set trust_pickle = true in [model] only if you trust this file, or re-save "
                "it with torch.export.save from a current torch.")


def details(findings: list[Finding]) -> str:
    return "\n".join(f"{f.entry}: {f.reason}" for f in findings)


@contextlib.contextmanager
def weights_only_loads() -> Iterator[None]:
    """Inside, every torch.load runs with weights_only=True, whatever its caller asked."""
    keys = ("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
    saved = {key: os.environ.get(key) for key in keys}
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ---------------------------------------------------------------------------- the archive


class _Archive:
    """Entries as torch's reader sees them: under the root folder, found case-insensitively."""

    def __init__(self, archive: zipfile.ZipFile, prefix: str) -> None:
        self.zip = archive
        self.prefix = prefix
        self.names = [i.filename[len(prefix):] for i in archive.infolist()
                      if i.filename.startswith(prefix)]
        self.by_lower: dict[str, list[zipfile.ZipInfo]] = {}
        for info in archive.infolist():
            self.by_lower.setdefault(info.filename.lower(), []).append(info)

    def copies(self, name: str) -> list[bytes]:
        """The content of every entry torch might read for `name` (one, unless duplicated)."""
        return [self.zip.read(i) for i in self.by_lower.get((self.prefix + name).lower(), [])]


def _duplicates(infos: list[zipfile.ZipInfo]) -> list[Finding]:
    """Names that occur twice (ignoring case), named under the root folder like the rest."""
    root = infos[0].filename.split("/", 1)[0].lower() + "/"
    seen: dict[str, int] = {}
    for info in infos:
        seen[info.filename.lower()] = seen.get(info.filename.lower(), 0) + 1
    return [Finding(name[len(root):] if name.startswith(root) else name,
                    "occurs more than once; which copy torch reads is unknown", False)
            for name, n in seen.items() if n > 1]


def _scan_pt2(archive: _Archive) -> list[Finding]:
    found: list[Finding] = []
    aoti: set[str] = set()
    for name in archive.names:
        lower = name.lower()
        if lower.startswith("data/aotinductor/"):
            model = name[len("data/aotinductor/"):].split("/", 1)[0]
            aoti.add(f"data/aotinductor/{model}/")
        if not lower.startswith("models/"):
            continue
        model = name[len("models/"):-len(".json")]  # as torch derives it
        for data in archive.copies(name):
            found += _check_program(data, name)
        for kind in ("weights", "constants"):
            legacy = f"data/{kind}/{model}.pt"
            for data in archive.copies(legacy):
                found += _check_artifact(data, legacy, f"legacy {kind}")
            config = f"data/{kind}/{model}_{kind}_config.json"
            for data in archive.copies(config):
                found += _check_config(data, config, kind)
        sample = f"data/sample_inputs/{model}.pt"
        for data in archive.copies(sample):
            found += _check_artifact(data, sample, "sample inputs")
    found += [Finding(name, "AOTInductor compiled code, a native library that loading runs",
                      False) for name in sorted(aoti)]
    return found


_LEGACY_ARTIFACTS = ("serialized_state_dict.pt", "serialized_constants.pt",
                     "serialized_example_inputs.pt", "serialized_state_dict.json",
                     "serialized_constants.json")


def _scan_legacy(archive: zipfile.ZipFile) -> list[Finding]:
    """The pre-2.7 layout torch.export.load falls back to (exact names, Python's zipfile)."""
    found: list[Finding] = []
    for info in archive.infolist():
        if info.filename in _LEGACY_ARTIFACTS:
            found += _check_artifact(archive.read(info), info.filename, "legacy data")
        elif info.filename == "serialized_exported_program.json":
            found += _check_program(archive.read(info), info.filename)
    return found


def _check_config(data: bytes, name: str, kind: str) -> list[Finding]:
    """Entries a weights/constants config sends to an unpickler."""
    unreadable = [Finding(name, "a config in an unexpected form; what it marks for "
                                "unpickling cannot be told", True)]
    try:
        config = json.loads(data.decode("utf-8")).get("config")
    except (ValueError, UnicodeDecodeError, AttributeError, RecursionError):
        return unreadable
    if not isinstance(config, dict):
        return unreadable
    found: list[Finding] = []
    for meta in config.values():
        if not isinstance(meta, dict) or not isinstance(meta.get("path_name"), str):
            return unreadable
        path_name = meta["path_name"]
        entry = os.path.join(f"data/{kind}/", path_name)  # as torch joins it
        if kind == "weights" or path_name.startswith("tensor_"):
            if meta.get("use_pickle"):
                found.append(Finding(entry, f"a pickled {kind[:-1]}, loaded with "
                                            "torch.load(weights_only=False)", True))
        elif path_name.startswith("custom_obj_"):
            found.append(Finding(entry, "a custom object for TorchScript's unpickler", True))
        elif path_name.startswith("opaque_obj_"):
            found.append(Finding(entry, "a pickled object, loaded with pickle.loads", True))
    return found


# ---------------------------------------------------------------------------- pickles


_SAFE_GLOBALS = frozenset({
    ("collections", "OrderedDict"),
    ("torch._utils", "_rebuild_tensor"),
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_tensor_v3"),
    ("torch._utils", "_rebuild_parameter"),
    ("torch._utils", "_rebuild_parameter_with_state"),
    ("torch._utils", "_rebuild_qtensor"),
    ("torch._utils", "_rebuild_sparse_tensor"),
    ("torch._utils", "_rebuild_meta_tensor_no_storage"),
    ("torch._tensor", "_rebuild_from_type_v2"),  # a tensor with attributes (dynamo's marks)
    ("torch", "Tensor"),
    ("torch.nn.parameter", "Parameter"),
    ("torch.serialization", "_get_layout"),
    ("torch.storage", "UntypedStorage"),
    ("torch", "Size"),
    ("torch", "device"),
    ("torch", "per_tensor_affine"),
    ("torch", "per_tensor_symmetric"),
    ("torch", "per_channel_affine"),
    ("torch", "per_channel_symmetric"),
    ("torch", "per_channel_affine_float_qparams"),
    ("builtins", "set"),
    ("builtins", "complex"),
    ("builtins", "bytearray"),
    ("_codecs", "encode"),
})
_TORCH_DATA_NAME = re.compile(  # attributes of `torch` that are storage classes or dtypes
    r"[A-Z]\w*Storage|u?int\d+|float\d+(_\w+)?|bfloat16|complex\d+|bool|half|double|long|"
    r"short|int|float|cfloat|cdouble|chalf|qu?int\d+(x\d+)?|bits\w+")
_STRING_OPS = frozenset({"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE",
                         "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8"})
_BYTES_OPS = frozenset({"BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8"})


def _check_artifact(data: bytes, name: str, what: str) -> list[Finding]:
    if _plain_torch_save(data):
        return []
    return [Finding(name, f"{what} that weights_only=True cannot load, so torch falls back to "
                          "torch.load(weights_only=False)", True)]


def _plain_torch_save(data: bytes) -> bool:
    """True when torch.load of `data` can only rebuild tensors, whatever weights_only says."""
    if not data:
        return True  # torch reads an empty artifact as {} without loading anything
    if not data.startswith(b"PK\x03\x04"):
        return False  # the legacy torch.save stream (or anything else): not vouched for
    try:
        inner = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError):
        return False
    with inner:
        for info in inner.infolist():
            name = info.filename.lower()
            if name.endswith("constants.pkl") or "/code/" in name:
                return False  # a TorchScript archive: torch.load hands it to torch.jit.load
            if name.endswith(".pkl") and not plain_pickle(inner.read(info)):
                return False
    return True


def plain_pickle(data: bytes) -> bool:
    """True when the pickle references only tensor-rebuilding globals and plain strings.

    Read with pickletools.genops, which parses opcodes and runs nothing. A pickle can call
    only what GLOBAL / STACK_GLOBAL / INST name (or the extension registry, EXT*): checking
    every such name is checking everything it can call.
    """
    memo: dict[int, str | None] = {}
    recent: list[str | None] = []  # what the last pushes were, when they were strings
    try:
        for op, opcode_arg, _pos in pickletools.genops(data):
            name, arg = op.name, cast(Any, opcode_arg)
            if name in _STRING_OPS or name in _BYTES_OPS:
                text = arg if isinstance(arg, str) else bytes(arg).decode("latin-1")
                if not PLAIN.fullmatch(text):
                    return False
                recent = [*recent[-1:], arg if isinstance(arg, str) else None]
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[int(arg)] = recent[-1] if recent else None
            elif name == "MEMOIZE":
                memo[len(memo)] = recent[-1] if recent else None
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                recent = [*recent[-1:], memo.get(int(arg))]
            elif name in ("GLOBAL", "INST"):
                module, _, attr = str(arg).partition(" ")
                if not _safe_global(module, attr):
                    return False
                recent = []
            elif name == "STACK_GLOBAL":
                if len(recent) < 2 or recent[-2] is None or recent[-1] is None:
                    return False
                if not _safe_global(str(recent[-2]), str(recent[-1])):
                    return False
                recent = []
            elif name.startswith("EXT"):
                return False
            elif name not in ("PROTO", "FRAME"):
                recent = []
    except Exception:  # malformed: what an unpickler would make of it is not vouched for
        return False
    return True


def _safe_global(module: str, name: str) -> bool:
    module = {"__builtin__": "builtins"}.get(module, module)  # protocol 2's Python 2 name
    if (module, name) in _SAFE_GLOBALS:
        return True
    return module == "torch" and bool(_TORCH_DATA_NAME.fullmatch(name))


def _check_program(data: bytes, name: str) -> list[Finding]:
    """Code-bearing text in a serialized ExportedProgram, checked against what torch writes."""
    problems = program_problems(data)
    if not problems:
        return []
    shown = "; ".join(dict.fromkeys(problems))
    return [Finding(name, f"code in the program's text: {shown[:300]}", False)]
