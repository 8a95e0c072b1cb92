"""Export parts with some dimensions fixed at a size (a recipe's `[dims] NAME = { size = N }`,
`--static-dim NAME=N`): out of the dynamic axes, and held at that size in every input the
part makes, so the export and every validation trial run there.

Which argument of a part's input maker (batch, sequence, past) a dimension follows is found by
making inputs twice at distinct sizes, so it holds for every kind of part without a table of
names; a dimension that follows none of them (a sum of two, a size the model fixes) is refused
naming the ones to fix instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.source.hf.wrappers import ExportPart, Inputs

# distinct sizes for (batch, sequence, past), twice: a dimension that takes the same
# argument's size both times follows it (a size held elsewhere cannot match both)
_PROBES = ((3, 5, 7), (4, 6, 9))


def _dims(part: ExportPart) -> set[str]:
    return {dim for axes in part.dynamic.values() for dim in axes.values()}


def _sizes_of(inputs: Inputs, part: ExportPart) -> dict[str, int]:
    """Each dynamic dimension's size in `inputs`."""
    return {dim: int(inputs[name].shape[axis]) for name, axes in part.dynamic.items()
            if name in inputs for axis, dim in axes.items()}


def _roles(part: ExportPart) -> dict[str, int]:
    """Dimension name -> the maker argument (0 batch, 1 sequence, 2 past) it follows."""
    first, second = (_sizes_of(part.make_inputs(0, *probe), part) for probe in _PROBES)
    return {dim: role for dim in first for role in range(3)
            if first[dim] == _PROBES[0][role] and second.get(dim) == _PROBES[1][role]}


def with_static(parts: list[ExportPart], static: dict[str, int]) -> list[ExportPart]:
    """`parts` with the `static` dimensions fixed; a name no part has is kind `recipe`."""
    known = set().union(*(_dims(part) for part in parts)) if parts else set()
    unknown = sorted(set(static) - known)
    if unknown:
        raise StudioError(
            "recipe", f"No input of this export has a dimension called {unknown[0]!r}; its "
            f"dimensions are {', '.join(sorted(known)) or 'none'}.",
            "Name one of those with --static-dim DIM=SIZE (a recipe's [dims] DIM = "
            "{ size = SIZE }).", exit_code=2)
    return [_fixed(part, static) for part in parts]


def _fixed(part: ExportPart, static: dict[str, int]) -> ExportPart:
    mine = {dim: size for dim, size in static.items() if dim in _dims(part)}
    if not mine:
        return part
    roles = _roles(part)
    held: dict[int, int] = {}
    for dim, size in mine.items():
        if dim not in roles:
            raise StudioError(
                "recipe", f"The dimension {dim!r} of {part.file} follows other sizes (a sum "
                "of two, or a size the model fixes), so it cannot be fixed by itself.",
                "Fix the dimensions it is made of instead: "
                f"{', '.join(sorted(d for d in roles if d != dim)) or 'none'}.", exit_code=2)
        held[roles[dim]] = size
    # the sizes the example inputs were made at, then the held ones in their place
    at = [2, 1, 0]
    for dim, size in _sizes_of(part.inputs, part).items():
        if dim in roles:
            at[roles[dim]] = size
    make = _holding(part.make_inputs, held)
    # every dimension that follows a held argument is that size now, not only the named one
    dynamic = {name: {axis: dim for axis, dim in axes.items() if roles.get(dim) not in held}
               for name, axes in part.dynamic.items()}
    return dataclasses.replace(part, inputs=make(0, *at), dynamic=dynamic, make_inputs=make)


def _holding(make: Callable[[int, int, int, int], Inputs],
             held: dict[int, int]) -> Callable[[int, int, int, int], Inputs]:
    def made(seed: int, batch: int, sequence: int, past: int) -> Inputs:
        sizes = [held.get(i, size) for i, size in enumerate((batch, sequence, past))]
        return make(seed, *sizes)
    return made


__all__ = ["with_static"]
