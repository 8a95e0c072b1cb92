"""Which argument a failed forward() call is about: a missing or unexpected argument (Python's
own TypeErrors) or the ValueError a transformers model raises for an input it was not given
("You have to specify pixel_values"). Read from the whole exception chain; no torch."""

from __future__ import annotations

import re
from dataclasses import dataclass

from onnx_studio.engine.errors import exception_chain, plain

_UNEXPECTED = re.compile(r"got an unexpected keyword argument '(?P<name>\w+)'")
# Python's call ("missing 1 required positional argument: 'y'") and inspect's bind ("missing a
# required argument: 'y'", which torch.export uses)
_MISSING = re.compile(r"missing (?:\d+|a) required (?:positional |keyword-only )?arguments?: "
                      r"'(?P<name>\w+)'")
_SPECIFY = re.compile(r"You (?:have|need|must) to specify (?:either |exactly one of |one of )?"
                      r"(?:the )?`?(?P<name>[a-z_]\w*)`?")
_CLASS_PREFIX = re.compile(r"^<class '[\w.]+'>: ")


@dataclass(frozen=True)
class ArgumentError:
    """forward() was not given an argument it needs (`missing`), or given one it does not
    take; `message` is the error's own line."""

    name: str
    missing: bool
    message: str


def argument_error(exc: BaseException) -> ArgumentError | None:
    """The argument error anywhere in the exception chain (or in a torch.onnx wrapper's summary
    of it); None when the failure is something else."""
    for e in exception_chain(exc):
        text = plain(str(e))
        for pattern, missing in ((_UNEXPECTED, False), (_MISSING, True), (_SPECIFY, True)):
            found = pattern.search(text)
            if found is None:
                continue
            # "You have to specify" is the model's refusal only as a ValueError
            if pattern is _SPECIFY and not isinstance(e, ValueError) and "ValueError" not in text:
                continue
            line = next((ln.strip() for ln in text.splitlines() if found[0] in ln), found[0])
            return ArgumentError(found["name"], missing, _CLASS_PREFIX.sub("", line).rstrip("."))
    return None
