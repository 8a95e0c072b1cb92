"""What to change after a failed validation: `failure_hint` by the first cause found (a shape,
a dtype, the output count, a model or ONNX Runtime that cannot run, then the numbers), and for
numbers `values_hint`: the tolerance that would pass and whether that is rounding.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["COUNT_DIFFERS", "ORT_FAILED", "PYTORCH_FAILED", "failure_hint", "round_up",
           "values_hint"]

# how a failed trial's message begins (or what it says): written by the validator's trials,
# read back by `failure_hint`
ORT_FAILED = "ONNX Runtime failed"
PYTORCH_FAILED = "The PyTorch model itself failed"
COUNT_DIFFERS = "the ONNX file has"


# Hints for a failed validation, by the first cause found (a tolerance only for numbers).
_HINTS = {
    "shape": ("ONNX Runtime returns another shape than PyTorch ({detail}); no tolerance "
              "changes a shape. If it differs only at other sizes, a dynamic axis was baked "
              "into the file as a constant: look in Warnings for shape arithmetic traced as a "
              "number (.item(), int(), len()), keep it a tensor, and declare the axis dynamic "
              "on the inputs and outputs. If the shapes belong to another output, the outputs "
              "come in another order than the recipe's [[outputs]]."),
    "dtype": ("ONNX Runtime returns another dtype than PyTorch ({detail}); no tolerance "
              "changes a dtype. Look for a cast in forward() the export changed, or give the "
              "inputs the dtypes the model expects."),
    "count": ("PyTorch and the ONNX file return a different number of outputs; compare what "
              "forward() returns (None, nested tuples or dicts) with the recipe's [[outputs]]."),
    "pytorch": ("The PyTorch model itself fails on these inputs, so nothing could be compared "
                "there; if forward() accepts only the export's sizes, remove that dynamic axis "
                "or set validate.dynamic_sizes = false."),
    "onnxruntime": ("ONNX Runtime cannot run the file on these inputs: the message names the "
                    "node. At other sizes this means a size from the export inputs is fixed in "
                    "the file; look in Warnings for what was traced as a constant."),
    "other": "The failed trial's message says what went wrong; its details hold the cause.",
    "values": ("Compare the per-output numbers; loosen rtol/atol if the differences are "
               "rounding, otherwise look for values baked in at export time (see Warnings)."),
}


def failure_hint(validation: dict[str, Any]) -> str:
    """What to change after a failed validation (the contract's `validation` object as a dict),
    chosen by its cause: a shape or dtype mismatch, a different output count, a model or an
    ONNX Runtime that failed to run, and only then differing numbers (where a tolerance may
    help). "" when nothing failed."""
    failed = [t for t in validation.get("trials") or [] if not t.get("ok")]
    if not failed:
        return ""
    for key, differs in (("shape", "onnx_shape"), ("dtype", "onnx_dtype")):
        field = "shape" if key == "shape" else "dtype"
        for trial in failed:
            for out in trial.get("outputs") or []:
                if out.get(field) is not None and out.get(differs) is not None \
                        and out[field] != out[differs]:
                    detail = (f"output {out['name']!r}: {out[differs]} from ONNX Runtime, "
                              f"{out[field]} from PyTorch")
                    return _HINTS[key].format(detail=detail)
    messages = [t.get("message") or "" for t in failed]
    if any(COUNT_DIFFERS in m and "output(s)" in m for m in messages):
        return _HINTS["count"]
    if any(PYTORCH_FAILED in m for m in messages):
        return _HINTS["pytorch"]
    if any(m.startswith(ORT_FAILED) for m in messages):
        return _HINTS["onnxruntime"]
    if any(not out.get("passed", True) for t in failed for out in t.get("outputs") or []):
        return values_hint(validation) or _HINTS["values"]
    return _HINTS["other"]


# the largest difference, as a fraction of the output's scale, that the hint calls rounding
ROUNDING_FRACTION = 1e-4


def values_hint(validation: dict[str, Any]) -> str:
    """What to change when the numbers differ: the output's largest difference against its
    scale, the tolerance that would pass it (a `validate.atol` or `validate.rtol` to set),
    and whether that is float32 rounding or a real difference; "" when no output says."""
    outputs = [o for o in validation.get("outputs") or []
               if not o.get("passed", True) and o.get("needed_atol") is not None]
    if not outputs:
        return ""
    out = max(outputs, key=lambda o: o.get("scale_ratio") or 0.0)
    rtol, atol = validation.get("rtol"), validation.get("atol")
    ratio, scale = out.get("scale_ratio"), out.get("reference_scale")
    needed_atol = round_up(out["needed_atol"])
    where = (f"Output {out['name']!r} differs by up to {out.get('max_abs_diff') or 0:.3g}"
             + (f", {ratio:.1e} of its scale (max |expected| {scale:.3g})"
                if ratio is not None and scale else ""))
    passing = f"validate.atol = {needed_atol:g} (at rtol {rtol:g})"
    if out.get("needed_rtol") is not None:
        passing += f" or validate.rtol = {round_up(out['needed_rtol']):g} (at atol {atol:g})"
    if ratio is not None and ratio <= ROUNDING_FRACTION:
        return (f"{where}: float32 rounding grown over the model's operations at that scale, "
                f"not a wrong file. It passes with {passing}.")
    return (f"{where}: more than rounding at that scale, so loosening the tolerance would hide "
            f"a real difference (it would pass with {passing}). Look in Warnings for values "
            "baked in at export time, or compare node by node (validate.intermediates = true "
            "or onnx-studio explain) to find where the file starts to differ.")


def round_up(value: float, digits: int = 2) -> float:
    """`value` rounded up to `digits` significant digits (a tolerance that still passes)."""
    if value <= 0 or not math.isfinite(value):
        return value
    exponent = math.floor(math.log10(value)) - digits + 1
    step = 10.0 ** exponent
    return float(f"{math.ceil(value / step) * step:.{digits}g}")
