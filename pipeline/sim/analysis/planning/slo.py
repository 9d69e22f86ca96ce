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
for a metric whose per-run values are roughly normal across runs, as means
and percentiles of long runs are. Those of short runs are skewed to the right
(a run that met a long busy period waits far longer), and a t bound alone
then misses too often (a 99% upper bound on 2,000-item M/M/10 runs: 4-6%).
So when every value is positive, each bound is the wider of the t bound and
a lognormal one on the mean
(:func:`~pipeline.sim.stats.intervals.lognormal_mean_bounds`), and
:attr:`Judgement.interval` holds both ends.

**When the replications agree exactly** the t interval has zero width, a
certainty the data cannot give: nothing shed in any of 3 runs does not make
the shed fraction 0 for sure. So:

- a *fraction* (:data:`FRACTION_METRICS`, a count over a count) is bounded
  instead by the exact one-sided binomial (Clopper-Pearson) bound on the
  counts pooled over the replications
  (:func:`~pipeline.sim.stats.intervals.proportion_bound`): no event in ``N`` items
  gives the upper bound ``1 - (1 - confidence) ** (1 / N)``, about ``3 / N``
  at 95%. Pooling treats the items as independent trials, which the items of
  one queueing run are only roughly (a burst sheds its neighbours together);
  that is why it is used only where the replications leave no spread to
  measure, and the judgement says so (:attr:`Judgement.note`).
- any other metric keeps its exact value (a utilisation fixed by the
  configuration, a memory peak at its ceiling): the judgement says the
  replications agreed exactly, with no interval to estimate, rather than
  "± 0".

**When a run's drain timed out** (``drain_timeout_s``), the items it left
unfinished have no finish time: its latency and wait statistics
(:data:`DRAIN_CUT_METRICS`) leave out the slowest tail, and only look better
for it. Such a run never supports ``meets`` on those metrics: an SLO on one of
them *fails* on a configuration with any run whose drain timed out (given
``timed_out`` to :func:`judge`), and the judgement's note says so. That
configuration did not finish its work within the drain; more replications
would not change it. SLOs on other metrics are judged as usual
(``unfinished_fraction`` bounds the unfinished items themselves).

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

from ...stats.intervals import lognormal_mean_bounds, proportion_bound, t_quantile
from ...stats.runlength import run_length_advice, scaled_run_length

