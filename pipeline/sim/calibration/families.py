"""The service-time families a histogram is fitted to: log-normal and gamma, by mean and cv.

Both are right-skewed, both are what a scenario file spells
(``lognormal:mean=,cv=``, ``gamma:mean=,cv=``), and both are given here by
their ``mean`` (seconds) and ``cv`` (standard deviation over mean), so a fit
that takes the mean from the data (Prometheus's ``_sum / _count``) searches
one parameter whichever family it tries. Each :class:`Family` gives what
interval-censored fitting and a bucketed distribution need: the CDF at the
bucket bounds, the log-density within a bucket (up to a constant), a
quantile, and the tail beyond the last finite bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from ..stats.chisquare import chi2_sf
from ..workloads.distributions import Distribution, Gamma, LogNormal

__all__ = ["FAMILIES", "Family"]

_NORMAL = NormalDist()
_SQRT2 = math.sqrt(2.0)


@dataclass(frozen=True)
class Family:
    """One family of service-time distributions, given by ``mean`` and ``cv``.

    Attributes:
        name: ``"lognormal"`` or ``"gamma"``.
        cv_range: the cvs a fit searches, ``(low, high)``.
    """

    name: str
    cv_range: tuple[float, float]

    def distribution(self, mean: float, cv: float) -> Distribution:
        """The simulator's distribution of this family."""
        return LogNormal(mean=mean, cv=cv) if self.name == "lognormal" else Gamma(mean=mean, cv=cv)

    def cdf(self, x: np.ndarray, mean: float, cv: float) -> np.ndarray:
        """``P(X <= x)`` at each of ``x`` (seconds; 0 and ``inf`` allowed)."""
        x = np.asarray(x, dtype=np.float64)
        out = np.where(np.isinf(x), 1.0, 0.0)
        inside = (x > 0) & np.isfinite(x)
        if self.name == "lognormal":
            mu, sigma = _lognormal(mean, cv)
            z = (np.log(x[inside]) - mu) / (sigma * _SQRT2)
            out[inside] = [0.5 * math.erfc(-v) for v in z.tolist()]
        else:
            shape, scale = 1.0 / (cv * cv), mean * cv * cv
            out[inside] = [1.0 - chi2_sf(2.0 * v / scale, 2.0 * shape) for v in x[inside].tolist()]
        return out

    def log_density(self, x: np.ndarray, mean: float, cv: float) -> np.ndarray:
        """The log of the density at ``x`` (> 0), up to an additive constant; ``-inf`` at 0."""
        x = np.asarray(x, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            logx = np.log(x)
            if self.name == "lognormal":
                mu, sigma = _lognormal(mean, cv)
                value = -logx - (logx - mu) ** 2 / (2 * sigma * sigma)
            else:
                shape, scale = 1.0 / (cv * cv), mean * cv * cv
                value = (shape - 1.0) * logx - x / scale
        return np.where(x > 0, value, -np.inf)

    def quantile(self, q: float, mean: float, cv: float) -> float:
        """The ``q`` quantile (0 < q < 1), seconds."""
        if self.name == "lognormal":
            mu, sigma = _lognormal(mean, cv)
            return math.exp(mu + sigma * _NORMAL.inv_cdf(q))
        low, high = 0.0, mean
        for _ in range(2000):  # doubling: a gamma's q quantile is a few means out at most
            if not self.cdf(np.array([high]), mean, cv)[0] < q:
                break
            high *= 2.0
        for _ in range(200):
            middle = (low + high) / 2
            if self.cdf(np.array([middle]), mean, cv)[0] < q:
                low = middle
            else:
                high = middle
            if high - low <= 1e-13 * high:
                break
        return (low + high) / 2

    def tail(self, bound: float, r: np.ndarray, mean: float, cv: float) -> np.ndarray:
        """Quantiles at ranks ``r`` (0 to 1) of the distribution beyond ``bound``, seconds."""
        r = np.clip(np.asarray(r, dtype=np.float64), 0.0, 1.0 - 1e-15)
        if self.name == "lognormal":
            mu, sigma = _lognormal(mean, cv)
            z = (math.log(bound) - mu) / sigma
            beyond = 0.5 * math.erfc(z / _SQRT2)
            if beyond > 1e-12:
                levels = 1.0 - beyond * (1.0 - r)
                return np.array([math.exp(mu + sigma * _NORMAL.inv_cdf(v)) for v in levels])
            # Far out, log(x / bound) is close to exponential, of rate z / sigma (Mills).
            return bound * np.exp(-np.log1p(-r) * sigma / max(z, 1.0))
        # A gamma's tail is close to exponential at its scale beyond a few means.
        return bound - mean * cv * cv * np.log1p(-r)


def _lognormal(mean: float, cv: float) -> tuple[float, float]:
    sigma = math.sqrt(math.log1p(cv * cv))
    return math.log(mean) - sigma * sigma / 2, sigma


FAMILIES: tuple[Family, ...] = (
    Family("lognormal", (1e-3, 100.0)),
    Family("gamma", (0.03, 10.0)),
)
"""The families :func:`~pipeline.sim.calibration.histogram.fit_histogram` tries, in order."""
