"""The one error type the engine raises, classified by `kind` as in the JSON contract."""

from __future__ import annotations

import os
import re
import traceback
from pathlib import Path

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
    # the model's own code failed (sys.exit, its own exception): onnx_studio.engine.export.blame
    "model": 1,
    "out_of_memory": 1,  # the model asked for more memory than there is
    # an .onnx file that is readable but unusable: onnx_studio.engine.graph.file_check
    "invalid_file": 1,
    # the job ran past its time limit and was ended (onnx_studio.engine.batch's --timeout)
    "timeout": 1,
}


# Terminal control sequences: CSI (colours such as "\x1b[96m", cursor moves), OSC (titles,
# links; ended by BEL or ST) and the two-byte escapes; then any stray ESC.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]"       # CSI: colours, cursor moves
                   r"|\x1b[ -/]+[0-~]"               # nF: character set choices
                   r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: titles, links
                   r"|\x1b[@-Z\\-_]|\x1b")           # two-byte escapes, a stray ESC


def plain(text: str) -> str:
    """`text` without terminal colour codes and other escape sequences.

    Every text captured from torch or the model (messages, hints, details, warnings, log
    lines) goes through this before it reaches the user: torch colours its own errors.
    """
    return _ANSI.sub("", text) if "\x1b" in text else text


def missing_file_hint(path: str | os.PathLike[str], suffix: str) -> str:
    """What to write instead of a missing file: the `suffix` files its folder holds (the first
    few, each a path that works as given), or that the folder itself is missing."""
    folder = Path(os.path.abspath(path)).parent
    if not folder.is_dir():
        return f"The folder {folder} does not exist either; check the path."
    found = sorted(p for p in folder.iterdir() if p.suffix == suffix and p.is_file())
    if not found:
        return f"{folder} holds no {suffix} file; check the path."
    named = ", ".join(str(folder / p.name) for p in found[:5])
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    return f"{folder} holds: {named}{more}."


def exception_chain(exc: BaseException) -> list[BaseException]:
    """`exc` and every exception behind it (causes, then contexts), outermost first."""
    found: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop(0)
        if current is None or any(current is seen for seen in found):
            continue
        found.append(current)
        todo.append(current.__cause__)
        if not current.__suppress_context__:
            todo.append(current.__context__)
    return found


def chain_text(exc: BaseException) -> str:
    """The full exception chain as text (traceback.format_exception: the causes and the
    contexts, each with its traceback), without colour codes: an error's `details`."""
    return plain("".join(traceback.format_exception(exc)))


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception as one short line for a sentence: its first non-empty line, no final '.'."""
    for line in plain(str(exc)).splitlines():
        line = line.strip().rstrip(".")
        if line:
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return type(exc).__name__


class StudioError(Exception):
    """A failure the user can act on: one sentence, a hint, and the details behind a toggle.

    Its JSON (the contract's `error` object) is
    `onnx_studio.engine.protocol.Error.from_exception(exc)`.
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
        message, hint = plain(message), plain(hint)
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.hint = hint
        self.unsupported_ops = list(unsupported_ops or [])
        self.details = details  # the exception chain or exporter output; shown on request
        # A kind's usual status, unless this case says otherwise (an output path under a
        # regular file is a wrong request, while a full disk during the write is a failure).
        self.exit_code = KINDS[kind] if exit_code is None else exit_code

    @property
    def details(self) -> str:
        """The full cause: as given, else this error's own exception chain when it was raised
        while handling another exception (`raise StudioError(...) from exc`, or inside an
        `except` block without `from None`); "" when there is no cause to show."""
        if self._details:
            return self._details
        cause = self.__cause__ or (None if self.__suppress_context__ else self.__context__)
        return chain_text(cause) if cause is not None else ""

    @details.setter
    def details(self, value: str) -> None:
        self._details = plain(value or "")
