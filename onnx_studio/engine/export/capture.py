"""What torch says while it exports, turned into the studio's words: the dynamo exporter's
stage lines become progress, its prints and loggers' records log lines, and its warnings the
report's warnings (located in the user's file where possible, torch's own noise left out).
"""

from __future__ import annotations

import contextlib
import io
import logging
import traceback
import warnings
from collections.abc import Iterator
from typing import Any

from onnx_studio.engine import torch_private
from onnx_studio.engine.errors import plain
from onnx_studio.engine.events import Events
from onnx_studio.engine.export import diagnose
from onnx_studio.engine.protocol import ExportReport, WarningItem

__all__ = ["captured", "warn"]

# The dynamo exporter prints its stages as "[torch.onnx] <stage>..." lines; each becomes a step
# of the progress bar (fraction of the export part).
_DYNAMO_STAGES = {
    "Obtain model graph": 0.05,
    "Run decompositions": 0.45,
    "Translate the graph into ONNX": 0.6,
    "Optimize the ONNX graph": 0.8,
}
# The loggers whose records become the export's log lines.
_LOGGERS = ("torch", "onnxscript", "onnx_ir")
# Warnings that speak to us (the tool), not to the user about their model.
_NOISE = (
    "legacy TorchScript-based ONNX export",
    "isinstance(treespec, LeafSpec)",
    "Exporting a model while it is in training mode",
    "torch.jit.trace",  # the deprecation banners of tracing and scripting themselves
    "is deprecated. Please switch to `torch.compile`",
    "The feature will be removed. Please remove usage of this function",
    "skipping _decide_input_format",  # the TorchScript exporter given a ScriptModule, always
)
# torch files whose TracerWarnings come from torch's own argument checks (rnn.py: "is the
# hidden state the expected size?"), which only raise and never change the traced graph
_NOISE_FILES = ("torch/nn/modules/rnn.py",)
# dynamo's notice that two dynamic axes are one: "# The axis name: n will not be used, since
# it shares the same shape constraints with another axis: batch." Same names: nothing to do;
# different names: a DynamicShape warning says which name the file keeps.
_SHARED_AXIS = ("The axis name: ", " will not be used, since it shares the same shape "
                "constraints with another axis: ")
# the C++ location torch appends to some notices, a path on torch's build machine
_TRIGGERED = " (Triggered internally at "


def warn(report: ExportReport, events: Events, item: dict[str, Any]) -> None:
    """A warning for the report (typed, as it crosses to the user) and for the events now;
    its texts without colour codes."""
    item = {k: plain(v) if isinstance(v, str) else v for k, v in item.items()}
    report.warnings.append(WarningItem.from_dict(item))
    events.warning(item)


class _LineWriter(io.TextIOBase):
    """A stdout stand-in that hands complete lines to a callback."""

    def __init__(self, on_line: Any) -> None:
        self.on_line = on_line
        self.buffer_text = ""

    def write(self, text: str) -> int:
        self.buffer_text += text
        *lines, self.buffer_text = self.buffer_text.split("\n")
        for line in lines:
            if line.strip():
                self.on_line(line.rstrip())
        return len(text)

    def flush(self) -> None:
        if self.buffer_text.strip():
            self.on_line(self.buffer_text.rstrip())
        self.buffer_text = ""


def _not_noise(record: logging.LogRecord) -> bool:
    # "torchvision is not installed. Skipping torchvision::nms": noise without torchvision
    return "is not installed. Skipping" not in record.getMessage()


class _LogForwarder(logging.Handler):
    def __init__(self, events: Events) -> None:
        super().__init__(logging.INFO)
        self.events = events

    def emit(self, record: logging.LogRecord) -> None:
        self.events.log(plain(f"{record.levelname.lower()}: {record.getMessage()}"))


