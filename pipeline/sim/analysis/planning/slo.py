"""Service-level objectives: ``latency_p95_s<=0.5``, parsed, checked and judged with confidence.

An :class:`SLO` bounds one metric of a run from above (``<=``) or below
(``>=``). The metrics are the numeric keys of a run's summary
(:data:`SUMMARY_METRICS`, as the command line's JSON names them), a few
fractions derived from its counts (:data:`DERIVED_METRICS`), and, for a
scenario with item classes, one class's numbers: ``classes.NAME.KEY`` with KEY
one of :data:`~pipeline.sim.running.class_summary.CLASS_METRICS`
(``classes.high.latency_p95_s<=0.5``, ``classes.low.expired_fraction<=0.05``).

How a configuration's replications are judged against an SLO is
:mod:`~.judgement`.

Example:
    >>> slo = SLO.parse("latency_p95_s<=0.5")
    >>> slo.metric, slo.op, slo.limit
    ('latency_p95_s', '<=', 0.5)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...running.class_summary import CLASS_METRICS
from ...running.drain_warning import drain_cut

__all__ = [
    "BACKLOG_METRICS",
    "CHAIN_METRICS",
    "DERIVED_METRICS",
    "DRAIN_CUT_METRICS",
    "FRACTION_METRICS",
    "METRICS",
    "SLO",
    "SUMMARY_METRICS",
    "check_slo_metrics",
    "class_metric",
    "metric_counts",
    "metric_value",
    "parse_slos",
    "summary_keys",
]

SUMMARY_METRICS: tuple[str, ...] = (
    "items_offered",
    "items_admitted",
    "items_completed",
    "items_dead_lettered",
    "items_shed",
    "items_unfinished",
    "items_expired",
    "expired_fraction",
    "attempts_total",
    "retries_total",
    "wait_mean_s",
    "wait_p95_s",
    "latency_mean_s",
    "latency_p50_s",
    "latency_p95_s",
    "latency_p99_s",
    "throughput_per_s",
    "goodput_per_s",
    "utilisation",
    "queue_depth_mean",
    "queue_depth_max",
    "in_system_mean",
    "upstream_backlog_max",
    "producer_blocked_s",
    "memory_peak_bytes",
    "sim_time_s",
    "wait_mean_ci95_s",
    "latency_mean_ci95_s",
)
"""Numeric summary keys an SLO may bound. ``wall_time_s`` is left out on purpose:
it measures the machine, not the pipeline, and would make a plan depend on where it ran."""

DERIVED_METRICS: dict[str, tuple[str, str, str]] = {
    "shed_fraction": ("items_shed", "items_offered", "share of offered items shed"),
    "completed_fraction": ("items_completed", "items_offered", "share of offered items completed"),
    "dead_letter_fraction": (
        "items_dead_lettered",
        "items_admitted",
        "share of admitted items dead-lettered (p**k with independent failures)",
    ),
    "unfinished_fraction": (
        "items_unfinished",
        "items_admitted",
        "share of admitted items left unfinished by the drain",
    ),
    "expired_fraction": (
        "items_expired",
        "items_offered",
        "share of offered items expired unstarted (max_wait_s, or a class's patience)",
    ),
    "attempts_per_item": ("attempts_total", "items_admitted", "attempts per admitted item"),
}
"""name -> (numerator, denominator, meaning): ratios of two summary counts (NaN when 0/0)."""

FRACTION_METRICS: tuple[str, ...] = (
    "shed_fraction",
    "completed_fraction",
    "dead_letter_fraction",
    "unfinished_fraction",
    "expired_fraction",
)
"""The derived metrics that are fractions of items, each item in or out: a binomial
count, which an exact bound can judge when the replications agree
(``attempts_per_item`` is a ratio, not a fraction: an item may take many attempts)."""

DRAIN_CUT_METRICS: tuple[str, ...] = tuple(m for m in SUMMARY_METRICS if drain_cut(m))
"""Metrics of the items' latency and wait, which leave out the items a timed-out drain
left unfinished: a run whose drain timed out fails an SLO on any of them (see :func:`judge`)."""

CHAIN_METRICS: tuple[str, ...] = (
    "items_offered",
    "items_admitted",
    "items_completed",
    "items_dead_lettered",
    "items_shed",
    "items_unfinished",
    "items_expired",
    "expired_fraction",
    "attempts_total",
    "latency_mean_s",
    "latency_p50_s",
    "latency_p95_s",
    "latency_p99_s",
    "throughput_per_s",
    "memory_peak_bytes",
    "items_held_max",
    "sim_time_s",
)
"""The summary keys of a chain an SLO may bound: its end-to-end summary's numbers
(arrival at the source to the last stage's finish; items held by every stage
together). A chain has no one wait, utilisation or queue: those are each stage's,
and an SLO does not bound one stage (``write.utilisation``): a plan answers for
what the chain delivers end to end."""

# Summary keys only a chain's summary has.
_CHAIN_ONLY = tuple(m for m in CHAIN_METRICS if m not in SUMMARY_METRICS)

POOL_METRICS: tuple[str, ...] = ("workers_mean", "workers_max", "worker_seconds", "scale_events")
"""Summary keys of an autoscaled run (:func:`~pipeline.sim.running.summary.pool_keys`),
read for a plan's cost: NaN for a run whose pool is fixed."""

