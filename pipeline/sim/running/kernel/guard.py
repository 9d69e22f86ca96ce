"""The retry budgets' and circuit breakers' part of the replay's arrays (see :mod:`.replay`).

Their exact rates as the integers the replay compares, their columns of the stage rows,
their rings (a budget's times, a breaker's outcomes and waiting workers), and the growth
of a budget's rings when full.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from pipeline.config import PipelineConfig

from . import replay as R
from .pool import slots

__all__ = ["BUDGET_RING", "grow_budgets", "guard_rows", "guard_terms"]


def guard_terms(config: PipelineConfig) -> dict[int, int]:
    """The retry budget's and breaker's exact rates as the integers the replay compares.

    As :class:`~pipeline.overload.budget.BudgetState` and
    :class:`~pipeline.overload.breaker.BreakerState` do, the rates are the decimal numbers
    they print as: ``(retries + 1) * BQB <= BPB * firsts + BAQ`` and ``count * q >= p * calls``.
    Keyed by the stage row's columns (:mod:`.replay`).
    """
    exact = lambda value: Fraction(repr(value))  # noqa: E731
    terms = {}
    budget, breaker = config.retry_budget, config.breaker
    if budget is not None:
        ratio, floor = exact(budget.ratio), exact(budget.min_retries_per_s) * exact(budget.window_s)
        q, b = ratio.denominator, floor.denominator
        terms.update({R.BQB: q * b, R.BPB: ratio.numerator * b, R.BAQ: floor.numerator * q})
    if breaker is not None:
        rate, slow = exact(breaker.failure_rate), exact(breaker.slow_call_rate)
        terms.update({R.KRNUM: rate.numerator, R.KRDEN: rate.denominator,
                      R.KSNUM: slow.numerator, R.KSDEN: slow.denominator})  # fmt: skip
    return terms


BUDGET_RING = 64
"""A retry budget's rings' first size (times of first attempts, of retries); each doubles
when full (GROW_BUDGET): it holds what its window holds, not the run."""


def guard_rows(
    stages: list, reaching: list[int], si: np.ndarray, sf: np.ndarray, ring: int | None
) -> list[np.ndarray]:
    """The retry budgets' and breakers' columns of the stage rows, and their arrays (D[GFIRSTS:]).

    A budget's rings start at ``ring`` times (None: :data:`BUDGET_RING`); a breaker's ring
    holds its window (or its probes, half-open), or every call the run can make if fewer;
    its waiters' ring a worker each.
    """
    sizes = np.zeros((len(stages), 4), np.int64)  # firsts, retries, outcomes, waiting workers
    for s, (spec, r) in enumerate(zip(stages, reaching, strict=True)):
        config, row = spec.config, si[s]
        budget, breaker = config.retry_budget, config.breaker
        row[R.GUARD] = (budget is not None) + 2 * (breaker is not None)
        for column, value in guard_terms(config).items():
            row[column] = value
        if budget is not None:
            sizes[s, :2] = ring or BUDGET_RING
            sf[s, R.BWINDOW_S] = budget.window_s
        if breaker is not None:
            calls = min(max(breaker.window, breaker.half_open_calls), r * config.max_attempts)
            sizes[s, 2:] = max(calls, 1), slots(config)  # an autoscaled pool's most
            row[[R.KWINDOW, R.KMIN, R.KHALF]] = (
                breaker.window, breaker.min_calls, breaker.half_open_calls,
            )  # fmt: skip
            slow_s = math.inf if breaker.slow_call_s is None else breaker.slow_call_s
            sf[s, [R.KOPEN_S, R.KSLOW_S]] = breaker.open_s, slow_s
    for k, column in enumerate((R.BFOFF, R.BROFF, R.KOFF, R.KWOFF)):
        si[:, column] = np.cumsum(sizes[:, k]) - sizes[:, k]
        si[:, column + 1] = sizes[:, k]
    workers = int(si[:, R.GCAP].sum())  # worker slots (an autoscaled pool's most)
    totals = [max(1, int(total)) for total in sizes.sum(axis=0)]
    ints = [np.zeros(size, np.int64) for size in (totals[2], totals[3], workers)]
    return [np.zeros(totals[0]), np.zeros(totals[1]), *ints, np.zeros(workers)]


def grow_budgets(state: Any) -> None:
    """Double every retry budget's rings (GROW_BUDGET), each stage's times from its head on."""
    si = state.si
    for ring, column in ((R.GFIRSTS, R.BFOFF), (R.GRETRIES, R.BROFF)):
        old, new = state.D[ring], []
        for b in range(column, len(si), R.SI):
            off, cap, head, n = (int(x) for x in si[b : b + 4])
            held = [float(old[off + (head + i) % cap]) for i in range(n)]
            si[b : b + 4] = [len(new), 2 * cap, 0, n]
            new += held + [0.0] * (2 * cap - n)
        state.D[ring] = np.array(new or [0.0]) if isinstance(old, np.ndarray) else new or [0.0]
