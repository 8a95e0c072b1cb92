"""The parts the JSON documents are built of: a graph's inputs and outputs (`Graph`,
`TensorInfo`), a warning (`WarningItem`) and the contract's `error` object (`Error`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from onnx_studio.engine.errors import KINDS, StudioError
from onnx_studio.engine.protocol.convert import LOCAL, OMIT, ProtocolError, Wire

# ---------------------------------------------------------------------------- graph


@dataclass(kw_only=True)
class TensorInfo(Wire):
    """One graph input or output: its name, element type and shape (None: unknown rank)."""

    name: str
    dtype: str
    shape: list[int | str] | None  # a symbolic dimension is its name, an unknown one "?"


@dataclass(kw_only=True)
class Graph(Wire):
    """The `graph` object: node count, inputs (initializers excluded) and outputs."""

    nodes: int
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]

    @classmethod
    def from_summary(cls, summary: dict[str, Any]) -> Graph:
        """From onnx_studio.engine.graph.summarize's dict (its `opset_imports` is not part of
        `graph`)."""
        return cls.from_dict({k: summary[k] for k in ("nodes", "inputs", "outputs")})


# ---------------------------------------------------------------------------- warnings, errors


@dataclass(kw_only=True)
class WarningItem(Wire):
    """A warning of the export or the validation; `source` is "file.py:LINE" or ""."""

    category: str
    message: str
    source: str = ""
    hint: str | None = field(default=None, metadata=OMIT)
    details: str | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class Error(Wire):
    """The contract's `error` object: what failed (`kind`), one sentence, what to change.

    `details` (the full cause) is written when set: the CLI document carries it, as the
    contract says; on the worker's wire it travels beside the error as `details` today
    (`ErrorEvent`, `ExportResult`), so there it is None and left out.
    """

    kind: str
    message: str
    hint: str = ""
    details: str | None = field(default=None, metadata=OMIT)
    unsupported_ops: list[str] = field(default_factory=list)
    # a StudioError's own exit status, when it differs from its kind's (not on the wire)
    exit_code: int | None = field(default=None, compare=False, metadata=LOCAL)

    @classmethod
    def from_exception(cls, exc: StudioError | ProtocolError, *, with_details: bool = True
                       ) -> Error:
        """The error object of a StudioError (or a ProtocolError: kind "worker_protocol")."""
        if isinstance(exc, ProtocolError):
            return cls(kind=exc.kind, message=exc.message, hint=exc.hint,
                       details="" if with_details else None)
        return cls(kind=exc.kind, message=exc.message, hint=exc.hint,
                   details=exc.details if with_details else None,
                   unsupported_ops=list(exc.unsupported_ops), exit_code=exc.exit_code)

    def to_exception(self, details: str = "") -> StudioError:
        """A StudioError to raise; a kind this engine does not know keeps its name, status 1."""
        known_kind = self.kind in KINDS
        exc = StudioError(self.kind if known_kind else "export", self.message, self.hint,
                          self.unsupported_ops, self.details or details,
                          exit_code=self.exit_code)
        exc.kind = self.kind
        return exc

    def exit_status(self) -> int:
        """The CLI's exit status for this error: 2 a wrong request, 1 a failure."""
        return self.exit_code if self.exit_code is not None else KINDS.get(self.kind, 1)
