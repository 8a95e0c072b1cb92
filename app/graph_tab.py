"""The Graph tab: hosts the GraphBrowser, built only when first needed.

app.graph pulls in onnx and pyqtgraph, which would slow the window's first paint, so the tab
starts as a placeholder and builds the browser after the window is up (or on first use).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

if TYPE_CHECKING:
    from app.graph import GraphBrowser

_EMPTY = ("The graph of the exported file appears here after an export, or open any .onnx "
          "file (Ctrl+O).")


class GraphTab(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.browser: GraphBrowser | None = None
        self.placeholder = QLabel(_EMPTY)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.addWidget(self.placeholder)
        self.loaded_path: Path | None = None

    def ensure_browser(self) -> GraphBrowser:
        """The GraphBrowser, created (and its heavy imports done) on first call."""
        if self.browser is None:
            from app.graph import GraphBrowser

            self.browser = GraphBrowser(self)
            self.browser.loadFailed.connect(self._show_failure)
            self.browser.hide()
            self._layout.addWidget(self.browser)
        return self.browser

    def load_file(self, path: Path) -> bool:
        """Show the graph of `path`; False (and the reason in the tab) when it cannot."""
        self.loaded_path = path
        if not self.ensure_browser().load_file(str(path)):
            return False
        self._show_browser()
        return True

    def time_load(self, path: Path) -> tuple[float, int]:
        """Load `path` and wait for the first paint: (seconds, nodes), for --exit-after-paint."""
        from app.graph import time_first_paint

        self.loaded_path = path
        browser = self.ensure_browser()
        self._show_browser()
        return time_first_paint(browser, path)

    def node_count(self) -> int | None:
        return self.browser.node_count() if self.browser is not None else None

    def clear(self) -> None:
        self.loaded_path = None
        if self.browser is not None:
            self.browser.hide()
        self.placeholder.setText(_EMPTY)
        self.placeholder.show()

    def _show_browser(self) -> None:
        assert self.browser is not None
        self.browser.show()
        self.placeholder.hide()

    def _show_failure(self, reason: str) -> None:
        name = self.loaded_path.name if self.loaded_path else "the file"
        self.placeholder.setText(f"Could not show the graph of {name}: {reason}")
        self.placeholder.show()
        if self.browser is not None:
            self.browser.hide()
