"""The Log tab: the worker's standard error, the jobs' log lines and the session's own, as a
terminal would show them.

A line that a progress bar rewrote in place (carriage returns, tqdm's bars) shows what it
ended as, and the next state of the same bar replaces it rather than adding a line; a
character the log's font has no glyph for (an emoji such as ✅) is written as a sign or a
name it can show, never as a box. A torch log line (glog's "W1207 15:00:19.143000 11883
torch/onnx/...py:123] text") and a Python warning under the interpreter's folders are written as
what they say, the file named from its package (`readable`); long lines wrap, never cut.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtGui import QFontMetrics, QTextOption
from PySide6.QtWidgets import QPlainTextEdit, QWidget

from onnx_studio.app.results.summary import mono
from onnx_studio.app.session import ExportSession

if TYPE_CHECKING:
    from PySide6.QtGui import QShowEvent

__all__ = ["LogView", "displayable", "readable", "terminal_lines"]

# glog, as torch's C++ and torch.onnx's loggers print: LEVEL MMDD HH:MM:SS.micro THREAD file:line]
_GLOG = re.compile(r"^(?P<level>[IWEF])\d{4} (?P<time>\d\d:\d\d:\d\d)\.\d+\s+\d+\s+"
                   r"(?P<file>[^\s:]+):(?P<line>\d+)\]\s?(?P<text>.*)$")
_LEVELS = {"I": "info", "W": "warning", "E": "error", "F": "fatal"}
# warnings.showwarning: /abs/path/file.py:105: FutureWarning: text
_PY_WARNING = re.compile(r"^(?P<file>/\S+?\.py|[A-Za-z]:\\\S+?\.py):(?P<line>\d+): "
                         r"(?P<category>\w+(?:Warning|Error)): (?P<text>.*)$")
_PACKAGES = re.compile(r".*[/\\](?:site|dist)-packages[/\\]")


def _short(file: str) -> str:
    """A file as its package names it: site-packages/torch/onnx/x.py as torch/onnx/x.py, the
    standard library's copyreg.py as copyreg.py; another file stays as it is."""
    short = _PACKAGES.sub("", file)
    if short != file:
        return short
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        lib = re.match(re.escape(prefix) + r"[/\\]lib[/\\](?:python[\d.]+[/\\])?", file)
        if lib is not None:
            return file[lib.end():]
    return file


def readable(line: str) -> str:
    """`line` as what it says: a glog line as "warning: text (torch/onnx/x.py:123)", a Python
    warning from an installed package as "FutureWarning: text (copyreg.py:105)"."""
    glog = _GLOG.match(line)
    if glog is not None:
        return (f"{_LEVELS[glog['level']]}: {glog['text']} "
                f"({_short(glog['file'])}:{glog['line']}, {glog['time']})")
    warning = _PY_WARNING.match(line)
    if warning is not None:
        return (f"{warning['category']}: {warning['text']} "
                f"({_short(warning['file'])}:{warning['line']})")
    return line

# tqdm's bar: "desc: 50%|█████     | 1/2 [00:01<00:01, 1.2it/s]" (the bar between the pipes)
_BAR = re.compile(r"^(?P<head>.*?)(?P<percent>\d{1,3})%\|[^|]*\|\s*(?P<tail>.*)$")
# emoji and signs often printed by libraries, as characters a plain font has (else words)
_SIGNS = {"✅": "✔", "✔️": "✔", "☑": "✔", "❌": "✘", "❎": "✘", "✖": "✘", "⚠️": "⚠",
          "🚀": "", "🤗": "(Hugging Face)", "💡": "(hint)", "🔥": "", "📦": "", "⏳": "…"}
_INVISIBLE = {"\ufe0f", "\ufe0e", "\u200d"}  # emoji presentation selectors, joiners


def terminal_lines(text: str) -> list[tuple[str, str]]:
    """The lines of `text` as a terminal leaves them, each with its progress bar's key ("" for
    a plain line): a carriage return starts the line again (its last state is kept), and a
    tqdm bar is written without its bar, as "desc 50% 1/2 [00:01<00:01, 1.2it/s]"."""
    out: list[tuple[str, str]] = []
    for raw in text.split("\n"):
        states = [s for s in raw.split("\r") if s.strip()]
        line = states[-1].rstrip() if states else ""
        bar = _BAR.match(line)
        if bar is not None:
            head = bar.group("head").rstrip(": ").strip()
            line = f"{head + ' ' if head else ''}{bar.group('percent')}% {bar.group('tail')}"
            out.append((line.rstrip(), head or "progress"))
        elif line or not states:
            out.append((line, ""))
    return out


def displayable(text: str, has_glyph: Callable[[str], bool]) -> str:
    """`text` with every character `has_glyph` says the font cannot draw replaced: a sign it
    can (✅ as ✔), else its name in brackets; emoji presentation selectors are dropped."""
    if all(ch.isascii() or has_glyph(ch) for ch in text):
        return text
    out: list[str] = []
    for ch in text:
        if ch.isascii() or has_glyph(ch):
            out.append(ch)
        elif ch in _INVISIBLE:
            continue
        elif ch in _SIGNS and all(has_glyph(c) for c in _SIGNS[ch]):
            out.append(_SIGNS[ch])
        else:
            out.append(f"[{unicodedata.name(ch, f'U+{ord(ch):04X}').lower()}]")
    return "".join(out)


class LogView(QPlainTextEdit):
    """Everything the worker said, newest at the bottom (bounded)."""

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setMaximumBlockCount(20000)
        # a long line wraps (a path without spaces anywhere): nothing is cut at the right edge
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        # its fixed-width font is looked up (fontconfig) with the first line or the first show,
        # not while the window opens: the Log tab is not the one shown then
        self._mono = False
        self._bar = ""  # the progress bar the last line shows ("": a plain line)
        session.logLine.connect(self.add)

    def _use_mono(self) -> None:
        if not self._mono:
            self._mono = True
            mono(self)

    def showEvent(self, event: QShowEvent) -> None:
        self._use_mono()
        super().showEvent(event)

    def has_glyph(self, ch: str) -> bool:
        """True when the log's font (or a font Qt falls back to) draws `ch`."""
        self._use_mono()
        return QFontMetrics(self.font()).inFontUcs4(ord(ch))

    def add(self, text: str) -> None:
        """Append what was said, as a terminal shows it (see terminal_lines, displayable)."""
        from PySide6.QtGui import QTextCursor  # a progress bar's line: its enums made then

        self._use_mono()
        bar = self.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        for line, key in terminal_lines(text.rstrip("\n")):
            line = displayable(readable(line), self.has_glyph)
            if key and key == self._bar:  # the same bar moved on: its line says where it is
                cursor = QTextCursor(self.document().lastBlock())
                cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock,
                                    QTextCursor.MoveMode.KeepAnchor)
                cursor.insertText(line)
            else:
                self.appendPlainText(line)
            self._bar = key
        if at_end:
            bar.setValue(bar.maximum())
