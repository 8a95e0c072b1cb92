"""The one error type the engine raises, classified by `kind` as in the JSON contract."""

from __future__ import annotations

# error.kind values of the JSON contract, and the exit status each one maps to:
# 2 when the request itself is wrong, 1 when the export or the validation failed.
KINDS = {
    "recipe": 2,
    "source": 2,
    "inputs": 2,
    "unsupported_operator": 1,
    "export": 1,
    "write": 1,
    "validation": 1,
    "cancelled": 1,
    "worker_crashed": 1,
    "worker_protocol": 1,  # a line between the window, the CLI and the worker that does not fit
}


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception as one short line for a sentence: its first non-empty line, no final '.'."""
    for line in str(exc).splitlines():
        line = line.strip().rstrip(".")
        if line:
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return type(exc).__name__


class StudioError(Exception):
    """A failure the user can act on: one sentence, a hint, and the details behind a toggle.

    Its JSON (the contract's `error` object) is `engine.protocol.Error.from_exception(exc)`.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        hint: str = "",
        unsupported_ops: list[str] | None = None,
        details: str = "",
        exit_code: int | None = None,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.hint = hint
        self.unsupported_ops = list(unsupported_ops or [])
        self.details = details  # traceback or exporter output; shown on request only
        # A kind's usual status, unless this case says otherwise (an output path under a
        # regular file is a wrong request, while a full disk during the write is a failure).
        self.exit_code = KINDS[kind] if exit_code is None else exit_code