BACKLOG_METRICS: tuple[str, ...] = ("backlog_cleared_s", "backlog_drained_s")
"""Summary keys of a run with an initial backlog (:mod:`pipeline.sim.running.backlog`),
single stage or chain: "drain 5,000 waiting items within 20 minutes" is
``backlog_drained_s<=1200``. NaN (a drain that timed out first) fails the SLO."""

# expired_fraction is a summary key and a derived fraction (judged as a binomial count): once.
METRICS: tuple[str, ...] = tuple(
    dict.fromkeys((*SUMMARY_METRICS, *_CHAIN_ONLY, *BACKLOG_METRICS, *DERIVED_METRICS))
)
"""Every metric an SLO may name (a chain's :data:`CHAIN_METRICS` and the backlog's included)."""

_CLASS_METRIC = re.compile(r"classes\.([A-Za-z0-9_][A-Za-z0-9_-]{0,63})\.([a-z0-9_]+)")
# A class's fraction, as (events, trials) of its own summary: each item in or out.
_CLASS_FRACTIONS = {"expired_fraction": ("expired", "items")}


def class_metric(metric: str) -> tuple[str, str] | None:
    """``(class name, key)`` of a ``classes.NAME.KEY`` metric, or None for any other metric.

    Raises:
        ValueError: ``classes.NAME.KEY`` with a KEY a class's summary does not have.
    """
    match = _CLASS_METRIC.fullmatch(metric) if isinstance(metric, str) else None
    if match is None:
        return None
    name, key = match.groups()
    if key not in CLASS_METRICS:
        raise ValueError(
            f"unknown metric {key!r} of class {name!r} in {_quoted(metric)}; a class's metrics: "
            f"{', '.join(CLASS_METRICS)}"
        )
    return name, key


_OPERATORS = ("<=", ">=")
_EXPRESSION = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*(<=|>=|==|=<|=>|<|>|=)\s*(.*?)\s*$")


def _quoted(text: str) -> str:
    return repr(text) if len(text) <= 60 else f"{text[:50]!r}... ({len(text)} characters)"


@dataclass(frozen=True)
class SLO:
    """One objective: ``metric op limit`` with ``op`` ``"<="`` or ``">="``.

    Attributes:
        metric: one of :data:`METRICS`, e.g. ``"latency_p95_s"`` (units in its name).
        op: ``"<="`` (an upper limit) or ``">="`` (a lower limit).
        limit: a finite number, in the metric's units.

    Raises:
        ValueError: an unknown metric (the message lists the allowed ones), an
            operator other than ``<=``/``>=``, or a limit that is not a finite number.
    """

    metric: str
    op: str
    limit: float

    def __post_init__(self) -> None:
        if not isinstance(self.metric, str) or (
            self.metric not in METRICS and class_metric(self.metric) is None
        ):
            raise ValueError(
                f"unknown metric {_quoted(str(self.metric))} in SLO; allowed: {', '.join(METRICS)}"
            )
        if self.op not in _OPERATORS:
            raise ValueError(f"SLO operator must be '<=' or '>=', got {self.op!r}")
        limit = self.limit
        if isinstance(limit, bool) or not isinstance(limit, int | float | np.number):
            raise ValueError(f"SLO limit must be a finite number, got {limit!r}")
        if not math.isfinite(float(limit)):
            raise ValueError(f"SLO limit must be a finite number, got {float(limit)!r}")
        object.__setattr__(self, "limit", float(limit))

    @classmethod
    def parse(cls, text: str) -> SLO:
        """``"METRIC<=LIMIT"`` or ``"METRIC>=LIMIT"`` -> SLO (spaces allowed, ``200e6`` too).

        Raises:
            ValueError: a malformed expression, an unknown metric, ``<``, ``>`` or
                ``=`` instead of ``<=``/``>=``, or a limit that is not a finite number.
        """
        if not isinstance(text, str):
            raise ValueError(f"an SLO must be a string like 'latency_p95_s<=0.5', got {text!r}")
        match = _EXPRESSION.match(text)
        if match is None:
            raise ValueError(
                f"an SLO must look like METRIC<=LIMIT or METRIC>=LIMIT "
                f"(e.g. 'latency_p95_s<=0.5'), got {_quoted(text)}"
            )
        metric, op, limit_text = match.groups()
        try:
            by_class = class_metric(metric)
        except ValueError as exc:
            raise ValueError(f"SLO {_quoted(text)}: {exc}") from None
        if "." in metric and by_class is None:
            raise ValueError(
                f"SLO {_quoted(text)}: {_quoted(metric)} is one stage's metric; an SLO bounds "
                "the run's own summary, for a chain the end-to-end one (latency_p95_s, "
                "items_held_max, memory_peak_bytes, ...)"
            )
        if metric not in METRICS and by_class is None:
            raise ValueError(
                f"unknown metric {_quoted(metric)} in SLO {_quoted(text)}; "
                f"allowed: {', '.join(METRICS)}"
            )
        if op not in _OPERATORS:
            raise ValueError(
                f"SLO {_quoted(text)}: use '<=' or '>=' (a limit the metric may reach), not {op!r}"
            )
        try:
            limit = float(limit_text)
        except ValueError:
            raise ValueError(
                f"SLO {_quoted(text)}: the limit must be a number (e.g. 0.5 or 200e6), "
                f"got {_quoted(limit_text)}"
            ) from None
        if not math.isfinite(limit):
            raise ValueError(f"SLO {_quoted(text)}: the limit must be finite, got {limit_text!r}")
        return cls(metric, op, limit)

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.limit:.15g}"

    @property
    def upper(self) -> bool:
        """True for an upper limit (``<=``)."""
        return self.op == "<="


