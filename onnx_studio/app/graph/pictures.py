"""The laid-out graph saved as a picture: a PNG (scaled down when very large) or an SVG."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QGraphicsScene

MAX_EXPORT_PIXELS = 12000  # longest side of an exported PNG


def save_png(scene: QGraphicsScene, rect: QRectF, background: QColor, path: str | Path) -> None:
    """Render `rect` of `scene` on `background` into a PNG at `path` (1.5 px per unit, less
    when the longest side would pass MAX_EXPORT_PIXELS); OSError when it cannot be written."""
    s = min(1.5, MAX_EXPORT_PIXELS / max(rect.width(), rect.height(), 1))
    img = QImage(max(1, int(rect.width() * s)), max(1, int(rect.height() * s)),
                 QImage.Format.Format_ARGB32)
    img.fill(background)
    p = QPainter(img)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    scene.render(p, QRectF(img.rect()), rect)
    p.end()
    if not img.save(str(path), "PNG"):  # type: ignore[call-overload]
        raise OSError(f"Could not write {path}.")


def save_svg(scene: QGraphicsScene, rect: QRectF, background: QColor, path: str | Path,
             title: str) -> None:
    """Render `rect` of `scene` on `background` into an SVG drawing at `path`."""
    from PySide6.QtSvg import QSvgGenerator

    gen = QSvgGenerator()
    gen.setFileName(str(path))
    gen.setSize(rect.size().toSize())
    gen.setViewBox(QRectF(0, 0, rect.width(), rect.height()))
    gen.setTitle(title)
    p = QPainter(gen)
    p.fillRect(QRectF(0, 0, rect.width(), rect.height()), background)
    scene.render(p, QRectF(0, 0, rect.width(), rect.height()), rect)
    p.end()
