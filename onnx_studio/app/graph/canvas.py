"""GraphCanvas: one QGraphicsItem that paints the whole laid-out graph.

One item instead of one per node: the scene index stays trivial, and painting is a few
batched calls (rectangles grouped by colour, edges as one line list when zoomed out) over
the boxes and edges inside the exposed rectangle, found with numpy. Level of detail: text
appears only when it is readable, curves and arrowheads only when zoomed in.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from PySide6.QtCore import QLineF, QPointF, QRect, QRectF, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetricsF,
    QPainter,
    QPainterPath,
    QPalette,
    QPen,
    QPolygonF,
)
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from onnx_studio.app.graph import colors
from onnx_studio.app.graph.fonts import BoxFonts
from onnx_studio.engine.graph.layout import HEADER
from onnx_studio.engine.graph.model import GraphModel
from onnx_studio.engine.graph.scene import Scene

TEXT_LOD = 0.42  # below this scale labels would be under ~5 px: not drawn
CURVE_LOD = 0.3  # below this, edges are straight segments in one call
EDGE_LOD = 0.06  # below this (a layer gap under ~2 px) edges are not drawn
EDGE_LABEL_LOD = 0.75
FAR_TEXT_PX = 10.0  # screen size of labels drawn below TEXT_LOD, where they fit
MAX_FAR_LABELS = 400


class GraphCanvas(QGraphicsItem):
    """Paints a layout Scene; answers which box is under a point."""

    def __init__(self, fonts: BoxFonts) -> None:
        super().__init__()
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption, True)
        self.fonts = fonts
        self.scene_data: Scene | None = None
        self.model: GraphModel | None = None
        self.palette = QPalette()
        self.selected: int = -1
        self.hits: set[int] = set()
        self.current_hit: int = -1
        self._bounds = QRectF()
        self._fills: list[QColor] = []
        self.overlay: dict[str, float] | None = None
        self.overlay_norm: colors.Scale | None = None
        self.marks: set[int] = set()  # boxes outlined as having a problem
        self.labelled: list[int] = []  # boxes whose label the last paint drew (tests ask)

    # ------------------------------------------------------------------ data
    def set_data(self, scene: Scene, model: GraphModel, layout: Any,
                 palette: QPalette) -> None:
        """Take a new layout (after load, expand or collapse)."""
        import numpy as np  # lazily: the window shows before numpy is needed

        self.prepareGeometryChange()
        self.scene_data = scene
        self.model = model
        self.layout = layout
        self.palette = palette
        boxes = scene.boxes
        self.x0 = boxes.x.copy()
        self.y0 = boxes.y.copy()
        self.x1 = self.x0 + boxes.w
        self.y1 = self.y0 + boxes.h
        self.depth = boxes.depth.astype(int)
        self.container = boxes.expanded.astype(bool)
        self.rects = _Rects(self.x0, self.y0, boxes.w, boxes.h)
        # Containers paint first, outermost first; leaves on top.
        cont = np.nonzero(self.container)[0]
        self.container_order = cont[np.argsort(self.depth[cont], kind="stable")]
        self.leaf_mask = ~self.container
        eb = np.asarray(scene.edge_bounds, dtype=float).reshape(len(scene.edges), 4)
        self.ex0, self.ey0, self.ex1, self.ey1 = (eb[:, k].copy() for k in range(4))
        self._lines: dict[int, list[QLineF]] = {}
        self._paths: dict[int, QPainterPath] = {}
        self._bounds = QRectF(-40, -40, scene.width + 80, scene.height + 80)
        self.selected = -1
        self.hits = set()
        self.marks = set()
        self.current_hit = -1
        self.refresh_colors()

    def refresh_colors(self) -> None:
        """Recompute fills (palette change, overlay set or cleared)."""
        import numpy as np  # lazily: the window shows before numpy is needed

        sc = self.scene_data
        if sc is None:
            return
        dark = colors.is_dark(self.palette)
        # One QColor per kind of box (op type, group depth), not one per box; each box gets
        # the code of its colour, so the buckets below are numpy selections.
        by_rgba: dict[int, int] = {}
        distinct: list[QColor] = []
        boxes = sc.boxes
        overlay = self.overlay is not None
        # what decides a box's colour: its key under an overlay, else its kind and label
        # (a node), its depth and whether it is open (a group), or nothing more (an input)
        kinds = [(("overlay", key, 0, False) if overlay and not expanded
                  else (kind, "", depth, expanded) if kind in ("group", "section")
                  else ("io", "", 0, False) if kind in ("input", "output")
                  else (kind, label, 0, False))
                 for key, kind, label, depth, expanded in zip(
                     boxes.keys, boxes.kinds, boxes.labels, self.depth.tolist(),
                     self.container.tolist(), strict=True)]
        made: dict[tuple[str, str, int, bool], int] = {}
        for made_key in dict.fromkeys(kinds):  # in the order the boxes first show them
            kind, name, depth, expanded = made_key
            if kind == "overlay":
                color = self._overlay_fill(name)
            elif kind in ("group", "section"):
                color = colors.group_color(depth, dark, expanded)
            elif kind == "io":
                color = colors.category_color("io", dark)
            else:
                color = colors.category_color(colors.category(name), dark)
            code = by_rgba.get(color.rgba())
            if code is None:
                code = by_rgba[color.rgba()] = len(distinct)
                distinct.append(color)
            made[made_key] = code
        codes = list(map(made.__getitem__, kinds))
        fills = [distinct[c] for c in codes]
        self._fills = fills
        code_of = np.array(codes, dtype=np.int64)
        rgba_of = [c.rgba() for c in distinct]
        leaves = np.nonzero(self.leaf_mask)[0]
        leaf_codes = code_of[leaves]
        self._buckets = {rgba_of[c]: leaves[leaf_codes == c]
                         for c in np.flatnonzero(np.bincount(leaf_codes)).tolist()}
        buckets = self._buckets
        cbuckets: dict[tuple[int, int], list[int]] = {}
        for i in self.container_order.tolist():
            cbuckets.setdefault((int(self.depth[i]), rgba_of[codes[i]]), []).append(i)
        self._container_buckets = [(rgba, np.array(v, dtype=int))
                                   for (_d, rgba), v in sorted(cbuckets.items())]
        self._text_colors = {k: colors.text_color_on(QColor.fromRgba(k)) for k in buckets}
        self.update()

    def _overlay_fill(self, key: str) -> QColor:
        assert self.overlay is not None and self.model is not None and self.overlay_norm
        vals = self.overlay_values(key)
        if not vals:
            return self.palette.color(QPalette.ColorRole.Button)
        return colors.ramp_color(self.overlay_norm(max(vals)))

    def overlay_values(self, key: str) -> list[float]:
        """Overlay values of the nodes a box stands for (a group: all nodes inside)."""
        if self.overlay is None or self.model is None:
            return []
        m = self.model
        if key.startswith("n"):
            name = m.nodes[int(key[1:])].name
            return [self.overlay[name]] if name in self.overlay else []
        if key.startswith("g:"):
            out = []
            for idx in self.layout.nodes_in(key[2:]):
                v = self.overlay.get(m.nodes[idx].name)
                if v is not None:
                    out.append(v)
            return out
        return []

    # ------------------------------------------------------------------ queries
    def box_at(self, x: float, y: float) -> int:
        """Index of the innermost box under a scene point, or -1."""
        import numpy as np  # lazily: the window shows before numpy is needed

        if self.scene_data is None or not len(self.x0):
            return -1
        inside = (self.x0 <= x) & (x <= self.x1) & (self.y0 <= y) & (y <= self.y1)
        idx = np.nonzero(inside)[0]
        if not len(idx):
            return -1
        # Containers are hit only on their title strip or empty space: the deepest wins.
        return int(idx[np.argmax(self.depth[idx] * 2 + self.leaf_mask[idx])])

    def edge_at(self, x: float, y: float, tolerance: float) -> int:
        """Index of the edge passing within ``tolerance`` of a scene point, or -1."""
        import numpy as np

        if self.scene_data is None or not len(self.ex0):
            return -1
        near = np.nonzero((self.ex0 - tolerance <= x) & (x <= self.ex1 + tolerance)
                          & (self.ey0 - tolerance <= y) & (y <= self.ey1 + tolerance))[0]
        best, best_d = -1, tolerance
        for e in near.tolist():
            for (ax, ay), (bx, by) in pairwise(self.scene_data.edges[e].points):
                # Distance to the segment (curves stay close to their chord between layers).
                dx, dy = bx - ax, by - ay
                t = 0.0 if dx == dy == 0 else max(0.0, min(1.0, ((x - ax) * dx + (y - ay) * dy)
                                                            / (dx * dx + dy * dy)))
                d = ((ax + t * dx - x) ** 2 + (ay + t * dy - y) ** 2) ** 0.5
                if d < best_d:
                    best, best_d = e, d
        return best

    def boundingRect(self) -> QRectF:
        return self._bounds

    # ------------------------------------------------------------------ paint
    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        import numpy as np  # lazily: the window shows before numpy is needed

        sc = self.scene_data
        if sc is None:
            return
        lod = QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())
        r = option.exposedRect
        ex0, ey0, ex1, ey1 = r.left(), r.top(), r.right(), r.bottom()
        vis = (self.x1 >= ex0) & (self.x0 <= ex1) & (self.y1 >= ey0) & (self.y0 <= ey1)
        pal = self.palette
        text = pal.color(QPalette.ColorRole.Text)
        border = pal.color(QPalette.ColorRole.Mid)
        detailed = lod >= CURVE_LOD
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, detailed)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)

        # Expanded groups: tinted frames with a title strip.
        cont_pen = QPen(border, 1.0)
        cont_pen.setCosmetic(True)
        painter.setPen(cont_pen if lod > 0.05 else Qt.PenStyle.NoPen)
        if detailed:
            for i in self.container_order:
                if vis[i]:
                    painter.setBrush(self._fills[i])
                    painter.drawRoundedRect(self.rects[i], 6, 6)
        else:
            # Zoomed out, frames are drawn per nesting depth in one call each (outer first).
            seen = vis & ((self.y1 - self.y0) * lod >= 0.5)  # a frame under half a pixel: skip
            for rgba, idx in self._container_buckets:
                sel = idx[seen[idx]]
                if len(sel):
                    painter.setBrush(QColor.fromRgba(rgba))
                    painter.drawRects([self.rects[i] for i in sel.tolist()])
        # Edges under the boxes; so far out that a layer gap is a few pixels, none at all.
        evis: list[int] = []
        if lod >= EDGE_LOD:
            evis = np.nonzero((self.ex1 >= ex0) & (self.ex0 <= ex1) & (self.ey1 >= ey0)
                              & (self.ey0 <= ey1))[0].tolist()
        # Opaque (the text colour 60 % over the background): Qt blends a translucent line
        # one scanline at a time, 30 times slower, a frame's worth on a deep model's edges.
        base = pal.color(QPalette.ColorRole.Base)
        edge_color = QColor(*(round(0.6 * a + 0.4 * b) for a, b in (
            (text.red(), base.red()), (text.green(), base.green()), (text.blue(), base.blue()))))
        pen = QPen(edge_color, 1.2)
        pen.setCosmetic(not detailed)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        if not detailed:
            lines: list[QLineF] = []
            cache = self._lines
            for e in evis:
                seg = cache.get(e)
                if seg is None:
                    pts = sc.edges[e].points
                    seg = cache[e] = [QLineF(a[0], a[1], b[0], b[1]) for a, b in pairwise(pts)]
                lines.extend(seg)
            painter.drawLines(lines)
        else:
            # An edge far longer than the view (a mask or position ids reaching every block of
            # a deep model) is drawn only where it crosses the view: stroking all of it
            # costs a frame of its own.
            span_w, span_h = 4 * (ex1 - ex0), 4 * (ey1 - ey0)
            margin = 20 / max(lod, 1e-6)  # (a pen's width past the edge of the view)
            view = (ex0 - margin, ey0 - margin, ex1 + margin, ey1 + margin)
            for e in evis:
                if self.ex1[e] - self.ex0[e] > span_w or self.ey1[e] - self.ey0[e] > span_h:
                    painter.drawPath(self._path(e, view))
                else:
                    painter.drawPath(self._path(e))
            painter.setBrush(edge_color)
            painter.setPen(Qt.PenStyle.NoPen)
            for e in evis:
                painter.drawPolygon(self._arrow(e))
            if lod >= EDGE_LABEL_LOD:
                self._paint_edge_labels(painter, evis)

        # Titles after the edges, on their own background, so entering edges pass under them.
        labelled: list[int] = []
        self.labelled = labelled
        if lod >= TEXT_LOD:
            fm = QFontMetricsF(self.fonts.label)
            fm_sub = QFontMetricsF(self.fonts.sub)
            painter.setPen(Qt.PenStyle.NoPen)
            for i in self.container_order:
                if not vis[i]:
                    continue
                b = sc.boxes[i]
                off = fm.horizontalAdvance(b.label) + 10
                tw = min(b.w - 12, off + fm_sub.horizontalAdvance(b.sublabel) + 6)
                tr = QRectF(b.x + 6, b.y + 3, tw, HEADER - 4)
                painter.setBrush(self._fills[i])
                painter.setPen(Qt.PenStyle.NoPen)
                painter.drawRect(tr)
                painter.setPen(text)
                painter.setFont(self.fonts.label)
                align = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
                painter.drawText(tr.adjusted(2, 0, 0, 0), align, b.label)
                painter.setFont(self.fonts.sub)
                painter.drawText(tr.adjusted(off, 0, 0, 0), align, b.sublabel)
                labelled.append(i)

        # Leaf boxes, one brush change per colour.
        leaf_pen = QPen(border, 1.0)
        leaf_pen.setCosmetic(True)
        painter.setPen(leaf_pen if lod > 0.15 else Qt.PenStyle.NoPen)
        # So far out that a node is under a third of a pixel, its module's frame stands for it.
        leaves = self._buckets.items() if lod * 22 >= 0.33 else ()
        for rgba, idx in leaves:
            sel = idx[vis[idx]]
            if not len(sel):
                continue
            painter.setBrush(QColor.fromRgba(rgba))
            if detailed:
                for i in sel:
                    painter.drawRoundedRect(self.rects[i], 4, 4)
            else:
                painter.drawRects([self.rects[i] for i in sel.tolist()])
        if lod >= TEXT_LOD:
            for rgba, idx in self._buckets.items():
                sel = idx[vis[idx]]
                if not len(sel):
                    continue
                painter.setPen(self._text_colors[rgba])
                for i in sel:
                    b = sc.boxes[i]
                    if b.sublabel:
                        top = QRectF(b.x, b.y + 3, b.w, 17)
                        bot = QRectF(b.x, b.y + 18, b.w, 14)
                        painter.setFont(self.fonts.label)
                        painter.drawText(top, Qt.AlignmentFlag.AlignCenter, b.label)
                        painter.setFont(self.fonts.sub)
                        painter.drawText(bot, Qt.AlignmentFlag.AlignCenter, b.sublabel)
                    else:
                        painter.setFont(self.fonts.label)
                        painter.drawText(self.rects[i], Qt.AlignmentFlag.AlignCenter, b.label)
                    labelled.append(int(i))
        else:
            self._paint_far_labels(painter, vis, lod, labelled)

        # Problem marks, search hits and the selection on top of everything.
        painter.setBrush(Qt.BrushStyle.NoBrush)
        if self.marks:
            mark_pen = QPen(QColor(220, 40, 40), 2.5, Qt.PenStyle.DashLine)
            mark_pen.setCosmetic(True)
            painter.setPen(mark_pen)
            for i in self.marks:
                if i < len(self.rects) and vis[i]:
                    painter.drawRect(self.rects[i].adjusted(-2, -2, 2, 2))
        if self.hits:
            hit_pen = QPen(QColor(255, 170, 0), 2.0)
            hit_pen.setCosmetic(True)
            painter.setPen(hit_pen)
            for i in self.hits:
                if vis[i]:
                    painter.drawRect(self.rects[i].adjusted(-3, -3, 3, 3))
        if 0 <= self.selected < len(self.rects):
            sel_pen = QPen(pal.color(QPalette.ColorRole.Highlight), 3.0)
            sel_pen.setCosmetic(True)
            painter.setPen(sel_pen)
            painter.drawRect(self.rects[self.selected].adjusted(-4, -4, 4, 4))

    def _paint_far_labels(self, painter: QPainter, vis: Any, lod: float,
                          labelled: list[int]) -> None:
        """Zoomed out below the normal text size: the label of every box still wide and tall
        enough to hold it at FAR_TEXT_PX screen pixels (module frames keep their names at
        any zoom where the name fits; nodes keep theirs a little further out)."""
        import numpy as np

        sc = self.scene_data
        assert sc is not None
        px = FAR_TEXT_PX / lod  # the font's size in scene units
        k = px / 12.0  # against the label font the widths were measured in
        sw = (self.x1 - self.x0) * lod
        sh = (self.y1 - self.y0) * lod
        cand = np.nonzero(vis & (sw >= 24) & (sh >= FAR_TEXT_PX + 2))[0]
        if len(cand) > MAX_FAR_LABELS:  # the widest first
            cand = cand[np.argsort(-sw[cand], kind="stable")[:MAX_FAR_LABELS]]
        if not len(cand):
            return
        font = QFont(self.fonts.label)
        font.setPixelSize(max(1, round(px)))
        painter.setFont(font)
        pad = 4 / lod
        text = self.palette.color(QPalette.ColorRole.Text)
        for i in cand.tolist():
            b = sc.boxes[i]
            tw = self.fonts.text_width(b.label) * k
            if tw > b.w - 2 * pad:
                continue
            if self.container[i]:
                r = QRectF(b.x + pad, b.y + pad / 2, tw + pad, px * 1.25)
                painter.fillRect(r, self._fills[i])
                painter.setPen(text)
                painter.drawText(r, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                                 b.label)
            elif px * 1.1 <= b.h:
                painter.setPen(colors.text_color_on(self._fills[i]))
                painter.drawText(self.rects[i], Qt.AlignmentFlag.AlignCenter, b.label)
            else:
                continue
            labelled.append(i)

    def _paint_edge_labels(self, painter: QPainter, evis: list[int]) -> None:
        """Tensor shapes just below each output, centred on the edge, on a small plate so
        the line does not cross the text; a label that would overlap another is skipped."""
        assert self.scene_data is not None
        fm = QFontMetricsF(self.fonts.edge)
        plate = QColor(self.palette.color(QPalette.ColorRole.Base))
        plate.setAlpha(230)
        painter.setFont(self.fonts.edge)
        ink = self.palette.color(QPalette.ColorRole.PlaceholderText)
        rows: dict[int, list[QRectF]] = {}
        for e in evis:
            edge = self.scene_data.edges[e]
            if edge.reversed or edge.entering:
                continue
            label = self.layout.edge_label(edge)
            if not label:
                continue
            x, y = edge.points[0]
            w = fm.horizontalAdvance(label) + 6
            r = QRectF(x + 3, y - 13, w, 12) if edge.across else QRectF(x - w / 2, y + 3, w, 12)
            row = rows.setdefault(round(x if edge.across else y), [])
            if any(r.intersects(o) for o in row):
                continue
            row.append(r)
            painter.fillRect(r, plate)
            painter.setPen(ink)
            painter.drawText(r, Qt.AlignmentFlag.AlignCenter, label)

    def _path(self, e: int, within: tuple[float, float, float, float] | None = None
              ) -> QPainterPath:
        """Edge `e` as lines and S-curves (kept), or, `within` a rectangle, only its pieces
        that reach into it (made for this paint)."""
        path = self._paths.get(e) if within is None else None
        if path is not None:
            return path
        assert self.scene_data is not None
        edge = self.scene_data.edges[e]
        pts = edge.points
        path = QPainterPath(QPointF(*pts[0]))
        for (px, py), (qx, qy) in pairwise(pts):
            if within is not None:  # a piece stays inside its two ends' box
                x0, y0, x1, y1 = within
                if max(px, qx) < x0 or min(px, qx) > x1 or max(py, qy) < y0 or min(py, qy) > y1:
                    path.moveTo(qx, qy)
                    continue
                if abs(px - qx) < 0.5 or abs(py - qy) < 0.5:  # a straight run: its part in view
                    path.moveTo(min(max(px, x0), x1), min(max(py, y0), y1))
                    path.lineTo(min(max(qx, x0), x1), min(max(qy, y0), y1))
                    path.moveTo(qx, qy)
                    continue
            if edge.across:  # left to right: straight along x, S-curves across
                if abs(py - qy) < 0.5:
                    path.lineTo(qx, qy)
                else:
                    mx = (px + qx) / 2
                    path.cubicTo(mx, py, mx, qy, qx, qy)
            elif abs(px - qx) < 0.5:
                path.lineTo(qx, qy)
            else:
                my = (py + qy) / 2
                path.cubicTo(px, my, qx, my, qx, qy)
        if within is None:
            self._paths[e] = path
        return path

    def _arrow(self, e: int) -> QPolygonF:
        assert self.scene_data is not None
        edge = self.scene_data.edges[e]
        x, y = edge.points[0] if edge.reversed else edge.points[-1]
        d = -1 if edge.reversed else 1
        if edge.across:
            return QPolygonF([QPointF(x, y), QPointF(x - 7 * d, y - 3.5),
                              QPointF(x - 7 * d, y + 3.5)])
        return QPolygonF([QPointF(x, y), QPointF(x - 3.5, y - 7 * d), QPointF(x + 3.5, y - 7 * d)])

    def paint_minimap(self, painter: QPainter, sx: float, sy: float, ox: float,
                      oy: float) -> None:
        """Boxes only, for the minimap's cached picture: scene x, y map to ``x * sx + ox``,
        ``y * sy + oy`` pixels (the two scales differ for a very tall or wide graph), and every
        box covers at least one pixel, so no graph comes out blank. Boxes landing on the same
        pixels are drawn once."""
        import numpy as np  # lazily: the window shows before numpy is needed

        if self.scene_data is None or not len(self.x0):
            return
        painter.setPen(Qt.PenStyle.NoPen)
        left, top = self._bounds.left(), self._bounds.top()
        X0 = np.floor((self.x0 - left) * sx + ox).astype(np.int64)
        Y0 = np.floor((self.y0 - top) * sy + oy).astype(np.int64)
        X1 = np.maximum(X0 + 1, np.ceil((self.x1 - left) * sx + ox).astype(np.int64))
        Y1 = np.maximum(Y0 + 1, np.ceil((self.y1 - top) * sy + oy).astype(np.int64))
        groups = [(rgba, idx) for rgba, idx in self._container_buckets]
        groups += list(self._buckets.items())
        # One 48-bit key per pixel rectangle (12 bits a coordinate; the minimap is a few
        # hundred pixels), de-duplicated by a sort: np.unique over rows costs 0.4 s at 100k
        # boxes, and its first call imports numpy.ma (another 0.3 s).
        key = np.clip(X0, 0, 4095)
        for c in (Y0, X1, Y1):
            key = (key << 12) | np.clip(c, 0, 4095)
        for rgba, idx in groups:
            if not len(idx):
                continue
            k = np.sort(key[idx])
            k = k[np.concatenate(([True], k[1:] != k[:-1]))]
            a, b, c, d = (k >> 36) & 4095, (k >> 24) & 4095, (k >> 12) & 4095, k & 4095
            painter.setBrush(QBrush(QColor.fromRgba(rgba)))
            painter.drawRects([QRect(*r) for r in zip(a.tolist(), b.tolist(),
                                                      (c - a).tolist(), (d - b).tolist(),
                                                      strict=True)])


class _Rects:
    """The QRectF of each box, made when first painted: most boxes of a 100k-node graph are
    never on screen, and making them all costs a tenth of a second per layout."""

    def __init__(self, x: Any, y: Any, w: Any, h: Any) -> None:
        self._x, self._y, self._w, self._h = x.tolist(), y.tolist(), w.tolist(), h.tolist()
        self._made: dict[int, QRectF] = {}

    def __len__(self) -> int:
        return len(self._x)

    def __getitem__(self, i: int) -> QRectF:
        r = self._made.get(i)
        if r is None:
            r = self._made[i] = QRectF(self._x[i], self._y[i], self._w[i], self._h[i])
        return r
