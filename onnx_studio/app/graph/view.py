"""GraphView: the QGraphicsView of the graph tab — pan, zoom, fit, minimap and legend."""

from __future__ import annotations

import time

from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QKeyEvent,
    QLinearGradient,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QPen,
    QPixmap,
    QResizeEvent,
    QWheelEvent,
)
from PySide6.QtWidgets import QFrame, QGraphicsScene, QGraphicsView, QWidget

from onnx_studio.app.graph import colors
from onnx_studio.app.graph.canvas import GraphCanvas

MIN_SCALE = 1e-6  # Fit must reach a fully expanded 100k-node graph (millions of px tall)
MAX_SCALE = 4.0


class GraphView(QGraphicsView):
    """Shows a GraphCanvas; emits the box index clicked or double-clicked."""

    boxClicked = Signal(int)
    edgeClicked = Signal(int)
    boxDoubleClicked = Signal(int)
    painted = Signal()
    viewChanged = Signal()
    resized = Signal()
    userMoved = Signal()  # the user zoomed or panned: stop placing the view automatically

    def __init__(self, canvas: GraphCanvas, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.canvas = canvas
        self.setScene(QGraphicsScene(self))
        self.scene().addItem(canvas)
        # One item: no index to maintain, and no per-item state saving while painting.
        self.scene().setItemIndexMethod(QGraphicsScene.ItemIndexMethod.NoIndex)
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontSavePainterState, True)
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontAdjustForAntialiasing, True)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.MinimalViewportUpdate)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self._press: QPoint | None = None
        self.minimap = Minimap(self)
        self.legend = Legend(self)
        self.legend.hide()
        self.horizontalScrollBar().valueChanged.connect(self._moved)
        self.verticalScrollBar().valueChanged.connect(self._moved)
        self.last_paint = 0.0
        self.fit_mode = False  # the last placement was Fit: a resize fits again
        self.userMoved.connect(self._leave_fit_mode)

    # ------------------------------------------------------------------ zoom
    def scale_factor(self) -> float:
        """Current zoom (1.0 = 100 %)."""
        return self.transform().m11()

    def zoom(self, factor: float, anchor: QPointF | None = None) -> None:
        """Zoom by a factor, clamped, around the mouse (wheel) or the view centre."""
        s = self.scale_factor()
        factor = max(MIN_SCALE / s, min(MAX_SCALE / s, factor))
        if anchor is None:
            self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.scale(factor, factor)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self._moved()

    def set_zoom(self, scale: float) -> None:
        """Zoom to an absolute scale around the view centre."""
        self.zoom(scale / self.scale_factor())

    def fit(self) -> None:
        """Show the whole graph, as large as fits (never above 100 %); it stays fitted
        through resizes (scroll bars coming and going, the splitter) until the user zooms
        or pans."""
        rect = self.canvas.boundingRect()
        if rect.isEmpty():
            return
        self.fitInView(rect, Qt.AspectRatioMode.KeepAspectRatio)
        if self.scale_factor() > 1.0:
            self.set_zoom(1.0)
        self.centerOn(rect.center())
        self.fit_mode = True
        self._moved()

    def _leave_fit_mode(self) -> None:
        self.fit_mode = False

    def center_on_rect(self, rect: QRectF, min_scale: float = 0.8) -> None:
        """Bring a box into the middle of the view at a readable zoom; the view stays there
        (no longer fitted: scroll bars coming with the zoom would fit it again)."""
        self.fit_mode = False
        if self.scale_factor() < min_scale:
            self.set_zoom(min_scale)
        self.centerOn(rect.center())
        self._moved()

    def wheelEvent(self, event: QWheelEvent) -> None:
        if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            super().wheelEvent(event)
            return
        delta = event.angleDelta().y()
        if delta:
            self.userMoved.emit()
            self.zoom(1.0015 ** delta, event.position())
        event.accept()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key in (Qt.Key.Key_Plus, Qt.Key.Key_Equal, Qt.Key.Key_Minus, Qt.Key.Key_1,
                   Qt.Key.Key_0):
            self.userMoved.emit()
        if key in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom(1.25)
        elif key == Qt.Key.Key_Minus:
            self.zoom(0.8)
        elif key == Qt.Key.Key_0:
            self.fit()
        elif key == Qt.Key.Key_1:
            self.set_zoom(1.0)
        else:
            super().keyPressEvent(event)

    # ------------------------------------------------------------------ clicks
    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._press = event.position().toPoint()
        self.userMoved.emit()
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        super().mouseReleaseEvent(event)
        if self._press is not None and (event.position().toPoint()
                                        - self._press).manhattanLength() < 5:
            p = self.mapToScene(event.position().toPoint())
            box = self.canvas.box_at(p.x(), p.y())
            # A click on an edge (within 5 screen pixels) shows its tensor, unless it is
            # inside a node box.
            edge = -1
            if box < 0 or self.canvas.container[box]:
                edge = self.canvas.edge_at(p.x(), p.y(), 5.0 / max(self.scale_factor(), 1e-6))
            if edge >= 0:
                self.edgeClicked.emit(edge)
            else:
                self.boxClicked.emit(box)
        self._press = None

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        p = self.mapToScene(event.position().toPoint())
        i = self.canvas.box_at(p.x(), p.y())
        if i >= 0:
            self.boxDoubleClicked.emit(i)
        event.accept()

    # ------------------------------------------------------------------ painting
    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        self.last_paint = time.perf_counter()
        self.painted.emit()

    def drawBackground(self, painter: QPainter, rect: QRectF | QRect) -> None:
        painter.fillRect(rect, self.palette().color(QPalette.ColorRole.Base))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.fit_mode:
            self.fit()
        self.minimap.rebuild()
        self._place_overlays()
        self.resized.emit()

    def _place_overlays(self) -> None:
        vp = self.viewport().geometry()
        mm = self.minimap
        mm.move(vp.right() - mm.width() - 10, vp.bottom() - mm.height() - 10)
        self.legend.move(vp.right() - self.legend.width() - 10, vp.top() + 10)

    def _moved(self) -> None:
        self.minimap.sync()
        self.viewChanged.emit()

    def content_changed(self) -> None:
        """The canvas has a new layout: resize the scene and redraw the minimap."""
        self.scene().setSceneRect(self.canvas.boundingRect())
        self.minimap.rebuild()
        self._place_overlays()


