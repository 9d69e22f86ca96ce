"""The widgets' PNG: the very pixels matplotlib's own PNG has, encoded by our writer."""

import io

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from pipeline.viz.figures.png import encode_png, figure_png


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))


def _figure(figsize, dpi, facecolor="white") -> Figure:
    figure = Figure(figsize=figsize, dpi=dpi, facecolor=facecolor)
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    ax.plot([0, 1, 2], [0, 3, 1], label="a line")
    ax.step([0, 1, 2], [1, 2, 0], where="post", alpha=0.4)
    ax.set_title("title")
    ax.legend()
    return figure


def _matplotlib_png(figure: Figure, scale: float) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi * scale)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("figsize", "dpi", "scale", "facecolor"),
    [
        ((11.5, 4.4), 100, 2, "white"),  # the explorer's
        ((3.33, 2.07), 72, 1.5, "white"),  # sizes that are no whole number of pixels
        ((4.0, 3.0), 100, 1, "none"),  # transparent: kept as RGBA
    ],
)
def test_figure_png_has_matplotlibs_pixels(figsize, dpi, scale, facecolor):
    figure = _figure(figsize, dpi, facecolor)
    ours = figure_png(figure, scale)
    theirs = _matplotlib_png(figure, scale)
    assert ours.startswith(b"\x89PNG\r\n\x1a\n")
    assert Image.open(io.BytesIO(ours)).size == Image.open(io.BytesIO(theirs)).size
    assert (_pixels(ours) == _pixels(theirs)).all()
    assert figure.dpi == dpi  # the figure keeps its own dpi
    mode = Image.open(io.BytesIO(ours)).mode
    assert mode == ("RGBA" if facecolor == "none" else "RGB")


@pytest.mark.parametrize("opaque", [True, False])
@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (64, 3)])
def test_encode_png_is_lossless(opaque, shape):
    rng = np.random.default_rng(3)
    rgba = rng.integers(0, 256, (*shape, 4), dtype=np.uint8)
    if opaque:
        rgba[..., 3] = 255
    png = encode_png(rgba, dpi=144)
    image = Image.open(io.BytesIO(png))
    image.load()  # checks every chunk's CRC and the zlib stream
    assert image.mode == ("RGB" if opaque else "RGBA")
    assert (np.asarray(image.convert("RGBA")) == rgba).all()
    assert image.info["dpi"] == pytest.approx((144, 144), abs=0.01)


def test_encode_png_takes_a_view():
    # A strided view (the alpha dropped from a larger buffer) encodes as its values.
    base = np.full((5, 6, 4), 255, dtype=np.uint8)
    base[2, 3] = (10, 20, 30, 255)
    png = encode_png(base[1:4, ::2])
    assert (np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")) == base[1:4, ::2]).all()


def _texty_figure(canvas, antialiased=True) -> Figure:
    figure = Figure(figsize=(5.1, 3.3), dpi=90)
    canvas(figure)
    ax = figure.subplots()
    ax.plot([0, 1, 2], [0, 3, 1], label="wait p95 (s)")
    ax.set_ylabel("queued items (rotated)")
    ax.set_xlabel("virtual time, s")
    ax.set_title("Queue depth — ünïcode ✓", fontsize=13)
    ax.text(0.4, 1.5, "at 33°", rotation=33, antialiased=antialiased)
    ax.text(1.0, 2.0, r"$\mu = 0.8$ mathtext")
    ax.legend(fontsize=9)
    figure.suptitle("maxsize=100, concurrency=4", fontsize="medium")
    return figure


@pytest.mark.parametrize("antialiased", [True, False])
def test_the_text_caching_canvas_draws_the_plain_canvas_pixels(antialiased):
    from pipeline.viz.figures.textcache import TextCachingCanvas

    plain = _pixels(figure_png(_texty_figure(FigureCanvasAgg, antialiased), 2))
    figure = _texty_figure(TextCachingCanvas, antialiased)
    first = _pixels(figure_png(figure, 2))
    again = _pixels(figure_png(figure, 2))  # every glyph from the cache
    assert (first == plain).all() and (again == plain).all()
    # Moved by a fraction of a pixel and at another dpi: other pen positions, other keys.
    figure.axes[0].set_xlim(-0.013, 2.2)
    figure.axes[0].title.set_text("Queue depth, moved")
    moved_plain = _pixels(figure_png(_texty_figure_moved(antialiased), 1.5))
    moved = _pixels(figure_png(figure, 1.5))
    assert (moved == moved_plain).all()


def _texty_figure_moved(antialiased):
    figure = _texty_figure(FigureCanvasAgg, antialiased)
    figure.axes[0].set_xlim(-0.013, 2.2)
    figure.axes[0].title.set_text("Queue depth, moved")
    return figure


def test_touching_glyphs_are_blended_one_by_one_and_the_rest_at_once():
    # A string whose glyphs share no pixel is drawn as one image; one whose glyphs
    # overlap ("___" at 20 points: each underscore's edge under the next) glyph by
    # glyph, since blending a pixel twice is not blending it once. Both as plain Agg.
    from pipeline.viz.figures.textcache import TextCachingCanvas

    def figure(canvas):
        fig = Figure(figsize=(3, 2), dpi=100)
        canvas(fig)
        fig.text(0.1, 0.2, "___", fontsize=20)
        fig.text(0.1, 0.6, "Tyjy wwww", fontsize=20)
        return fig

    cached = figure(TextCachingCanvas)
    assert (_pixels(figure_png(cached, 2)) == _pixels(figure_png(figure(FigureCanvasAgg), 2))).all()
    pieces = {key[0][4]: len(kept) for key, kept in cached.canvas.renderer._strings.items()}
    assert pieces == {"___": 3, "Tyjy wwww": 1}


def test_a_font_changed_between_draws_is_drawn_in_the_new_font():
    # Fonts are looked up once per draw, not once per canvas: a changed rcParams font
    # is drawn as the plain canvas draws it (a canvas that never cached anything).
    from matplotlib import rc_context

    from pipeline.viz.figures.textcache import TextCachingCanvas

    def draw_twice(canvas) -> tuple[np.ndarray, np.ndarray]:
        figure = _texty_figure(canvas)
        before = _pixels(figure_png(figure, 1))
        with rc_context({"font.sans-serif": ["DejaVu Serif"]}):
            after = _pixels(figure_png(figure, 1))
        return before, after

    plain_before, plain_after = draw_twice(FigureCanvasAgg)
    before, after = draw_twice(TextCachingCanvas)
    assert not (plain_before == plain_after).all()  # the font did change
    assert (before == plain_before).all() and (after == plain_after).all()
