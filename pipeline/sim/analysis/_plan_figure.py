"""The frontier figure of a :class:`~pipeline.sim.analysis.plan_result.Plan`.

One panel per SLO: the metric's mean for each configuration run, against the
first cost field (usually ``concurrency``), one line per combination of the
other searched fields; error bars reach the one-sided confidence bounds; the
limit is a dashed line; the chosen configuration is a star; configurations
queueing theory rejected (not run) are shaded. matplotlib is imported here
only, when a figure is asked for.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .plan_result import Plan

__all__: list[str] = []


def _show(value: Any) -> str:
    return "unbounded" if value is None else str(value)


def _new_figure(panels: int) -> tuple[Figure, list[Any]]:
    import matplotlib.pyplot as plt

    columns = min(panels, 3)
    rows = math.ceil(panels / columns)
    # Made through pyplot so Jupyter's inline backend shows it, then closed at once:
    # pyplot keeps no reference and the cell shows it once, as its value.
    fig = plt.figure(figsize=(5.2 * columns, 3.8 * rows), layout="constrained")
    plt.close(fig)
    axes = fig.subplots(rows, columns, squeeze=False).ravel().tolist()
    for extra in axes[panels:]:
        extra.set_visible(False)
    return fig, axes[:panels]


def frontier_figure(plan: Plan, ax: Any = None) -> Figure:
    """Each SLO's metric against cost, with bounds, limits, the choice and unstable points.

    Args:
        plan: what :func:`~pipeline.sim.analysis.plan.plan` returned.
        ax: axes to draw into, one per SLO (default: a new figure).

    Raises:
        ValueError: fewer axes given than the plan has SLOs.
    """
    slos = plan.slos
    if ax is None:
        fig, axes = _new_figure(len(slos))
    else:
        axes = list(ax) if isinstance(ax, list | tuple) else [ax]
        if len(axes) < len(slos):
            raise ValueError(f"the frontier needs {len(slos)} axes (one per SLO), got {len(axes)}")
        fig = axes[0].get_figure(root=True)

    x_field, others = plan.cost[0], plan.cost[1:]
    ranked = plan._ranked_values(x_field)
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in ranked)

    def x_of(value: Any) -> float:
        return float(value) if numeric else float(ranked.index(value))

    groups: dict[tuple[Any, ...], list[Any]] = {}
    for candidate in plan._candidates:
        groups.setdefault(tuple(candidate.point[f] for f in others), []).append(candidate)
    target = plan._target if plan.status == "chosen" else None

    for index, (slo, axis) in enumerate(zip(slos, axes, strict=False)):
        for g, (key, members) in enumerate(groups.items()):
            ran = [c for c in members if c.judgements]
            label = ", ".join(f"{f}={_show(v)}" for f, v in zip(others, key, strict=True))
            if ran:
                xs = [x_of(c.point[x_field]) for c in ran]
                means = [c.judgements[index].mean for c in ran]
                spans = (c.judgements[index].half_width for c in ran)
                halves = [h if math.isfinite(h) else 0.0 for h in spans]
                axis.errorbar(
                    xs, means, yerr=halves, marker="o", markersize=4, capsize=3,
                    linewidth=1, color=f"C{g % 10}", label=label or None,
                )  # fmt: skip
            for c in members:
                if c.verdict == "unstable":
                    x = x_of(c.point[x_field])
                    axis.axvspan(x - 0.5, x + 0.5, color="0.9", zorder=0, linewidth=0)
        axis.axhline(slo.limit, color="C3", linestyle="--", linewidth=1, label=f"limit {slo}")
        if target is not None:
            j = target.judgements[index]
            axis.plot(
                [x_of(target.point[x_field])], [j.mean], marker="*", markersize=16,
                color="gold", markeredgecolor="black", linestyle="none", label="chosen",
            )  # fmt: skip
        axis.set_title(str(slo))
        axis.set_xlabel(x_field + ("" if numeric else " (in cost order)"))
        axis.set_ylabel(slo.metric)
        if not numeric:
            axis.set_xticks(range(len(ranked)), [_show(v) for v in ranked])
        handles, _ = axis.get_legend_handles_labels()
        if handles:
            axis.legend(fontsize="small")
    level = f"{100 * plan.look_confidence:.4g}%"
    fig.suptitle(
        f"plan: {plan.status} -- means with one-sided {level} bounds; shaded: unstable, not run"
    )
    return fig
