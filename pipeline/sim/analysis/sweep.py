"""``sweep()``: run a grid of what-if scenarios x replications on a local process pool.

Every combination of the grid's values is applied to a base scenario
(``Scenario.replace``: scenario or config field names), and each grid point is
run ``replications`` times. Replication *r* of every grid point uses the
random streams of ``(seed, r)`` -- common random numbers -- so two
configurations are compared on the same traffic, item for item, and
differences between grid points are not noise between seeds.

The result is one tidy DataFrame (one row per grid point and replication);
:func:`summarise_sweep` turns it into means with 95% confidence half-widths.
The numbers do not depend on how many processes ran them.

Example:
    >>> frame = sweep(base, {"concurrency": [4, 5, 6], "queue_maxsize": [10, None]},
    ...               replications=5)
    >>> summarise_sweep(frame, metrics=("wait_mean_s", "memory_peak_bytes"))
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..executors.pool import check_executor, check_picklable, default_workers, run_tasks
from ..running.class_summary import flatten_classes
from ..running.drain_warning import drain_cut, warn_drain_timeouts
from ..running.engine_choice import check_engine, choose_engine
from ..running.result import SimulationResult
from ..running.single import simulate_once
from ..stats.intervals import summarise_values
from ..workloads.randomness import check_replications
from ..workloads.scenario import Scenario

if TYPE_CHECKING:
    from concurrent.futures import Executor

    import pandas as pd

__all__ = ["DEFAULT_METRICS", "simulate_replication", "summarise_sweep", "sweep"]

DEFAULT_METRICS = (
    "wait_mean_s",
    "latency_mean_s",
    "latency_p95_s",
    "throughput_per_s",
    "utilisation",
    "queue_depth_mean",
    "memory_peak_bytes",
    "items_dead_lettered",
    "items_shed",
)
"""Summary keys :func:`summarise_sweep` reports unless told otherwise."""


def simulate_replication(
    scenario: Scenario, replication: int, *, engine: str = "auto"
) -> SimulationResult:
    """Run replication ``replication`` (>= 0) of a scenario: streams from ``(seed, replication)``.

    ``simulate(scenario, replications=R).results[r]`` gives the same numbers.
    ``engine`` is as for :func:`~pipeline.sim.simulate`.

    Raises:
        TypeError: ``scenario`` is not a Scenario.
        ValueError: ``replication`` is not an integer >= 0, a bad ``engine``,
            ``engine="kernel"`` for a scenario outside the kernel's domain, or
            ``replication >= 1`` of a scenario nothing in which is random (a
            replayed trace: every replication is replication 0 again;
            :func:`~pipeline.sim.workloads.randomness.fixed_workload`).
    """
    if not isinstance(scenario, Scenario):
        raise TypeError(f"scenario must be a Scenario, got {scenario!r}")
    if isinstance(replication, bool) or not isinstance(replication, int) or replication < 0:
        raise ValueError(f"replication must be an integer >= 0, got {replication!r}")
    check_replications(scenario, replication + 1, f"replication={replication}")
    return simulate_once(scenario, replication, engine)


def run_task(scenario: Scenario, replication: int, engine: str) -> dict[str, Any]:
    # Module level so a worker process can unpickle it; returns only the small summary.
    return simulate_replication(scenario, replication, engine=engine).summary


def _grid_points(base: Scenario, grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    if not isinstance(grid, Mapping):
        raise TypeError(f"grid must be a dict of field name -> sequence of values, got {grid!r}")
    for key, values in grid.items():
        if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
            raise TypeError(
                f"grid[{key!r}] must be a sequence of values (e.g. a list), got {values!r}"
            )
        if len(values) == 0:
            raise ValueError(f"grid[{key!r}] must hold at least one value, got an empty sequence")
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*grid.values())]


def _scenarios(base: Scenario, points: list[dict[str, Any]]) -> list[Scenario]:
    out = []
    for point in points:
        try:
            out.append(base.replace(**point))
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"grid point {point}: {exc}") from None
    return out


def sweep(
    base: Scenario,
    grid: Mapping[str, Sequence[Any]],
    *,
    replications: int = 3,
    processes: int | None = None,
    progress: bool = True,
    engine: str = "auto",
    executor: Executor | None = None,
) -> pd.DataFrame:
    """Run every combination of ``grid`` x ``replications`` and return one tidy frame.

    Args:
        base: the scenario every grid point starts from.
        grid: field name -> values to try; names are :class:`~pipeline.sim.Scenario`
            or :class:`~pipeline.PipelineConfig` fields (``queue_maxsize`` may
            include None, the unbounded queue). An empty grid runs ``base`` alone.
        replications: runs per grid point (>= 1); replication *r* of every point
            uses the same random streams.
        processes: worker processes (default: CPU count, at most one per run);
            1 runs everything in this process.
        progress: show a tqdm progress bar.
        engine: ``"auto"`` (default), ``"asyncio"`` or ``"kernel"``, as for
            :func:`~pipeline.sim.simulate`; the frame's ``engine`` column says
            which one ran each row.
        executor: a :class:`concurrent.futures.Executor` to run the runs on
            instead of a local process pool (``processes`` is then ignored), e.g.
            a Dask client's ``get_executor()``; see
            :func:`~pipeline.sim.executors.cluster.scheduler_executor`. It is left open.

    Returns:
        A DataFrame with one row per (grid point, replication), in grid order:
        the grid's columns, ``replication``, then every summary key
        (with item classes, each class's as ``classes.NAME.KEY`` columns;
        ``drain_timed_out`` among them: True where the run's drain hit
        ``drain_timeout_s``, so its latency statistics leave out the items it
        left unfinished). The grid's field names are kept in
        ``frame.attrs["grid"]``. Everything except ``wall_time_s`` is the same
        whatever ``processes`` is.

    Warns:
        DrainTimeoutWarning: once, when some runs' drain timed out, with how
            many of the runs and how many items they left unfinished.

    Raises:
        TypeError: ``base`` is not a Scenario, a bad grid, or ``executor`` is
            not a :class:`concurrent.futures.Executor`.
        ValueError: an unknown field name or a value the scenario rejects (named
            with its grid point), bad ``replications``, ``processes`` or ``engine``,
            ``replications`` > 1 of a scenario nothing in which is random (a
            replayed trace),
            ``engine="kernel"`` for a scenario outside the kernel's domain, or a
            scenario that cannot be pickled for the worker processes.
        RuntimeError: ``processes`` > 1 asked for from the top level of a script
            without an ``if __name__ == "__main__":`` guard (worker processes
            re-run the script); with the default ``processes`` such a call runs
            in this process, with a warning.

    Example:
        >>> sweep(base, {"concurrency": [4, 8]}, replications=5, progress=False)
    """
    import pandas as pd

    if not isinstance(base, Scenario):
        raise TypeError(f"base must be a Scenario, got {base!r}")
    if isinstance(replications, bool) or not isinstance(replications, int) or replications < 1:
        raise ValueError(f"replications must be an integer >= 1, got {replications!r}")
    if processes is not None and (
        isinstance(processes, bool) or not isinstance(processes, int) or processes < 1
    ):
        raise ValueError(f"processes must be an integer >= 1 or None, got {processes!r}")
    check_engine(engine)
    check_executor(executor)
    points = _grid_points(base, grid)
    scenarios = _scenarios(base, points)
    for point, scenario in zip(points, scenarios, strict=True):  # refused before any run
        choose_engine(scenario, engine, where=f"grid point {point}")
    for scenario in scenarios:  # before any run: a replayed trace is one sample
        check_replications(scenario, replications, f"replications={replications}")
    tasks = [(scenario, r, engine) for scenario in scenarios for r in range(replications)]
    workers = default_workers(processes, len(tasks))
    if workers > 1 or executor is not None:
        check_picklable(scenarios, workers, "sweep")

    from tqdm.auto import tqdm

    with tqdm(total=len(tasks), desc="sweep", unit="run", disable=not progress) as bar:
        summaries = run_tasks(
            run_task,
            tasks,
            workers=workers,
            bar=bar,
            what="sweep",
            executor=executor,
            workers_asked=processes is not None,
        )

    warn_drain_timeouts(
        [(scenario, summary) for (scenario, _, _), summary in zip(tasks, summaries, strict=True)],
        what="sweep runs",
        then=" (the drain_timed_out column marks those runs)",
    )
    rows = []
    for index, ((_, r, _), summary) in enumerate(zip(tasks, summaries, strict=True)):
        rows.append({**points[index // replications], "replication": r, **flatten_classes(summary)})
    frame = keep_none(pd.DataFrame(rows), rows, list(grid))
    frame.attrs["grid"] = list(grid)
    return frame


def grid_columns(frame: pd.DataFrame) -> list[str]:
    """The grid's field names of a :func:`sweep` frame (``[]`` for an empty grid).

    Shared with :mod:`pipeline.sim.analysis.planning.slo_table`.

    Raises:
        ValueError: the frame did not come from :func:`sweep`.
    """
    grid = frame.attrs.get("grid")
    if grid is not None:
        return list(grid)
    columns = list(frame.columns)
    if "replication" not in columns:
        raise ValueError(
            f"frame must come from sweep() (a 'replication' column), got columns {columns}"
        )
    return columns[: columns.index("replication")]


def grid_groups(frame: pd.DataFrame, grid: Sequence[str]) -> Iterable[tuple[Any, pd.DataFrame]]:
    """The rows of each grid point, in grid order; one group for an empty grid."""
    # groupby([]) raises "No group keys passed!": an empty grid is one point, base alone.
    return frame.groupby(list(grid), sort=False, dropna=False) if grid else [((), frame)]


def summarise_sweep(
    frame: pd.DataFrame, metrics: Sequence[str] | None = DEFAULT_METRICS
) -> pd.DataFrame:
    """Mean and 95% confidence half-width of each metric, per grid point.

    The rule is :func:`pipeline.sim.stats.intervals.summarise_values`: Student t
    half-widths across replications, widened for skew; NaN with a single replication or when
    some replication has no value (then the mean is over those that do).
    For a percentile (``latency_p95_s``) that is the t interval of the
    per-replication percentiles, valid because each replication is one
    independent value (its coverage is tested); for a distribution-free
    interval of the median run use :func:`pipeline.sim.stats.intervals.quantile_ci` on
    one grid point's column. To compare two grid points, replication by
    replication (they share their random numbers), use
    :func:`pipeline.sim.stats.intervals.paired_difference` on their columns.

    Args:
        frame: what :func:`sweep` returned.
        metrics: summary keys to report (default :data:`DEFAULT_METRICS`); None
            for every numeric column.

    Returns:
        One row per grid point, in grid order: the grid's columns,
        ``replications``, ``drain_timed_out`` (how many of them hit the drain
        timeout: their latency and wait statistics leave out the items left
        unfinished), then ``<metric>_mean`` and ``<metric>_ci95`` for each metric,
        and for a wait or latency (:func:`~pipeline.sim.running.drain_warning.drain_cut`,
        the rule a plan fails such an SLO by) ``<metric>_drain_cut``: how many of
        the point's runs left out their slowest items. A point with any is not
        comparable with one without: it looks better only because its tail was cut.

    Raises:
        ValueError: a metric that is not a column of ``frame``.
    """
    import pandas as pd

    grid = grid_columns(frame)
    skip = {*grid, "replication"}
    if metrics is None:
        metrics = [
            c
            for c in frame.columns
            if c not in skip
            and pd.api.types.is_numeric_dtype(frame[c])
            and not pd.api.types.is_bool_dtype(frame[c])
        ]
    else:
        metrics = list(metrics)
        unknown = [m for m in metrics if m not in frame.columns]
        if unknown:
            allowed = [c for c in frame.columns if c not in skip]
            raise ValueError(f"unknown metric(s) {unknown}; allowed: {allowed}")

    rows = []
    for _, part in grid_groups(frame, grid):
        # Values from the rows, not the group keys: groupby turns None into NaN.
        row: dict[str, Any] = {column: part[column].iloc[0] for column in grid}
        row["replications"] = len(part)
        cut = None
        if "drain_timed_out" in part:
            cut = row["drain_timed_out"] = int(part["drain_timed_out"].astype(bool).sum())
        for metric in metrics:
            mean, half = summarise_values(part[metric].to_numpy(dtype=np.float64))
            row[f"{metric}_mean"] = mean
            row[f"{metric}_ci95"] = half
            if cut is not None and drain_cut(metric):
                row[f"{metric}_drain_cut"] = cut
        rows.append(row)
    return keep_none(pd.DataFrame(rows), rows, grid)


def keep_none(
    frame: pd.DataFrame, rows: list[dict[str, Any]], columns: Sequence[str]
) -> pd.DataFrame:
    """Grid columns holding None (the unbounded queue) stay None rather than NaN.

    Shared with :mod:`pipeline.sim.analysis.planning.slo_table`.
    """
    import pandas as pd

    for column in columns:
        values = [row[column] for row in rows]
        if any(v is None for v in values):
            frame[column] = pd.Series(values, dtype=object, index=frame.index)
    return frame
