"""Whose fault a failure in the model's own code is, and the sentence that says so.

The model's forward() runs three times in a job: once before the export (to check the
inputs), inside the exporter's tracing, and in every validation trial. When it raises, the
exception says what happened:

- `SystemExit`: the model's code called sys.exit(); the sentence names the call's line;
- out of memory (`MemoryError`, or torch's "can't allocate memory: you tried to allocate N
  bytes" / "CUDA out of memory. Tried to allocate 20.00 GiB"): the size asked, in human units;
- a missing or unexpected argument (or a transformers model's "You have to specify X"): the
  argument named, a wrong request (onnx_studio.engine.export.causes.argument_cause);
- a shape or dtype error (mat1 and mat2 shapes, size mismatch, expected scalar type, a wrong
  number of arguments, ...): the example inputs do not fit forward(), a wrong request;
- anything else: the model's own error, by its type, message and the line of the model's file
  that raised it.

`model_error` turns the exception into the StudioError the user reads. Nothing here imports
torch.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

from onnx_studio.engine.errors import StudioError, chain_text, exception_chain, one_line
from onnx_studio.engine.export.causes import argument_cause

INPUTS_HINT = "Check the number, order, shapes and dtypes of the inputs against forward()."

_CPU_ALLOC = re.compile(r"can't allocate memory: you tried to allocate (\d+) bytes")
_GPU_ALLOC = re.compile(r"out of memory\. Tried to allocate ([\d.]+ ?[KMGTP]?i?B)", re.I)

# Messages torch (and Python's call machinery) gives when the inputs do not fit the model:
# their shapes, their dtypes, their number or their device.
_INPUT_MISFIT = re.compile(
    r"mat1 and mat2 shapes cannot be multiplied|size mismatch|shapes? .{0,40}cannot be "
    r"(?:multiplied|broadcast)|The size of tensor a \(\d+\) must match|must match the size|"
    r"Sizes of tensors must match|Tensors must have same number of dimensions|"
    r"is invalid for input of size|Expected \d+D (?:\(unbatched\) )?or \d+D|"
    r"expected input\[.*\] to have \d+ channels|Dimension out of range|"
    r"Expected (?:\w+ )?(?:tensor|input)\b.{0,80}\b(?:size|shape|dim|dimension)|"
    r"expected scalar type|expected .{0,30}\bdtype\b|Input type \(.*\) and weight type|"
    r"found dtype \w+ but expected|result type \w+ can't be cast|to have one of the following "
    r"scalar types|must have the same dtype|not implemented for '\w+'|"
    r"Expected all tensors to be on the same device|index out of range in self|"
    r"missing \d+ required positional argument|takes \d+ positional arguments? but \d+ "
    r"(?:were|was) given|got an unexpected keyword argument", re.I)


def model_error(exc: BaseException, *, user_file: Path | str | None = None,
                given: str = "", where: str = "forward()") -> StudioError:
    """The StudioError for an exception raised by running the model (`where` names what ran).

    `given` describes the example inputs ("x[2, 3]") for the inputs sentence; `user_file` is
    the model's source file, whose innermost frame names the line (else the innermost frame
    outside torch and this engine). `details` is the whole exception chain.
    """
    details = chain_text(exc)
    chain = exception_chain(exc)
    line, code = user_frame(exc, user_file)
    at = f" at {line}" if line else ""
    shown = f" (`{code}`)" if code else ""
    exiting = next((e for e in chain if isinstance(e, SystemExit)), None)
    if exiting is not None:
        return StudioError(
            "model", f"{exit_sentence(exiting, user_file, where)}.",
            "Remove the sys.exit() call from the model's code (raise an exception if forward() "
            "must refuse an input); an exported model cannot end its caller.", details=details)
    asked = memory_asked(exc)
    if asked is not None:
        size = f"{human_bytes(asked)} at once" if isinstance(asked, int) else f"{asked} at once"
        what = f"it asked for {size}" if asked else "a MemoryError"
        return StudioError(
            "out_of_memory", f"{where} ran out of memory{at}{shown}: {what}.",
            "Use smaller example inputs (batch 1, a shorter sequence), check that line for a "
            "size computed wrong, or export on a machine with more memory.", details=details)
    argument = argument_cause(exc)
    if argument is not None:  # a missing or unexpected argument, named
        return StudioError("inputs", f"The model's {argument.message}", argument.hint,
                           details=details)
    if any(_INPUT_MISFIT.search(str(e)) for e in chain):
        given_text = f" ({given})" if given else ""
        return StudioError(
            "inputs", f"The model's {where} fails on the example inputs{given_text}: "
            f"{one_line(exc)}.", INPUTS_HINT, details=details)
    return StudioError(
        "model", f"The model's {where} raised {type(exc).__name__}{at}: {one_line(exc)}.",
        f"The error comes from the model's own code{at}{shown}: fix it there, or give inputs "
        "it accepts; the details hold the traceback.", details=details)


def is_model_fault(exc: BaseException) -> bool:
    """Whether an exporter's exception is the model's own end (sys.exit) or memory running
    out, which no exporter option changes."""
    return any(isinstance(e, SystemExit) for e in exception_chain(exc)) \
        or memory_asked(exc) is not None


def memory_asked(exc: BaseException) -> int | str | None:
    """The bytes an out-of-memory error asked for (a CUDA message's own text such as
    "20.00 GiB"; 0 when a MemoryError does not say); None when `exc` is no memory error."""
    for e in exception_chain(exc):
        text = str(e)
        cpu = _CPU_ALLOC.search(text)
        if cpu:
            return int(cpu[1])
        gpu = _GPU_ALLOC.search(text)
        if gpu:
            return gpu[1]
    if any(isinstance(e, MemoryError) for e in exception_chain(exc)):
        return 0
    return None


def human_bytes(n: int) -> str:
    """4398046511104 -> "4.0 TiB"."""
    size = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{n} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} PiB"  # pragma: no cover - the loop returns at TiB


def exit_sentence(exc: SystemExit, user_file: Path | str | None = None,
                  where: str = "forward()") -> str:
    """"forward() called sys.exit(3) at net.py:12": where the model's code ended the process."""
    code = exc.code
    shown = "" if code is None else repr(code) if isinstance(code, str) else str(code)
    line, _ = user_frame(exc, user_file)
    return f"{where} called sys.exit({shown})" + (f" at {line}" if line else "")


