"""The frontier figure of a :class:`~pipeline.sim.analysis.planning.result.Plan`.

One panel per SLO: the metric's mean for each configuration run, against the
first cost field (usually ``concurrency``), one line per combination of the
other searched fields; error bars reach the one-sided confidence bounds; the
limit is a dashed line; the chosen configuration is a star; configurations
queueing theory rejected (not run) are shaded; a red cross marks a latency or
wait SLO failed because some run's drain timed out. Titles and axes are in words
(``p95 latency ≤ 0.5 s``, :mod:`~pipeline._units`).
:meth:`Plan.figure() <pipeline.sim.analysis.planning.result.Plan.figure>` draws through
here, so the simulation layer never imports matplotlib.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..._units import metric_range, slo_text
from ...sim.analysis.planning.records import ranked_values
from .units import metric_axis

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ...sim.analysis.planning.result import Plan
    from ...sim.analysis.planning.slo import SLO

__all__ = ["frontier_figure"]

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
    frontier = _Frontier(plan, scenario)
    before = _chosen_candidate(previous)
    for index, (slo, axis) in enumerate(zip(slos, axes, strict=False)):
        frontier.panel(axis, index, slo, previous, before)
    _legend(fig, axes[: len(slos)], outside=ax is None)
    level = f"{100 * plan.look_confidence:.4g}%"
    where = "" if scenario is None else f" in scenario {scenario!r}"
    fig.suptitle(
        f"plan: {plan.status}{where} -- means with one-sided {level} bounds; "
        "shaded: unstable, not run"
    )
    return fig


class _Frontier:
    """One plan's panels: the x axis (the first cost field), the groups of configurations
    (one line per combination of the other fields) and, per SLO, what a panel draws."""

    def __init__(self, plan: Plan, scenario: str | None) -> None:
        self.plan, self.scenario = plan, scenario
        self.x_field, self.others = plan.cost[0], plan.cost[1:]
        self.ranked = ranked_values(plan.search[self.x_field])
        self.numeric = all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in self.ranked
        )
        self.groups: dict[tuple[Any, ...], list[Any]] = {}
        for candidate in plan.examined:
            key = tuple(candidate.point[f] for f in self.others)
            self.groups.setdefault(key, []).append(candidate)
        self.target = plan.target if plan.status == "chosen" else None

    def judged(self, candidate: Any) -> tuple[Any, ...]:
        """The candidate's judgements: the deciding scenario's per SLO, or the one asked."""
        if self.scenario is None:
            return candidate.judgements
        return candidate.by_scenario.get(self.scenario, ())

    def x_of(self, value: Any) -> float:
        return float(value) if self.numeric else float(self.ranked.index(value))

    def panel(self, axis: Any, index: int, slo: SLO, previous: Plan | None, before: Any) -> None:
        """SLO ``index``'s panel: each group's means and bounds, the limit, the choices."""
        shown = [slo.limit]
        # A bound of a few skewed runs can lie orders of magnitude out: drawn whole, it would
        # set the scale (and a byte axis's ticks) and hide every mean. Bars stop at the top.
        means_here = [
            self.judged(c)[index].mean
            for c in self.plan.examined
            if self.judged(c) and index < len(self.judged(c))
        ]
        finite = [abs(v) for v in (slo.limit, *means_here) if math.isfinite(v)]
        top = BOUND_SCALE * max(finite, default=1.0)
        off_scale: list[tuple[float, float]] = []
        for g, (key, members) in enumerate(self.groups.items()):
            shown += self.group(axis, index, slo, g, key, members, top, off_scale)
        if off_scale:
            axis.plot(
                *zip(*off_scale, strict=True), marker="^", markersize=7, color="0.3",
                linestyle="none", label="bound beyond the scale (too few runs)",
            )  # fmt: skip
        axis.axhline(slo.limit, color="C3", linestyle="--", linewidth=1, label="limit")
        self.choices(axis, index, slo, previous, before)
        axis.set_title(slo_text(slo))
        axis.set_xlabel(self.x_field + ("" if self.numeric else " (in cost order)"))
        _scale_y(axis, slo.metric, [*shown, top] if off_scale else shown)
        if not self.numeric:
            axis.set_xticks(range(len(self.ranked)), [_show(v) for v in self.ranked])
        elif all(isinstance(v, int) for v in self.ranked):
            from matplotlib.ticker import MaxNLocator

            axis.xaxis.set_major_locator(MaxNLocator(integer=True))

    def group(
        self,
        axis: Any,
        index: int,
        slo: SLO,
        g: int,
        key: tuple[Any, ...],
        members: list[Any],
        top: float,
        off_scale: list[tuple[float, float]],
    ) -> list[float]:
        """One group's line of means with its bounds (and the bounds past ``top``, added to
        ``off_scale``), its drain cuts and its unstable points; returns the means drawn."""
        ran = [c for c in members if self.judged(c)]
        label = ", ".join(f"{f}={_show(v)}" for f, v in zip(self.others, key, strict=True))
        means: list[float] = []
        if ran:
            found = [self.judged(c)[index] for c in ran]
            xs = [self.x_of(c.point[self.x_field]) for c in ran]
            means = [j.mean for j in found]
            # Down to the lower bound, up to the upper one: asymmetric when exact binomial.
            # No bar reaches outside what the metric can take (a depth below 0).
            floor, ceiling = metric_range(slo.metric)
            below = [j.mean - max(j.low, floor) for j in found]
            above = [min(j.high, top, ceiling) - j.mean for j in found]
            off_scale += [
                (x, top) for x, j in zip(xs, found, strict=True) if min(j.high, ceiling) > top
            ]
            spans = [[h if math.isfinite(h) else 0.0 for h in side] for side in (below, above)]
            axis.errorbar(
                xs, means, yerr=spans, marker="o", markersize=4, capsize=3,
                linewidth=1, color=f"C{g % 10}", label=label or None,
            )  # fmt: skip
            # A run whose drain timed out fails this SLO whatever the mean: say so.
            cut = [c for c in ran if self.judged(c)[index].drain_timed_out]
            if cut:
                axis.plot(
                    [self.x_of(c.point[self.x_field]) for c in cut],
                    [self.judged(c)[index].mean for c in cut],
                    marker="x", markersize=9, markeredgewidth=2, color="C3",
                    linestyle="none", label="drain timed out: fails",
                )  # fmt: skip
        for c in members:
            if c.verdict == "unstable":
                x = self.x_of(c.point[self.x_field])
                axis.axvspan(x - 0.5, x + 0.5, color="0.9", zorder=0, linewidth=0)
        return means

    def choices(self, axis: Any, index: int, slo: SLO, previous: Plan | None, before: Any) -> None:
        """The previous plan's limit (where it differs), this plan's choice, the previous one's."""
        if previous is not None and previous.slos[index].limit != slo.limit:
            axis.axhline(
                previous.slos[index].limit, color="C3", alpha=0.35, linestyle=":",
                linewidth=1.5, label="previous limit",
            )  # fmt: skip
        target = self.target
        if target is not None and self.judged(target):
            j = self.judged(target)[index]
            axis.plot(
                [self.x_of(target.point[self.x_field])], [j.mean], marker="*", markersize=16,
                color="gold", markeredgecolor="black", linestyle="none", label="chosen",
            )  # fmt: skip
        if before is not None and before.point[self.x_field] in self.ranked:
            axis.plot(
                [self.x_of(before.point[self.x_field])], [before.judgements[index].mean],
                marker="*", markersize=16, markerfacecolor="none", markeredgecolor="0.35",
                linestyle="none", label="previous choice",
            )  # fmt: skip


def _chosen_candidate(plan: Plan | None) -> Any:
    return plan.target if plan is not None and plan.status == "chosen" else None


def _scale_y(axis: Any, metric: str, values: list[float]) -> None:
    """Words on the y axis, a log scale for a wide positive range, ticks in the metric's unit."""
    finite = [v for v in values if math.isfinite(v)]
    log = bool(finite) and min(finite) > 0 and max(finite) > 20 * min(finite)
    if log:
        axis.set_yscale("log")
    axis.set_ylabel(metric_axis(axis.yaxis, metric, max(finite, default=1.0), log=log))


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
