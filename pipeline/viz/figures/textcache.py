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
renderer (``tests/viz/test_png.py`` compares them). A string whose glyphs
share no pixel is kept as one image and blended with one call (matplotlib
blends each glyph in turn: a call per glyph, most of a text's drawing once
the bitmaps are kept); the font of each font property, and its line height
that matplotlib's text layout reads from the font's tables for every text,
are looked up once per draw.

Only plain text takes this path; mathtext and TeX are drawn as matplotlib draws them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag
from matplotlib.font_manager import fontManager, get_font
from matplotlib.ft2font import RenderMode

__all__ = ["TextCachingCanvas"]

#: Strings and glyph bitmaps kept per canvas before starting afresh (bounds its memory).
_MAX_ENTRIES = 20_000
#: The font tables Text._get_layout reads a line's height from, in its order.
_HEIGHT_TABLES = (
    ("OS/2", "sTypoLineGap", "sTypoAscender", "sTypoDescender"),
    ("hhea", "lineGap", "ascent", "descent"),
)


class _CachingRenderer(RendererAgg):
    """:class:`RendererAgg` that reuses shaped strings, glyph bitmaps and font look-ups."""

    def __init__(self, width: float, height: float, dpi: float, caches: dict) -> None:
        super().__init__(width, height, dpi)
        self._layouts: dict[tuple, list] = caches.setdefault("layouts", {})
        self._glyphs: dict[tuple, tuple] = caches.setdefault("glyphs", {})
        self._strings: dict[tuple, tuple] = caches.setdefault("strings", {})
        # Font properties (by hash, as matplotlib's own caches key them) -> the font
        # file and its height metrics, for one draw: rcParams may change between draws.
        self._fonts: dict[int, tuple] = {}

    def new_draw(self) -> None:
        """Forget the fonts resolved so far (a draw may follow a change of rcParams)."""
        self._fonts.clear()

    def _font(self, prop) -> tuple:
        """(font file, (ascent, descent, line gap) in pixels or Nones) for ``prop``, this draw."""
        key = hash(prop)
        found = self._fonts.get(key)
        if found is None:
            # As Text._get_layout measures a line's height without this renderer's help.
            font = get_font(fontManager._find_fonts_by_props(prop))
            metrics = (None, None, None)
            for table_name, gap_key, ascent_key, descent_key in _HEIGHT_TABLES:
                table = font.get_sfnt_table(table_name)
                if table is None:
                    continue
                units_per_em = font.get_sfnt_table("head")["unitsPerEm"]
                scale = 1 / units_per_em * prop.get_size_in_points() * self.dpi / 72
                metrics = (table[ascent_key] * scale, -table[descent_key] * scale,
                           table[gap_key] * scale)  # fmt: skip
                break
            found = self._fonts[key] = (font.fname, metrics)
        return found

    def _get_font_height_metrics(self, prop):
        # Text._get_layout asks the renderer first (matplotlib >= 3.10), else finds the
        # font and reads its tables itself: for every text on every draw, a tenth of a
        # widget's redraw. The same numbers, looked up once per font and draw.
        ascent, descent, gap = self._font(prop)[1]
        return ascent, descent, gap

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if ismath:
            return super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)
        flags = get_hinting_flag()
        features = mtext.get_fontfeatures() if mtext is not None else None
        language = mtext.get_language() if mtext is not None else None
        size = prop.get_size_in_points()
        # The font file as resolved in this draw (rcParams may have changed since the
        # last), not the properties alone.
        key = (self._font(prop)[0], hash(prop), size, self.dpi, s, flags,
               _hashable(features), _hashable(language))  # fmt: skip
        items = self._layouts.get(key)
        if items is None:
            font = self._prepare_font(prop)
            laid = font._layout(s, flags=flags, features=features, language=language)
            items = [(item.ft_object, item.glyph_index, item.x, item.y) for item in laid]
            if len(self._layouts) >= _MAX_ENTRIES:
                self._layouts.clear()
            self._layouts[key] = items
        if items:
            self._draw_string(gc, x, y, angle, size, key, items, flags)
        return None

    def _draw_string(self, gc, x, y, angle, size, key, items, flags) -> None:
        # As RendererAgg._draw_text_glyphs_and_boxes for plain text (no slant, no
        # extension, no boxes): each glyph rendered at its pen position, in 1/64
        # pixels. The string is kept as one image per set of pen positions relative
        # to the first glyph's pixel, drawn with one call.
        cos = math.cos(math.radians(angle))
        sin = math.sin(math.radians(angle))
        matrix = (0x10000 * np.array([[cos, -sin], [sin, cos]]) @ [[1, 0], [0, 1]]).round()
        matrix = matrix.astype(int)
        antialiased = gc.get_antialiased()
        height = self.height
        # FreeType's y is upwards.
        pens = [
            (round(0x40 * (x + dx * cos - dy * sin)),
             round(0x40 * (height - y + dx * sin + dy * cos)))
            for _, _, dx, dy in items
        ]  # fmt: skip
        origin_x, origin_y = pens[0][0] >> 6, pens[0][1] >> 6
        relative = tuple((px - (origin_x << 6), py - (origin_y << 6)) for px, py in pens)
        string_key = (key, tuple(matrix.ravel().tolist()), antialiased, relative)
        kept = self._strings.get(string_key)
        if kept is None:
            kept = self._compose(items, relative, matrix, size, flags, antialiased)
            if len(self._strings) >= _MAX_ENTRIES:
                self._strings.clear()
            self._strings[string_key] = kept
        for image, column, row in kept:
            # draw_text_image's y is downwards and names the image's bottom row.
            self._renderer.draw_text_image(
                image, origin_x + column, int(height) - origin_y + row + image.shape[0], 0, gc
            )

    def _compose(self, items, relative, matrix, size, flags, antialiased) -> list:
        """The string's glyphs as ``[(image, column, row)]`` placed from its first pen's pixel.

        One image holding every glyph when no two glyphs cover the same pixel:
        blending a pixel once with its only glyph's coverage is what blending each
        glyph in turn does (zero coverage leaves a pixel alone). Where glyphs
        overlap, blending twice is not blending once, so each glyph stays apart.
        """
        matrix_key = tuple(matrix.ravel().tolist())
        mode = RenderMode.NORMAL if antialiased else RenderMode.MONO
        placed = []
        for (font, glyph_index, _, _), (pen_x, pen_y) in zip(items, relative, strict=True):
            key = (font.fname, size, self.dpi, glyph_index, matrix_key, pen_x & 63, pen_y & 63,
                   flags, antialiased)  # fmt: skip
            glyph = self._glyphs.get(key)
            if glyph is None:
                font.set_size(size, self.dpi)
                font._set_transform(matrix, [pen_x, pen_y])
                bitmap = font._render_glyph(glyph_index, flags, mode)
                buffer = np.array(bitmap.buffer)
                if not antialiased:
                    buffer *= 0xFF
                glyph = (buffer, bitmap.left - (pen_x >> 6), bitmap.top - (pen_y >> 6))
                if len(self._glyphs) >= _MAX_ENTRIES:
                    self._glyphs.clear()
                self._glyphs[key] = glyph
            buffer, left, top = glyph
            if buffer.size:
                # Column and row (downwards) of the bitmap's top left, from the origin pixel.
                placed.append((buffer, left + (pen_x >> 6), -(top + (pen_y >> 6))))
        if len(placed) < 2:
            return placed
        first_column = min(column for _, column, _ in placed)
        first_row = min(row for _, _, row in placed)
        width = max(column + b.shape[1] for b, column, _ in placed) - first_column
        rows = max(row + b.shape[0] for b, _, row in placed) - first_row
        image = np.zeros((rows, width), dtype=np.uint8)
        covered = np.zeros((rows, width), dtype=bool)
        for buffer, column, row in placed:
            r, c = row - first_row, column - first_column
            window = (slice(r, r + buffer.shape[0]), slice(c, c + buffer.shape[1]))
            inked = buffer > 0
            if (covered[window] & inked).any():
                return placed
            covered[window] |= inked
            image[window] += buffer
        return [(image, first_column, first_row)]


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
        self.renderer.new_draw()
        return self.renderer
