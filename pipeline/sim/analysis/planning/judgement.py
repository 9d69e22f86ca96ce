"""Judging an SLO on a configuration's replications: ``meets``, ``fails`` or ``undecided``.

:func:`judge` decides an :class:`~.slo.SLO` from one value per replication with a one-sided
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
then misses too often (a 99% upper bound on 2,000-item M/M/10 runs: 3-4%).
So each bound is the widest of the t bound, Hall's skewness-corrected t and,
when every value is positive, a lognormal one on the mean
(:func:`~pipeline.sim.stats.intervals.mean_bounds`), and
:attr:`Judgement.interval` holds both ends.

**When the replications agree exactly** the t interval has zero width, a
certainty the data cannot give: nothing shed in any of 3 runs does not make
the shed fraction 0 for sure. So:

- a *fraction* (:data:`~.slo.FRACTION_METRICS`, a count over a count) is bounded
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
(:data:`~.slo.DRAIN_CUT_METRICS`) leave out the slowest tail, and only look better
for it. Such a run never supports ``meets`` on those metrics: an SLO on one of
them *fails* on a configuration with any run whose drain timed out (given
``timed_out`` to :func:`judge`), and the judgement's note says so. That
configuration did not finish its work within the drain; more replications
would not change it. SLOs on other metrics are judged as usual
(``unfinished_fraction`` bounds the unfinished items themselves).

Example:
    >>> from .slo import SLO
    >>> judge(SLO.parse("latency_p95_s<=0.5"), [0.41, 0.44, 0.43], confidence=0.95).verdict
    'meets'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ...stats.intervals import mean_bounds, proportion_bound, t_quantile
from ...stats.runlength import run_length_advice, scaled_run_length
from .slo import DERIVED_METRICS, DRAIN_CUT_METRICS, FRACTION_METRICS, SLO, check_confidence

__all__ = ["Judgement", "judge", "judgement_run_length_advice"]


class Judgement(NamedTuple):
    """One SLO judged on one configuration's replications.

    Attributes:
        slo: the objective.
        replications: values judged (one per run).
        mean: mean of the finite values (NaN if none).
        half_width: the distance from the mean to the bound on the SLO's safe
            side (``basis`` ``"t"``: the skew-robust
            :func:`~pipeline.sim.stats.intervals.mean_bounds`, at least
            ``t(confidence, n-1) s / sqrt(n)``, and wider on the side a right
            skew reaches; the other side's is in :attr:`low`/:attr:`high`);
            inf with one value, NaN when a run had no value; 0
            when the runs agreed exactly (``"exact"``); for a ``"binomial"``
            bound, its distance from the mean on the safe side (the other side's
            is in :attr:`low`/:attr:`high`).
        bound: the bound on the SLO's safe side (``<=``: the upper bound;
            ``>=``: the lower one).
        verdict: ``"meets"``, ``"fails"`` or ``"undecided"``.
        basis: how the bounds were found: ``"t"`` (Student t across the
            replications, widened for skew), ``"binomial"`` (they agreed exactly on a fraction:
            the exact bound on the pooled counts) or ``"exact"`` (they agreed
            exactly on another metric: the value itself); ``"theory"`` for a
            configuration queueing theory rejected without runs (a check's
            judgements, :func:`~.check.unrun_judgements`).
        note: for ``"binomial"``, ``"exact"`` and ``"theory"``, a sentence saying so
            (None for ``"t"``).
        interval: ``(low, high)``, the two one-sided bounds (None with one value,
            when a run had no value, or when the runs agreed on a non-fraction).
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
    if n == 1:
        verdict, bound = _verdict(slo, mean - half, mean + half)
        return Judgement(slo, n, mean, half, bound, verdict)
    # Values of short runs are skewed: each bound is the widest of t, Hall's and lognormal.
    low, high = mean_bounds(x, level)
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
