"""Which line of the model's code made a node: one frame chosen from the Python stack the
dynamo exporter records on it (`pkg.torch.onnx.stack_trace`), by rules.

A stack runs from the exported module's forward down into torch. Its frames are, outermost first:
the studio's own wrappers (onnx_studio.engine.source: a Hugging Face model behind flat tensors,
forward() called with the recipe's arguments), the user's code, library code (transformers, timm,
torchvision...), and torch. The node's source is the innermost frame of the user's code; a model
that lives in a library has its code there too, in the library's model files
(transformers/models/gpt2/modeling_gpt2.py, torchvision/models/resnet.py), which win over the
library's generic helpers (transformers/pytorch_utils.py, activations.py). Frames of torch and of
the studio are never the source: a node made by torch's own passes has none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
# The studio's engine package: its files in a stack are the studio's wrappers, except the
# example models it ships (engine/source/examples), which are a model's own code.
_ENGINE = Path(__file__).resolve().parents[1]
_EXAMPLES = ("source", "examples")
_LIBRARY_DIRS = ("site-packages", "dist-packages")
_TORCH_PACKAGES = frozenset({"torch", "torchgen", "functorch", "onnxscript", "onnx",
                             "onnxruntime"})
_STDLIB = re.compile(r"python\d+(\.\d+)?$")  # lib/python3.11: the standard library

USER, MODEL_FILE, LIBRARY, TORCH, STUDIO = "user", "model file", "library", "torch", "studio"


@dataclass(frozen=True)
class Frame:
    """One frame of a recorded stack: file, line and function, and what kind of code it is
    (`USER`, `MODEL_FILE`, `LIBRARY`, `TORCH` or `STUDIO`)."""

    path: str
    line: int
    function: str
    kind: str

    def __str__(self) -> str:
        """``file:line``; a library's file by its path inside the installed packages
        (transformers/models/gpt2/modeling_gpt2.py:213), the user's as recorded."""
        path = self.path
        if self.kind in (MODEL_FILE, LIBRARY):
            parts = path.replace("\\", "/").split("/")
            inside = next((i for i, p in enumerate(parts) if p in _LIBRARY_DIRS), None)
            if inside is not None:
                path = "/".join(parts[inside + 1:])
        return f"{path}:{self.line}"


def frames(stack_trace: str) -> list[Frame]:
    """The frames of a recorded stack, outermost first, each with its kind."""
    return [Frame(path, int(line), func, kind_of(path))
            for path, line, func in _FRAME.findall(stack_trace)]


def source_frame(stack_trace: str) -> Frame | None:
    """The frame of the model's code that made a node: the innermost frame of the user's
    code, else the innermost of a library's model files, else the innermost library frame;
    None when the stack holds only torch and the studio (or nothing)."""
    found = frames(stack_trace)
    for kind in (USER, MODEL_FILE, LIBRARY):
        for frame in reversed(found):
            if frame.kind == kind:
                return frame
    return None


@lru_cache(maxsize=4096)
def kind_of(path: str) -> str:
    """What kind of code the file at `path` (as a stack records it) is."""
    parts = path.replace("\\", "/").split("/")
    if _is_studio(parts):
        return STUDIO
    library = next((i for i, p in enumerate(parts) if p in _LIBRARY_DIRS), None)
    if library is not None:
        inside = parts[library + 1:]
    elif not path.startswith(("/", "\\")) and ":" not in path[:3] and parts[0] in _TORCH_PACKAGES:
        inside = parts  # relative to an installed package ("torch/fx/passes/...")
    elif any(_STDLIB.match(p) for p in parts[:-1]):
        return LIBRARY
    else:
        return USER
    if not inside:
        return USER
    if inside[0] in _TORCH_PACKAGES:
        return TORCH
    # a library's models folder holds the models themselves, its other files helpers
    return MODEL_FILE if "models" in inside[1:-1] else LIBRARY


def _is_studio(parts: list[str]) -> bool:
    """True for a file of the studio's engine package (its example models excepted): the
    path after an `engine` folder names a file of this engine."""
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] != "engine":
            continue
        inside = parts[i + 1:]
        if tuple(inside[:2]) == _EXAMPLES:
            return False
        if inside and _ENGINE.joinpath(*inside).is_file():
            return True
    return False
