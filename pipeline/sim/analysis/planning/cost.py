"""What a configuration costs per hour: workers, and optionally items waiting.

A :class:`Cost` prices one worker-hour (``worker_hour``; on a chain, a price per
stage, ``"write.worker_hour"``, the plain one for the stages not named) and,
optionally, one item waiting an hour (``wait_hour``). The cost per hour of a
configuration is then Hillier and Lieberman's ``E(TC) = C_s c + C_w L``:

- workers: ``worker_hour * concurrency`` (summed over a chain's stages), exact;
  for an autoscaled pool (``PipelineConfig(autoscale=...)``, a chain's stage
  included), what it was paid for: ``worker_hour * workers_mean``, the run's
  ``worker_seconds`` over its length (a chain's ``STAGE.workers_mean``), one
  value per replication, judged as the waiting cost is (below). Before any run, the
  least such a pool can cost, ``worker_hour * min_workers``, orders the search and
  bounds what is left to examine;
- waiting: ``wait_hour * L``, where ``L = lambda W`` is the mean number of items
  waiting (Little's law): ``lambda`` the arrival rate times the share of items
  admitted, ``W`` the run's ``wait_mean_s``. Each replication gives one value,
  so the waiting cost has the skew-robust one-sided bounds of an SLO's metric
  (:func:`~pipeline.sim.stats.intervals.mean_bounds`).

With a wait cost, or an autoscaled pool, :func:`~.plan.plan` picks, among the
configurations shown to meet every SLO, the one of least total cost per hour;
two configurations are told apart by the paired difference of their totals (replication *r* of
both ran on the same random numbers), at the plan's per-look level. When the
budget runs out before a cheaper-looking rival is told apart, the choice is
the lower mean and :attr:`CostEstimate.note` says which rival is within reach.

Over a scenario set, one configuration serves every scenario's hours: the
cost per hour is the mean over the hours, each scenario weighed by its share
of them (:class:`Mix`; equal shares unless given).

A chain has no one wait (each stage has its own), so ``wait_hour`` is refused
on a chain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from numbers import Real
from typing import TYPE_CHECKING, Any

import numpy as np

from ...stats.intervals import mean_bounds

if TYPE_CHECKING:
    from ...workloads.scenario import Scenario

__all__ = [
    "COST_KEYS",
    "MAX_PRICE",
    "POOL_METRIC",
    "WAIT_METRICS",
    "Cost",
    "CostEstimate",
    "Mix",
    "check_shares",
    "offered_rate",
    "pool_scaler",
    "pool_values",
]

COST_KEYS = ("worker_hour", "wait_hour")
"""Keys a cost takes (and ``STAGE.worker_hour`` on a chain)."""

WAIT_METRICS = ("wait_mean_s", "items_admitted", "items_offered", "items_completed")
"""Summary keys each run reports for the cost (the waiting cost and items per hour)."""

POOL_METRIC = "workers_mean"
"""The summary key an autoscaled pool's workers cost is measured by (NaN for a fixed pool)."""

CHAIN_METRICS = ("items_offered", "items_completed")


MAX_PRICE = 1e12
"""The largest price a cost takes, money per hour: beyond it a cost per hour can
overflow to infinity (give prices in a larger unit)."""


