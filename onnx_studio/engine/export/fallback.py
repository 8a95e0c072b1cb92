"""When `exporter = "auto"` leaves dynamo for the TorchScript exporter, and what it says: the
rule (`may_fall_back`), the one warning naming dynamo's cause (`fallback_warning`), and the
error when both exporters fail (`both_failed`).

torch.onnx.export(dynamo=True) does the same on its own (its `fallback` argument); the studio
does it itself so that the warning names the cause and the report says which exporter ran.
"""

from __future__ import annotations

from typing import Any

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import Recipe

# the failures of capture (torch.export) and translation (onnxscript): another exporter may
# get through. The model's own errors, its inputs, memory and the disk are the same for both.
FALLBACK_KINDS = frozenset({"export", "unsupported_operator"})
CAUSE_CHARS = 240  # dynamo's cause in the warning: its first sentence, shortened to this


def may_fall_back(recipe: Recipe, chosen: str, error: StudioError) -> str | None:
    """None when the TorchScript exporter may run after dynamo failed with `error`; otherwise
    why not ("" when the recipe did not ask for "auto" or dynamo did not run)."""
    from onnx_studio.engine import torch_private

    if recipe.export.exporter != "auto" or chosen != "dynamo":
        return ""
    if error.kind not in FALLBACK_KINDS or getattr(error, "no_fallback", False):
        return ""  # no_fallback: a cause the other exporter shares (symbolic_attributes)
    opset = recipe.export.opset
    highest = torch_private.torchscript_max_opset()
    if opset is not None and opset > highest:
        return (f"the TorchScript exporter was not tried: it writes opset {highest} at most "
                f"and the recipe asks for {opset}")
    return None


def short_cause(error: StudioError) -> str:
    """dynamo's cause in one short sentence (its message, cut at CAUSE_CHARS)."""
    text = " ".join(error.message.split())
    if len(text) > CAUSE_CHARS:
        text = text[:CAUSE_CHARS - 1].rstrip() + "…"
    return text


def fallback_warning(error: StudioError) -> dict[str, Any]:
    """The one warning of a fallback: dynamo's cause, and how to choose either exporter."""
    return {
        "category": "ExporterFallback", "source": "",
        "message": f"The dynamo exporter could not export the model, so exporter = \"auto\" "
                   f"exported it with the TorchScript exporter. Dynamo's cause: "
                   f"{short_cause(error)}",
        "hint": 'Set exporter = "torchscript" to skip the dynamo attempt, or "dynamo" to get '
                "its failure (the details hold dynamo's full cause).",
        "details": error.details or error.message,
    }


def both_failed(first: StudioError, second: StudioError) -> StudioError:
    """The error of an "auto" export both exporters failed: dynamo's (the default's), with the
    TorchScript exporter's cause beside it and a hint that names no exporter."""
    message = (f"{first.message.rstrip('.')}. The TorchScript exporter (tried next, as "
               f"exporter = \"auto\" does) failed too: {second.message}")
    hint = _without_exporter_switch(first.hint) or _without_exporter_switch(second.hint)
    details = (f"dynamo:\n{first.details or first.message}\n\n"
               f"TorchScript exporter:\n{second.details or second.message}")
    return StudioError(first.kind, message, hint, first.unsupported_ops, details,
                       exit_code=first.exit_code)


def _without_exporter_switch(hint: str) -> str:
    """`hint` without its sentences that suggest the other exporter (both were tried)."""
    sentences = [s for s in hint.replace("; ", ". ").split(". ") if s.strip()]
    kept = [s for s in sentences if "torchscript" not in s.lower()
            and 'exporter = "dynamo"' not in s]
    text = ". ".join(s.rstrip(".") for s in kept)
    return text + "." if text else ""
