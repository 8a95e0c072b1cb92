"""Checkpoints: a state_dict file (.pt/.pth or .safetensors) applied to a built module.

Read with weights_only=True (or safetensors), so a checkpoint never runs code; a mismatch is
reported as the keys or sizes that differ, not as torch's page-long message.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import StudioError, one_line
from onnx_studio.engine.source.describe import must_exist


def apply_checkpoint(module: Any, path: Path) -> None:
    """Load the state_dict at `path` (weights only) into `module`; raises StudioError("source")."""
    import torch

    must_exist(path, "Checkpoint")
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
        raise StudioError("source", f"Cannot read checkpoint {path.name}: {one_line(exc)}.",
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
    return lines[0].rstrip(".") if lines else one_line(exc)
