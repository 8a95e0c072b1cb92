"""Marking a form field as wrong: a tinted background and the reason as its tooltip."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from onnx_studio.app import theme


def mark(widget: QWidget, sentence: str | None, dark: bool, plain_tooltip: str = "") -> None:
    """Tint `widget` and show `sentence` as its tooltip; None clears the mark."""
    if sentence:
        name = widget.metaObject().className()
        widget.setStyleSheet(f"{name} {{ background-color: {theme.error_background(dark)}; }}")
        widget.setToolTip(sentence)
    else:
        widget.setStyleSheet("")
        widget.setToolTip(plain_tooltip)


def problems_under(problems: dict[str, str], prefix: str) -> str | None:
    """The first problem sentence whose field is `prefix` or starts with `prefix.`/`prefix[`."""
    for field, sentence in problems.items():
        if field == prefix or field.startswith((prefix + ".", prefix + "[")):
            return sentence
    return None