__all__ = [
    "CHAIN_METRICS",
    "DERIVED_METRICS",
    "DRAIN_CUT_METRICS",
    "FRACTION_METRICS",
    "METRICS",
    "SLO",
    "SUMMARY_METRICS",
    "Judgement",
    "check_slo_metrics",
    "judge",
    "metric_counts",
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

FRACTION_METRICS: tuple[str, ...] = (
    "shed_fraction",
    "completed_fraction",
    "dead_letter_fraction",
    "unfinished_fraction",
)
"""The derived metrics that are fractions of items, each item in or out: a binomial
count, which an exact bound can judge when the replications agree
(``attempts_per_item`` is a ratio, not a fraction: an item may take many attempts)."""

DRAIN_CUT_METRICS: tuple[str, ...] = tuple(
    m for m in SUMMARY_METRICS if m.startswith(("wait_", "latency_"))
)
"""Metrics of the items' latency and wait, which leave out the items a timed-out drain
left unfinished: a run whose drain timed out fails an SLO on any of them (see :func:`judge`)."""

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
        bottom = float(summary[denominator])
        return float(summary[numerator]) / bottom if bottom > 0 else math.nan
    if metric not in SUMMARY_METRICS and metric not in _CHAIN_ONLY:
        raise ValueError(f"unknown metric {_quoted(metric)}; allowed: {', '.join(METRICS)}")
    return float(summary[metric])


def metric_counts(summary: Mapping[str, Any], metric: str) -> tuple[int, int] | None:
    """One run's ``(events, trials)`` behind a fraction metric, e.g. (items shed, items offered).

    None for a metric that is not one of :data:`FRACTION_METRICS`.
    """
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


class Judgement(NamedTuple):
    """One SLO judged on one configuration's replications.

    Attributes:
        slo: the objective.
        replications: values judged (one per run).
        mean: mean of the finite values (NaN if none).
        half_width: the distance from the mean to the bound on the SLO's safe
            side: ``t(confidence, n-1) s / sqrt(n)`` (``basis`` ``"t"``, the same
            on either side); inf with one value, NaN when a run had no value; 0
            when the runs agreed exactly (``"exact"``); for a ``"binomial"``
            bound, its distance from the mean on the safe side (the other side's
            is in :attr:`low`/:attr:`high`).
        bound: the bound on the SLO's safe side (``<=``: the upper bound;
            ``>=``: the lower one).
        verdict: ``"meets"``, ``"fails"`` or ``"undecided"``.
        basis: how the bounds were found: ``"t"`` (Student t across the
            replications), ``"binomial"`` (they agreed exactly on a fraction:
            the exact bound on the pooled counts) or ``"exact"`` (they agreed
            exactly on another metric: the value itself).
        note: for ``"binomial"`` and ``"exact"``, a sentence saying so (None for ``"t"``).
        interval: ``(low, high)`` when it is not ``mean ± half_width`` (binomial).
        pooled: for ``"binomial"``, the ``(events, trials)`` summed over the replications.
        drain_timed_out: how many of the replications' drains timed out, for
            an SLO on one of :data:`DRAIN_CUT_METRICS` (0 otherwise): any makes
            the verdict ``fails``, whatever the bounds say.
    """

    slo: SLO
    replications: int
    mean: float
    half_width: float
    bound: float
    verdict: str
    basis: str = "t"
    note: str | None = None
    interval: tuple[float, float] | None = None
    pooled: tuple[int, int] | None = None
    drain_timed_out: int = 0

    @property
    def low(self) -> float:
        """Lower one-sided bound (``mean - half_width`` unless binomial)."""
        return self.interval[0] if self.interval is not None else self.mean - self.half_width

    @property
    def high(self) -> float:
        """Upper one-sided bound (``mean + half_width`` unless binomial)."""
        return self.interval[1] if self.interval is not None else self.mean + self.half_width


def _verdict(slo: SLO, low: float, high: float) -> tuple[str, float]:
    """The verdict from the two one-sided bounds, and the bound on the safe side."""
    if slo.upper:
        return ("meets" if high <= slo.limit else "fails" if low > slo.limit else "undecided"), high
    return ("meets" if low >= slo.limit else "fails" if high < slo.limit else "undecided"), low


def _pooled(slo: SLO, counts: Sequence[tuple[int, int]] | None, n: int) -> tuple[int, int] | None:
    """``(events, trials)`` summed over the replications, or None when not a fraction."""
    if slo.metric not in FRACTION_METRICS or counts is None:
        return None
    pairs = [(int(events), int(trials)) for events, trials in counts]
    if len(pairs) != n:
        raise ValueError(
            f"counts must have one (events, trials) pair per value ({n}), got {len(pairs)}"
        )
    if any(not 0 <= e <= t for e, t in pairs):
        raise ValueError(f"counts must be pairs with 0 <= events <= trials, got {pairs!r:.120}")
    return sum(e for e, _ in pairs), sum(t for _, t in pairs)


def _binomial_note(slo: SLO, events: int, trials: int, runs: int, level: float) -> str:
    numerator, denominator, _ = DERIVED_METRICS[slo.metric]
    happened = numerator.removeprefix("items_").replace("_", "-")
    of = denominator.removeprefix("items_")
    pooled = f"{trials:,} items {of} over {runs} runs"
    rule = f"about {-math.log1p(-level):.2g}/N at {100 * level:.4g}%"
    if events == 0:
        return f"no item {happened} in {pooled}: exact binomial upper bound, {rule}"
    if events == trials:
        return f"every item {happened} in {pooled}: exact binomial lower bound, 1 - {rule}"
    return (
        f"every run {happened} the same share, {events:,} of {pooled}: exact binomial "
        "bounds on the pooled counts"
    )


def judge(
    slo: SLO,
    values: Sequence[float] | np.ndarray,
    *,
    confidence: float,
    counts: Sequence[tuple[int, int]] | None = None,
    timed_out: Sequence[bool] | None = None,
) -> Judgement:
    """Judge ``slo`` from one value per replication (see the module docstring for the rule).

    A run without a value (NaN: e.g. nothing completed, so no latency) counts
    against the SLO: the verdict is ``fails``, since nothing shows the
    objective is met and the run itself shows a failure to measure it.

    When two or more values are all equal, the t interval has no width. For a
    fraction (:data:`FRACTION_METRICS`) with ``counts`` given, the bounds are
    then the exact binomial ones on the pooled counts (basis ``"binomial"``);
    a fraction without ``counts`` cannot be bounded and is ``undecided``
    (unless it already fails); any other metric is judged on the exact value
    (basis ``"exact"``). :attr:`Judgement.note` says which.

    Args:
        slo: the objective.
        values: the metric's value in each replication.
        confidence: one-sided level in [0.5, 1).
        counts: for a fraction metric, each replication's ``(events, trials)``
            (:func:`metric_counts`), e.g. (items shed, items offered).
        timed_out: each replication's ``drain_timed_out`` (None: no drain
            timed out). On a metric of :data:`DRAIN_CUT_METRICS`, any True
            makes the verdict ``fails`` (the bounds are still computed, for
            show), with :attr:`Judgement.note` saying why.

    Raises:
        ValueError: no values, ``confidence`` not in [0.5, 1), ``counts`` not
            one ``(events, trials)`` pair per value with ``0 <= events <= trials``,
            or ``timed_out`` not one flag per value.
    """
    level = check_confidence(confidence)
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n == 0:
        raise ValueError(f"cannot judge {slo} on no replications")
    cut = 0
    if timed_out is not None:
        flags = [bool(flag) for flag in timed_out]
        if len(flags) != n:
            raise ValueError(f"timed_out must have one flag per value ({n}), got {len(flags)}")
        cut = sum(flags) if slo.metric in DRAIN_CUT_METRICS else 0
    judgement = _judge_values(slo, x, level, _pooled(slo, counts, n))
    if not cut:
        return judgement
    note = (
        f"the drain timed out in {cut} of {n} runs: the items left unfinished have no "
        f"{'wait' if slo.metric.startswith('wait_') else 'latency'}, so these values leave out "
        "the slowest tail and cannot show the SLO is met; counted as failing"
    )
    if judgement.note is not None:
        note += f" ({judgement.note})"
    return judgement._replace(verdict="fails", note=note, drain_timed_out=cut)


def _judge_values(
    slo: SLO, x: np.ndarray, level: float, pooled: tuple[int, int] | None
) -> Judgement:
    """:func:`judge` on the values alone (t, binomial or exact), drain timeouts aside."""
    n = x.size
    finite = np.isfinite(x)
    if not finite.all():
        mean = float(x[finite].mean()) if finite.any() else math.nan
        return Judgement(slo, n, mean, math.nan, math.nan, "fails")
    mean = float(x.mean())
    if n >= 2 and bool((x == x[0]).all()):
        return _judge_agreed(slo, n, mean, level, pooled)
    # One run has no spread to measure: its interval is the whole line.
    half = math.inf if n == 1 else t_quantile(level, n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    if n == 1 or not bool((x > 0).all()):
        verdict, bound = _verdict(slo, mean - half, mean + half)
        return Judgement(slo, n, mean, half, bound, verdict)
    # Positive values may be skewed (short runs): each bound is the wider of t and lognormal.
    skew_low, skew_high = lognormal_mean_bounds(x, level)
    low, high = min(mean - half, skew_low), max(mean + half, skew_high)
    verdict, bound = _verdict(slo, low, high)
    return Judgement(slo, n, mean, abs(bound - mean), bound, verdict, interval=(low, high))


def _judge_agreed(
    slo: SLO, n: int, mean: float, level: float, pooled: tuple[int, int] | None
) -> Judgement:
    """Every replication gave ``mean``: no spread for a t interval to measure."""
    if slo.metric in FRACTION_METRICS and pooled is not None and pooled[1] > 0:
        events, trials = pooled
        low = proportion_bound(events, trials, level, upper=False)
        high = proportion_bound(events, trials, level, upper=True)
        verdict, bound = _verdict(slo, low, high)
        note = _binomial_note(slo, events, trials, n, level)
        return Judgement(
            slo, n, mean, abs(bound - mean), bound, verdict, "binomial", note, (low, high), pooled
        )
    if slo.metric in FRACTION_METRICS:
        # No counts to pool: the value alone cannot show a fraction is within its limit.
        verdict, _ = _verdict(slo, mean, mean)
        note = (
            f"the {n} replications agreed exactly ({mean:.4g}), and without their counts "
            "no exact binomial bound could be found"
        )
        return Judgement(
            slo, n, mean, math.inf, math.inf if slo.upper else -math.inf,
            "fails" if verdict == "fails" else "undecided", "exact", note,
        )  # fmt: skip
    verdict, bound = _verdict(slo, mean, mean)
    note = f"the {n} replications agreed exactly: no interval to estimate"
    return Judgement(slo, n, mean, 0.0, bound, verdict, "exact", note)


def judgement_run_length_advice(
    judgement: Judgement, n_items: int | None, duration_s: float | None
) -> str:
    """How much more simulation would decide an undecided SLO.

    :func:`~pipeline.sim.stats.runlength.run_length_advice`'s rule, ``n ~ n0 (h0 / h)**2``
    with ``h = |mean - limit|``, in replications; and since a half-width also
    falls as one over the square root of the run length (for means and
    percentiles of long, stationary runs), the same factor in items or seconds.
    """
    n0, h0 = judgement.replications, judgement.half_width
    gap = abs(judgement.mean - judgement.slo.limit)
    if judgement.basis == "binomial":
        return _binomial_advice(judgement, n_items, duration_s)
    if judgement.basis == "exact":
        return f"{judgement.note}; more replications or longer runs may show a spread to measure"
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


def _binomial_advice(judgement: Judgement, n_items: int | None, duration_s: float | None) -> str:
    """How many pooled items an exact binomial bound needs to clear the limit.

    Solved for the zero-event case (an upper limit on a fraction nobody hit),
    ``1 - (1 - level)**(1/N) <= limit``, i.e. ``N >= log(1 - level) / log(1 - limit)``;
    the same factor in replications or run length (items pool either way).
    """
    slo, note = judgement.slo, judgement.note
    events, trials = judgement.pooled
    if not (slo.upper and events == 0 and 0 < slo.limit < 1):
        return f"{note}; more replications or longer runs narrow it"
    # The level the bound was found at, from the bound itself: log(1 - bound) = log(alpha) / N.
    log_alpha = trials * math.log1p(-judgement.bound)
    needed = math.ceil(log_alpha / math.log1p(-slo.limit))
    factor = needed / trials
    runs = math.ceil(judgement.replications * factor)
    advice = (
        f"{note}: the bound falls to the limit {slo.limit:.4g} with about {needed:,} items "
        f"pooled, about {runs} replications (now {judgement.replications})"
    )
    if n_items is not None:
        advice += f" or runs of about {math.ceil(n_items * factor):,} items"
    elif duration_s is not None:
        advice += f" or runs of about {duration_s * factor:.4g} s"
    happened = DERIVED_METRICS[slo.metric][0].removeprefix("items_").replace("_", "-")
    return advice + f", if no item is {happened} in those either"
