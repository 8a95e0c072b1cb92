"""The Graph tab: hosts the graph helper's GraphBrowser, imported only when first needed.

app.graph pulls in onnx and pyqtgraph, which would slow the window's first paint, so the tab
starts as a placeholder and builds the browser after the window is up (or on first use).
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget


class GraphTab(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.browser: Any = None
        self.unavailable: str | None = None
        self.placeholder = QLabel("The graph of the exported file appears here after an "
                                  "export, or open any .onnx file (Ctrl+O).")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.addWidget(self.placeholder)
        self.loaded_path: Path | None = None

    def ensure_browser(self) -> bool:
        """Create the GraphBrowser if app.graph is available; False (with a reason) if not."""
        if self.browser is not None:
            return True
        if self.unavailable is not None:
            return False
        try:
            # importlib keeps mypy quiet while app.graph is still being written
            browser_class = importlib.import_module("app.graph").GraphBrowser
        except Exception as exc:  # not written yet, or a dependency missing
            self.unavailable = f"The graph view is not available ({exc})."
            return False
        self.browser = browser_class(self)
        self._layout.addWidget(self.browser)
        self.placeholder.hide()
        return True

    def load_file(self, path: Path) -> tuple[float | None, int | None]:
        """Show the graph of `path`; returns (seconds, node count) or (None, None)."""
        self.loaded_path = path
        if not self.ensure_browser():
            self.placeholder.setText(f"{path.name}: {self.unavailable}")
            return None, None
        started = time.perf_counter()
        try:
            self.browser.load_file(str(path))
        except Exception as exc:
            self.placeholder.setText(f"Could not show the graph of {path.name}: {exc}")
            self.placeholder.show()
            self.browser.hide()
            return None, None
        self.browser.show()
        self.placeholder.hide()
        return time.perf_counter() - started, self.node_count()

    def node_count(self) -> int | None:
        """Nodes in the shown graph, from whatever the browser exposes."""
        if self.browser is None:
            return None
        for attr in ("node_count", "nodes"):
            value = getattr(self.browser, attr, None)
            value = value() if callable(value) else value
            if isinstance(value, int):
                return value
        model = getattr(self.browser, "model", None)
        nodes = getattr(model, "nodes", None)
        return len(nodes) if nodes is not None else None

    def clear(self) -> None:
        self.loaded_path = None
        if self.browser is not None:
            self.browser.hide()
        self.placeholder.setText("The graph of the exported file appears here after an "
                                 "export, or open any .onnx file (Ctrl+O).")
        self.placeholder.show()
