"""Figure plumbing shared by :mod:`~.run` and :mod:`~.theory`.

One colour per quantity (so "memory" is the same green in every figure), new
figures that leak no pyplot state, the caller's axes when given, and a legend
only when something is labelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__: list[str] = []  # private helpers; the public plots live in plots.py and overlays.py

COLORS = {
    "queue": "C0",
    "in_flight": "C1",
    "upstream": "C3",
    "wait": "C0",
    "latency": "C1",
    "age": "C4",
    "memory": "C2",
    "dead": "C3",
    "retry": "C1",
    "theory": "black",
}


def new_figure(
    nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None, **kwargs: Any
) -> tuple[Figure, np.ndarray]:
    """A new figure with an ``nrows`` x ``ncols`` array of axes; ``figsize`` in inches."""
    import matplotlib.pyplot as plt

    figsize = figsize or (6.4 * ncols if ncols > 1 else 7.0, 3.6 * nrows)
    # Made through pyplot so that Jupyter's inline backend is set up and shows the
    # returned figure as an image, then closed at once: pyplot keeps no reference,
    # the cell shows it once (as its value), and nothing accumulates.
    fig = plt.figure(figsize=figsize, layout="constrained", **kwargs)
    plt.close(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def axes_list(ax: Axes | Sequence[Axes] | None, default: int, figsize=None):
    """A figure and ``default`` axes, or the caller's axes (one or a sequence)."""
    if ax is None:
        fig, axes = new_figure(1, default, figsize=figsize)
        return fig, list(axes.ravel())
    axes = [ax] if isinstance(ax, Axes) else list(ax)
    return axes[0].get_figure(root=True), axes


def legend(ax: Axes, **kwargs: Any) -> None:
    """A legend, when anything is labelled (an empty run may have nothing to show)."""
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(**kwargs)
