"""The result of an export (and its validation), shaped exactly as the CLI's JSON contract."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.errors import StudioError


@dataclass
class ExportReport:
    ok: bool = False
    output: str | None = None
    exporter: str | None = None
    opset: int | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    # {"nodes": N, "inputs": [{"name", "dtype", "shape"}], "outputs": [...]}
    graph: dict[str, Any] | None = None
    # [{"category", "message", "source"}]; source is "file.py:LINE" or ""
    warnings: list[dict[str, Any]] = field(default_factory=list)
    error: StudioError | None = None
    # the `validation` object of the contract, or None when validation did not run
    validation: dict[str, Any] | None = None
    # extra facts for the window's summary; not part of the JSON contract
    extra: dict[str, Any] = field(default_factory=dict)

    def fail(self, error: StudioError) -> ExportReport:
        self.ok = False
        self.error = error
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "output": self.output,
            "exporter": self.exporter,
            "opset": self.opset,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "graph": self.graph,
            "warnings": self.warnings,
            "error": self.error.to_json() if self.error else None,
            "validation": self.validation,
        }
