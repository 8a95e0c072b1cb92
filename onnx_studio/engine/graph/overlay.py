"""Overlays: values per ONNX node computed on one file (a profile, a validation's per-node
error), each tied to that file as it was, and the `Scale` that maps them onto a colour ramp.

An overlay colours a graph only while its own file is shown: another file (or the same path
rewritten by a later export) shows none of it. Qt-free.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Scale:
    """How overlay values map onto the colour ramp: ``lo`` is its first colour, ``hi`` its
    last (values beyond are clamped), ``log`` spaces it by decades, and ``mark`` is a reference
    value the legend ticks (e.g. 1.0 for "at tolerance" on an error/tolerance overlay).

    A fixed Scale gives an absolute colour (the same error has the same colour in every
    graph); `Scale.of_values` fits the ramp to the values shown (relative colours)."""

    lo: float
    hi: float
    log: bool = False
    mark: float | None = None

    @classmethod
    def of_values(cls, values: Iterable[float]) -> Scale:
        """A ramp from the smallest to the largest finite value; log when positive values
        span more than three decades."""
        finite = [v for v in values if math.isfinite(v)]
        lo = min(finite) if finite else 0.0
        hi = max(finite) if finite else 1.0
        return cls(lo, hi, bool(finite) and lo > 0 and hi / lo > 1e3)

    def __call__(self, v: float) -> float:
        """Position of a value on the ramp, in [0, 1] (NaN for NaN, 1 for +inf)."""
        if v != v:
            return float("nan")
        if v == math.inf:
            return 1.0
        if v == -math.inf:
            return 0.0
        if self.hi <= self.lo:
            return 0.5
        if self.log:
            if v <= 0 or self.lo <= 0:
                return 0.0
            lo, hi = math.log10(self.lo), math.log10(self.hi)
            return min(1.0, max(0.0, (math.log10(v) - lo) / (hi - lo)))
        return min(1.0, max(0.0, (v - self.lo) / (self.hi - self.lo)))


FileState = tuple[int, int]  # (size, mtime_ns): the file as it was


def file_state(path: Path) -> FileState | None:
    """The size and modification time of `path` now; None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def same_file(a: Path, b: Path) -> bool:
    """True when two paths name one file (resolved; a missing file compares by path)."""
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


@dataclass(frozen=True)
class Overlay:
    """Values per ONNX node name, computed on `file` when it was `state`: the browser draws
    them only while that file, unchanged, is shown. `source` names what computed them
    ("profile", "validation"): a newer overlay from the same source replaces the older one."""

    file: Path
    values: Mapping[str, float]
    label: str
    source: str = ""
    scale: Scale | None = None  # None: fitted to the values (`Scale.of_values`)
    state: FileState | None = field(default=None, compare=False)

    @classmethod
    def on(cls, file: Path, values: Mapping[str, float], label: str, *, source: str = "",
           scale: Scale | None = None) -> Overlay:
        """An overlay of `file` as it is on disk now."""
        return cls(Path(file), dict(values), label, source, scale, file_state(Path(file)))

    @property
    def ramp(self) -> Scale:
        """The scale the values are coloured on (the given one, or fitted to them)."""
        return self.scale if self.scale is not None else Scale.of_values(self.values.values())

    def belongs_to(self, path: Path | None, state: FileState | None) -> bool:
        """True when `path` (as it was when read: `state`) is the file these values were
        computed on: the same file, not rewritten since."""
        if path is None or not same_file(self.file, path):
            return False
        return self.state is None or state is None or self.state == state