def _price(name: str, value: Any) -> float:
    allowed = f"a finite number >= 0 and <= {MAX_PRICE:g} (money per hour)"
    if isinstance(value, bool) or not isinstance(value, Real | Decimal):
        raise ValueError(f"cost {name} must be {allowed}, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or not 0 <= number <= MAX_PRICE:
        raise ValueError(f"cost {name} must be {allowed}, got {value!r}")
    return number


@dataclass(frozen=True)
class Cost:
    """Prices, in any one currency: a worker-hour and an item waiting an hour.

    Attributes:
        worker_hour: one worker for one hour (None on a chain whose every
            stage has a price of its own).
        wait_hour: one item waiting one hour (0: waiting is free, the plan
            stays the cheapest in workers).
        stage_worker_hour: on a chain, ``{stage name: price}`` for the stages
            priced apart.

    Example:
        >>> Cost.parse({"worker_hour": 0.5, "wait_hour": 20})
        Cost(worker_hour=0.5, wait_hour=20.0, stage_worker_hour={})
    """

    worker_hour: float | None = None
    wait_hour: float = 0.0
    stage_worker_hour: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def parse(cls, value: Cost | Mapping[str, Any]) -> Cost:
        """A Cost from ``{"worker_hour": X, "wait_hour": Y, "write.worker_hour": Z}``.

        Raises:
            ValueError: an unknown key, a price that is not a finite number >= 0,
                or no worker price at all.
        """
        if isinstance(value, Cost):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(
                f"cost must be a dict like {{'worker_hour': 0.5, 'wait_hour': 20}}, got {value!r}"
            )
        worker, wait, stages = None, 0.0, {}
        for key, price in value.items():
            name = str(key)
            stage, dot, field_name = name.rpartition(".")
            if name == "worker_hour":
                worker = _price(name, price)
            elif name == "wait_hour":
                wait = _price(name, price)
            elif dot and stage and field_name == "worker_hour":
                stages[stage] = _price(name, price)
            else:
                raise ValueError(
                    f"unknown cost key {name!r}; allowed: worker_hour, wait_hour, "
                    "STAGE.worker_hour (a chain's stage)"
                )
        if worker is None and not stages:
            raise ValueError(
                f"cost needs worker_hour (the price of one worker for an hour), got {dict(value)!r}"
            )
        return cls(worker_hour=worker, wait_hour=wait, stage_worker_hour=stages)

    def check(self, base: Scenario) -> None:
        """Refuse prices that do not fit ``base`` (stage names, a wait cost on a chain).

        Raises:
            ValueError: a stage price on a single pipeline or for a stage the chain
                lacks, a chain stage with no price, or ``wait_hour`` on a chain.
        """
        if base.stages is None:
            if self.stage_worker_hour:
                named = ", ".join(f"{s}.worker_hour" for s in self.stage_worker_hour)
                raise ValueError(f"cost {named}: the scenario is not a chain (no [[stages]])")
            return
        names = [stage.name for stage in base.stages]
        unknown = [s for s in self.stage_worker_hour if s not in names]
        if unknown:
            raise ValueError(
                f"cost {unknown[0]}.worker_hour: no stage {unknown[0]!r}; stages: {names}"
            )
        if self.worker_hour is None:
            missing = [s for s in names if s not in self.stage_worker_hour]
            if missing:
                raise ValueError(
                    f"cost: stage {missing[0]!r} has no price; give worker_hour (every stage) "
                    f"or {missing[0]}.worker_hour"
                )
        if self.wait_hour:
            raise ValueError(
                "cost wait_hour: a chain has no one wait (each stage has its own); "
                "price the workers only, or plan one stage"
            )

    def stage_price(self, stage: str) -> float:
        """The price of one of ``stage``'s workers for an hour."""
        price = self.stage_worker_hour.get(stage, self.worker_hour)
        assert price is not None  # check() refused a stage without a price
        return price

    def workers_per_hour(
        self, base: Scenario, point: Mapping[str, Any], *, measured: bool = False
    ) -> float:
        """The workers' cost per hour of ``base`` with ``point`` (searched fields) applied.

        An autoscaled pool's is measured by its runs (:func:`pool_values`): here the least
        it can cost, ``worker_hour * min_workers`` (it never shrinks below), or 0 with
        ``measured`` (the part the runs give is left to them).
        """
        if base.stages is None:
            scaler = pool_scaler(base, point)
            if scaler is None:
                workers = point.get("concurrency", base.config.concurrency)
            else:
                workers = 0 if measured else scaler.min_workers
            return float(self.worker_hour or 0.0) * workers
        total = 0.0
        for stage in base.stages:
            scaler = stage.config.autoscale
            if scaler is None:
                workers = point.get(f"{stage.name}.concurrency", stage.config.concurrency)
            else:
                workers = 0 if measured else scaler.min_workers
            total += self.stage_price(stage.name) * workers
        return total

    def pools(self, base: Scenario, point: Mapping[str, Any]) -> dict[str, float]:
        """The autoscaled pools of ``base`` at ``point``: the summary key of each one's
        ``workers_mean``, and its price per worker-hour (empty: every pool is fixed)."""
        return {
            key: float(self.worker_hour or 0.0) if stage is None else self.stage_price(stage)
            for key, stage in _pool_keys(base, point).items()
        }

    def metrics(self, base: Scenario) -> tuple[str, ...]:
        """Summary keys every run must report for this cost (whatever the prices)."""
        if base.stages is None:
            return (*WAIT_METRICS, POOL_METRIC)
        return (*CHAIN_METRICS, *_pool_keys(base, {}))

    def waiting_per_hour(self, rate: float, run: Mapping[str, float]) -> float:
        """One run's waiting cost per hour: ``wait_hour * lambda_admitted * wait_mean_s``,
        ``rate`` the scenario's arrival rate (:func:`offered_rate`, per second)."""
        if not self.wait_hour:
            return 0.0
        offered = run["items_offered"]
        admitted = run["items_admitted"] / offered if offered > 0 else math.nan
        return self.wait_hour * rate * admitted * run["wait_mean_s"]

    def to_dict(self) -> dict[str, Any]:
        """The prices, as ``plan --json`` prints them beside the cost."""
        return {
            "worker_hour": self.worker_hour,
            "wait_hour": self.wait_hour,
            "stage_worker_hour": dict(self.stage_worker_hour),
        }


@dataclass(frozen=True)
class CostEstimate:
    """One configuration's cost per hour, from its replications.

    Attributes:
        workers: the workers' cost per hour: exact for a fixed pool; for an
            autoscaled one the mean over the replications of ``worker_hour x
            workers_mean`` (what the pool was paid for).
        waiting: the mean waiting cost per hour over the replications (0 without
            a wait cost; NaN when a run had no wait to measure).
        total: ``workers + waiting``: the cost per hour.
        low, high: the one-sided bounds of ``total`` at the level given (equal to
            it without a wait cost or an autoscaled pool).
        per_million_items: ``total`` per million items completed (items per
            hour: the arrival rate times the share completed, from the runs).
        replications: runs behind the estimate.
        note: why this configuration was chosen over a rival it could not be
            told apart from, else None.
    """

    workers: float
    waiting: float
    total: float
    low: float
    high: float
    per_million_items: float
    replications: int
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ``plan --json`` prints as ``cost_breakdown``."""
        return {
            "workers_per_hour": self.workers,
            "waiting_per_hour": self.waiting,
            "total_per_hour": self.total,
            "low": self.low,
            "high": self.high,
            "per_million_items": self.per_million_items,
            "replications": self.replications,
            "note": self.note,
        }


@dataclass(frozen=True)
class Mix:
    """The scenarios a cost per hour averages over, each with its share of the hours.

    One scenario has the whole of the hours. A scenario set (``plan(scenarios=...)``)
    runs one configuration in every scenario, so the cost per hour is the mean over
    the hours: ``sum_s share_s * (workers_s + wait_hour * lambda_s * W_s)``, with
    ``lambda_s`` the scenario's arrival rate times its share of items admitted and
    ``W_s`` its ``wait_mean_s``; items per hour likewise. Every run's values
    enter linearly, so the cost keeps a Student t interval per replication and
    a paired difference between configurations (replication *r* of every
    scenario ran on that scenario's common random numbers).

    Attributes:
        scenarios: the scenarios, in the order a run's cost metrics list them.
        shares: each scenario's share of the hours, >= 0, summing to 1.
        names: the scenarios' names (empty for one scenario).
        given: False when the shares are the default (equal), not given.
    """

    scenarios: tuple[Scenario, ...]
    shares: tuple[float, ...]
    names: tuple[str, ...] = ()
    given: bool = False

    @cached_property
    def rates(self) -> tuple[float, ...]:
        """Each scenario's arrival rate (:func:`offered_rate`), found once, when priced."""
        return tuple(offered_rate(s) for s in self.scenarios)

    @classmethod
    def single(cls, scenario: Scenario) -> Mix:
        """One scenario, the whole of the hours."""
        return cls((scenario,), (1.0,))

    def split(self, extra: Sequence[float]) -> list[tuple[int, float, Sequence[float]]]:
        """One replication's cost metrics, per scenario: (its index, share, its values);
        scenarios with no share of the hours left out."""
        m = len(extra) // len(self.scenarios)
        return [
            (s, share, extra[s * m : s * m + m]) for s, share in enumerate(self.shares) if share > 0
        ]

    def workers_per_hour(
        self, cost: Cost, point: Mapping[str, Any], *, measured: bool = False
    ) -> float:
        """The workers' cost per hour, over the hours (a chain's stages not searched may
        run other numbers of workers in other scenarios); an autoscaled pool's as
        :meth:`Cost.workers_per_hour` says (its least, or 0 with ``measured``)."""
        return sum(
            share * cost.workers_per_hour(scenario, point, measured=measured)
            for scenario, share in zip(self.scenarios, self.shares, strict=True)
            if share > 0
        )

    def autoscales(self, cost: Cost, point: Mapping[str, Any]) -> bool:
        """Whether a scenario with a share of the hours runs an autoscaled pool at ``point``."""
        return any(
            cost.pools(scenario, point)
            for scenario, share in zip(self.scenarios, self.shares, strict=True)
            if share > 0
        )

    def to_dict(self) -> dict[str, Any] | None:
        """``{"shares": {name: share}, "given": bool}`` for a set, None for one scenario."""
        if not self.names:
            return None
        return {"shares": dict(zip(self.names, self.shares, strict=True)), "given": self.given}


def check_shares(names: Sequence[str], shares: Mapping[str, Any] | None) -> tuple[float, ...]:
    """Each scenario's share of the hours, checked: one per name, each a finite number
    >= 0, summing to 1; equal shares when None.

    Raises:
        ValueError: an unknown or missing name, a share that is not a finite number
            >= 0, or shares that do not sum to 1.
    """
    if shares is None:
        return tuple(1.0 / len(names) for _ in names)
    if not isinstance(shares, Mapping):
        raise TypeError(f"shares must be a dict of scenario name -> share, got {shares!r}")
    unknown = [name for name in shares if name not in names]
    if unknown:
        raise ValueError(f"shares names no scenario {unknown[0]!r}; scenarios: {', '.join(names)}")
    missing = [name for name in names if name not in shares]
    if missing:
        raise ValueError(
            f"shares gives no share for scenario {missing[0]!r}: give one for every "
            "scenario, or none (equal shares)"
        )
    out = []
    for name in names:
        value = shares[name]
        allowed = "a finite number >= 0 (its share of the hours)"
        if isinstance(value, bool) or not isinstance(value, Real | Decimal):
            raise ValueError(f"share of scenario {name!r} must be {allowed}, got {value!r}")
        number = float(value)
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"share of scenario {name!r} must be {allowed}, got {value!r}")
        out.append(number)
    total = math.fsum(out)
    if abs(total - 1.0) > 1e-6:
        listed = ", ".join(f"{n}={v:g}" for n, v in zip(names, out, strict=True))
        raise ValueError(f"the scenarios' shares must sum to 1, got {total:.6g} ({listed})")
    return tuple(out)


def offered_rate(scenario: Scenario) -> float:
    """The mean arrival rate of ``scenario`` over what it simulates, per second: a
    time-varying rate's mean over ``[0, duration_s]`` when the run has a duration (a
    three-hour morning of a daily curve is busier than the day's mean), else the
    arrival process's long-run ``rate``.

    Raises:
        ValueError: the arrival process has no known rate (a rate function without
            ``period_s`` in a run of ``n_items``).
    """
    arrivals = scenario.arrivals
    window = scenario.duration_s
    if window is not None and window > 0 and hasattr(arrivals, "integrated_rate"):
        return float(arrivals.integrated_rate(0.0, window)) / window
    try:
        return float(arrivals.rate)
    except ValueError as exc:
        raise ValueError(f"cost: the arrival rate is unknown, needed per hour: {exc}") from None


def pool_scaler(base: Scenario, point: Mapping[str, Any]) -> Any:
    """The autoscaler of ``base`` with ``point`` applied, or None (a fixed pool, a chain)."""
    if base.stages is not None:
        return None
    if base.config.autoscale is None and "autoscale" not in point:
        return None  # an "autoscale.NAME" field needs an autoscaler to change
    return base.replace(**point).config.autoscale


def _pool_keys(base: Scenario, point: Mapping[str, Any]) -> dict[str, str | None]:
    """The summary key of each autoscaled pool's ``workers_mean`` at ``point``, and its
    chain stage's name (None: a single pipeline's pool)."""
    if base.stages is None:
        return {POOL_METRIC: None} if pool_scaler(base, point) is not None else {}
    return {
        f"{stage.name}.{POOL_METRIC}": stage.name
        for stage in base.stages
        if stage.config.autoscale is not None
    }


def pool_values(
    cost: Cost, mix: Mix, point: Mapping[str, Any], extra: Sequence[Sequence[float]]
) -> np.ndarray:
    """Per replication, the autoscaled pools' workers cost per hour over the hours of
    ``mix``: ``worker_hour x workers_mean`` (the run's worker-seconds over its
    length; each autoscaled stage's at its price on a chain); 0 where every pool is
    fixed (its cost is exact)."""
    pools = [cost.pools(part, point) for part in mix.scenarios]
    return np.array(
        [
            math.fsum(
                share * price * _rows(cost, mix.scenarios[s], values)[key]
                for s, share, values in mix.split(row)
                for key, price in pools[s].items()
            )
            for row in extra
        ],
        dtype=np.float64,
    )


def _rows(cost: Cost, part: Scenario, values: Sequence[float]) -> dict[str, float]:
    return dict(zip(cost.metrics(part), values, strict=True))


def waiting_values(cost: Cost, mix: Mix, extra: Sequence[Sequence[float]]) -> np.ndarray:
    """Per replication, the waiting cost per hour, over the hours of ``mix``."""
    return np.array(
        [
            math.fsum(
                share * cost.waiting_per_hour(mix.rates[s], _rows(cost, mix.scenarios[s], values))
                for s, share, values in mix.split(row)
            )
            for row in extra
        ],
        dtype=np.float64,
    )


def _items_per_hour(cost: Cost, mix: Mix, extra: Sequence[Sequence[float]]) -> float:
    """Items completed per hour over the hours of ``mix`` (mean over the replications)."""
    completed: dict[int, list[float]] = {}
    for row in extra:
        for s, _, values in mix.split(row):
            found = _rows(cost, mix.scenarios[s], values)
            if found["items_offered"] > 0:
                completed.setdefault(s, []).append(
                    found["items_completed"] / found["items_offered"]
                )
    return math.fsum(
        mix.shares[s] * mix.rates[s] * 3600.0 * float(np.mean(shares))
        for s, shares in completed.items()
    )


def estimate(
    cost: Cost,
    mix: Mix,
    point: Mapping[str, Any],
    extra: Sequence[Sequence[float]],
    level: float,
) -> CostEstimate:
    """The cost per hour of the configuration at ``point``, from its runs' cost metrics
    ``extra`` (one tuple per replication, every scenario's of ``mix`` in turn)."""
    waits = waiting_values(cost, mix, extra)
    n = waits.size
    if n == 0:
        workers = mix.workers_per_hour(cost, point)
        return CostEstimate(workers, math.nan, math.nan, math.nan, math.nan, math.nan, 0)
    # The exact part (fixed pools), and the part each replication measures: autoscaled
    # pools' workers and the waiting.
    exact = mix.workers_per_hour(cost, point, measured=True)
    pools = pool_values(cost, mix, point, extra)
    measured = pools + waits
    workers = exact + float(pools.mean())
    waiting = float(waits.mean())
    if not cost.wait_hour and not mix.autoscales(cost, point):
        low = high = float(measured.mean())
    elif n == 1 or not np.isfinite(measured).all():
        low, high = -math.inf, math.inf
    else:
        # Mean waits and mean pools scaled: skewed on short runs, like an SLO's metric.
        low, high = mean_bounds(measured, level)
    per_hour_items = _items_per_hour(cost, mix, extra)
    total = workers + waiting
    per_million = total / per_hour_items * 1e6 if per_hour_items > 0 else math.nan
    return CostEstimate(workers, waiting, total, exact + low, exact + high, per_million, n)


def difference_bounds(
    cost: Cost,
    mix: Mix,
    extra_a: Sequence[Sequence[float]],
    point_a: Mapping[str, Any],
    extra_b: Sequence[Sequence[float]],
    point_b: Mapping[str, Any],
    level: float,
) -> tuple[float, float]:
    """One-sided bounds on ``total(b) - total(a)``, paired over the replications both ran."""
    n = min(len(extra_a), len(extra_b))
    workers = mix.workers_per_hour(cost, point_b, measured=True) - mix.workers_per_hour(
        cost, point_a, measured=True
    )
    if n == 0:
        return -math.inf, math.inf

    def measured(extra: Sequence[Sequence[float]], point: Mapping[str, Any]) -> np.ndarray:
        return pool_values(cost, mix, point, extra[:n]) + waiting_values(cost, mix, extra[:n])

    diff = measured(extra_b, point_b) - measured(extra_a, point_a)
    if not np.isfinite(diff).all():
        return -math.inf, math.inf
    mean = workers + float(diff.mean())
    if n == 1:
        return (mean, mean) if not diff.any() else (-math.inf, math.inf)
    low, high = mean_bounds(diff, level)
    return workers + low, workers + high
