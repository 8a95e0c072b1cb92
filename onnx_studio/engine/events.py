"""Plain callbacks through which long engine calls report progress (no Qt types).

Sub-steps map into a part of the overall range with `Events.part`, as Orange's
`wrap_callback` does, so an export inside an export-and-validate run still moves one bar.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def _ignore(*_: Any) -> None:
    return None


@dataclass
class Events:
    """Callbacks for progress (fraction 0..1, stage text), log lines and warnings."""

    progress: Callable[[float, str], None] = field(default=_ignore)
    log: Callable[[str], None] = field(default=_ignore)
    warning: Callable[[dict[str, Any]], None] = field(default=_ignore)

    def part(self, start: float, end: float) -> Events:
        """Events whose progress 0..1 lands in [start, end] of this one's range."""
        outer = self.progress

        def progress(fraction: float, stage: str) -> None:
            outer(start + (end - start) * min(max(fraction, 0.0), 1.0), stage)

        return Events(progress=progress, log=self.log, warning=self.warning)
