"""An Agg canvas that remembers text it has rasterised: a widget's redraw is mostly text.

A widget redraws the same figure on every change: the same titles, labels,
legend entries and most tick labels, at the same size. matplotlib's Agg
renderer shapes each string and rasterises each glyph afresh on every draw
(about half of a widget's redraw, at twice the displayed density).
:class:`TextCachingCanvas` keeps, per canvas, each string's shaped glyphs and
each glyph's bitmap, keyed by everything the bitmap depends on (font file,
size, dpi, glyph, rotation, the pen's position within its pixel in 1/64ths,
hinting and antialiasing). A glyph moved by whole pixels is the same bitmap
moved by whole pixels, so the drawn pixels are exactly those of the plain
renderer (``tests/viz/test_png.py`` compares them).

Only plain text takes this path; mathtext and TeX are drawn as matplotlib draws them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag
from matplotlib.ft2font import RenderMode

__all__ = ["TextCachingCanvas"]

#: Strings and glyph bitmaps kept per canvas before starting afresh (bounds its memory).
_MAX_ENTRIES = 20_000


class _CachingRenderer(RendererAgg):
    """:class:`RendererAgg` that reuses shaped strings and glyph bitmaps."""

    def __init__(self, width: float, height: float, dpi: float, caches: dict) -> None:
        super().__init__(width, height, dpi)
        self._layouts: dict[tuple, list] = caches.setdefault("layouts", {})
        self._glyphs: dict[tuple, tuple] = caches.setdefault("glyphs", {})

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if ismath:
            return super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)
        flags = get_hinting_flag()
        features = mtext.get_fontfeatures() if mtext is not None else None
        language = mtext.get_language() if mtext is not None else None
        size = prop.get_size_in_points()
        # The font file as resolved now (rcParams may have changed since), not the properties.
        font = self._prepare_font(prop)
        key = (font.fname, hash(prop), size, self.dpi, s, flags, _hashable(features),
               _hashable(language))  # fmt: skip
        items = self._layouts.get(key)
        if items is None:
            laid = font._layout(s, flags=flags, features=features, language=language)
            items = [(item.ft_object, item.glyph_index, item.x, item.y) for item in laid]
            if len(self._layouts) >= _MAX_ENTRIES:
                self._layouts.clear()
            self._layouts[key] = items
        self._draw_glyphs(gc, x, y, angle, size, items, flags)
        return None

    def _draw_glyphs(self, gc, x, y, angle, size, items, flags) -> None:
        # As RendererAgg._draw_text_glyphs_and_boxes for plain text (no slant, no
        # extension, no boxes), with each glyph's bitmap kept.
        cos = math.cos(math.radians(angle))
        sin = math.sin(math.radians(angle))
        matrix = (0x10000 * np.array([[cos, -sin], [sin, cos]]) @ [[1, 0], [0, 1]]).round()
        matrix = matrix.astype(int)
        matrix_key = tuple(matrix.ravel().tolist())
        antialiased = gc.get_antialiased()
        mode = RenderMode.NORMAL if antialiased else RenderMode.MONO
        height = self.height
        glyphs = self._glyphs
        for font, glyph_index, dx, dy in items:
            pen_x = round(0x40 * (x + dx * cos - dy * sin))
            pen_y = round(0x40 * (height - y + dx * sin + dy * cos))
            key = (font.fname, size, self.dpi, glyph_index, matrix_key, pen_x & 63, pen_y & 63,
                   flags, antialiased)  # fmt: skip
            kept = glyphs.get(key)
            if kept is None:
                font.set_size(size, self.dpi)
                font._set_transform(matrix, [pen_x, pen_y])
                bitmap = font._render_glyph(glyph_index, flags, mode)
                buffer = np.array(bitmap.buffer)
                if not antialiased:
                    buffer *= 0xFF
                kept = (buffer, bitmap.left - (pen_x >> 6), bitmap.top - (pen_y >> 6))
                if len(glyphs) >= _MAX_ENTRIES:
                    glyphs.clear()
                glyphs[key] = kept
            buffer, left, top = kept
            top += pen_y >> 6
            self._renderer.draw_text_image(
                buffer, left + (pen_x >> 6), int(height) - top + buffer.shape[0], 0, gc
            )


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


class TextCachingCanvas(FigureCanvasAgg):
    """:class:`FigureCanvasAgg` whose renderer keeps shaped strings and glyph bitmaps."""

    def __init__(self, figure=None) -> None:
        super().__init__(figure)
        self._text_caches: dict = {}

    def get_renderer(self):
        # FigureCanvasAgg.get_renderer with the caching renderer (one per size and dpi,
        # as there); the caches outlive renderers, their keys name the dpi.
        w, h = self.get_width_height(physical=True)
        key = w, h, self.figure.dpi
        if self._lastKey != key:
            self.renderer = _CachingRenderer(w, h, self.figure.dpi, self._text_caches)
            self._lastKey = key
        return self.renderer
