"""The sizes an export traces its dynamic dimensions at: the example's, except that an example
size of 0 or 1 becomes one torch does not specialise (`trace_sizes`), with the sentence that
says so (`trace_size_warning`).

torch specialises sizes 0 and 1 while it traces: a dynamic batch traced at 1 either comes out
fixed at 1 in the file or trips a guard (`batch <= 2`, "Not all values of batch ... satisfy the
generated guard") in models that broadcast, squeeze or branch on it. Traced at 2 (or the
dimension's min when larger), the same model exports a batch that varies. The inputs are drawn
from the same fills and seed at that size, and validation still runs the user's own size (its
export-inputs trial), so a file that cannot run at 1 is caught there.
"""

from __future__ import annotations

from onnx_studio.engine.recipe import Recipe

SPECIALISED = (0, 1)  # the sizes torch's tracer turns into constants
TRACE_SIZE = 2  # the smallest size it keeps symbolic


def trace_sizes(recipe: Recipe) -> dict[str, int]:
    """{dimension: size to trace at} for every dynamic dimension whose example size is 0 or 1;
    empty when none is. A dimension carried by an input read from a file keeps the file's
    size; one whose [dims] max is below 2 keeps its example size (the user asked for it)."""
    from_files = {name for spec in recipe.inputs if spec.fill == "file"
                  for name in spec.dynamic.values()}
    out: dict[str, int] = {}
    for name, places in recipe.dynamic_dims().items():
        if name in from_files:
            continue
        size = _example_size(recipe, places)
        if size is None or size not in SPECIALISED:
            continue
        bounds = recipe.dims.get(name)
        low = bounds.min if bounds is not None and bounds.min is not None else 0
        high = bounds.max if bounds is not None else None
        wanted = max(TRACE_SIZE, low)
        if high is not None and wanted > high:
            continue  # max = 1 (or 0): a size of 1 is what the user asked for
        out[name] = wanted
    return out


def _example_size(recipe: Recipe, places: list[tuple[str, int]]) -> int | None:
    by_name = {spec.name: spec for spec in recipe.inputs}
    for input_name, axis in places:
        shape = by_name[input_name].shape
        if -len(shape) <= axis < len(shape):
            return int(shape[axis])
    return None


def trace_size_warning(recipe: Recipe, sizes: dict[str, int]) -> str:
    """One sentence for every dimension `trace_sizes` moved ("" when none)."""
    if not sizes:
        return ""
    examples = {name: _example_size(recipe, places) for name, places
                in recipe.dynamic_dims().items() if name in sizes}
    moved = ", ".join(f"{name!r} at {size} (the example has {examples[name]})"
                      for name, size in sizes.items())
    plural = "s" if len(sizes) > 1 else ""
    return (f"The export traced the dynamic dimension{plural} {moved}, with inputs drawn from "
            "the same fills and seed: torch fixes a size of 0 or 1 while it traces, which "
            "would make the axis static or fail the export. Validation runs the example's "
            "size as well.")
