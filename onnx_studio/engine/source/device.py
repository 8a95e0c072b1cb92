"""Is the device a recipe names present on this machine: checked before any work starts."""

from __future__ import annotations

from onnx_studio.engine.errors import StudioError


def check_device(device: str) -> None:
    """Raise StudioError("inputs") when `device` is absent here, before any work starts."""
    import torch

    if device == "cpu":
        return
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise StudioError("inputs", "CUDA is not available on this machine; set "
                              "device = \"cpu\".",
                              "Install a CUDA build of torch on a machine with an NVIDIA GPU "
                              "to export on the GPU.")
        index = device.partition(":")[2]
        if index and int(index) >= torch.cuda.device_count():
            count = torch.cuda.device_count()
            raise StudioError("inputs", f"There is no {device}; this machine has {count} CUDA "
                              f"device{'s' if count != 1 else ''} (cuda:0 to cuda:{count - 1}).",
                              "Choose one of those, or device = \"cpu\".")
        return
    if device == "mps":
        if not torch.backends.mps.is_available():
            raise StudioError("inputs", "MPS (Apple GPU) is not available on this machine; "
                              "set device = \"cpu\".")
        return
    raise StudioError("inputs", f"{device!r} is not a device; use cpu, cuda, cuda:N or mps.")
