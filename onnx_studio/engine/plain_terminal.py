"""A worker's terminal made plain: nothing prompts, nothing is coloured, nothing draws a bar.

The worker's standard input is the protocol's alone: `detach_stdin` moves it to a private
descriptor and puts an empty stream in its place, so a library that asks a question (transformers'
"Do you wish to run the custom code? [y/N]") reads end-of-file at once instead of waiting
forever. `quiet_libraries` sets the environment the libraries read (NO_COLOR, no Hugging Face or
tqdm progress bars, transformers' verbosity) and puts a writer in front of standard error that
strips terminal escape codes from whatever Python code writes there (transformers colours its
load report whether or not it writes to a terminal).
"""

from __future__ import annotations

import io
import os
import sys
from typing import IO, Any

from onnx_studio.engine.errors import plain

QUIET_ENVIRONMENT = {
    "NO_COLOR": "1",                       # https://no-color.org: every library that honours it
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",   # huggingface_hub's and transformers' bars
    "TQDM_DISABLE": "1",                   # tqdm's own switch (any other library's bars)
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "TRANSFORMERS_VERBOSITY": "warning",   # its load report (a warning) stays, stripped of colour
}


class PlainWriter(io.TextIOBase):
    """A text stream that writes `stream`'s text without terminal escape codes; never a tty."""

    def __init__(self, stream: IO[str]) -> None:
        super().__init__()
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(plain(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", "utf-8") or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._stream, "errors", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def quiet_libraries() -> None:
    """Set the libraries' quiet environment and strip escape codes from standard error."""
    os.environ.update(QUIET_ENVIRONMENT)
    if not isinstance(sys.stderr, PlainWriter) and sys.stderr is not None:
        sys.stderr = PlainWriter(sys.stderr)


def detach_stdin() -> IO[str]:
    """The protocol's input (a private copy of descriptor 0); descriptor 0 and sys.stdin are
    then an empty stream, so nothing the job runs can wait on a prompt."""
    protocol_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    empty = os.open(os.devnull, os.O_RDONLY)
    os.dup2(empty, 0)
    os.close(empty)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - the process's stdin for good
    return protocol_in
