"""``Replications``: independent runs of one scenario, with confidence intervals.

:func:`replicate` runs them, in this process or on a pool when the runs are
long enough to repay starting one (:data:`POOL_WORTH_S`, from the rough
per-item cost in :data:`SECONDS_PER_ITEM`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..._units import metric_range
from ..stats.intervals import MeanCI, QuantileCI, quantile_ci, robust_mean_ci, summarise_values
from ..stats.runlength import DEFAULT_RELATIVE_PRECISION, run_length_advice
from ..workloads.scenario import Scenario
from .class_summary import flatten_classes
from .engine_choice import choose_engine
from .result import SimulationResult
from .single import simulate_once

if TYPE_CHECKING:
    from concurrent.futures import Executor

    import pandas as pd

__all__ = ["POOL_WORTH_S", "Replications", "estimated_seconds", "replicate"]


class Replications:
    """Independent replications of one scenario, with 95% confidence intervals.

    Replication *r* uses streams derived from ``(seed, r)``, so the same
    replication of two what-if scenarios sees the same traffic
    (:func:`~pipeline.sim.compare` uses that for paired intervals).
    :meth:`interval` gives a key's t interval (percentile keys included),
    :meth:`quantile_interval` a distribution-free one for the median run, and
    :meth:`advice` says when an interval is too wide and how many
    replications would do.

    Attributes:
        results: one :class:`SimulationResult` per replication.
    """

    def __init__(self, results: list[SimulationResult]) -> None:
        self.results = results

    def __repr__(self) -> str:
        return f"<Replications n={len(self.results)} scenario={self.results[0].scenario!r}>"

    def __len__(self) -> int:
        return len(self.results)

    def values(self, key: str) -> np.ndarray:
        """One summary value per replication; ``classes.NAME.KEY`` reads one class's summary."""
        if key.startswith("classes.") and key not in self.results[0].summary:
            return np.array([float(flatten_classes(r.summary)[key]) for r in self.results])
        return np.array([float(r.summary[key]) for r in self.results])

    def interval(self, key: str, level: float = 0.95) -> MeanCI:
        """(mean, half-width) of a summary key across replications (skew-robust t).

        The interval is :func:`~pipeline.sim.stats.intervals.robust_mean_ci`'s:
        Student t, and from 6 replications on widened on the side a skew of the
        per-run values reaches (short runs' means and percentiles are skewed to
        the right; fewer values cannot bound a skew usefully, so with 2 to 5
        replications the runs must be long enough for their means to be nearly
        symmetric). ``ci.within(*metric_range(key))`` cuts its ends to the
        metric's range (:func:`~pipeline._units.metric_range`). For a
        percentile key (``latency_p95_s``) this is the interval of the
        per-replication percentiles: each run's p95 is one independent value,
        so the interval is valid although the items inside a run are
        correlated. It bounds the p95 expected of a run of this length
        (``tests/sim/running/test_percentile_intervals.py`` checks its coverage).

        Raises:
            ValueError: fewer than 2 replications, or a replication without a value (NaN).
        """
        return robust_mean_ci(self.values(key), level=level)

    def quantile_interval(self, key: str, q: float = 0.5, level: float = 0.95) -> QuantileCI:
        """Distribution-free interval for the ``q``-quantile of a key's per-replication values.

        With ``q=0.5``, the median run's value (e.g. its ``latency_p95_s``):
        unlike :meth:`interval` it assumes nothing about the shape of the
        per-replication values, which heavy traffic makes skewed. It needs at
        least 6 replications for a finite 95% interval of the median (and
        ``low``/``high`` are infinite below that). See
        :func:`~pipeline.sim.stats.intervals.quantile_ci`.

        Raises:
            ValueError: a replication without a value (NaN), or bad ``q``/``level``.
        """
        return quantile_ci(self.values(key), q, level)

    def advice(
        self,
        key: str,
        *,
        relative_precision: float | None = None,
        limit: float | None = None,
        level: float = 0.95,
    ) -> str | None:
        """Run-length advice for a key's interval, or None when it is precise enough.

        See :func:`~pipeline.sim.stats.runlength.run_length_advice`: the half-width is
        judged against ``relative_precision`` of the mean (default 10%), or
        against an SLO ``limit`` the interval should clear; the sentence says
        about how many replications would do, and warns when the runs'
        utilisation is near 1.
        """
        mean, half = summarise_values(self.values(key), level)
        return run_length_advice(
            mean,
            half,
            len(self.results),
            metric=key,
            relative_precision=(
                DEFAULT_RELATIVE_PRECISION if relative_precision is None else relative_precision
            ),
            limit=limit,
            level=level,
            utilisation=summarise_values(self.values("utilisation")).mean,
        )

    @property
    def summary(self) -> pd.DataFrame:
        """Mean, 95% half-width and bounds of every numeric summary key.

        With item classes, each class's keys too, as ``classes.NAME.KEY`` rows.

        Missing values (NaN: e.g. no latency when nothing completed) are left
        out of the mean; the half-width is NaN unless every run has a value.
        ``low`` and ``high`` are cut to the metric's range
        (:func:`~pipeline._units.metric_range`): no depth below 0, no fraction above 1.
        """
        import pandas as pd

        rows = []
        for key, value in flatten_classes(self.results[0].summary).items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            ci = summarise_values(self.values(key))
            low, high = ci.within(*metric_range(key))
            rows.append(
                {
                    "metric": key,
                    "mean": ci.mean,
                    "half_width": ci.half_width,
                    "low": low,
                    "high": high,
                }
            )
        return pd.DataFrame(rows).set_index("metric")


