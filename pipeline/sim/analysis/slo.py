"""Service-level objectives: ``latency_p95_s<=0.5``, parsed, checked and judged with confidence.

An :class:`SLO` bounds one metric of a run from above (``<=``) or below
(``>=``). The metrics are the numeric keys of a run's summary
(:data:`SUMMARY_METRICS`, as the command line's JSON names them) and a few
fractions derived from its counts (:data:`DERIVED_METRICS`).

:func:`judge` decides an SLO from one value per replication with a one-sided
Student t bound at a chosen confidence:

- ``meets`` when the bound on the safe side is within the limit (``<=``: the
  upper bound ``mean + t s / sqrt(n)`` is at most the limit);
- ``fails`` when the opposite bound is beyond it (``<=``: the lower bound
  ``mean - t s / sqrt(n)`` is above the limit);
- ``undecided`` otherwise: more replications (or longer runs) are needed.

``t`` is the ``confidence`` quantile of Student t with ``n - 1`` degrees of
freedom, so each verdict is wrong with probability at most ``1 - confidence``
(for a metric whose per-run values are roughly normal across runs, as means
and percentiles of long runs are).

Example:
    >>> slo = SLO.parse("latency_p95_s<=0.5")
    >>> judge(slo, [0.41, 0.44, 0.43], confidence=0.95).verdict
    'meets'
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..stats import t_quantile

__all__ = [
    "CHAIN_METRICS",
    "DERIVED_METRICS",
    "METRICS",
    "SLO",
    "SUMMARY_METRICS",
    "Judgement",
    "check_slo_metrics",
    "judge",
    "metric_value",
    "parse_slos",
]

SUMMARY_METRICS: tuple[str, ...] = (
    "items_offered",
    "items_admitted",
    "items_completed",
    "items_dead_lettered",
    "items_shed",
    "items_unfinished",
    "attempts_total",
    "retries_total",
    "wait_mean_s",
    "wait_p95_s",
    "latency_mean_s",
    "latency_p50_s",
    "latency_p95_s",
    "latency_p99_s",
    "throughput_per_s",
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
    "attempts_per_item": ("attempts_total", "items_admitted", "attempts per admitted item"),
}
"""name -> (numerator, denominator, meaning): ratios of two summary counts (NaN when 0/0)."""

CHAIN_METRICS: tuple[str, ...] = (
    "items_offered",
    "items_admitted",
    "items_completed",
    "items_dead_lettered",
    "items_shed",
    "items_unfinished",
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

METRICS: tuple[str, ...] = (*SUMMARY_METRICS, *_CHAIN_ONLY, *DERIVED_METRICS)
"""Every metric an SLO may name (a chain's :data:`CHAIN_METRICS` included)."""

_OPERATORS = ("<=", ">=")
_EXPRESSION = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(<=|>=|==|=<|=>|<|>|=)\s*(.*?)\s*$")


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
        if not isinstance(self.metric, str) or self.metric not in METRICS:
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
        if "." in metric:
            raise ValueError(
                f"SLO {_quoted(text)}: {_quoted(metric)} is one stage's metric; an SLO bounds "
                "the run's own summary, for a chain the end-to-end one (latency_p95_s, "
                "items_held_max, memory_peak_bytes, ...)"
            )
        if metric not in METRICS:
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


def check_slo_metrics(slos: Sequence[SLO], *, chain: bool, fan_out: bool = False) -> None:
    """Each SLO's metric is in the summary of the run it will judge.

    A single stage's summary has every metric but a chain's own
    (``items_held_max``); a chain's has :data:`CHAIN_METRICS` and the derived
    fractions, unless some stage fans out (``fan_out``): then the counts are
    of different items (source items offered, their children completed) and
    a ratio of two of them is not a fraction.

    Raises:
        ValueError: the first SLO whose metric the run does not have, with the ones it has.
    """
    for slo in slos:
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


def _slo_keys(slos: Sequence[SLO]) -> dict[SLO, str]:
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
        bottom = float(summary[denominator])
        return float(summary[numerator]) / bottom if bottom > 0 else math.nan
    if metric not in SUMMARY_METRICS and metric not in _CHAIN_ONLY:
        raise ValueError(f"unknown metric {_quoted(metric)}; allowed: {', '.join(METRICS)}")
    return float(summary[metric])


def _check_confidence(confidence: float) -> float:
    """``confidence`` as a float in [0.5, 1), or a one-line ValueError."""
    if isinstance(confidence, bool) or not isinstance(confidence, int | float | np.number):
        raise ValueError(f"confidence must be a number in [0.5, 1), got {confidence!r}")
    level = float(confidence)
    if not 0.5 <= level < 1:  # also refuses NaN
        raise ValueError(
            f"confidence must be >= 0.5 and < 1 (a one-sided level, e.g. 0.95), got {level!r}"
        )
    return level


class Judgement(NamedTuple):
    """One SLO judged on one configuration's replications.

    Attributes:
        slo: the objective.
        replications: values judged (one per run).
        mean: mean of the finite values (NaN if none).
        half_width: ``t(confidence, n-1) s / sqrt(n)``, the distance from the mean
            to either one-sided bound; inf with one value, NaN when a run had no value.
        bound: the bound on the SLO's safe side (``<=``: ``mean + half_width``;
            ``>=``: ``mean - half_width``).
        verdict: ``"meets"``, ``"fails"`` or ``"undecided"``.
    """

    slo: SLO
    replications: int
    mean: float
    half_width: float
    bound: float
    verdict: str

    @property
    def low(self) -> float:
        """Lower one-sided bound, ``mean - half_width``."""
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        """Upper one-sided bound, ``mean + half_width``."""
        return self.mean + self.half_width


def judge(slo: SLO, values: Sequence[float] | np.ndarray, *, confidence: float) -> Judgement:
    """Judge ``slo`` from one value per replication (see the module docstring for the rule).

    A run without a value (NaN: e.g. nothing completed, so no latency) counts
    against the SLO: the verdict is ``fails``, since nothing shows the
    objective is met and the run itself shows a failure to measure it.

    Raises:
        ValueError: no values, or ``confidence`` not in [0.5, 1).
    """
    level = _check_confidence(confidence)
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n == 0:
        raise ValueError(f"cannot judge {slo} on no replications")
    finite = np.isfinite(x)
    if not finite.all():
        mean = float(x[finite].mean()) if finite.any() else math.nan
        return Judgement(slo, n, mean, math.nan, math.nan, "fails")
    mean = float(x.mean())
    # One run has no spread to measure: its interval is the whole line.
    half = math.inf if n == 1 else t_quantile(level, n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    low, high = mean - half, mean + half
    if slo.upper:
        verdict = "meets" if high <= slo.limit else "fails" if low > slo.limit else "undecided"
        bound = high
    else:
        verdict = "meets" if low >= slo.limit else "fails" if high < slo.limit else "undecided"
        bound = low
    return Judgement(slo, n, mean, half, bound, verdict)


def _run_length_advice(judgement: Judgement, n_items: int | None, duration_s: float | None) -> str:
    """How much more simulation would decide an undecided SLO.

    :func:`~pipeline.sim.stats.run_length_advice`'s rule, ``n ~ n0 (h0 / h)**2``
    with ``h = |mean - limit|``, in replications; and since a half-width also
    falls as one over the square root of the run length (for means and
    percentiles of long, stationary runs), the same factor in items or seconds.
    """
    from ..stats import run_length_advice, scaled_run_length

    n0, h0 = judgement.replications, judgement.half_width
    gap = abs(judgement.mean - judgement.slo.limit)
    if not (math.isfinite(h0) and math.isfinite(gap)):
        return "no interval to extrapolate from (a run had no value, or only one run)"
    advice = run_length_advice(
        judgement.mean, h0, n0, metric=judgement.slo.metric, limit=judgement.slo.limit
    )
    if advice is None or gap <= 0:
        return advice or "the interval already clears the limit"
    factor = scaled_run_length(n0, h0, gap) / n0
    if n_items is not None:
        advice += (
            f" Or runs about {factor:.3g}x longer: about {math.ceil(n_items * factor):,} items."
        )
    elif duration_s is not None:
        advice += f" Or runs about {factor:.3g}x longer: about {duration_s * factor:.4g} s."
    return advice
