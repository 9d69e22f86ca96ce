"""``SimulationResult``: one simulated run -- its scenario, report, exact tables and summary.

Also :class:`DrainTimeoutWarning`, the warning a run whose drain hit its
timeout gives (:func:`~pipeline.sim.simulate` warns it).
"""

from __future__ import annotations

import os
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ...records import DeadLetter, RunReport
from ..workloads.scenario import Scenario
from .recorder import ItemColumns, StepSeries
from .summary import summarise

if TYPE_CHECKING:
    import pandas as pd

    from .control_series import ControlSeries
    from .downstream import DownstreamStats
    from .pooltrace import PoolSeries

__all__ = ["DrainTimeoutWarning", "SimulationResult"]


class DrainTimeoutWarning(UserWarning):
    """Warned by :func:`simulate` when a run's drain hit ``drain_timeout_s``.

    The items still queued, running or waiting for a retry at the deadline were
    handed back unfinished: they have no finish time, so they are missing from
    every latency statistic, and the heaviest tail is what gets cut. The
    message names how many items were left and the remedies
    (``drain_timeout_s=None`` or a longer one, or fewer items). Silence it on
    purpose with ``warnings.simplefilter("ignore", DrainTimeoutWarning)``.
    """


class SimulationResult:
    """One simulated run: the report, per-item records and exact time series.

    Attributes:
        scenario: what was simulated.
        report: the engine's own :class:`~pipeline.RunReport` (payloads are item ids).
        columns: per-item numpy columns (see :class:`~pipeline.sim.running.recorder.ItemColumns`).
        series: exact step functions (see :class:`~pipeline.sim.running.recorder.StepSeries`).
        wall_time_s: real seconds the simulation took.
        summary: headline numbers, keys as in the command line's JSON;
            ``wait_mean_ci95_s`` and ``latency_mean_ci95_s`` are the 95%
            batch-means half-widths of ``wait_mean_s`` and ``latency_mean_s``
            (:data:`BATCHES` batches in arrival order; NaN below
            :data:`BATCH_MEANS_MIN_ITEMS` values), the run's own precision.
        items: one row per item (DataFrame, built on first use), the columns of
            ``items.csv``: ``item_id`` to ``outcome``, then ``expired_s``, the
            instant each expired item expired, seconds (NaN for every other item;
            an expired item never finished, so its ``finish_s`` and ``latency_s``
            are NaN and no latency statistic counts it); with an initial
            backlog a boolean ``backlog`` column marks its items (ids ``0 .. N - 1``);
            with item classes a categorical ``class`` column names each item's class.
        downstream: with a :class:`~pipeline.sim.Downstream`, what it served
            (:class:`~pipeline.sim.running.downstream.DownstreamStats`); else None.
        pool: with an autoscaler, the pool's size and desired count over time
            (:class:`~pipeline.sim.running.pooltrace.PoolSeries`); else None.
        item_class: with item classes, each item's class as its index in
            ``scenario.classes`` (by item id); else None.
        controls: with an overload control, what it did over time
            (:class:`~pipeline.sim.running.control_series.ControlSeries`); else None.
        timeseries: the step functions as a DataFrame (built on first use); with an
            autoscaler also ``workers`` (``statistics().workers``: the pool, cold-starting
            and departing busy workers included) and ``workers_desired`` (the count the
            last sync's metric asked for, ``<NA>`` before the first sync); with an
            overload control, also its columns (:attr:`controls`).
    """

    def __init__(
        self,
        scenario: Scenario,
        report: RunReport,
        columns: ItemColumns,
        series: StepSeries,
        wall_time_s: float,
        engine: str = "asyncio",
        item_class: np.ndarray | None = None,
        *,
        downstream: DownstreamStats | None = None,
        controls: ControlSeries | None = None,
        pool: PoolSeries | None = None,
    ) -> None:
        self.scenario = scenario
        self.downstream = downstream
        self.controls = controls
        self.pool = pool
        self.item_class = item_class
        self.engine = engine
        self.report = report
        self.columns = columns
        self.series = series
        self.wall_time_s = wall_time_s
        self.summary = summarise(self)

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"<SimulationResult items={s['items_offered']} completed={s['items_completed']} "
            f"dead_lettered={s['items_dead_lettered']} shed={s['items_shed']} "
            f"wait_mean_s={s['wait_mean_s']:.4g} sim_time_s={s['sim_time_s']:.6g}>"
        )

    def to_openmetrics(
        self,
        path: str | os.PathLike[str],
        *,
        start_s: float | None = None,
        step_s: float = 1.0,
        pipeline: str = "sim",
    ) -> float:
        """Write this run as OpenMetrics text (see :mod:`pipeline.sim.running.openmetrics`).

        Args:
            path: the file, replaced once complete.
            start_s: UNIX seconds of virtual time 0; None: the run ends now.
            step_s: sampling step, seconds (coarsened beyond ``MAX_STEPS`` steps).
            pipeline: the ``pipeline`` label's value.

        Returns:
            The sampling step used, seconds.
        """
        from .openmetrics import write_openmetrics  # on first use (start-up)

        return write_openmetrics(self, path, start_s=start_s, step_s=step_s, pipeline=pipeline)

    @property
    def dead_letters(self) -> list[DeadLetter]:
        """Dead-letter records (payloads are item ids)."""
        return self.report.dead_letters

    @cached_property
    def items(self) -> pd.DataFrame:
        """One row per item, in arrival order; columns as ``items.csv`` (and ``backlog``)."""
        import pandas as pd

        c = self.columns
        frame = pd.DataFrame(
            {
                "item_id": np.arange(len(c.arrival_s)),
                "arrival_s": c.arrival_s,
                "admitted_s": c.admitted_s,
                "start_s": c.start_s,
                "finish_s": c.finish_s,
                "wait_s": c.start_s - c.arrival_s,
                "latency_s": c.finish_s - c.arrival_s,
                "attempts": c.attempts,
                "outcome": pd.Categorical.from_codes(c.outcome, ItemColumns.OUTCOMES),
                # When each expired item expired: it has no finish, so latency_s stays NaN
                # and no latency statistic counts it, while its expiry is still on record.
                "expired_s": c.expired_times(),
            }
        )
        classes = self.scenario.classes
        if classes is not None and self.item_class is not None:
            # Only then, as the backlog column: a run without classes keeps items.csv's columns.
            frame["class"] = pd.Categorical.from_codes(
                self.item_class, [item_class.name for item_class in classes]
            )
        backlog = self.scenario.initial_backlog
        if backlog:
            # Only then: every other run's items keep the columns of items.csv.
            frame["backlog"] = np.arange(len(c.arrival_s)) < backlog
        return frame

    @cached_property
    def timeseries(self) -> pd.DataFrame:
        """Exact step functions over virtual time; each row holds until the next.

        With an overload control, its columns follow (``retries_denied``,
        ``breaker_state``, ``breaker_calls_refused``, ``concurrency_limit``,
        ``codel_shed``: those of the controls that are on, named and valued as
        ``statistics()`` fields), and the rows are the moments either changed.
        """
        import pandas as pd

        s = self.series
        frame = pd.DataFrame({"time_s": s.time_s})
        for name in StepSeries.COLUMNS:
            frame[name] = getattr(s, name)
        frame["in_system"] = s.in_system
        frame["lag_items"] = s.lag_items
        frame["memory_bytes"] = s.memory_bytes(self.scenario.item_size_bytes)
        if self.pool is not None:  # only then: other runs keep timeseries.csv's columns
            workers, desired = self.pool.at(s.time_s)
            frame["workers"] = workers
            # Nullable integers: no desired count before the first sync.
            frame["workers_desired"] = pd.arrays.IntegerArray(np.maximum(desired, 0), desired < 0)
        controls = self.controls
        if controls is None:
            return frame
        time_s = np.union1d(s.time_s, controls.time_s)
        rows = np.maximum(np.searchsorted(s.time_s, time_s, side="right") - 1, 0)
        frame = frame.iloc[rows].reset_index(drop=True)
        frame["time_s"] = time_s
        for name in controls.names:
            values = controls.at(name, time_s)
            if name == "breaker_state":
                values = pd.Categorical.from_codes(values, controls.STATES)
            frame[name] = values
        return frame
