"""``plot_stages``: a chain's stages side by side -- queue, busy workers, blocked hand-offs.

One column per stage, in chain order, three rows over virtual time:

- **queue**: items in the stage's queue (its bound dashed), and the items
  waiting to enter it: at the source for the first stage, finished by the
  stage before and blocked on the hand-off for the others;
- **busy workers**: workers in an attempt (the stage's concurrency dashed);
- **blocked on hand-off**: workers holding a finished item that the next
  stage has no room for (blocking after service; none at the last stage).

Read it left to right: the bottleneck is the column whose workers are all
busy; the columns before it show full queues and blocked workers, the ones
after it idle workers. Each column's title says how busy and how blocked the
stage was, as shares of its worker time (from
:func:`~pipeline.sim.analysis.diagnostics.bottleneck.stage_loads`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...sim.analysis.diagnostics.bottleneck import stage_loads
from .run import MAX_POINTS, step, styled
from .style import COLORS, legend, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ...sim.running.chained import ChainSimulationResult

__all__ = ["STAGE_ROWS", "plot_stages"]

STAGE_ROWS = ("queue", "busy workers", "blocked on hand-off")
"""The rows of :func:`plot_stages`, top to bottom (each row's y-axis label)."""

_BLOCKED_COLOR = "C3"
OCCUPANCY_BUCKETS = 50
"""Busy and blocked workers toggle with every item: a stage with a worker or two draws
a comb of 0/1 teeth that no eye can average. Past this many steps, those rows show the
time-weighted mean of this many equal windows (the share of the stage's workers busy or
blocked), without a min-max band, which would only span 0 to the concurrency."""


def _check_chain(result: Any, name: str) -> None:
    if getattr(result, "scenario", None) is None or result.scenario.stages is None:
        raise TypeError(
            f"{name} must be a simulated chain (simulate(Scenario(stages=[...]))), got {result!r}"
        )


def _draw_stage(axes: Any, run: ChainSimulationResult, number: int, faded: bool, max_points: int):
    stages = list(run.stages.values())
    stage = stages[number]
    series = stage.series
    waiting = "waiting at the source" if number == 0 else "waiting to enter (blocked hand-offs)"
    occupancy = min(max_points, OCCUPANCY_BUCKETS)
    lines = (  # (axes, series, colour, label, most steps drawn exactly, min-max band)
        (axes[0], series.queue_depth, COLORS["queue"], "queued", max_points, True),
        (axes[0], series.upstream_backlog, COLORS["upstream"], waiting, max_points, True),
        (axes[1], series.in_flight, COLORS["in_flight"], "busy", occupancy, False),
    )
    for ax, values, color, label, most, band in lines:
        if label == waiting and not values.any():
            continue
        kwargs = {"color": color, "linewidth": 1.1, "label": label}
        step(ax, stage, values, max_points=most, band=band, **styled(kwargs, faded))
    if number + 1 < len(stages):
        after = stages[number + 1]
        kwargs = {"color": _BLOCKED_COLOR, "linewidth": 1.1, "label": "blocked"}
        step(
            axes[2],
            after,
            after.series.producers_blocked,
            max_points=occupancy,
            band=False,
            **styled(kwargs, faded),
        )


def plot_stages(
    result: ChainSimulationResult,
    *,
    compare: ChainSimulationResult | None = None,
    max_points: int = MAX_POINTS,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Each stage's queue, busy workers and blocked hand-offs, side by side.

    Args:
        result: a simulated chain (``simulate(Scenario(stages=[...]))``).
        compare: a previous run of a chain with the same stage names, drawn
            faded behind (e.g. before a slider moved).
        max_points: longest series drawn as is; longer ones as a min-max band and the mean.
        figsize: inches (default: 4 wide per stage, 7.5 high).

    Returns:
        The figure: 3 rows (:data:`STAGE_ROWS`) x one column per stage; the
        axes share the time axis.

    Raises:
        TypeError: ``result`` or ``compare`` is not a simulated chain.
        ValueError: ``compare``'s stages are not ``result``'s.

    Example:
        >>> plot_stages(simulate(chain_scenario))
    """
    _check_chain(result, "result")
    names = list(result.stages)
    if compare is not None:
        _check_chain(compare, "compare")
        if list(compare.stages) != names:
            raise ValueError(
                f"compare must have the same stages as result ({names}), got {list(compare.stages)}"
            )
    width = len(names)
    fig, grid = new_figure(len(STAGE_ROWS), width, figsize=figsize or (4.0 * width + 0.6, 7.5))
    for ax in grid.flat[1:]:
        ax.sharex(grid.flat[0])
    loads = stage_loads(result)
    for number, (name, load) in enumerate(zip(names, loads, strict=True)):
        column = grid[:, number]
        for run, faded in ((compare, True), (result, False)):
            if run is not None:
                _draw_stage(column, run, number, faded, max_points)
        config = result.scenario.stages[number].config
        if config.queue_maxsize is not None:
            column[0].axhline(
                config.queue_maxsize, color=COLORS["queue"], linestyle="--", linewidth=1,
                label=f"maxsize = {config.queue_maxsize}",
            )  # fmt: skip
        else:
            column[0].plot([], [], color=COLORS["queue"], linestyle="--", label="maxsize = ∞")
        for ax in column[1:] if number + 1 < width else column[1:2]:
            ax.axhline(
                config.concurrency, color="0.4", linestyle="--", linewidth=1,
                label=f"concurrency = {config.concurrency}",
            )  # fmt: skip
        column[0].set_title(
            f"{name}\nbusy {load.busy_share:.0%}, blocked {load.blocked_share:.0%} of worker time",
            fontsize="medium",
        )
        if number + 1 == width:
            column[2].text(
                0.5, 0.5, "last stage: nothing to hand on", transform=column[2].transAxes,
                ha="center", va="center", color="0.5",
            )  # fmt: skip
        for row, ax in enumerate(column):
            ax.set_ylim(bottom=0)
            ax.set_xlim(left=0)
            if number == 0:
                ax.set_ylabel("items" if row == 0 else "workers")
            legend(ax, loc="upper left", fontsize="x-small")
        column[-1].set_xlabel("virtual time (s)")
    for row, label in enumerate(STAGE_ROWS):
        grid[row, 0].annotate(
            label, xy=(0, 0.5), xycoords="axes fraction", xytext=(-48, 0),
            textcoords="offset points", rotation=90, ha="center", va="center",
            fontweight="bold",
        )  # fmt: skip
    return fig
