"""How long to run: replications (or items) an interval needs to be precise enough.

- :func:`replications_needed` -- replications for a Student t half-width of at
  most a target, from pilot values;
- :func:`run_length_advice` -- one sentence of advice when an interval is too
  wide to meet a relative precision or to decide an SLO;
- :func:`scaled_run_length` -- the square-root rule behind both,
  ``n ~ n0 (h0 / h)**2``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

from pipeline._validate import integer, real
from pipeline.sim.stats.samples import confidence_level, sample_array
from pipeline.sim.stats.tdist import t_quantile

__all__ = [
    "DEFAULT_RELATIVE_PRECISION",
    "replications_needed",
    "run_length_advice",
    "scaled_run_length",
]


DEFAULT_RELATIVE_PRECISION = 0.10
"""Half-width, as a share of the mean, above which an interval gets run-length advice."""

# Utilisation above which the advice adds that heavy traffic needs longer runs.
_HEAVY_TRAFFIC = 0.85


def replications_needed(
    values: Sequence[float] | np.ndarray, half_width: float, level: float = 0.95
) -> int:
    """Replications needed for a Student t half-width of at most ``half_width``.

    From pilot ``values`` (one per replication; their standard deviation ``s``
    is taken as known): the smallest ``n`` with ``t_{(1+level)/2, n-1} s /
    sqrt(n) <= half_width``, found by iterating ``n = (t s / half_width)**2``.
    For n beyond a few tens this is the familiar rule ``n ~ n0 (h0 / h)**2``,
    with ``h0`` the pilot's half-width over ``n0`` values. Never less than
    ``len(values)`` (replications already run are not given back).

    Raises:
        ValueError: fewer than 2 values, a non-finite one, ``half_width`` not a
            finite number > 0, or ``level`` not in (0, 1).

    Example:
        >>> replications_needed([1.0, 1.4, 0.8, 1.2, 1.1], half_width=0.05)
        80
    """
    x = sample_array(values, 2)
    target = real("half_width", half_width, "seconds or units of the values", above=0)
    level = confidence_level(level)
    s = float(x.std(ddof=1))
    if s == 0.0:
        return int(x.size)
    p = (1.0 + level) / 2.0

    def enough(n: int) -> bool:
        return t_quantile(p, n - 1) * s / math.sqrt(n) <= target

    # The normal quantile gives a lower bound; the t fixed point converges from there in a
    # few steps; the last steps make n the smallest that is enough.
    n = max(2, math.ceil((NormalDist().inv_cdf(p) * s / target) ** 2))
    for _ in range(50):
        if n > 10**15:  # beyond any run: report it rather than loop
            return max(int(x.size), n)
        needed = max(2, math.ceil((t_quantile(p, n - 1) * s / target) ** 2))
        if needed <= n:
            break
        n = needed
    while not enough(n):
        n += 1
    while n > 2 and enough(n - 1):
        n -= 1
    return max(int(x.size), n)


def scaled_run_length(n: int, half_width: float, target: float) -> int:
    """``ceil(n (half_width / target)**2)``: the run length to shrink ``half_width`` to ``target``.

    The square-root rule behind :func:`run_length_advice`; ``n`` counts
    replications or items. A relative slack of 1e-9 keeps an exact ratio (4x)
    from rounding up to one more.
    """
    return math.ceil(n * (half_width / target) ** 2 * (1.0 - 1e-9))


def run_length_advice(
    mean: float,
    half_width: float,
    n: int,
    *,
    metric: str = "the metric",
    relative_precision: float = DEFAULT_RELATIVE_PRECISION,
    limit: float | None = None,
    level: float = 0.95,
    unit: str = "replications",
    utilisation: float | None = None,
) -> str | None:
    """A sentence of advice when an interval is too wide for the decision, else None.

    Two decisions are judged:

    - *precision* (``limit`` None): the half-width must be at most
      ``relative_precision`` times ``|mean|`` (default
      :data:`DEFAULT_RELATIVE_PRECISION`, 10%);
    - *an SLO* (``limit`` given): the interval ``mean +- half_width`` must not
      contain the limit, or it cannot tell whether the SLO is met.

    The advice scales the run by ``n ~ n0 (h0 / h)**2``: a half-width shrinks
    like one over the square root of the replications (or, for batch means of
    one run, of the items). When ``utilisation`` is given and near 1 it adds
    that heavy traffic needs longer runs: the variance of a mean wait grows
    roughly like ``1 / (1 - rho)**2`` times the item count needed at light load.

    Args:
        mean, half_width: the interval (the half-width at ``level``).
        n: what it was computed from: replications, or items for a single run.
        metric: the name shown in the sentence (e.g. ``"latency_p95_s"``).
        relative_precision: largest acceptable ``half_width / |mean|``, > 0.
        limit: an SLO bound the interval should clear, or None.
        level: the interval's confidence, for the wording.
        unit: what ``n`` counts: ``"replications"`` or ``"items"``.
        utilisation: the run's utilisation (0..1), or None.

    Returns:
        None when the interval is good enough (or NaN: nothing to judge), else
        one sentence with the numbers.

    Raises:
        ValueError: ``n < 1``, ``relative_precision`` not > 0, a non-finite
            ``limit``, ``level`` not in (0, 1), or an unknown ``unit``.

    Example:
        >>> print(run_length_advice(2.0, 0.5, 5, metric="latency_p95_s"))
        latency_p95_s = 2 ± 0.5 (95%) is ±25% of its mean, wider than the 10% asked:
        about 32 replications (now 5) would give ±10%, by n ~ n0 (h0/h)^2.
    """
    n = integer("n", n, unit, at_least=1)
    precision = real("relative_precision", relative_precision, "share of the mean", above=0)
    level = confidence_level(level)
    if unit not in ("replications", "items"):
        raise ValueError(f"unit must be 'replications' or 'items', got {unit!r}")
    if limit is not None:
        limit = real("limit", limit, "the SLO's bound, in the metric's units")
    if not (math.isfinite(mean) and math.isfinite(half_width)) or half_width <= 0:
        return None
    shown = f"{metric} = {mean:.4g} ± {half_width:.3g} ({level:.0%})"
    if limit is None:
        target = precision * abs(mean)
        if half_width <= target:
            return None
        problem = (
            f"{shown} is ±{half_width / abs(mean):.0%} of its mean, wider than the "
            f"{precision:.0%} asked"
            if mean != 0
            else f"{shown} has a mean of 0: no relative precision can be met"
        )
        goal = f"±{precision:.0%}"
    else:
        target = abs(mean - limit)
        if half_width < target:
            return None
        problem = (
            f"{shown} contains the limit {limit:.4g}, so it cannot tell whether the SLO is met"
        )
        goal = f"an interval that clears {limit:.4g}"
    if target > 0:
        needed = scaled_run_length(n, half_width, target)
        advice = (
            f"{problem}: about {needed:,} {unit} (now {n:,}) would give {goal}, by n ~ n0 (h0/h)^2."
        )
    else:
        advice = f"{problem}; no run length will settle it: change the configuration instead."
    if utilisation is not None and math.isfinite(utilisation) and utilisation >= _HEAVY_TRAFFIC:
        advice += (
            f" At utilisation {utilisation:.2f} (rho near 1) waits are long-correlated and "
            "runs must be longer: the items needed grow roughly like 1/(1-rho)^2, so prefer "
            "more items per replication and cut the warm-up (detect_warmup)."
        )
    return advice
