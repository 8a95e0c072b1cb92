"""When `exporter = "auto"` leaves dynamo for the TorchScript exporter, and what it says: the
rule (`may_fall_back`), the one warning naming dynamo's cause (`fallback_warning`), and the
error when both exporters fail (`both_failed`).

torch.onnx.export(dynamo=True) does the same on its own (its `fallback` argument); the studio
does it itself so that the warning names the cause and the report says which exporter ran.
"""

from __future__ import annotations

from typing import Any

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.export import causes
from onnx_studio.engine.recipe import Recipe

# the failures of capture (torch.export) and translation (onnxscript): another exporter may
# get through. The model's own errors, its inputs, memory and the disk are the same for both;
# a branch or size read from a tensor's value would be traced as a constant (a wrong file).
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
    if causes.is_data_dependent(error.details or error.message):
        # a trace follows the branch (or keeps the size) of the example only: the file
        # would be wrong for other inputs, so dynamo's answer (torch.cond, a script) stands
        return ""
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
    TorchScript exporter's cause beside it and a hint that does not send the user to an
    exporter that was tried already."""
    message = (f"{first.message.rstrip('.')}. The TorchScript exporter (tried next, as "
               f"exporter = \"auto\" does) failed too: {second.message}")
    details = (f"dynamo:\n{first.details or first.message}\n\n"
               f"TorchScript exporter:\n{second.details or second.message}")
    ops = sorted({*first.unsupported_ops, *second.unsupported_ops})
    if "torchscript" not in first.hint.lower():
        hint = first.hint
    elif ops:
        hint = (f"Neither exporter converts {', '.join(ops)}: rewrite the model to avoid it, try "
                "another opset, or register a translation in an extension file "
                "(export.extensions): a `custom_translation_table` dict for dynamo.")
    else:
        hint = ("Both exporters failed: the message names each one's cause and the details hold "
                "both in full; change the model's code they point to.")
    return StudioError(first.kind, message, hint, first.unsupported_ops, details,
                       exit_code=first.exit_code)