@contextlib.contextmanager
def captured(events: Events, report: ExportReport, loaded: Any) -> Iterator[None]:
    """Exporter stages become progress, its prints and logs become log lines, its warnings
    become report warnings located in the user's file where possible."""

    def on_line(line: str) -> None:
        line = plain(line)
        events.log(line)
        if line.startswith("[torch.onnx] "):
            stage = line.removeprefix("[torch.onnx] ").rstrip(" .✅❌")
            for name, fraction in _DYNAMO_STAGES.items():
                if stage.startswith(name):
                    events.progress(fraction, name)

    writer = _LineWriter(on_line)
    handler = _LogForwarder(events)
    # torch's and the ONNX optimizer's loggers (onnxscript's "Evaluation failed: ..." when a
    # constant does not fold) become log lines, not text on the terminal beside the progress
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    for logger in loggers:
        logger.addHandler(handler)
    registration = logging.getLogger(torch_private.DYNAMO_REGISTRATION_LOGGER)
    registration.addFilter(_not_noise)
    caught: list[tuple[warnings.WarningMessage, str]] = []

    def record(message: Warning | str, category: type[Warning], filename: str, lineno: int,
               file: Any = None, line: str | None = None) -> None:
        """catch_warnings(record=True)'s list, with where each warning was raised."""
        w = warnings.WarningMessage(message, category, filename, lineno, file, line)
        noise = any(text in str(message) for text in _NOISE)
        caught.append((w, "" if noise else _warning_stack()))

    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(writer):
            warnings.simplefilter("always")
            warnings.showwarning = record  # catch_warnings puts the previous one back
            try:
                yield
            finally:
                writer.flush()
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        registration.removeFilter(_not_noise)
        for item in _user_warnings(caught, loaded):
            warn(report, events, item)


def _warning_stack(limit: int = 12) -> str:
    """Where a warning was raised, innermost call last: the frames of the model, torch and
    the libraries, without the warnings machinery and this module's own frames."""
    frames = [f for f in traceback.extract_stack()
              if not f.filename.endswith(("warnings.py", "contextlib.py"))
              and "/engine/" not in f.filename.replace("\\", "/")]
    if not frames:
        return ""
    return "Raised at (innermost call last):\n" + "".join(
        traceback.format_list(frames[-limit:])).rstrip()


def _folding_arithmetic(w: warnings.WarningMessage, stack: str) -> bool:
    """NumPy's floating-point notices ("divide by zero encountered in log") raised while the
    dynamo exporter's optimizer folds constants with the ONNX reference evaluator: the same
    arithmetic torch does silently in the model (T5's relative position buckets take log(0)),
    and what the file computes is what validation compares; nothing for the user to do."""
    return issubclass(w.category, RuntimeWarning) and "/onnxscript/optimizer/" in stack.replace(
        "\\", "/")


def _user_warnings(caught: list[tuple[warnings.WarningMessage, str]],
                   loaded: Any) -> list[dict[str, Any]]:
    user_file = str(loaded.source_file) if getattr(loaded, "source_file", None) else None
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for w, stack in caught:
        text = plain(str(w.message)).split(_TRIGGERED)[0]
        if any(noise in text for noise in _NOISE) or _folding_arithmetic(w, stack):
            continue
        if w.category.__name__ == "TracerWarning" and w.filename.replace("\\", "/").endswith(
                _NOISE_FILES):
            continue
        if _SHARED_AXIS[0] in text and _SHARED_AXIS[1] in text:
            head, _, kept = text.partition(_SHARED_AXIS[1])
            unused, kept = head.partition(_SHARED_AXIS[0])[2].strip(), kept.strip().rstrip(".")
            if unused != kept and ("DynamicShape", f"{unused} {kept}") not in seen:
                seen.add(("DynamicShape", f"{unused} {kept}"))
                out.append({
                    "category": "DynamicShape", "source": "",
                    "message": f"Dimensions {unused!r} and {kept!r} are one dimension: the "
                               f"model needs them equal, so the file calls both {kept!r}.",
                    "hint": f"Name both axes {kept!r} in the recipe, or change the model if "
                            "they should differ."})
            continue
        in_library = _in_library(w.filename)
        source = f"{w.filename}:{w.lineno}" if not in_library or w.filename == user_file else ""
        key = (source, text)
        if key in seen:
            continue
        seen.add(key)
        item: dict[str, Any] = {"category": w.category.__name__, "message": text.strip(),
                                "source": source}
        if hint := diagnose.hint_for(item["message"]):
            item["hint"] = hint
        if stack:
            item["details"] = f"{w.category.__name__}: {text.strip()}\n\n{stack}"
        out.append(item)
    return out


def _in_library(filename: str) -> bool:
    """Whether a warning's file is an installed package's or Python's own (contextlib.py, where
    torch's context managers warn from): no line of the model's, so no source is shown."""
    import sysconfig

    name = filename.replace("\\", "/")
    stdlib = sysconfig.get_paths()["stdlib"].replace("\\", "/").rstrip("/") + "/"
    return "site-packages" in name or "/torch/" in name or name.startswith(stdlib)
