"""The image-model libraries as sources: `torchvision:NAME` and `timm:NAME` factories, and
torchvision imported so that a build whose C++ operators do not load still serves classifiers.

Both libraries are optional (the `vision` extra). Weights: torchvision's pretrained ones when
already in the torch hub cache (no network at run time), timm's never (random weights, or the
recipe's `checkpoint`, a state_dict with timm's keys).

Why `import_torchvision` exists: PyPI pairs a CPU torch with a CUDA build of torchvision whose
C++ extension needs libraries the CPU torch lacks. torchvision then imports without its
operators (nms, roi_align, ...: detection only) except that two of its fake-kernel
registrations (`torchvision::nms`, `torchvision::qnms`) are not guarded and fail with
"operator torchvision::nms does not exist", which takes `import torchvision`, and so
`import timm`, down. When, and only when, the ordinary import fails that way, the two operators'
schemas are declared (no kernel: calling them still fails, with torchvision's own message) and
the import is tried again; the load says so in a warning. transformers imports torchvision
when it is installed, so the Hugging Face sources and model files go through
`ready_torchvision` first.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import StudioError, one_line

NO_TORCHVISION = "torchvision is not installed, so torchvision: models cannot be loaded."
NO_TIMM = "timm is not installed, so timm: models cannot be loaded."
INSTALL_HINT = ("Install the `vision` extra (pip install 'onnx-export-studio[vision]': "
                "torchvision and timm), or use an example such as example:alexnet.")
# the schemas torchvision's C++ extension defines for the two operators whose fake kernels
# torchvision registers without checking that the extension loaded (torchvision 0.2x)
_UNGUARDED_SCHEMAS = ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
                      "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_declared: list[Any] = []  # the torch.library.Library that holds them: alive as long as we are


def import_torchvision() -> tuple[Any, str]:
    """torchvision, and "" or a sentence saying its C++ operators did not load (why, and what
    that leaves out); raises StudioError("source") when it is absent or cannot be imported."""
    if importlib.util.find_spec("torchvision") is None:
        raise StudioError("source", NO_TORCHVISION, INSTALL_HINT)
    try:
        import torchvision
    except RuntimeError as exc:
        if "torchvision::" not in str(exc) or "does not exist" not in str(exc):
            raise _broken(exc) from None
        torchvision = _import_without_operators(exc)
    except Exception as exc:
        raise _broken(exc) from None
    if torchvision.extension._has_ops():
        return torchvision, ""
    return torchvision, (
        f"torchvision {torchvision.__version__}'s C++ operators (nms, roi_align, deform_conv2d: "
        f"detection models) did not load with torch {_torch_version()} ({_extension_cause()}); "
        "image classifiers do not use them. A model that calls one fails when it runs; "
        "install the torchvision build made for this torch to use them.")


def ready_torchvision() -> None:
    """Import torchvision through `import_torchvision` when it is installed and not imported
    yet, before code that imports it on its own (transformers' image utilities, a model file):
    there a CUDA torchvision beside a CPU torch would fail. Best effort: never raises."""
    if "torchvision" in sys.modules or importlib.util.find_spec("torchvision") is None:
        return
    with contextlib.suppress(StudioError):  # the code that imports it says why, itself
        import_torchvision()


def _import_without_operators(first: BaseException) -> Any:
    """Import torchvision again after declaring the schemas its import registers fakes for."""
    import torch

    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
        del sys.modules[name]  # the half-imported package of the failed attempt
    if not _declared:
        library = torch.library.Library("torchvision", "FRAGMENT")
        for schema in _UNGUARDED_SCHEMAS:
            if not _has_operator(schema.split("(", 1)[0]):
                library.define(schema)
        _declared.append(library)
    try:
        import torchvision
    except Exception as exc:
        raise _broken(exc, first) from None
    return torchvision


def _has_operator(name: str) -> bool:
    import torch

    try:
        getattr(torch.ops.torchvision, name)
    except (AttributeError, RuntimeError):
        return False
    return True


def _broken(exc: BaseException, first: BaseException | None = None) -> StudioError:
    return StudioError("source", f"torchvision is installed but fails to import: "
                       f"{one_line(first or exc)}.",
                       "Install the torchvision build made for the installed torch.",
                       details=traceback.format_exc())


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def _extension_cause() -> str:
    """Why torchvision's _C extension does not load, one line (the missing library)."""
    import ctypes

    spec = importlib.util.find_spec("torchvision")
    folder = Path(spec.origin).parent if spec and spec.origin else None
    found = sorted(folder.glob("_C*.so")) + sorted(folder.glob("_C*.pyd")) if folder else []
    if not found:
        return "it has no _C extension"
    try:
        ctypes.CDLL(str(found[0]))
    except OSError as exc:
        return one_line(exc)
    return "its _C extension does not register them"


def torchvision_factory(name: str) -> tuple[Callable[..., Any], str]:
    """A factory for torchvision's model `name` (keyword arguments go to get_model) and the
    import note (`import_torchvision`); StudioError("source") for an unknown name."""
    torchvision, note = import_torchvision()
    tvm = torchvision.models
    available = tvm.list_models()
    if name not in available:
        close = [m for m in available if name.lower() in m or m in name.lower()][:8]
        raise StudioError("source", f"torchvision has no model called {name!r}.",
                          f"Try one of: {', '.join(close or available[:8])}.")
    weights = _cached_torchvision_weights(tvm, name)
    return (lambda **kw: tvm.get_model(name, weights=weights, **kw)), note


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


def import_timm() -> tuple[Any, str]:
    """timm and the torchvision note (timm imports torchvision); StudioError("source") when
    either is absent or cannot be imported."""
    if importlib.util.find_spec("timm") is None:
        raise StudioError("source", NO_TIMM, INSTALL_HINT)
    _, note = import_torchvision()  # first, so a CUDA torchvision beside a CPU torch imports
    try:
        import timm
    except Exception as exc:
        raise StudioError("source", f"timm is installed but fails to import: {one_line(exc)}.",
                          "Install a timm that works with the installed torch and torchvision.",
                          details=traceback.format_exc()) from None
    return timm, note


def timm_factory(name: str) -> tuple[Callable[..., Any], str]:
    """A factory for timm's model `name` with random weights (keyword arguments go to
    timm.create_model: num_classes, img_size, ...) and the torchvision note."""
    timm, note = import_timm()
    if not timm.is_model(name):
        close = timm.list_models(f"*{name}*")[:8] or timm.list_models()[:8]
        raise StudioError("source", f"timm has no model called {name!r}.",
                          f"Try one of: {', '.join(close)}.")
    # pretrained=False: timm would download the weights; a checkpoint on disk is the
    # recipe's `checkpoint` (a state_dict with timm's keys, .safetensors or .pth)
    return (lambda **kw: timm.create_model(name, pretrained=False, **kw)), note
