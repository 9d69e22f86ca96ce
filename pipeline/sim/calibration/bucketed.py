"""A service-time distribution made from histogram buckets: their counts, and the exact mean.

When no family fits a Prometheus histogram, the twin still needs a
distribution. Spreading each bucket's observations evenly over the bucket
(PromQL's ``histogram_quantile``) overshoots: service times are skewed, so
inside a wide upper bucket most observations sit near its lower bound, and
an even spread moves the 95th percentile up by tens of percent and the mean
with it. :class:`BucketedShape` keeps what the data does say:

- **each bucket's mass** is the data's (its count over the total);
- **the shape within a bucket** is a base density's (the best-fitting
  family's, :mod:`~pipeline.sim.calibration.families`, even when its test
  refused it across buckets: locally it is the best guess there is; uniform
  when there is none) tilted by ``exp(theta * u)``, ``u``
  the position within the bucket from 0 to 1. One ``theta`` for every finite
  bucket moves mass toward the buckets' lower (``theta < 0``) or upper
  bounds; it is solved so that **the mean is the data's** (``_sum /
  _count``), which the buckets alone cannot say;
- **the ``+Inf`` bucket** follows the base family's tail beyond the last
  finite bound (untilted), or sits at that bound when there is no base.

:meth:`BucketedShape.quantile` is the quantile function;
:meth:`BucketedShape.points` the ``k + 1/2`` quantile points the twin
resamples (:class:`~pipeline.sim.Empirical`), whose mean is matched exactly
when a mean is given and the buckets allow it.
"""

from __future__ import annotations

import math

import numpy as np

from .families import Family

__all__ = ["BucketedShape"]

_GRID = 512  # points of the within-bucket density, per bucket
_THETA_MAX = 2000.0  # |theta| beyond which the within-bucket mass sits at a bound


class BucketedShape:
    """A quantile function whose bucket masses are the data's (see the module docstring).

    Args:
        lower, upper: each bucket's bounds, seconds (the last upper may be ``inf``).
        counts: each bucket's own count (not cumulative), > 0 in total.
        base: ``(family, mean, cv)`` of the distribution whose shape fills
            the buckets, or ``None`` for a uniform fill.
    """

    def __init__(
        self,
        lower: np.ndarray,
        upper: np.ndarray,
        counts: np.ndarray,
        base: tuple[Family, float, float] | None,
    ) -> None:
        keep = counts > 0
        self.lower, self.upper = lower[keep], upper[keep]
        self.shares = counts[keep] / counts[keep].sum()
        self.ends = np.cumsum(self.shares)
        self.ends[-1] = 1.0
        self.base = base
        u = np.linspace(0.0, 1.0, _GRID + 1)
        self._u = u
        self._x: list[np.ndarray] = []
        self._log_density: list[np.ndarray] = []
        for lo, hi in zip(self.lower.tolist(), self.upper.tolist(), strict=True):
            if not math.isfinite(hi):
                self._x.append(np.empty(0))
                self._log_density.append(np.empty(0))
                continue
            x = lo + (hi - lo) * u
            self._x.append(x)
            if base is None:
                self._log_density.append(np.zeros_like(x))
            else:
                family, mean, cv = base
                self._log_density.append(family.log_density(x, mean, cv))

    def _within(self, j: int, r: np.ndarray, theta: float) -> np.ndarray:
        """Quantiles at ranks ``r`` (0 to 1) within bucket ``j`` at tilt ``theta``."""
        lo, hi = float(self.lower[j]), float(self.upper[j])
        if not math.isfinite(hi):
            return self._tail(lo, r)
        exponent = self._log_density[j] + theta * self._u
        top = np.max(exponent)
        if not np.isfinite(top):
            return lo + (hi - lo) * r
        density = np.exp(exponent - top)
        area = np.concatenate([[0.0], np.cumsum((density[1:] + density[:-1]) / 2)])
        if not area[-1] > 0:
            return lo + (hi - lo) * r
        return np.interp(r, area / area[-1], self._x[j])

    def _tail(self, bound: float, r: np.ndarray) -> np.ndarray:
        """The ``+Inf`` bucket: the base family beyond ``bound``, or ``bound`` itself."""
        if self.base is None or bound <= 0:
            return np.full(r.shape, bound)
        family, mean, cv = self.base
        return family.tail(bound, r, mean, cv)

    def quantile(self, levels: np.ndarray, theta: float = 0.0) -> np.ndarray:
        """The quantiles at ``levels`` (each in (0, 1)), seconds."""
        q = np.asarray(levels, dtype=np.float64)
        bucket = np.minimum(np.searchsorted(self.ends, q, side="left"), self.ends.size - 1)
        out = np.empty(q.shape)
        for j in np.unique(bucket).tolist():
            at = bucket == j
            start = self.ends[j] - self.shares[j]
            rank = np.clip((q[at] - start) / self.shares[j], 0.0, 1.0)
            out[at] = self._within(j, rank, theta)
        return out

    def points(self, n: int) -> np.ndarray:
        """``n`` quantile points at levels ``(k + 1/2) / n`` (untilted)."""
        return self.quantile((np.arange(n) + 0.5) / n)

    def matched(self, n: int, mean: float) -> tuple[np.ndarray, float, bool]:
        """``n`` quantile points whose mean is ``mean``: ``(points, theta, matched)``.

        ``matched`` is False when no tilt reaches ``mean`` (a sum that does not
        belong to these buckets): the points are then the nearest the buckets allow.
        """
        levels = (np.arange(n) + 0.5) / n

        def gap(theta: float) -> float:
            return float(self.quantile(levels, theta).mean()) - mean

        low, high = -_THETA_MAX, _THETA_MAX
        if gap(low) > 0:
            return self.quantile(levels, low), low, False
        if gap(high) < 0:
            return self.quantile(levels, high), high, False
        for _ in range(200):
            middle = (low + high) / 2
            if gap(middle) > 0:
                high = middle
            else:
                low = middle
            if high - low <= 1e-12 * max(1.0, abs(middle)):
                break
        theta = (low + high) / 2
        points = self.quantile(levels, theta)
        # The bisection leaves the mean a rounding error off: a shift of the last few ulps.
        points = np.maximum(points + (mean - float(points.mean())), 0.0)
        return points, theta, True