def parse_slos(slos: Sequence[str | SLO] | str | SLO) -> tuple[SLO, ...]:
    """SLOs from expressions or :class:`SLO` objects; at least one, no repeated (metric, op).

    Two SLOs on one metric are allowed when they bound it from both sides
    (``utilisation>=0.5`` and ``utilisation<=0.85``).

    Raises:
        ValueError: no SLO, a bad expression, or one metric bounded twice from one side.
    """
    if isinstance(slos, str | SLO):
        slos = [slos]
    if not isinstance(slos, Sequence) or isinstance(slos, bytes):
        raise ValueError(
            f"slos must be a list of expressions like 'latency_p95_s<=0.5', got {slos!r}"
        )
    if len(slos) == 0:
        raise ValueError("give at least one SLO, e.g. 'latency_p95_s<=0.5'")
    parsed = tuple(s if isinstance(s, SLO) else SLO.parse(s) for s in slos)
    seen: dict[tuple[str, str], SLO] = {}
    for slo in parsed:
        key = (slo.metric, slo.op)
        if key in seen:
            raise ValueError(
                f"two SLOs bound {slo.metric} from the same side ({seen[key]} and {slo}); "
                "keep the one you mean"
            )
        seen[key] = slo
    return parsed


def check_slo_metrics(
    slos: Sequence[SLO],
    *,
    chain: bool,
    fan_out: bool = False,
    backlog: bool = True,
    classes: Sequence[str] | None = None,
) -> None:
    """Each SLO's metric is in the summary of the run it will judge.

    A single stage's summary has every metric but a chain's own
    (``items_held_max``); a chain's has :data:`CHAIN_METRICS` and the derived
    fractions, unless some stage fans out (``fan_out``): then the counts are
    of different items (source items offered, their children completed) and
    a ratio of two of them is not a fraction.

    The :data:`BACKLOG_METRICS` need a run with an initial backlog (``backlog``);
    a ``classes.NAME.KEY`` metric a scenario with a class of that name (``classes``,
    the names; None: no classes).

    Raises:
        ValueError: the first SLO whose metric the run does not have, with the ones it has.
    """
    for slo in slos:
        by_class = class_metric(slo.metric)
        if by_class is not None:
            name = by_class[0]
            if classes is None:
                raise ValueError(
                    f"SLO {slo}: this scenario has no item classes; give "
                    "Scenario(classes=[ItemClass(name=...), ...]) ([[classes]] in a scenario file)"
                )
            if name not in classes:
                raise ValueError(
                    f"SLO {slo}: no class named {name!r}; classes: {', '.join(classes)}"
                )
            continue
        if slo.metric in BACKLOG_METRICS:
            if not backlog:
                raise ValueError(
                    f"SLO {slo}: {slo.metric} times the drain of an initial backlog, and this "
                    "scenario has none; give Scenario(initial_backlog=N) (--backlog N)"
                )
            continue
        if not chain and slo.metric in _CHAIN_ONLY:
            raise ValueError(
                f"SLO {slo}: {slo.metric} is a chain's metric (items held by all its stages); "
                "for a single stage bound memory_peak_bytes or queue_depth_max"
            )
        if not chain or slo.metric in CHAIN_METRICS:
            continue
        if slo.metric in DERIVED_METRICS and not fan_out:
            continue
        if slo.metric in DERIVED_METRICS:
            raise ValueError(
                f"SLO {slo}: a stage of this chain fans out, so its counts are of different "
                "items (source items offered, their children completed); bound a count instead, "
                "e.g. items_dead_lettered or items_shed"
            )
        allowed = [*CHAIN_METRICS, *([] if fan_out else DERIVED_METRICS)]
        raise ValueError(
            f"SLO {slo}: a chain's summary is end to end and has no {slo.metric}; "
            f"allowed on a chain: {', '.join(allowed)}"
        )


