"""What a configuration costs per hour: workers, and optionally items waiting.

A :class:`Cost` prices one worker-hour (``worker_hour``; on a chain, a price per
stage, ``"write.worker_hour"``, the plain one for the stages not named) and,
optionally, one item waiting an hour (``wait_hour``). The cost per hour of a
configuration is then Hillier and Lieberman's ``E(TC) = C_s c + C_w L``:

- workers: ``worker_hour * concurrency`` (summed over a chain's stages), exact;
- waiting: ``wait_hour * L``, where ``L = lambda W`` is the mean number of items
  waiting (Little's law): ``lambda`` the arrival rate times the share of items
  admitted, ``W`` the run's ``wait_mean_s``. Each replication gives one value,
  so the waiting cost has the skew-robust one-sided bounds of an SLO's metric
  (:func:`~pipeline.sim.stats.intervals.mean_bounds`).

With a wait cost, :func:`~.plan.plan` picks, among the configurations shown
to meet every SLO, the one of least total cost per hour; two configurations
are told apart by the paired difference of their totals (replication *r* of
both ran on the same random numbers), at the plan's per-look level. When the
budget runs out before a cheaper-looking rival is told apart, the choice is
the lower mean and :attr:`CostEstimate.note` says which rival is within reach.

A chain has no one wait (each stage has its own), so ``wait_hour`` is refused
on a chain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from numbers import Real
from typing import TYPE_CHECKING, Any

import numpy as np

from ...stats.intervals import mean_bounds

if TYPE_CHECKING:
    from ...workloads.scenario import Scenario

__all__ = ["COST_KEYS", "WAIT_METRICS", "Cost", "CostEstimate"]

COST_KEYS = ("worker_hour", "wait_hour")
"""Keys a cost takes (and ``STAGE.worker_hour`` on a chain)."""

WAIT_METRICS = ("wait_mean_s", "items_admitted", "items_offered", "items_completed")
"""Summary keys each run reports for the cost (the waiting cost and items per hour)."""

CHAIN_METRICS = ("items_offered", "items_completed")


def _price(name: str, value: Any) -> float:
    allowed = "a finite number >= 0 (money per hour)"
    if isinstance(value, bool) or not isinstance(value, Real | Decimal):
        raise ValueError(f"cost {name} must be {allowed}, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
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

    def workers_per_hour(self, base: Scenario, point: Mapping[str, Any]) -> float:
        """The workers' cost per hour of ``base`` with ``point`` (searched fields) applied."""
        if base.stages is None:
            workers = point.get("concurrency", base.config.concurrency)
            return float(self.worker_hour or 0.0) * workers
        total = 0.0
        for stage in base.stages:
            workers = point.get(f"{stage.name}.concurrency", stage.config.concurrency)
            total += self.stage_price(stage.name) * workers
        return total

    def metrics(self, base: Scenario) -> tuple[str, ...]:
        """Summary keys every run must report for this cost."""
        return CHAIN_METRICS if base.stages is not None else WAIT_METRICS

    def waiting_per_hour(self, base: Scenario, run: Mapping[str, float]) -> float:
        """One run's waiting cost per hour: ``wait_hour * lambda_admitted * wait_mean_s``."""
        if not self.wait_hour:
            return 0.0
        offered = run["items_offered"]
        admitted = run["items_admitted"] / offered if offered > 0 else math.nan
        return self.wait_hour * base.arrivals.rate * admitted * run["wait_mean_s"]

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
        workers: the workers' cost per hour (exact).
        waiting: the mean waiting cost per hour over the replications (0 without
            a wait cost; NaN when a run had no wait to measure).
        total: ``workers + waiting``: the cost per hour.
        low, high: the one-sided bounds of ``total`` at the level given (equal to
            it without a wait cost).
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


def run_rows(names: Sequence[str], extra: Sequence[Sequence[float]]) -> list[dict[str, float]]:
    """Each replication's cost metrics as a dict."""
    return [dict(zip(names, values, strict=True)) for values in extra]


def waiting_values(cost: Cost, base: Scenario, rows: Sequence[Mapping[str, float]]) -> np.ndarray:
    """Per replication, the waiting cost per hour."""
    return np.array([cost.waiting_per_hour(base, row) for row in rows], dtype=np.float64)


def estimate(
    cost: Cost,
    base: Scenario,
    point: Mapping[str, Any],
    rows: Sequence[Mapping[str, float]],
    level: float,
) -> CostEstimate:
    """The cost per hour of the configuration at ``point``, from its runs' ``rows``."""
    workers = cost.workers_per_hour(base, point)
    waits = waiting_values(cost, base, rows)
    n = waits.size
    if n == 0:
        return CostEstimate(workers, math.nan, math.nan, math.nan, math.nan, math.nan, 0)
    waiting = float(waits.mean())
    if not cost.wait_hour:
        low, high = waiting, waiting
    elif n == 1 or not np.isfinite(waits).all():
        low, high = -math.inf, math.inf
    else:
        # Waiting costs are mean waits scaled: skewed on short runs, like an SLO's metric.
        low, high = mean_bounds(waits, level)
    completed = [
        row["items_completed"] / row["items_offered"] for row in rows if row["items_offered"] > 0
    ]
    per_hour_items = base.arrivals.rate * 3600.0 * (float(np.mean(completed)) if completed else 0)
    total = workers + waiting
    per_million = total / per_hour_items * 1e6 if per_hour_items > 0 else math.nan
    return CostEstimate(workers, waiting, total, workers + low, workers + high, per_million, n)


def difference_bounds(
    cost: Cost,
    base: Scenario,
    rows_a: Sequence[Mapping[str, float]],
    point_a: Mapping[str, Any],
    rows_b: Sequence[Mapping[str, float]],
    point_b: Mapping[str, Any],
    level: float,
) -> tuple[float, float]:
    """One-sided bounds on ``total(b) - total(a)``, paired over the replications both ran."""
    n = min(len(rows_a), len(rows_b))
    workers = cost.workers_per_hour(base, point_b) - cost.workers_per_hour(base, point_a)
    if n == 0:
        return -math.inf, math.inf
    diff = waiting_values(cost, base, rows_b[:n]) - waiting_values(cost, base, rows_a[:n])
    if not np.isfinite(diff).all():
        return -math.inf, math.inf
    mean = workers + float(diff.mean())
    if n == 1:
        return (mean, mean) if not diff.any() else (-math.inf, math.inf)
    low, high = mean_bounds(diff, level)
    return workers + low, workers + high
