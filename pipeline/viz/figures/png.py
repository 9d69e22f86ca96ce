"""A figure as PNG display data for an ``ipywidgets.Output``, sharp on retina screens.

Widgets show their figures as ``image/png`` display data placed straight into
an ``Output`` widget's ``outputs``: the browser shows an ``<img>`` with a
``data:`` URL and no pyplot figure stays open. The PNG holds ``scale`` device
pixels per displayed pixel; the ``width``/``height`` metadata (which JupyterLab
and the classic notebook honour) display it at its nominal size, so on a
high-density screen it is as sharp as the screen, and elsewhere it is
downsampled by the browser. JupyterLab's CSS caps an image at the cell's width.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from matplotlib.figure import Figure

__all__: list[str] = []

#: Device pixels per displayed pixel in widget figures: 2 is a retina screen's density.
RETINA_SCALE = 2


def figure_png(figure: Figure, scale: float = RETINA_SCALE) -> bytes:
    """``figure`` rendered at ``scale`` times its dpi, as PNG bytes (fast, light compression)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi * scale, pil_kwargs={"compress_level": 1})
    return buffer.getvalue()


def png_display_data(png: bytes, size_px: tuple[int, int], text: str) -> dict[str, Any]:
    """One ``display_data`` output showing ``png`` at ``size_px`` (width, height) CSS pixels."""
    width, height = size_px
    return {
        "output_type": "display_data",
        "data": {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": text},
        "metadata": {"image/png": {"width": int(width), "height": int(height)}},
    }


def displayed_size(figure: Figure) -> tuple[int, int]:
    """(width, height) of ``figure`` as displayed: inches times dpi, CSS pixels."""
    width, height = figure.get_size_inches() * figure.dpi
    return round(width), round(height)