class Minimap(QWidget):
    """The whole graph in a corner, with the visible part framed; click or drag to move."""

    SIZE = 150

    def __init__(self, view: GraphView) -> None:
        # A child of the view, not of its viewport: viewport scrolling would move it.
        super().__init__(view)
        self.view = view
        self.resize(self.SIZE, self.SIZE)
        self._pix: QPixmap | None = None
        self._sx = self._sy = 1.0
        self._offset = QPointF()
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def rebuild(self) -> None:
        """Redraw the cached picture of the boxes (after a layout change)."""
        rect = self.view.canvas.boundingRect()
        if rect.isEmpty():
            self._pix = None
            self.hide()
            return
        # A long thin graph gets a long thin minimap, within limits and never more than a
        # quarter of the view; beyond those limits the two axes get their own scales, so a
        # graph a hundred times taller than wide still fills the minimap's width.
        aspect = rect.width() / rect.height()
        vp = self.view.viewport()
        cap_w = max(40, min(220, vp.width() // 4))
        cap_h = max(40, min(220, vp.height() // 3))
        w = max(40, min(cap_w, int(self.SIZE * aspect ** 0.5)))
        h = max(40, min(cap_h, int(self.SIZE / aspect ** 0.5)))
        self.resize(w, h)
        s = min(w / rect.width(), h / rect.height())
        sx, sy = s, s
        if rect.width() * s < w * 0.8:  # too thin to see at one scale: stretch across
            sx = w / rect.width()
        if rect.height() * s < h * 0.8:
            sy = h / rect.height()
        self._sx, self._sy = sx, sy
        self._offset = QPointF((w - rect.width() * sx) / 2, (h - rect.height() * sy) / 2)
        dpr = self.devicePixelRatioF()
        pix = QPixmap(int(w * dpr), int(h * dpr))
        pix.setDevicePixelRatio(dpr)
        pix.fill(Qt.GlobalColor.transparent)
        p = QPainter(pix)
        self.view.canvas.paint_minimap(p, sx, sy, self._offset.x(), self._offset.y())
        p.end()
        self._pix = pix
        self.sync()

    def sync(self) -> None:
        """Show only while part of the graph is out of view; redraw the frame."""
        if self._pix is None:
            return
        vis = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
        whole = vis.contains(self.view.canvas.boundingRect().adjusted(30, 30, -30, -30))
        self.setVisible(not whole)
        self.update()

    def to_minimap(self, pt: QPointF) -> QPointF:
        """A scene point in minimap pixels."""
        rect = self.view.canvas.boundingRect()
        return QPointF((pt.x() - rect.left()) * self._sx + self._offset.x(),
                       (pt.y() - rect.top()) * self._sy + self._offset.y())

    def _to_scene(self, pt: QPointF) -> QPointF:
        rect = self.view.canvas.boundingRect()
        return QPointF((pt.x() - self._offset.x()) / self._sx + rect.left(),
                       (pt.y() - self._offset.y()) / self._sy + rect.top())

    def paintEvent(self, event: QPaintEvent) -> None:
        if self._pix is None:
            return
        p = QPainter(self)
        bg = self.palette().color(QPalette.ColorRole.Window)
        bg.setAlpha(225)
        p.fillRect(self.rect(), bg)
        p.drawPixmap(0, 0, self._pix)
        vis = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
        frame = QRectF(self.to_minimap(vis.topLeft()), self.to_minimap(vis.bottomRight()))
        frame = frame.intersected(QRectF(self.rect()))
        hl = self.palette().color(QPalette.ColorRole.Highlight)
        fill = QColor(hl)
        fill.setAlpha(45)
        p.setPen(QPen(hl, 1.5))
        p.setBrush(fill)
        p.drawRect(frame.adjusted(0.5, 0.5, -0.5, -0.5))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.setPen(QPen(self.palette().color(QPalette.ColorRole.Mid)))
        p.drawRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5))

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self.view.centerOn(self._to_scene(event.position()))
        event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        self.view.centerOn(self._to_scene(event.position()))
        event.accept()


class Legend(QWidget):
    """Colour ramp with the overlay's label and range."""

    def __init__(self, view: GraphView) -> None:
        super().__init__(view)
        self.resize(210, 52)
        self.label = ""
        self.scale = colors.Scale(0.0, 1.0)

    def set_range(self, label: str, scale: colors.Scale) -> None:
        """Show a label, the value range of the ramp and its reference mark."""
        self.label, self.scale = label, scale
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        bg = self.palette().color(QPalette.ColorRole.Window)
        bg.setAlpha(235)
        p.fillRect(self.rect(), bg)
        p.setPen(self.palette().color(QPalette.ColorRole.Mid))
        p.drawRect(self.rect().adjusted(0, 0, -1, -1))
        p.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        sc = self.scale
        title = self.label + ("  (log scale)" if sc.log else "")
        p.drawText(QRectF(8, 2, self.width() - 16, 16), Qt.AlignmentFlag.AlignLeft, title)
        grad = QLinearGradient(8, 0, self.width() - 8, 0)
        for k in range(5):
            grad.setColorAt(k / 4, colors.ramp_color(k / 4))
        p.fillRect(QRectF(8, 20, self.width() - 16, 12), grad)
        p.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        p.drawText(QRectF(8, 33, 90, 16), Qt.AlignmentFlag.AlignLeft, f"{sc.lo:.3g}")
        p.drawText(QRectF(self.width() - 98, 33, 90, 16), Qt.AlignmentFlag.AlignRight,
                   f"{sc.hi:.3g}")
        if sc.mark is not None and sc.hi > sc.lo:
            x = 8 + sc(sc.mark) * (self.width() - 16)
            p.setPen(QPen(self.palette().color(QPalette.ColorRole.WindowText), 2))
            p.drawLine(QPointF(x, 18), QPointF(x, 34))
            p.drawText(QRectF(x - 30, 33, 60, 16), Qt.AlignmentFlag.AlignHCenter,
                       f"{sc.mark:.3g}")