def slo_keys(slos: Sequence[SLO]) -> dict[SLO, str]:
    """Column prefix of each SLO: its metric, or ``metric_le``/``metric_ge`` when both sides."""
    counts: dict[str, int] = {}
    for slo in slos:
        counts[slo.metric] = counts.get(slo.metric, 0) + 1
    return {
        slo: slo.metric if counts[slo.metric] == 1 else slo.metric + ("_le" if slo.upper else "_ge")
        for slo in slos
    }


def metric_value(summary: Mapping[str, Any], metric: str) -> float:
    """One run's value of ``metric`` (a summary key or a derived fraction); NaN if undefined.

    Raises:
        ValueError: ``metric`` is not one of :data:`METRICS`.
    """
    if metric in DERIVED_METRICS:
        numerator, denominator, _ = DERIVED_METRICS[metric]
        bottom = float(summary.get(denominator, math.nan))
        # A chain's end-to-end summary counts no expiries: NaN, as any fraction 0/0.
        return float(summary.get(numerator, math.nan)) / bottom if bottom > 0 else math.nan
    by_class = class_metric(metric)
    if by_class is not None:
        name, key = by_class
        value = summary.get("classes", {}).get(name, {}).get(key, math.nan)
        return math.nan if value is None else float(value)
    if metric in BACKLOG_METRICS or metric in POOL_METRICS or _stage_pool(metric):
        # A point of a search without a backlog has no drain to time; a fixed pool no mean.
        return float(summary.get(metric, math.nan))
    if metric not in SUMMARY_METRICS and metric not in _CHAIN_ONLY:
        raise ValueError(f"unknown metric {_quoted(metric)}; allowed: {', '.join(METRICS)}")
    return float(summary[metric])


def _stage_pool(metric: str) -> bool:
    """Whether ``metric`` is a chain's autoscaled stage's pool, ``STAGE.workers_mean``
    (a plan's cost reads it; an SLO does not bound one stage)."""
    stage, dot, key = metric.rpartition(".")
    return bool(dot and stage) and key == "workers_mean"


def summary_keys(metrics: Sequence[str]) -> frozenset[str] | None:
    """The summary keys :func:`metric_value` and :func:`metric_counts` read for ``metrics``.

    None when one of them needs more than the summary's own keys (a class's
    metric, or the backlog's), so that the whole summary is computed.
    """
    keys: set[str] = set()
    for metric in metrics:
        if metric in DERIVED_METRICS:
            numerator, denominator, _ = DERIVED_METRICS[metric]
            keys.update((numerator, denominator))
        elif (metric in SUMMARY_METRICS and metric not in BACKLOG_METRICS) or (
            metric in POOL_METRICS
        ):
            keys.add(metric)
        else:
            return None
    return frozenset(keys)


def metric_counts(summary: Mapping[str, Any], metric: str) -> tuple[int, int] | None:
    """One run's ``(events, trials)`` behind a fraction metric, e.g. (items shed, items offered).

    None for a metric that is not one of :data:`FRACTION_METRICS`.
    """
    by_class = class_metric(metric)
    if by_class is not None:
        name, key = by_class
        if key not in _CLASS_FRACTIONS:
            return None
        events, trials = _CLASS_FRACTIONS[key]
        own = summary["classes"][name]
        return int(own[events]), int(own[trials])
    if metric not in FRACTION_METRICS:
        return None
    numerator, denominator, _ = DERIVED_METRICS[metric]
    return int(summary[numerator]), int(summary[denominator])


def check_confidence(confidence: float) -> float:
    """``confidence`` as a float in [0.5, 1), or a one-line ValueError."""
    if isinstance(confidence, bool) or not isinstance(confidence, int | float | np.number):
        raise ValueError(f"confidence must be a number in [0.5, 1), got {confidence!r}")
    level = float(confidence)
    if not 0.5 <= level < 1:  # also refuses NaN
        raise ValueError(
            f"confidence must be >= 0.5 and < 1 (a one-sided level, e.g. 0.95), got {level!r}"
        )
    return level
