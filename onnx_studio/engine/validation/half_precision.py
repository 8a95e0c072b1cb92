"""What ONNX Runtime's CPU provider can validate of a half-precision export.

A Hugging Face checkpoint saved in float16 or bfloat16 loads and exports in that type (no
silent upcast of every weight to float32; `--model-kwarg dtype=float32` asks for one).

- float16: the CPU provider runs the file (float16 kernels for most operators, the rest cast
  by ONNX Runtime), compared with the eager model in float16. float16 keeps 11 bits (a relative
  step of about 1e-3), so two correct implementations differ by more than the float32 defaults
  allow: unless the recipe names other tolerances, the comparison uses `FLOAT16_TOLERANCES`,
  and says so.
- bfloat16: the CPU provider has no bfloat16 kernel for most operators (Where, MatMul, ...), so
  the file cannot run here: the validation is inconclusive, saying why, and how to validate
  (export in float32 to validate on the CPU, or a GPU provider).
"""

from __future__ import annotations

from typing import Any

DEFAULT_TOLERANCES = (1e-3, 1e-5)  # the recipe's (onnx_studio.engine.recipe.spec Validate)
FLOAT16_TOLERANCES = (1e-2, 5e-2)
FLOAT32_HINT = ("To validate on the CPU, export in float32: --model-kwarg dtype=float32 (a "
                "recipe's model.kwargs dtype = \"float32\"); the file then holds float32 "
                "weights, twice the size.")


def weights_dtype(model: Any) -> str | None:
    """The floating type of the model's weights ("float32", "float16", "bfloat16"), None for
    a model without floating weights."""
    for parameter in model.parameters():
        if parameter.is_floating_point():
            return str(parameter.dtype).removeprefix("torch.")
    return None


def cpu_cannot_run(dtype: str | None, rtol: float, atol: float) -> dict[str, Any] | None:
    """The validation dict of an export ONNX Runtime's CPU provider cannot run (bfloat16):
    inconclusive, saying why and how to validate; None when it can run it."""
    if dtype != "bfloat16":
        return None
    message = ("Not validated: the model is bfloat16 and ONNX Runtime's CPU provider has no "
               "bfloat16 kernel for most operators, so the files cannot run here.")
    hint = f"{FLOAT32_HINT} Or validate with a GPU provider that runs bfloat16 (CUDA)."
    warning = {"category": "Verdict", "message": message, "hint": hint}
    return {"ok": True, "rtol": rtol, "atol": atol, "outputs": [], "trials": [],
            "warnings": [warning], "conclusive": False, "message": message, "hint": hint}


def tolerances(dtype: str | None, rtol: float, atol: float) -> tuple[float, float, str | None]:
    """(rtol, atol) to compare a file of `dtype` at, and the sentence saying they were
    widened (None when the recipe's are kept): float16 at FLOAT16_TOLERANCES unless the
    recipe names its own."""
    if dtype != "float16" or (rtol, atol) != DEFAULT_TOLERANCES:
        return rtol, atol, None
    rtol, atol = FLOAT16_TOLERANCES
    return rtol, atol, (f"The model is float16: compared with the eager model in float16 at "
                        f"rtol={rtol:g}, atol={atol:g} (float16's rounding; the float32 "
                        f"defaults would fail a correct file). Set validate.rtol/atol to "
                        "judge at others, or export in float32 (--model-kwarg "
                        "dtype=float32) to judge at the float32 defaults.")
