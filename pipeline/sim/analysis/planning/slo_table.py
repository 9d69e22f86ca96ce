"""Which configurations of a sweep meet an SLO *with confidence*, and the cheapest of them.

- :func:`slo_table` -- each grid point of a :func:`~pipeline.sim.sweep` judged
  against ``metric <= limit`` by :func:`~.judgement.judge` (the judgement
  :func:`~pipeline.sim.plan` makes);
- :func:`smallest_config_meeting` -- the cheapest point that meets it.

Example:
    >>> frame = sweep(base, {"concurrency": [2, 3, 4], "queue_maxsize": [50, None]},
    ...               replications=5)
    >>> smallest_config_meeting(frame, "latency_p95_s", 30.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..sweep import grid_columns, grid_groups, keep_none
from .judgement import judge
from .slo import DERIVED_METRICS, SLO, check_confidence, metric_counts, metric_value

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["slo_table", "smallest_config_meeting"]


def slo_table(
    frame: pd.DataFrame, metric: str, limit: float, *, confidence: float = 0.95
) -> pd.DataFrame:
    """Per grid point of a sweep: the SLO ``metric <= limit`` judged as :func:`~.judgement.judge`.

    One judgement, the one :func:`~pipeline.sim.plan` makes: ``upper`` is the
    one-sided bound (at least Student t's ``mean + t(confidence, R-1) s / sqrt(R)``,
    widened for skew: :func:`~pipeline.sim.stats.intervals.mean_bounds`) across
    the R replications, except where they agree exactly; then a fraction
    (``shed_fraction``, ...) gets the exact binomial bound on the counts pooled
    over the replications (no item shed in 300 is not "0 for sure"), and any
    other metric its exact value. A point ``meets`` the SLO when its verdict is
    ``"meets"``; one replication has no spread to measure (``upper`` inf) and a
    replication without a value (NaN) fails, so neither meets.
    ``drain_timed_out`` counts the point's replications whose drain timed out:
    on a latency or wait metric
    (:data:`~pipeline.sim.analysis.planning.slo.DRAIN_CUT_METRICS`) such a point
    never meets, as in :func:`~pipeline.sim.plan` (its statistics leave out the
    items left unfinished).

    Args:
        frame: what :func:`~pipeline.sim.sweep` returned.
        metric: an SLO metric (:data:`~.slo.METRICS`), e.g. ``"latency_p95_s"``; a
            derived fraction needs the frame's count columns (``items_shed`` and
            ``items_offered`` for ``shed_fraction``).
        limit: the SLO's threshold, in the metric's units.
        confidence: one-sided confidence level in [0.5, 1).

    Returns:
        One row per grid point: the grid columns, ``replications``, ``mean``,
        ``upper``, ``meets``, ``verdict`` (meets, fails or undecided) and
        ``basis`` (t, binomial or exact: see :class:`~.judgement.Judgement`).

    Raises:
        ValueError: ``metric`` is not an SLO metric, the frame lacks a column it
            needs, ``limit`` is not finite, or ``confidence`` not in [0.5, 1).
    """
    import pandas as pd

    slo = SLO(metric, "<=", limit)
    level = check_confidence(confidence)
    needed = list(DERIVED_METRICS[metric][:2]) if metric in DERIVED_METRICS else [metric]
    missing = [column for column in needed if column not in frame.columns]
    if missing:
        raise ValueError(
            f"metric {metric!r} needs the columns {missing}, which the sweep frame lacks; "
            f"columns: {list(frame.columns)}"
        )
    grid = grid_columns(frame)
    rows = []
    for _, part in grid_groups(frame, grid):
        runs = part[needed].to_dict("records")
        values = [metric_value(run, metric) for run in runs]
        counts = [metric_counts(run, metric) for run in runs]
        timed_out = (
            part["drain_timed_out"].astype(bool).tolist() if "drain_timed_out" in part else None
        )
        judgement = judge(
            slo,
            values,
            confidence=level,
            counts=None if None in counts else counts,
            timed_out=timed_out,
        )
        row = {column: part[column].iloc[0] for column in grid}
        row.update(
            replications=judgement.replications,
            mean=judgement.mean,
            upper=judgement.bound,
            meets=judgement.verdict == "meets",
            verdict=judgement.verdict,
            basis=judgement.basis,
            drain_timed_out=sum(timed_out) if timed_out else 0,
        )
        rows.append(row)
    return keep_none(pd.DataFrame(rows), rows, grid)


_DEFAULT_COST = ("concurrency", "queue_maxsize")


def _cost_key(value: object) -> float:
    return math.inf if value is None or (isinstance(value, float) and math.isnan(value)) else value


def smallest_config_meeting(
    frame: pd.DataFrame,
    metric: str,
    limit: float,
    *,
    cost: Sequence[str] | None = None,
    confidence: float = 0.95,
) -> pd.Series | None:
    """The cheapest grid point whose metric meets ``limit`` with ``confidence`` (or None).

    Cheapest means smallest by the ``cost`` columns in order (fewest workers
    first, then the smallest queue; an unbounded queue, None, counts as the
    most expensive). See :func:`slo_table` for what "meets" means.

    Args:
        frame: what :func:`~pipeline.sim.sweep` returned.
        metric: a summary column, e.g. ``"latency_p95_s"``.
        limit: the SLO's threshold, in the metric's units.
        cost: grid columns to minimise, in order. The default,
            ``("concurrency", "queue_maxsize")``, uses those of the two the grid
            varies (a field the grid does not vary costs the same everywhere);
            with an empty grid there is a single point to choose.
        confidence: one-sided confidence level in (0, 1).

    Returns:
        That point's row of :func:`slo_table`, or None when no point meets the SLO.

    Raises:
        ValueError: as :func:`slo_table`, or a ``cost`` column that is not a grid column.
    """
    table = slo_table(frame, metric, limit, confidence=confidence)
    grid = grid_columns(frame)
    if cost is None:
        cost = [c for c in _DEFAULT_COST if c in grid]
    else:
        cost = [cost] if isinstance(cost, str) else list(cost)
        missing = [c for c in cost if c not in grid]
        if missing:
            raise ValueError(
                f"cost columns {missing} are not grid columns of the sweep; grid columns: {grid}"
            )
    meeting = table[table["meets"]]
    if meeting.empty:
        return None
    order = sorted(meeting.index, key=lambda i: tuple(_cost_key(meeting.at[i, c]) for c in cost))
    return meeting.loc[order[0]]