def user_frame(exc: BaseException, user_file: Path | str | None = None) -> tuple[str, str]:
    """("net.py:41", "return self.lin(x)"): the innermost frame of the chain in the model's
    file when there is one, else the innermost frame outside torch, onnx and this engine;
    ("", "") when every frame is library code."""
    frames = [frame for e in exception_chain(exc)
              for frame in traceback.extract_tb(e.__traceback__)]
    own: list[traceback.FrameSummary] = []
    if user_file is not None:
        wanted = _resolved(str(user_file))
        own = [f for f in frames if _resolved(f.filename) == wanted]
    candidates = own or [f for f in frames if not _library_frame(f.filename)]
    if not candidates:
        return "", ""
    last = candidates[-1]
    return f"{Path(last.filename).name}:{last.lineno}", (last.line or "").strip()


_ENGINE_DIR = Path(__file__).resolve().parent.parent


def _library_frame(filename: str) -> bool:
    if filename.startswith("<"):
        return True
    parts = Path(filename).parts
    return ("site-packages" in parts or "dist-packages" in parts
            or any(p in ("torch", "onnx", "onnxscript", "functorch") for p in parts)
            or Path(_resolved(filename)).is_relative_to(_ENGINE_DIR))


def _resolved(name: str) -> str:
    try:
        return str(Path(name).resolve())
    except OSError:
        return name
