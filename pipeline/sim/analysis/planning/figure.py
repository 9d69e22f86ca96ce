"""The frontier figure of a :class:`~pipeline.sim.analysis.planning.result.Plan`.

One panel per SLO: the metric's mean for each configuration run, against the
first cost field (usually ``concurrency``), one line per combination of the
other searched fields; error bars reach the one-sided confidence bounds; the
limit is a dashed line; the chosen configuration is a star; configurations
queueing theory rejected (not run) are shaded; a red cross marks a latency or
wait SLO failed because some run's drain timed out. Titles and axes are in words
(``p95 latency ≤ 0.5 s``, :mod:`~pipeline._units`).
matplotlib is imported here only, when a figure is asked for.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pipeline._units import (
    METRIC_LABELS,
    human_bytes,
    metric_label,
    metric_range,
    scale_bytes,
    slo_text,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .result import Plan

__all__: list[str] = []

#: Error bars stop at this multiple of the largest mean or limit a panel shows; a bound
#: beyond it (a few skewed runs' bound can be 10,000 times their mean) is marked at the top.
BOUND_SCALE = 4.0


def _show(value: Any) -> str:
    return "unbounded" if value is None else str(value)


def _new_figure(panels: int) -> tuple[Figure, list[Any]]:
    import matplotlib.pyplot as plt

    columns = min(panels, 3)
    rows = math.ceil(panels / columns)
    # Made through pyplot so Jupyter's inline backend shows it, then closed at once:
    # pyplot keeps no reference and the cell shows it once, as its value.
    # 4.5 inches a panel: three side by side fit a notebook cell without shrinking the text.
    fig = plt.figure(figsize=(4.5 * columns, 3.6 * rows + 0.6), layout="constrained")
    plt.close(fig)
    axes = fig.subplots(rows, columns, squeeze=False).ravel().tolist()
    for extra in axes[panels:]:
        extra.set_visible(False)
    return fig, axes[:panels]


def frontier_figure(
    plan: Plan, ax: Any = None, previous: Plan | None = None, *, scenario: str | None = None
) -> Figure:
    """Each SLO's metric against cost, with bounds, limits, the choice and unstable points.

    A metric whose values and limit are all positive and span more than a
    factor of 100 gets a log scale (the region near the limit stays readable);
    bytes are shown in KiB/MiB/GiB and fractions as percentages. One legend
    for the whole figure sits below the panels, outside the data.

    Args:
        plan: what :func:`~pipeline.sim.analysis.planning.plan.plan` returned.
        ax: axes to draw into, one per SLO (default: a new figure).
        previous: an earlier plan over the same search and metrics (the same
            question with other limits) to compare with: its choice is drawn
            as a hollow star, and its limits, where they differ, faded.
        scenario: one scenario of the plan's set: its judgements alone (default:
            per configuration and SLO, the scenario that decides it).

    Raises:
        ValueError: fewer axes given than the plan has SLOs, a ``previous``
            plan whose SLOs name other metrics, or a ``scenario`` not in the set.
    """
    slos = plan.slos
    if scenario is not None and scenario not in plan.scenario_names:
        known = ", ".join(map(repr, plan.scenario_names)) or "none: the plan has no scenario set"
        raise ValueError(
            f"scenario must be one of the plan's scenarios ({known}), got {scenario!r}"
        )

    def judged(candidate: Any) -> tuple[Any, ...]:
        if scenario is None:
            return candidate.judgements
        return candidate.by_scenario.get(scenario, ())

    if previous is not None and [s.metric for s in previous.slos] != [s.metric for s in slos]:
        raise ValueError(
            "previous must be a plan of the same metrics, got "
            f"{[str(s) for s in previous.slos]} against {[str(s) for s in slos]}"
        )
    if ax is None:
        fig, axes = _new_figure(len(slos))
    else:
        axes = list(ax) if isinstance(ax, list | tuple) else [ax]
        if len(axes) < len(slos):
            raise ValueError(f"the frontier needs {len(slos)} axes (one per SLO), got {len(axes)}")
        fig = axes[0].get_figure(root=True)

    x_field, others = plan.cost[0], plan.cost[1:]
    ranked = plan.ranked_values(x_field)
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in ranked)

    def x_of(value: Any) -> float:
        return float(value) if numeric else float(ranked.index(value))

    groups: dict[tuple[Any, ...], list[Any]] = {}
    for candidate in plan.examined:
        groups.setdefault(tuple(candidate.point[f] for f in others), []).append(candidate)
    target = plan.target if plan.status == "chosen" else None
    before = _chosen_candidate(previous)

    for index, (slo, axis) in enumerate(zip(slos, axes, strict=False)):
        shown = [slo.limit]
        # A bound of a few skewed runs can lie orders of magnitude out: drawn whole, it would
        # set the scale (and a byte axis's ticks) and hide every mean. Bars stop at the top.
        means_here = [
            judged(c)[index].mean for c in plan.examined if judged(c) and index < len(judged(c))
        ]
        finite = [abs(v) for v in (slo.limit, *means_here) if math.isfinite(v)]
        top = BOUND_SCALE * max(finite, default=1.0)
        off_scale: list[tuple[float, float]] = []
        for g, (key, members) in enumerate(groups.items()):
            ran = [c for c in members if judged(c)]
            label = ", ".join(f"{f}={_show(v)}" for f, v in zip(others, key, strict=True))
            if ran:
                xs = [x_of(c.point[x_field]) for c in ran]
                means = [judged(c)[index].mean for c in ran]
                # Down to the lower bound, up to the upper one: asymmetric when exact binomial.
                # No bar reaches outside what the metric can take (a depth below 0).
                floor, ceiling = metric_range(slo.metric)
                below = [judged(c)[index].mean - max(judged(c)[index].low, floor) for c in ran]
                above = [
                    min(judged(c)[index].high, top, ceiling) - judged(c)[index].mean for c in ran
                ]
                off_scale += [
                    (x, top)
                    for x, c in zip(xs, ran, strict=True)
                    if min(judged(c)[index].high, ceiling) > top
                ]
                spans = [[h if math.isfinite(h) else 0.0 for h in side] for side in (below, above)]
                axis.errorbar(
                    xs, means, yerr=spans, marker="o", markersize=4, capsize=3,
                    linewidth=1, color=f"C{g % 10}", label=label or None,
                )  # fmt: skip
                shown += means
                # A run whose drain timed out fails this SLO whatever the mean: say so.
                cut = [c for c in ran if judged(c)[index].drain_timed_out]
                if cut:
                    axis.plot(
                        [x_of(c.point[x_field]) for c in cut],
                        [judged(c)[index].mean for c in cut],
                        marker="x", markersize=9, markeredgewidth=2, color="C3",
                        linestyle="none", label="drain timed out: fails",
                    )  # fmt: skip
            for c in members:
                if c.verdict == "unstable":
                    x = x_of(c.point[x_field])
                    axis.axvspan(x - 0.5, x + 0.5, color="0.9", zorder=0, linewidth=0)
        if off_scale:
            axis.plot(
                *zip(*off_scale, strict=True), marker="^", markersize=7, color="0.3",
                linestyle="none", label="bound beyond the scale (too few runs)",
            )  # fmt: skip
        axis.axhline(slo.limit, color="C3", linestyle="--", linewidth=1, label="limit")
        if previous is not None and previous.slos[index].limit != slo.limit:
            axis.axhline(
                previous.slos[index].limit, color="C3", alpha=0.35, linestyle=":",
                linewidth=1.5, label="previous limit",
            )  # fmt: skip
        if target is not None and judged(target):
            j = judged(target)[index]
            axis.plot(
                [x_of(target.point[x_field])], [j.mean], marker="*", markersize=16,
                color="gold", markeredgecolor="black", linestyle="none", label="chosen",
            )  # fmt: skip
        if before is not None and before.point[x_field] in ranked:
            axis.plot(
                [x_of(before.point[x_field])], [before.judgements[index].mean], marker="*",
                markersize=16, markerfacecolor="none", markeredgecolor="0.35",
                linestyle="none", label="previous choice",
            )  # fmt: skip
        axis.set_title(slo_text(slo))
        axis.set_xlabel(x_field + ("" if numeric else " (in cost order)"))
        _scale_y(axis, slo.metric, [*shown, top] if off_scale else shown)
        if not numeric:
            axis.set_xticks(range(len(ranked)), [_show(v) for v in ranked])
        elif all(isinstance(v, int) for v in ranked):
            from matplotlib.ticker import MaxNLocator

            axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    _legend(fig, axes[: len(slos)], outside=ax is None)
    level = f"{100 * plan.look_confidence:.4g}%"
    where = "" if scenario is None else f" in scenario {scenario!r}"
    fig.suptitle(
        f"plan: {plan.status}{where} -- means with one-sided {level} bounds; "
        "shaded: unstable, not run"
    )
    return fig


def _chosen_candidate(plan: Plan | None) -> Any:
    return plan.target if plan is not None and plan.status == "chosen" else None


def _scale_y(axis: Any, metric: str, values: list[float]) -> None:
    """Words on the y axis, a log scale for a wide positive range, ticks in the metric's unit."""
    from matplotlib.ticker import FuncFormatter, PercentFormatter

    unit = METRIC_LABELS.get(metric, ("", ""))[1]
    finite = [v for v in values if math.isfinite(v)]
    log = bool(finite) and min(finite) > 0 and max(finite) > 20 * min(finite)
    if log:
        axis.set_yscale("log")
    if unit == "bytes":
        axis.set_ylabel(METRIC_LABELS[metric][0])
        _binary_ticks(axis, max(finite, default=1.0), log)
        axis.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: human_bytes(v, digits=6)))
    elif unit == "fraction":
        axis.set_ylabel(METRIC_LABELS[metric][0])
        axis.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    else:
        axis.set_ylabel(metric_label(metric))
        if log:  # 10 and 100 s, not 10^1 and 10^2
            axis.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))


def _binary_ticks(axis: Any, top: float, log: bool) -> None:
    """Ticks at round binary sizes: 1, 2, 4, 8 MiB on a log scale; 0.5 MiB steps or so on a line."""
    from matplotlib.ticker import LogLocator, MultipleLocator, NullLocator

    if log:
        axis.yaxis.set_major_locator(LogLocator(base=2))
        axis.yaxis.set_minor_locator(NullLocator())
        return
    unit, _ = scale_bytes(top)
    span = max(top / unit, 1e-12)
    step = next(
        (k * 10.0**e for e in range(-3, 7) for k in (1, 2, 5) if span / (k * 10.0**e) <= 8), 1.0
    )
    axis.yaxis.set_major_locator(MultipleLocator(step * unit))


def _legend(fig: Any, axes: list[Any], *, outside: bool) -> None:
    """One legend for every panel: below them on a figure of our own, else on the first."""
    entries: dict[str, Any] = {}
    for axis in axes:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    if not entries:
        return
    if outside:
        fig.legend(
            entries.values(), entries.keys(), loc="outside lower center",
            ncols=min(len(entries), 5), fontsize="small",
        )  # fmt: skip
    else:
        axes[0].legend(entries.values(), entries.keys(), fontsize="small")
