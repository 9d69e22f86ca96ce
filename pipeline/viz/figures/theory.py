"""Matplotlib figures of simulation against theory, across many runs.

:func:`theory_for` says which queueing formulas apply to a run (Erlang C,
M/M/c/K blocking, ``p**k``), and the ``plot_*_vs_theory`` functions draw
simulated means with 95% intervals against them, one point per x. A sweep's
grid is drawn by :func:`~pipeline.viz.figures.sweep.plot_sweep`.

Like :mod:`~pipeline.viz.figures.run`, every function draws into the ``ax`` it is
given, or builds a new figure, and returns the :class:`~matplotlib.figure.Figure`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from pipeline.sim import Exponential, IndependentFailures, NoFailures, Poisson

from ...sim.stats.intervals import mean_ci
from .style import COLORS, axes_list, legend
from .sweep import axis_key

if TYPE_CHECKING:
    from pipeline.sim.running.result import SimulationResult

__all__ = [
    "plot_dead_letters_vs_theory",
    "plot_shed_vs_theory",
    "plot_wait_vs_theory",
    "theory_for",
]


# -- theory -----------------------------------------------------------------------------


def theory_for(result: SimulationResult) -> dict[str, float]:
    """The queueing formulas that apply to a run's scenario, as numbers.

    - ``wait_mean_s``: Erlang C (M/M/c) mean wait, when arrivals are Poisson,
      service exponential, ``on_full="block"`` (the wait does not depend on
      ``maxsize``), no failures, and the load is below capacity;
    - ``shed_fraction``: M/M/c/K blocking with ``K = maxsize + concurrency``,
      when Poisson/exponential, ``on_full="reject"``, bounded, no failures;
    - ``dead_letter_fraction``: ``p**k`` with independent failures of
      probability ``p`` and ``k = max_attempts``.

    Keys that do not apply are absent.
    """
    from pipeline.sim.analysis.theory import dead_letter_rate, mmc, mmck

    sc = result.scenario
    cfg = sc.config
    out: dict[str, float] = {}
    markovian = isinstance(sc.arrivals, Poisson) and isinstance(sc.service, Exponential)
    clean = isinstance(sc.failures, NoFailures)
    if markovian and clean:
        lam, mean, c = sc.arrivals.rate, sc.service.mean, cfg.concurrency
        if cfg.on_full == "block" and lam * mean < c:
            out["wait_mean_s"] = mmc(lam, mean, c).wait_mean_s
        if cfg.on_full == "reject" and cfg.queue_maxsize is not None:
            out["shed_fraction"] = mmck(lam, mean, c, cfg.queue_maxsize + c).blocking_probability
    if isinstance(sc.failures, IndependentFailures):
        out["dead_letter_fraction"] = dead_letter_rate(sc.failures.p, cfg.max_attempts)
    return out


def _runs(results_by_x: Mapping[Any, Any] | Sequence[tuple[Any, Any]]):
    """(x, [results]) pairs sorted by x; a value may be one result or Replications."""
    pairs = results_by_x.items() if isinstance(results_by_x, Mapping) else results_by_x
    out = []
    for x, runs in pairs:
        runs = getattr(runs, "results", runs)
        out.append((x, list(runs) if isinstance(runs, Sequence) else [runs]))
    return sorted(out, key=lambda pair: axis_key(pair[0]))


def _plot_vs_theory(
    results_by_x,
    measured,
    key: str,
    *,
    ax,
    xlabel: str,
    ylabel: str,
    title: str,
    theory_label: str,
    log: bool = False,
) -> Figure:
    fig, (ax,) = axes_list(ax, 1)
    runs = _runs(results_by_x)
    xs, means, halves, theory_x, theory_y = [], [], [], [], []
    for x, group in runs:
        values = np.array([measured(r) for r in group], dtype=float)
        xs.append(axis_key(x))
        values = values[np.isfinite(values)]
        if len(values) > 1:
            mean, half = mean_ci(values, level=0.95)  # Student t: few replications
        else:
            mean, half = (values[0] if len(values) else math.nan), 0.0
        means.append(mean)
        halves.append(half)
        expected = theory_for(group[0]).get(key) if group else None
        if expected is not None:
            theory_x.append(axis_key(x))
            theory_y.append(expected)
    ax.errorbar(
        xs,
        means,
        yerr=halves,
        marker="o",
        linestyle="none",
        capsize=3,
        color="C0",
        label="simulated (mean ± 95% CI)" if any(halves) else "simulated",
    )
    if theory_x:
        ax.plot(
            theory_x,
            theory_y,
            color=COLORS["theory"],
            linewidth=1.2,
            marker="_",
            label=theory_label,
        )
    shown = np.array([*means, *theory_y], dtype=float)
    if log and (shown[np.isfinite(shown)] > 0).any():
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    legend(ax, fontsize="small")
    return fig


def plot_wait_vs_theory(
    results_by_x,
    *,
    ax: Axes | None = None,
    xlabel: str = "x",
    title: str = "Mean wait: simulation vs Erlang C",
) -> Figure:
    """Simulated mean wait against Erlang C's M/M/c mean wait, one point per x.

    Args:
        results_by_x: a mapping (or pairs) from an x value (say, arrival rate or
            concurrency) to a result, a list of results, or Replications.
        ax: axes to draw into.
        xlabel: label of the x axis (with units).
        title: axes title.

    The theory line is drawn where it applies (see :func:`theory_for`).
    """
    return _plot_vs_theory(
        results_by_x,
        lambda r: r.summary["wait_mean_s"],
        "wait_mean_s",
        ax=ax,
        xlabel=xlabel,
        ylabel="mean wait (s)",
        title=title,
        theory_label="Erlang C (M/M/c)",
    )


def plot_shed_vs_theory(
    results_by_x,
    *,
    ax: Axes | None = None,
    xlabel: str = "x",
    title: str = "Shed share: simulation vs M/M/c/K",
) -> Figure:
    """Simulated shed share (``on_full="reject"``) against M/M/c/K blocking probability."""

    def shed(r):
        return r.summary["items_shed"] / max(r.summary["items_offered"], 1)

    return _plot_vs_theory(
        results_by_x,
        shed,
        "shed_fraction",
        ax=ax,
        xlabel=xlabel,
        ylabel="share of items shed",
        title=title,
        theory_label="M/M/c/K blocking, K = maxsize + concurrency",
    )


def plot_dead_letters_vs_theory(
    results_by_x,
    *,
    ax: Axes | None = None,
    xlabel: str = "x",
    log: bool = True,
    title: str = "Dead-letter share: simulation vs p**k",
) -> Figure:
    """Simulated dead-lettered share against ``p**k`` (independent attempt failures)."""

    def dead(r):
        return r.summary["items_dead_lettered"] / max(r.summary["items_admitted"], 1)

    return _plot_vs_theory(
        results_by_x,
        dead,
        "dead_letter_fraction",
        ax=ax,
        xlabel=xlabel,
        ylabel="share of items dead-lettered",
        title=title,
        theory_label="p**k (k = max_attempts)",
        log=log,
    )
