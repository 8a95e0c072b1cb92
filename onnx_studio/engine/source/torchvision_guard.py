"""torchvision whose C++ operators cannot load on this torch, made importable.

A torchvision wheel built for another torch (the package index pairs torch 2.13's CPU build
with a CUDA build of torchvision only) installs, but its C++ library does not load, and its
`import` then fails on `torch.library.register_fake("torchvision::nms")`: "operator
torchvision::nms does not exist". transformers imports torchvision whenever it is installed
(its image utilities) and timm always does, so every Hugging Face and timm model would fail to
load. Classifiers never call torchvision's C++ operators (detection's nms and roi ops).

`guard()` runs before anything imports torchvision: when torchvision is installed and its C++
library does not load, it declares the two operators torchvision's import registers Python
implementations for (nms, qnms) without any kernel, so the import succeeds; a model that calls
them fails with torch's error naming the operator. Nothing is declared when the library loads
(a matching torchvision) or torchvision is absent.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

# the operators torchvision's import registers fake (meta) implementations for without first
# asking whether its library loaded (torchvision/_meta_registrations.py)
_DECLARED = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_state: dict[str, Any] = {}


def guard() -> str | None:
    """Make torchvision importable when its C++ library cannot load (see the module
    docstring); the loader's error when it could not, None when nothing was needed."""
    if "done" in _state:
        return _state["done"]
    _state["done"] = None
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return None
    import torch

    libraries = sorted(Path(spec.origin).parent.glob("_C*.so")) \
        + sorted(Path(spec.origin).parent.glob("_C*.pyd"))
    if not libraries:
        return None
    try:
        torch.ops.load_library(str(libraries[0]))
        return None
    except (OSError, RuntimeError) as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    library = torch.library.Library("torchvision", "DEF")
    for schema in _DECLARED.values():
        library.define(schema)
    _state["library"] = library  # a Library undoes its definitions when collected
    _state["done"] = problem
    return problem

