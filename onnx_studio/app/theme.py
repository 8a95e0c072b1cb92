"""Light and dark palettes for the Fusion style, following the OS colour scheme by default."""

from __future__ import annotations

import zlib

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

# Colours the forms use for marks; chosen to read on both palettes.
ERROR_LIGHT = "#fde2e1"
ERROR_DARK = "#5c2526"
WARN_TEXT_LIGHT = "#8a5300"
WARN_TEXT_DARK = "#f0b45a"


def dimension_tint(name: str, dark: bool) -> QColor:
    """A stable tint per dimension name, so shared names look alike in every row: a hue from
    yellow-green through blue to violet, never near the reds of an error mark."""
    hue = 70 + zlib.crc32(name.encode()) % 220
    return QColor.fromHsl(hue, 140, 70 if dark else 215)


def system_is_dark() -> bool:
    """True when the OS asks for a dark scheme (Qt 6.5+ styleHints().colorScheme())."""
    hints = QGuiApplication.styleHints()
    scheme = getattr(hints, "colorScheme", None)
    return bool(scheme is not None and scheme() == Qt.ColorScheme.Dark)


def is_dark(theme: str, system_dark: bool | None = None) -> bool:
    """True for "dark", and for "system" when the OS scheme is dark (`system_dark`, as the
    OS last announced it; None: ask Qt)."""
    if system_dark is None:
        system_dark = system_is_dark()
    return theme == "dark" or (theme == "system" and system_dark)


def _dark_palette() -> QPalette:
    p = QPalette()
    base, window, text = QColor("#1e1f22"), QColor("#2b2d30"), QColor("#dfe1e5")
    for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
        p.setColor(group, QPalette.ColorRole.Window, window)
        p.setColor(group, QPalette.ColorRole.WindowText, text)
        p.setColor(group, QPalette.ColorRole.Base, base)
        p.setColor(group, QPalette.ColorRole.AlternateBase, QColor("#26282b"))
        p.setColor(group, QPalette.ColorRole.Text, text)
        p.setColor(group, QPalette.ColorRole.Button, QColor("#3a3d41"))
        p.setColor(group, QPalette.ColorRole.ButtonText, text)
        p.setColor(group, QPalette.ColorRole.ToolTipBase, QColor("#3a3d41"))
        p.setColor(group, QPalette.ColorRole.ToolTipText, text)
        p.setColor(group, QPalette.ColorRole.Highlight, QColor("#3574f0"))
        p.setColor(group, QPalette.ColorRole.HighlightedText, QColor("#ffffff"))
        p.setColor(group, QPalette.ColorRole.Link, QColor("#589df6"))
        p.setColor(group, QPalette.ColorRole.PlaceholderText, QColor("#8c8f94"))
        # Fusion draws frames and check boxes from these; the defaults vanish on dark grey.
        p.setColor(group, QPalette.ColorRole.Light, QColor("#55585e"))
        p.setColor(group, QPalette.ColorRole.Midlight, QColor("#4a4d52"))
        p.setColor(group, QPalette.ColorRole.Mid, QColor("#6b6f76"))
        p.setColor(group, QPalette.ColorRole.Dark, QColor("#8a8e95"))
        p.setColor(group, QPalette.ColorRole.Shadow, QColor("#111214"))
    disabled = QPalette.ColorGroup.Disabled
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text,
                 QPalette.ColorRole.ButtonText):
        p.setColor(disabled, role, QColor("#6f737a"))
    p.setColor(disabled, QPalette.ColorRole.Button, QColor("#2f3135"))
    p.setColor(disabled, QPalette.ColorRole.Base, QColor("#232427"))
    return p


# Fusion derives check box and edit frames from the window colour, which leaves them nearly
# invisible on dark grey; a visible frame, and a filled box when checked, fix that.
DARK_STYLE = """
QCheckBox { spacing: 6px; }
QCheckBox::indicator { width: 12px; height: 12px; border: 1px solid #8a8e95;
                       border-radius: 2px; background: #1e1f22; }
QCheckBox::indicator:checked { background: #3574f0; border-color: #79a6f6; }
QCheckBox::indicator:disabled { border-color: #55585e; background: #2b2d30; }
QCheckBox::indicator:checked:disabled { background: #3d4f73; }
"""


def apply(app: QApplication, theme: str, system_dark: bool | None = None) -> bool:
    """Apply `theme` ("system", "light" or "dark"); returns True when the result is dark."""
    app.setStyle("Fusion")
    dark = is_dark(theme, system_dark)
    app.setPalette(_dark_palette() if dark else app.style().standardPalette())
    app.setStyleSheet(DARK_STYLE if dark else "")
    return dark


def error_background(dark: bool) -> str:
    return ERROR_DARK if dark else ERROR_LIGHT


def warning_text(dark: bool) -> str:
    return WARN_TEXT_DARK if dark else WARN_TEXT_LIGHT


def warning_background(dark: bool) -> str:
    """The background of a notice that something shown is out of date."""
    return "#4d3b12" if dark else "#fff3cd"


def note_background(dark: bool) -> str:
    """The background of a note about what is shown (a validation judged again)."""
    return "#1f3a52" if dark else "#e7f1fb"


class Follower(QObject):
    """The theme shown: the user's choice ("system", "light", "dark") applied to the
    application, and for "system" the OS colour scheme, followed live; `changed(dark)` after
    each application."""

    changed = Signal(bool)

    def __init__(self, choice: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.choice = choice
        self.dark = False
        self._system_dark: bool | None = None  # the OS scheme as last announced; None: ask Qt
        hints = QApplication.styleHints()
        if hasattr(hints, "colorSchemeChanged"):  # live: the OS scheme changed
            hints.colorSchemeChanged.connect(self._system_scheme_changed)

    def choose(self, choice: str) -> None:
        self.choice = choice
        self.apply()

    def apply(self) -> None:
        app = QApplication.instance()
        if isinstance(app, QApplication):
            self.dark = apply(app, self.choice, self._system_dark)
        self.changed.emit(self.dark)

    def _system_scheme_changed(self, scheme: Qt.ColorScheme) -> None:
        self._system_dark = scheme == Qt.ColorScheme.Dark
        self.apply()  # an override ("light", "dark") stays as it is