# Rough CPU seconds per item, to decide whether replications are worth a process pool.
SECONDS_PER_ITEM = {"kernel": 3e-6, "asyncio": 25e-6}
POOL_WORTH_S = 3.0  # a pool costs about a second to start (each worker imports numpy, pandas)


def estimated_seconds(scenario: Scenario, engine: str, runs: int) -> float:
    """A rough guess of the serial CPU time of ``runs`` replications (0 if unknown), on the
    engine :func:`~.engine_choice.choose_engine` picks for the request ``engine``.

    An unknown length (a rate function without a period) keeps the runs in
    this process: a pool is then only used when asked for (``processes=``).
    """
    if scenario.n_items is not None:
        items = float(scenario.n_items)
    else:
        try:
            items = float(scenario.arrivals.rate) * float(scenario.duration_s or 0.0)
        except (ValueError, TypeError, OverflowError):
            return 0.0
    if not math.isfinite(items):
        return 0.0
    return items * runs * SECONDS_PER_ITEM[choose_engine(scenario, engine).engine]


def replicate(
    scenario: Scenario,
    replications: int,
    engine: str,
    processes: int | None,
    progress: bool | None,
    executor: Executor | None = None,
) -> list[SimulationResult]:
    from ..executors.pool import check_picklable, default_workers, run_tasks

    guess = estimated_seconds(scenario, engine, replications)
    if processes is None:
        workers = default_workers(None, replications) if guess >= POOL_WORTH_S else 1
    else:
        workers = default_workers(processes, replications)
    what = "simulate(replications=...)"
    if workers > 1 or executor is not None:
        check_picklable([scenario], workers, what)
    pooled = workers > 1 or executor is not None
    show = progress if progress is not None else (pooled or guess >= POOL_WORTH_S)

    from tqdm.auto import tqdm

    tasks = [(scenario, r, engine) for r in range(replications)]
    with tqdm(total=replications, desc="replications", unit="run", disable=not show) as bar:
        return run_tasks(
            simulate_once,
            tasks,
            workers=workers,
            bar=bar,
            what=what,
            executor=executor,
            workers_asked=processes is not None,
        )
