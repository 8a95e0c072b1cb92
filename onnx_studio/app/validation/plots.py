"""Parity plots of one validation: ONNX Runtime against PyTorch, and the error histogram.

The data is the `.npz` the validation wrote (onnx_studio.engine.validation.metrics.load_plots: per
output, evenly sampled reference/candidate pairs of its worst trial and a histogram of the error).
pyqtgraph and numpy are imported when a plot is first drawn, never at window start, and a plot is
drawn only once the panel is on screen. The two plots stand side by side when the panel is wide
enough for both, one above the other when it is not (beside the form on a 1024-pixel screen).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from onnx_studio.app.validation.common import is_dark

# More points than this add nothing visible and make every repaint slower; the file keeps up
# to 100k per output, evenly spaced, so an even subset of them is still even.
MAX_DRAWN_POINTS = 20_000
SCATTER = {False: (31, 119, 180, 150), True: (116, 180, 255, 160)}
IDENTITY = {False: (214, 95, 0), True: (255, 176, 92)}
HISTOGRAM = {False: (70, 120, 190, 170), True: (116, 180, 255, 150)}
SIDE_BY_SIDE = 640  # narrower than this, the plots stack


class ParityPlots(QWidget):
    """An output chooser, then scatter (reference vs candidate, with y = x) and histogram."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.data: dict[str, dict[str, Any]] = {}
        self.scatter: Any = None  # pyqtgraph PlotWidgets, made on first draw
        self.histogram: Any = None
        self._dirty = False
        self.output = QComboBox()
        self.output.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.output.currentIndexChanged.connect(lambda _: self._mark_dirty())
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.message = QLabel("No plot data.")
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.message.setWordWrap(True)
        self.split = QSplitter(Qt.Orientation.Horizontal)
        self.split.setChildrenCollapsible(False)
        row = QHBoxLayout()
        row.addWidget(QLabel("Output"))
        row.addWidget(self.output)
        row.addWidget(self.note, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.message, 1)
        layout.addWidget(self.split, 1)
        self.split.hide()

    # ----------------------------------------------------------------- data

    def clear(self, message: str = "No plot data.") -> None:
        self.data = {}
        self.output.blockSignals(True)
        self.output.clear()
        self.output.blockSignals(False)
        self.note.setText("")
        self.message.setText(message)
        self.message.show()
        self.split.hide()

    def load(self, path: Path | None) -> None:
        """Read the plot file of a validation; a missing or unreadable one says so."""
        if path is None or not path.is_file():
            self.clear("No plot data: the validation did not save any"
                       + (f" ({path} is missing)." if path else "."))
            return
        try:
            from onnx_studio.engine.validation.metrics import load_plots

            data = load_plots(path)
        except Exception as exc:  # a truncated or foreign file: say so, keep the rest
            self.clear(f"The plot data in {path.name} could not be read: {exc}")
            return
        if not data:
            self.clear("No plot data: no trial produced outputs of matching shapes.")
            return
        self.data = data
        self.output.blockSignals(True)
        self.output.clear()
        self.output.addItems(list(data))
        self.output.blockSignals(False)
        self.message.hide()
        self.split.show()
        self._mark_dirty()

    def select_output(self, name: str) -> None:
        index = self.output.findText(name)
        if index >= 0:
            self.output.setCurrentIndex(index)

    # ----------------------------------------------------------------- drawing

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        wanted = (Qt.Orientation.Horizontal if event.size().width() >= SIDE_BY_SIDE
                  else Qt.Orientation.Vertical)
        if self.split.orientation() != wanted:
            self.split.setOrientation(wanted)

    def _mark_dirty(self) -> None:
        self._dirty = True
        if self.isVisible():
            self.draw()

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        if self._dirty:
            self.draw()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self.scatter is not None:
            self._dirty = True  # colours follow a light/dark switch
            if self.isVisible():
                self.draw()

    def _ensure_plots(self) -> None:
        if self.scatter is not None:
            return
        import pyqtgraph as pg  # heavy: first used here, long after the window is shown

        self.scatter = pg.PlotWidget()
        self.histogram = pg.PlotWidget()
        for plot in (self.scatter, self.histogram):
            plot.setMinimumSize(220, 150)
            plot.showGrid(x=True, y=True, alpha=0.25)
            plot.getPlotItem().setMenuEnabled(False)
            self.split.addWidget(plot)
        # "(x0.001)" beside values of order one reads like a unit: plain numbers on the
        # scatter; the histogram keeps the scale, its errors are often 1e-7 and smaller.
        # (Set before any data: pyqtgraph keeps the scale it had when this is turned off.)
        for side in ("bottom", "left"):
            self.scatter.getPlotItem().getAxis(side).enableAutoSIPrefix(False)

    def draw(self) -> None:
        """Draw the chosen output (no-op while there is nothing to draw)."""
        self._dirty = False
        name = self.output.currentText()
        entry = self.data.get(name)
        if entry is None:
            return
        import numpy as np
        import pyqtgraph as pg

        self._ensure_plots()
        dark = is_dark(self)
        self._style(dark)
        ref = np.asarray(entry["reference"], dtype=np.float64)
        cand = np.asarray(entry["candidate"], dtype=np.float64)
        if ref.size > MAX_DRAWN_POINTS:
            keep = np.linspace(0, ref.size - 1, MAX_DRAWN_POINTS).round().astype(np.int64)
            ref, cand = ref[keep], cand[keep]
        finite = np.isfinite(ref) & np.isfinite(cand)
        ref, cand = ref[finite], cand[finite]

        self.scatter.clear()
        if ref.size:
            lo = float(min(ref.min(), cand.min()))
            hi = float(max(ref.max(), cand.max()))
            if lo == hi:
                lo, hi = lo - 0.5, hi + 0.5
            self.scatter.addItem(pg.PlotDataItem(
                [lo, hi], [lo, hi], pen=pg.mkPen(IDENTITY[dark], width=1.5,
                                                 style=Qt.PenStyle.DashLine), name="y = x"))
            self.scatter.addItem(pg.ScatterPlotItem(
                ref, cand, size=5, pen=None, brush=pg.mkBrush(*SCATTER[dark])))
        self.histogram.clear()
        counts = np.asarray(entry["hist_counts"])
        edges = np.asarray(entry["hist_edges"])
        if counts.size and edges.size == counts.size + 1:
            self.histogram.addItem(pg.PlotDataItem(
                edges, counts, stepMode="center", fillLevel=0,
                brush=pg.mkBrush(*HISTOGRAM[dark]), pen=pg.mkPen(HISTOGRAM[dark][:3])))
        total = int(np.asarray(entry["index"]).size)
        shown = f"{ref.size:,} of {total:,} sampled points" if ref.size < total else \
            f"{ref.size:,} points"
        self.note.setText(f"worst trial: {entry['trial']} · {shown}")
        self.scatter.autoRange()
        self.histogram.autoRange()

    def _style(self, dark: bool) -> None:
        """Background, axes and titles from the window's palette (light or dark)."""
        palette = self.palette()
        base = palette.color(QPalette.ColorRole.Base)
        text = palette.color(QPalette.ColorRole.Text)
        titles = ((self.scatter, "ONNX Runtime vs PyTorch", "PyTorch (reference)",
                   "ONNX Runtime"),
                  (self.histogram, "Error (ONNX Runtime − PyTorch)", "error", "elements"))
        for plot, title, bottom, left in titles:
            plot.setBackground(base)
            item = plot.getPlotItem()
            item.setTitle(title, color=text.name(), size="10pt")
            for side, label in (("bottom", bottom), ("left", left)):
                axis = item.getAxis(side)
                axis.setPen(text)
                axis.setTextPen(text)
                axis.setLabel(label, color=text.name())
