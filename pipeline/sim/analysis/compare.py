"""``compare()``: the difference a change makes, with a paired confidence interval.

Two configurations that differ a little (4 or 5 workers) give results that
differ a little, and independent runs bury that difference in traffic noise:
one run happened to get a burst, the other did not. Run both on the *same*
traffic instead -- replication *r* of each scenario draws its arrivals and
service times from the streams of ``(seed, r)``, common random numbers -- and
take the difference replication by replication. The noise both runs share
cancels, and the interval of the mean difference is often many times
narrower than two separate intervals (:attr:`Comparison.unpaired_half_width`
shows what it would have been).

Example:
    >>> c = compare(base, base.replace(concurrency=5), metric="wait_mean_s", replications=10)
    >>> c.difference, c.half_width        # b - a, seconds: -0.58 +- 0.02
    >>> print(c)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..executors.pool import check_picklable, default_workers, run_tasks
from ..running.drain_warning import warn_drain_timeouts
from ..running.engine_choice import check_engine, choose_engine
from ..stats.intervals import MeanCI, paired_difference, summarise_values, t_quantile
from ..workloads.scenario import Scenario
from .planning.slo import DERIVED_METRICS, DRAIN_CUT_METRICS, metric_value
from .sweep import run_task

if TYPE_CHECKING:
    from concurrent.futures import Executor

__all__ = ["Comparison", "compare", "paired_summaries"]


@dataclass(frozen=True)
class Comparison:
    """Scenario ``b`` against scenario ``a`` on one metric, replication by replication.

    Attributes:
        metric: the summary key compared (e.g. ``"wait_mean_s"``), or a fraction
            derived from its counts (``"shed_fraction"``, as a plan's SLOs name them).
        values_a, values_b: its value in each replication of ``a`` and of ``b``
            (replication *r* of both ran on the same random streams).
        level: the confidence of the intervals.
        difference: mean of ``b - a`` over the replications (the metric's units).
        half_width: half-width of the paired t interval of ``difference``.
        unpaired_half_width: the half-width a comparison of independent runs
            would have had (Welch's interval of the two means), for contrast.
    """

    metric: str
    values_a: tuple[float, ...]
    values_b: tuple[float, ...]
    level: float
    difference: float
    half_width: float
    unpaired_half_width: float

    @property
    def low(self) -> float:
        """Lower end of the paired interval of ``b - a``."""
        return self.difference - self.half_width

    @property
    def high(self) -> float:
        """Upper end of the paired interval of ``b - a``."""
        return self.difference + self.half_width

    @property
    def interval(self) -> MeanCI:
        """``(difference, half_width)`` as a :class:`~pipeline.sim.stats.intervals.MeanCI`."""
        return MeanCI(self.difference, self.half_width)

    @property
    def replications(self) -> int:
        """How many pairs of runs the interval is built from."""
        return len(self.values_a)

    @property
    def mean_a(self) -> float:
        """Mean of the metric over the replications of ``a``."""
        return float(np.mean(self.values_a))

    @property
    def mean_b(self) -> float:
        """Mean of the metric over the replications of ``b``."""
        return float(np.mean(self.values_b))

    @property
    def significant(self) -> bool:
        """Whether the paired interval excludes 0: the change makes a difference at ``level``."""
        return not self.low <= 0.0 <= self.high

    def __str__(self) -> str:
        return (
            f"{self.metric}: b - a = {self.difference:.4g} ± {self.half_width:.3g} "
            f"({self.level:.0%}, paired over {self.replications} replications; "
            f"unpaired it would be ± {self.unpaired_half_width:.3g}); "
            f"a = {self.mean_a:.4g}, b = {self.mean_b:.4g}"
        )


def _welch_half_width(a: np.ndarray, b: np.ndarray, level: float) -> float:
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    total = va + vb
    if total == 0.0:
        return 0.0
    df = total**2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return t_quantile((1.0 + level) / 2.0, df) * math.sqrt(total)


def compare(
    a: Scenario,
    b: Scenario,
    *,
    metric: str = "wait_mean_s",
    replications: int = 10,
    level: float = 0.95,
    engine: str = "auto",
    processes: int | None = 1,
    executor: Executor | None = None,
    progress: bool = False,
) -> Comparison:
    """Run ``a`` and ``b`` on common random numbers and estimate the difference ``b - a``.

    Replication *r* of both scenarios uses the streams of ``(seed, r)``; give
    both the same ``seed`` (``b = a.replace(...)`` keeps it) so that they see
    the same arrivals and service times. With different seeds the interval is
    still valid, only no narrower than an unpaired one.

    Args:
        a, b: the two scenarios.
        metric: a numeric summary key, e.g. ``"wait_mean_s"`` or ``"latency_p95_s"``,
            or a metric derived from the counts as :func:`~pipeline.sim.plan`'s SLOs
            name them (:data:`~pipeline.sim.analysis.planning.slo.DERIVED_METRICS`:
            ``"shed_fraction"``, ``"dead_letter_fraction"``, ``"attempts_per_item"``, ...).
        replications: pairs of runs (>= 2).
        level: confidence of the interval, in (0, 1).
        engine: as for :func:`~pipeline.sim.simulate`.
        processes: worker processes (default 1: in this process); None for one
            per CPU.
        executor: a :class:`concurrent.futures.Executor` to run on instead.
        progress: show a tqdm progress bar on stderr.

    Returns:
        A :class:`Comparison`: the mean difference, its paired half-width, and
        the unpaired half-width for contrast.

    Warns:
        DrainTimeoutWarning: once, when some runs' drain timed out (their
            latency and wait statistics leave out the items left unfinished),
            with how many runs and items.

    Raises:
        TypeError: ``a`` or ``b`` is not a Scenario.
        ValueError: an unknown or non-numeric ``metric`` (or a derived fraction
            on a chain whose stage fans out), ``replications`` < 2,
            bad ``level``, ``engine`` or ``processes``, ``engine="kernel"`` for
            ``a`` or ``b`` outside the kernel's domain (before any run: ``"b: "``
            and the one-line refusal), or a replication in which the metric has
            no value (NaN: e.g. no item completed).

    Example:
        >>> compare(base, base.replace(concurrency=5), replications=10).significant
        True
    """
    _check_derived(metric, a, b)

    def check_metric(first: dict) -> None:
        if metric not in DERIVED_METRICS and (
            metric not in first or isinstance(first[metric], bool | str)
        ):
            allowed = [k for k, v in first.items() if not isinstance(v, bool | str)]
            raise ValueError(
                f"metric must be a numeric summary key or one of {list(DERIVED_METRICS)}, "
                f"got {metric!r}; allowed keys: {allowed}"
            )

    runs = paired_summaries(
        {"a": a, "b": b},
        (replications, level, engine, processes, executor, progress),
        what="compare",
        check_first=check_metric,
        then=(
            f", so the difference in {metric} leaves them out too"
            if metric in DRAIN_CUT_METRICS
            else ""
        ),
    )
    summaries = [*runs["a"], *runs["b"]]
    # One definition of each metric, the one plan() judges SLOs by.
    values = np.array([_value(s, metric) for s in summaries]).reshape(2, replications)
    missing = np.flatnonzero(~np.isfinite(values).all(axis=0))
    if missing.size:
        r = int(missing[0])
        raise ValueError(
            f"metric {metric!r} has no value in replication {r} "
            f"(a={float(values[0, r])}, b={float(values[1, r])}); compare a metric every run has"
        )
    paired = paired_difference(values[0], values[1], level)
    return Comparison(
        metric=metric,
        values_a=tuple(values[0].tolist()),
        values_b=tuple(values[1].tolist()),
        level=float(level),
        difference=paired.mean,
        half_width=paired.half_width,
        unpaired_half_width=_welch_half_width(values[0], values[1], level),
    )


def paired_summaries(
    scenarios: Mapping[str, Scenario],
    options: tuple[int, float, str, int | None, Executor | None, bool],
    *,
    what: str = "compare",
    check_first: Callable[[dict], None] | None = None,
    then: str = "",
) -> dict[str, list[dict]]:
    """Replications ``0 .. replications - 1`` of each scenario: name -> their summaries.

    The machinery of :func:`compare` for any number of scenarios: replication *r* of
    each runs on the streams of ``(seed, r)`` (common random numbers, with one seed).
    Everything is checked before any run (the scenarios' types, ``replications``,
    ``level``, ``processes``, ``engine`` for each scenario, named by its key); the
    first scenario's replication 0 runs first, here, and ``check_first`` may refuse its
    summary (a misspelt metric) before the other runs start. Runs whose drain timed
    out are warned once (``then`` ends the message). ``options`` are the caller's
    ``(replications, level, engine, processes, executor, progress)``, as :func:`compare`
    takes them.

    Raises:
        TypeError: a value of ``scenarios`` that is not a Scenario.
        ValueError: no scenarios, ``replications`` < 2, a bad ``level``, ``engine``
            or ``processes``, ``engine="kernel"`` for a scenario outside its domain,
            or what ``check_first`` raises.
    """
    replications, level, engine, processes, executor, progress = options
    if not scenarios:
        raise ValueError(f"{what} needs at least one scenario, got none")
    for name, scenario in scenarios.items():
        if not isinstance(scenario, Scenario):
            raise TypeError(f"{name} must be a Scenario, got {scenario!r}")
    if isinstance(replications, bool) or not isinstance(replications, int) or replications < 2:
        raise ValueError(
            f"replications must be an integer >= 2 (an interval needs two pairs), "
            f"got {replications!r}"
        )
    summarise_values([0.0], level)  # checks level, with the message the stats module gives
    if processes is not None and (
        isinstance(processes, bool) or not isinstance(processes, int) or processes < 1
    ):
        raise ValueError(f"processes must be an integer >= 1 or None, got {processes!r}")
    check_engine(engine)
    for name, scenario in scenarios.items():  # refused before any run
        choose_engine(scenario, engine, where=name)
    every_run = [
        (scenario, r, engine) for scenario in scenarios.values() for r in range(replications)
    ]
    # Replication 0 of the first first, here: a misspelt metric fails before the rest start.
    first = run_task(*every_run[0])
    if check_first is not None:
        check_first(first)
    tasks = every_run[1:]
    workers = default_workers(processes, len(tasks))
    if workers > 1 or executor is not None:
        check_picklable(list(scenarios.values()), workers, what)

    from tqdm.auto import tqdm

    with tqdm(total=len(tasks), desc=what, unit="run", disable=not progress) as bar:
        rest = run_tasks(run_task, tasks, workers=workers, bar=bar, what=what, executor=executor)
    summaries = [first, *rest]
    warn_drain_timeouts(
        [
            (scenario, summary)
            for (scenario, _, _), summary in zip(every_run, summaries, strict=True)
        ],
        what=f"{what} runs",
        then=then,
    )
    return {
        name: summaries[index * replications : (index + 1) * replications]
        for index, name in enumerate(scenarios)
    }


def _value(summary: dict, metric: str) -> float:
    """The metric in one run: a derived fraction as plan() computes it, else the summary key."""
    return metric_value(summary, metric) if metric in DERIVED_METRICS else float(summary[metric])


def _check_derived(metric: str, *scenarios: Scenario) -> None:
    """A derived fraction needs counts of the same items: refused where a stage fans out."""
    if metric not in DERIVED_METRICS:
        return
    for scenario in scenarios:
        stages = getattr(scenario, "stages", None)  # not a Scenario: refused with its type
        if stages is not None and any(stage.fan_out != 1 for stage in stages):
            raise ValueError(
                f"metric {metric!r}: a stage of this chain fans out, so its counts are of "
                "different items (source items offered, their children completed); compare "
                "a count instead, e.g. items_shed or items_dead_lettered"
            )
