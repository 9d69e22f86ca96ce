"""Student's t quantiles without scipy (the engine room of :func:`~.intervals.t_quantile`).

Exact forms for 1 and 2 degrees of freedom, a Cornish-Fisher expansion past
200, and in between Newton steps on the t CDF computed from the regularised
incomplete beta function. Public through :mod:`pipeline.sim.stats.intervals`.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

from pipeline._validate import real

__all__ = ["regularised_beta", "t_quantile"]


def _betacf(a: float, b: float, x: float) -> float:
    # Continued fraction of the incomplete beta, modified Lentz (Numerical Recipes 6.4).
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((a - 1.0 + m2) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1.0 + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def regularised_beta(a: float, b: float, x: float) -> float:
    """``I_x(a, b)``, the regularised incomplete beta function, for ``a, b > 0``, ``0 <= x <= 1``.

    The continued fraction on whichever side converges (Numerical Recipes 6.4);
    about 1e-13 relative. It is the Beta(a, b) CDF at ``x``, and so the
    binomial tail ``P(B >= k) = I_p(k, n - k + 1)`` exact bounds are solved on.
    """
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def _t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for t >= 0: ``I_x(df/2, 1/2) / 2`` with ``x = df / (df + t**2)``."""
    x = df / (df + t * t)
    a, b = df / 2.0, 0.5
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        ix = math.exp(log_front) * _betacf(a, b, x) / a
    else:
        ix = 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b
    return ix / 2.0


def _cornish_fisher(z: float, df: float) -> float:
    # Hill (1970) / Abramowitz & Stegun 26.7.5: t in powers of 1/df around the normal z.
    z2 = z * z
    g1 = (z2 + 1.0) * z / 4.0
    g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0
    g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0
    g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def t_quantile(p: float, df: float) -> float:
    """The ``p``-quantile of Student's t with ``df`` degrees of freedom.

    Exact forms for df = 1 and 2; the Cornish-Fisher expansion for df > 200
    (error below 1e-9); otherwise Newton/bisection on the t CDF computed from
    the regularised incomplete beta (about 1e-12). Example:
    ``t_quantile(0.975, 9)`` is 2.2622.

    Raises:
        ValueError: ``p`` not in (0, 1) or ``df <= 0``.
    """
    p = real("p", p, "probability in (0, 1)", above=0)
    if not p < 1:
        raise ValueError(f"p must be < 1 (probability in (0, 1)), got {p!r}")
    df = real("df", df, "degrees of freedom", above=0)
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -_t_quantile(1.0 - p, df)
    return _t_quantile(p, df)


@lru_cache(maxsize=256)
def _t_quantile(p: float, df: float) -> float:
    # Checked arguments, p > 0.5. Cached: every batch-means half-width of every summary
    # asks for the same few (p, df), and Newton's steps on the beta fraction cost 0.1 ms.
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2.0 * p - 1.0) / math.sqrt(2.0 * p * (1.0 - p))
    z = NormalDist().inv_cdf(p)
    guess = _cornish_fisher(z, df)
    if df > 200:
        return guess
    tail = 1.0 - p
    lo, hi = 0.0, max(guess, 1.0)
    while _t_upper_tail(hi, df) > tail:
        lo, hi = hi, 2.0 * hi
    t = min(max(guess, lo), hi)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    for _ in range(100):
        excess = _t_upper_tail(t, df) - tail  # > 0 means t is too small
        if excess > 0:
            lo = t
        else:
            hi = t
        density = math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))
        step = t + excess / density
        t = step if lo < step < hi else (lo + hi) / 2
        if hi - lo < 1e-13 * max(1.0, t) or abs(excess) < 1e-16:
            break
    return t
