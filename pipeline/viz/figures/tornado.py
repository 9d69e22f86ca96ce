"""The tornado chart of a sensitivity analysis
(:mod:`~pipeline.sim.analysis.planning.sensitivity`).

One panel per SLO. Each input is a row, largest effect at the top; its bar
runs from the metric's mean with the input moved down to the mean with it
moved up, across the mean at the plan's input (a thin black line). Each end is
blue where the SLO still meets there and red where it fails (grey:
undecided); the SLO's limit is a dashed line. ``Sensitivity.figure()`` draws
through here, so the simulation layer never imports matplotlib.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..._units import slo_text
from ...sim.analysis.planning.slo import SLO
from .units import metric_axis

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["tornado_figure"]

_COLOURS = {"meets": "#4477aa", "fails": "#cc3311", "undecided": "#999999"}


def tornado_figure(sensitivity: Mapping[str, Any], ax: Any = None) -> Figure:
    """A tornado chart of ``sensitivity``, a :meth:`Sensitivity.to_dict` dict.

    Args:
        sensitivity: ``{"change": 0.2, "rows": [...], ...}`` as
            :meth:`~pipeline.sim.analysis.planning.sensitivity.Sensitivity.to_dict`
            returns it.
        ax: axes to draw into, one per SLO (default: a new figure).

    Raises:
        ValueError: ``ax`` is not one axes per SLO.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows = list(sensitivity.get("rows", []))
    slos = list(dict.fromkeys(row["slo"] for row in rows))
    panels = max(1, len(slos))
    if ax is None:
        inputs = max((sum(r["slo"] == s for r in rows) for s in slos), default=1)
        fig = plt.figure(
            figsize=(6.5, 0.45 * inputs * panels + 1.3 * panels + 0.6), layout="constrained"
        )
        plt.close(fig)
        axes = fig.subplots(panels, 1, squeeze=False).ravel().tolist()
    else:
        axes = list(ax) if isinstance(ax, list | tuple) else [ax]
        if len(axes) != panels:
            raise ValueError(f"ax must be {panels} axes (one per SLO), got {len(axes)}")
        fig = axes[0].figure
    pct = f"{100 * float(sensitivity.get('change', 0.2)):.4g}%"
    if not rows:
        axes[0].text(0.5, 0.5, "no input applied", ha="center", va="center")
        axes[0].set_axis_off()
        return fig
    for axis, text in zip(axes, slos, strict=True):
        mine = [r for r in rows if r["slo"] == text][::-1]  # largest effect on top
        try:
            slo: SLO | None = SLO.parse(text)
        except ValueError:  # a dict built by hand: draw it without a limit line
            slo = None
        for y, row in enumerate(mine):
            base = _num(row["base"])
            for end in ("low", "high"):
                value = _num(row[end])
                if math.isnan(value) or math.isnan(base) or value == base:
                    continue
                colour = _COLOURS.get(row[f"verdict_{end}"], "#999999")
                axis.barh(y, value - base, left=base, height=0.6, color=colour, alpha=0.85)
                factor = row[f"factor_{end}"]
                axis.annotate(
                    f"×{factor:g}",
                    (value, y),
                    xytext=(3 if value >= base else -3, 0),
                    textcoords="offset points",
                    ha="left" if value >= base else "right",
                    va="center",
                    fontsize=7,
                )
            axis.plot([base, base], [y - 0.4, y + 0.4], color="black", linewidth=1)
        if slo is not None:
            axis.axvline(slo.limit, color="black", linestyle="--", linewidth=1)
        axis.set_yticks(range(len(mine)), [row["input"] for row in mine])
        if slo is not None:
            reached = [_num(row[key]) for row in mine for key in ("base", "low", "high")]
            top = max([v for v in reached if math.isfinite(v)] + [slo.limit], default=1.0)
            axis.set_xlabel(metric_axis(axis.xaxis, slo.metric, top))
        else:
            axis.set_xlabel(text)
        title = slo_text(slo) if slo is not None else text
        axis.set_title(f"{title}: each input ±{pct}", fontsize=10)
        axis.margins(x=0.15)
    fig.legend(
        handles=[Patch(color=c, label=f"SLO {v} at that end") for v, c in _COLOURS.items()]
        + [Patch(facecolor="none", edgecolor="black", linestyle="--", label="limit")],
        loc="outside lower center",
        ncols=4,
        fontsize=8,
        frameon=False,
    )
    return fig


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)
