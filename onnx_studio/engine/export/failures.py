"""The StudioError an exporter's exception becomes, at whichever stage it was raised: the model's
own end (sys.exit, memory), every operator without a conversion, or the cause
onnx_studio.engine.export.causes names (an argument error is kind `inputs`). `part_failure` does the
same for a Hugging Face part, with the model options that fix it where transformers has them.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import StudioError, chain_text, exception_chain
from onnx_studio.engine.export import blame, causes, diagnose

# transformers' experts implementations that run as plain tensor operations (a gather of each
# token's expert weights, one batched matmul): transformers' own exporters choose it
EXPORTABLE_EXPERTS = "batched_mm"


def export_failure(exc: BaseException, exporter: str, find_all: Callable[[], list[str]],
                   user_file: Path | None = None) -> StudioError:
    """Turn an exporter exception into a StudioError chosen by its cause: every unsupported
    operator listed (`find_all` scans for them all; the exporter stops at the first), or the
    cause named with its fix; `details` is the whole exception chain."""
    if blame.is_model_fault(exc):  # sys.exit or memory inside the traced forward()
        return blame.model_error(exc, user_file=user_file)
    details = chain_text(exc)
    message = causes.chain_messages(exc)
    named = diagnose.ops_named_in_error(message)
    if named or any("UnsupportedOperatorError" in type(e).__name__
                    for e in exception_chain(exc)):
        try:
            ops = sorted(set(find_all()) | set(named))
        except Exception:  # the scan is best effort: the exporter's own answer still stands
            ops = named
        if not ops:  # neither the message nor the scan names it: the exporter's own words
            return StudioError(
                "unsupported_operator", f"The {exporter} exporter cannot convert an operator "
                f"of the model: {causes.real_message(exc)}.",
                diagnose.unsupported_hint(exporter, ops), ops, details=details)
        plural = "s" if len(ops) != 1 else ""
        return StudioError(
            "unsupported_operator",
            f"The {exporter} exporter cannot convert {len(ops)} operator{plural}: "
            f"{', '.join(ops)}.",
            diagnose.unsupported_hint(exporter, ops), ops, details=details)
    cause = causes.classify(exc, exporter, user_file)
    return StudioError(cause.kind, cause.message, cause.hint, details=details)


def _pretrained(module: Any) -> Any:
    """The transformers model inside an export wrapper (None when there is none)."""
    return next((m for m in module.modules() if hasattr(m, "config")
                 and hasattr(m, "main_input_name")), None)


def experts_hint(model: Any, ops: list[str]) -> str:
    """The model option that swaps transformers' experts implementation for one that exports,
    when `ops` are transformers' own operators and the model's experts can switch; ""
    otherwise."""
    if model is None or not any(op.split(".")[0].split("::")[0] == "transformers"
                                for op in ops):
        return ""
    can_switch = getattr(model, "_can_set_experts_implementation", None)
    if can_switch is None or not can_switch():
        return ""
    try:
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    except ImportError:
        return ""
    current = getattr(model.config, "_experts_implementation", None)
    if EXPORTABLE_EXPERTS not in ALL_EXPERTS_FUNCTIONS or current == EXPORTABLE_EXPERTS:
        return ""
    return (f"The model's mixture-of-experts layers run transformers' {current!r} experts "
            f"implementation, whose {', '.join(ops)} has no ONNX translation: load it with "
            f"experts_implementation={EXPORTABLE_EXPERTS} (--model-kwarg experts_implementation="
            f"{EXPORTABLE_EXPERTS}; a recipe's model.kwargs = {{ experts_implementation = "
            f"\"{EXPORTABLE_EXPERTS}\" }}), which computes each token's experts with a batched "
            "matmul that exports; or register a translation for it in an extension file.")


def part_failure(exc: BaseException, part: Any, opset: int | None,
                 dynamic_shapes: Any) -> StudioError:
    """The StudioError of a Hugging Face part (onnx_studio.engine.source.hf.wrappers.ExportPart)
    that failed to export: as export_failure, an argument error naming the input, and for an
    operator transformers itself registered, the experts option that avoids it."""
    found = causes.argument_error(exc)
    if found is not None:
        given = ", ".join(part.inputs)
        verb = "needs the input" if found.missing else "does not take the input"
        return StudioError(
            "inputs", f"While exporting {part.file}, the model's forward() {verb} "
            f"{found.name!r} (the studio gave {given}): {found.message}.",
            "Choose another task (--task), or export the model through a Python file whose "
            f"factory returns it, with the inputs forward() takes (--input {found.name}="
            "SHAPE:DTYPE).", details=chain_text(exc), exit_code=2)

    def find_all() -> list[str]:
        return diagnose.unsupported_operators_dynamo(
            part.module, tuple(part.inputs.values()), dynamic_shapes, opset)

    error = export_failure(exc, "dynamo", find_all)
    if error.kind == "unsupported_operator":
        hint = experts_hint(_pretrained(part.module), error.unsupported_ops)
        if hint:
            error.hint = hint
    elif error.kind == "export" and not error.details:
        error.details = traceback.format_exc()
    error.message = f"{part.file}: {error.message}"
    return error
