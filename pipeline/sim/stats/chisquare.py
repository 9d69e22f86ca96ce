"""The chi-square distribution's upper tail without scipy, and the tests built on it.

``chi2_sf(x, df) = Q(df / 2, x / 2)``, the regularised upper incomplete gamma
function, by its series below ``a + 1`` and its continued fraction above
(Numerical Recipes 6.2), to about 1e-14. Two tests use it:

- :func:`dispersion_test`: are counts per interval consistent with one
  Poisson rate? Under a constant rate, ``D = sum((c - mean)**2) / mean`` is
  approximately chi-square with ``m - 1`` degrees of freedom (``m``
  intervals); a rate that varies inflates ``D``. One-sided: counts more
  regular than Poisson (an evenly paced load generator) still have one rate.
- :func:`chi2_goodness_of_fit`: observed counts per cell against a fitted
  model's expected counts, cells merged until each expects at least 5 (the
  usual rule for the approximation), ``df = cells - 1 - fitted parameters``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["ChiSquareTest", "chi2_goodness_of_fit", "chi2_sf", "dispersion_test"]


class ChiSquareTest(NamedTuple):
    """A chi-square test's statistic, degrees of freedom and upper-tail p-value."""

    statistic: float
    df: int
    p_value: float


def _upper_gamma_q(a: float, x: float) -> float:
    if x <= 0:
        return 1.0
    log_prefix = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1.0:
        # Series for P(a, x); Q = 1 - P.
        term = total = 1.0 / a
        denominator = a
        for _ in range(100_000):
            denominator += 1.0
            term *= x / denominator
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return max(0.0, 1.0 - total * math.exp(log_prefix))
    # Continued fraction for Q(a, x), modified Lentz.
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 100_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return min(1.0, math.exp(log_prefix) * h)


def chi2_sf(x: float, df: float) -> float:
    """``P(X >= x)`` for ``X`` chi-square with ``df`` (> 0) degrees of freedom."""
    if not df > 0:
        raise ValueError(f"df must be > 0 (degrees of freedom), got {df!r}")
    if math.isnan(x):
        return math.nan
    return _upper_gamma_q(df / 2.0, x / 2.0)


def dispersion_test(counts: np.ndarray) -> ChiSquareTest:
    """The Poisson dispersion test of counts per equal interval (see the module docstring).

    Fewer than two intervals, or no arrival at all, cannot be tested: the
    p-value is 1 (nothing contradicts a constant rate) with ``df = 0``.
    """
    c = np.asarray(counts, dtype=np.float64)
    mean = float(c.mean()) if c.size else 0.0
    if c.size < 2 or mean <= 0:
        return ChiSquareTest(0.0, 0, 1.0)
    statistic = float(np.sum((c - mean) ** 2) / mean)
    df = int(c.size - 1)
    return ChiSquareTest(statistic, df, chi2_sf(statistic, df))


def chi2_goodness_of_fit(
    observed: np.ndarray, expected: np.ndarray, *, fitted_parameters: int, min_expected: float = 5.0
) -> ChiSquareTest:
    """Pearson's chi-square of ``observed`` against ``expected`` counts per ordered cell.

    Adjacent cells are merged from the left until each expects at least
    ``min_expected``; a short remainder joins the last cell. With fewer cells
    than ``fitted_parameters + 2`` no test is possible: ``df = 0`` and the
    p-value is NaN.
    """
    o = np.asarray(observed, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    merged_o: list[float] = []
    merged_e: list[float] = []
    run_o = run_e = 0.0
    for oi, ei in zip(o.tolist(), e.tolist(), strict=True):
        run_o += oi
        run_e += ei
        if run_e >= min_expected:
            merged_o.append(run_o)
            merged_e.append(run_e)
            run_o = run_e = 0.0
    if run_e > 0 or run_o > 0:
        if merged_e:
            merged_o[-1] += run_o
            merged_e[-1] += run_e
        else:
            merged_o.append(run_o)
            merged_e.append(run_e)
    df = len(merged_e) - 1 - fitted_parameters
    if df < 1:
        return ChiSquareTest(math.nan, 0, math.nan)
    mo, me = np.asarray(merged_o), np.asarray(merged_e)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(me > 0, (mo - me) ** 2 / me, np.where(mo > 0, math.inf, 0.0))
    statistic = float(terms.sum())
    return ChiSquareTest(statistic, df, chi2_sf(statistic, df))
