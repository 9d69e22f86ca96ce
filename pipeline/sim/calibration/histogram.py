"""Service times from a cumulative histogram: the best-fitting family, or the buckets themselves.

A Prometheus histogram says how many observations fell at or below each
bound (``le``), and ``_sum / _count`` says their mean exactly; it does not
say what they were. :func:`fit_histogram` fits each family of
:mod:`~pipeline.sim.calibration.families` (log-normal, gamma) to the counts by
**interval-censored maximum likelihood**: each bucket ``(lower, upper]``
contributes ``count * log(F(upper) - F(lower))``, the first bucket starting
at 0 and the ``+Inf`` bucket ending at infinity. With the sum known, every
family's mean is the data's and only its cv is fitted to the buckets (a
golden-section search); without it, mean and cv both (Nelder-Mead). The
family of the highest likelihood is kept. Its standard errors: the mean's is
the sample mean's (the fitted spread over ``sqrt(n)``) when the sum is
known; the 95th percentile's (and, without the sum, the mean's) come from
the buckets' observed information in (log mean, log cv), a numerical
Hessian, by the delta method.

That family is then judged by Pearson's chi-square over the buckets (cells
merged until each expects 5 observations, one or two fitted parameters,
:func:`~pipeline.sim.stats.chisquare.chi2_goodness_of_fit`). When the test
passes at 5% the family is the service. When it fails, or cannot be run (too
few buckets hold data), or the data do not bound the family's cv within the range it
searches (the profile likelihood at an end of the range is within the 95% limit
of its maximum, 1.92 below it: nearly every observation in the first bucket and
a few far out gave a log-normal of cv 94 or 100, a tail the data never showed,
as likely as any cv between), the
service is the **bucketed distribution**
(:class:`~pipeline.sim.calibration.bucketed.BucketedShape`): each bucket's mass
the data's, the shape within a bucket the family's, tilted so that the mean
is the data's, as an :class:`~pipeline.sim.Empirical` of 1,000 quantile
points. Its intervals, from 30 observations on: the mean's from the sample
mean's standard error; the 95th percentile's distribution-free (the binomial
interval of its rank, through the fitted quantile function).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from ..stats.chisquare import ChiSquareTest, chi2_goodness_of_fit
from ..workloads.distributions import Distribution, Empirical, LogNormal
from ..workloads.telemetry.observed import ServiceHistogram
from .bucketed import BucketedShape
from .families import FAMILIES, Family
from .records import ServiceFit

__all__ = ["QUANTILE_POINTS", "HistogramServiceFit", "bucket_quantile", "fit_histogram"]

_LEVEL = 0.05  # the goodness-of-fit test's level, as calibrate's KS tests
_PROFILE_95 = 1.920729410347062
"""Half the chi-square (1 df) 95% point: a cv whose profile log-likelihood is within this
of the maximum is inside the cv's 95% likelihood-ratio interval."""
QUANTILE_POINTS = 1000
"""Quantile points of the bucketed distribution (``orders.service.csv``'s rows)."""
_Z95 = NormalDist().inv_cdf(0.95)
_Z975 = NormalDist().inv_cdf(0.975)
_MIN_INTERVAL = 30  # observations below which the bucketed fit gives no interval
_UNTESTED = ChiSquareTest(math.nan, 0, math.nan)


@dataclass(frozen=True)
class HistogramServiceFit(ServiceFit):
    """A :class:`~pipeline.sim.calibration.records.ServiceFit` made from histogram buckets.

    ``family`` is ``"lognormal"``, ``"gamma"`` or ``"buckets"``;
    ``ks_statistic`` and ``ks_critical`` are NaN (there are no samples to
    test); the chi-square test replaces them.

    Attributes:
        chi2: the best family's goodness-of-fit test over the buckets.
        p95_s: the service's 95th percentile, seconds.
        mean_se_s: standard error of the best family's mean (NaN if none was fitted).
        p95_se_s: standard error of its 95th percentile (NaN if none was fitted).
        observed_mean_s: ``_sum / _count`` when the sum was given, else NaN.
        lognormal: the fitted log-normal, whether or not it was chosen.
        mean_interval_s: the mean's 95% interval ``(low, high)``, seconds, or None.
        p95_interval_s: the 95th percentile's 95% interval, seconds, or None.
        best: the family of the highest bucket likelihood, fitted (None if none could be).
        log_likelihoods: each family's maximised log-likelihood, by name.
        mean_matched: True when the service's mean is ``observed_mean_s``.
        even: True when the bucketed distribution's base within a bucket is
            even (no family, or none that its tilt could bring to the mean).
        bounded: True when the data do not bound the best family's cv inside the range
            it searched (an end of the range lies in the cv's 95% likelihood-ratio
            interval), so that it was not chosen whatever its test said.
    """

    chi2: ChiSquareTest = _UNTESTED
    p95_s: float = math.nan
    mean_se_s: float = math.nan
    p95_se_s: float = math.nan
    observed_mean_s: float = math.nan
    lognormal: LogNormal | None = None
    mean_interval_s: tuple[float, float] | None = None
    p95_interval_s: tuple[float, float] | None = None
    best: Distribution | None = None
    log_likelihoods: dict[str, float] = field(default_factory=dict)
    mean_matched: bool = False
    even: bool = False
    bounded: bool = False

    @property
    def fits(self) -> bool:
        """True when a family passed its chi-square test at 5%."""
        return self.family != "buckets"


@dataclass(frozen=True)
class _Fitted:
    family: Family
    mean: float
    cv: float
    nll: float
    mean_given: bool
    bounded: bool  # an end of the cv range is in the cv's 95% likelihood-ratio interval


def _cells(hist: ServiceHistogram) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each bucket's lower and upper bound and its own count (not cumulative)."""
    upper = np.asarray(hist.upper_bounds_s, dtype=np.float64)
    cumulative = np.asarray(hist.cumulative_counts, dtype=np.float64)
    counts = np.diff(np.concatenate([[0.0], cumulative]))
    lower = np.concatenate([[0.0], upper[:-1]])
    return lower, upper, counts


def _probabilities(
    family: Family, mean: float, cv: float, lower: np.ndarray, upper: np.ndarray
) -> np.ndarray:
    return np.clip(family.cdf(upper, mean, cv) - family.cdf(lower, mean, cv), 0.0, 1.0)


def _negative_log_likelihood(
    family: Family, mean: float, cv: float, cells: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> float:
    """Minus the log-likelihood; the cells given should be those holding observations."""
    low, high = family.cv_range
    if not (low <= cv <= high and 0 < mean < math.inf):
        return math.inf
    lower, upper, counts = cells
    p = _probabilities(family, mean, cv, lower, upper)
    if np.any(p <= 0):
        return math.inf
    return -float(np.sum(counts * np.log(p)))


def _nelder_mead(f, start: np.ndarray, scale: np.ndarray, iterations: int = 2000) -> np.ndarray:
    """Minimise ``f`` over two parameters (the standard reflection/expansion/shrink moves)."""
    simplex = [start, start + np.array([scale[0], 0.0]), start + np.array([0.0, scale[1]])]
    values = [f(p) for p in simplex]
    for _ in range(iterations):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if (
            abs(values[-1] - values[0]) <= 1e-12 * (1 + abs(values[0]))
            and np.max(np.abs(simplex[-1] - simplex[0])) < 1e-10
        ):
            break
        centroid = (simplex[0] + simplex[1]) / 2
        reflected = centroid + (centroid - simplex[-1])
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2 * (centroid - simplex[-1])
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[1]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0] + 0.5 * (p - simplex[0]) for p in simplex]
                values = [f(p) for p in simplex]
    return simplex[int(np.argmin(values))]


def _golden(f, low: float, high: float, steps: int = 48) -> float:
    """The minimiser of ``f`` over ``[low, high]``: a grid scan, then golden sections around it."""
    grid = np.linspace(low, high, steps + 1)
    values = [f(float(x)) for x in grid]
    k = int(np.argmin(values))
    a, b = float(grid[max(k - 1, 0)]), float(grid[min(k + 1, steps)])
    ratio = (math.sqrt(5.0) - 1) / 2
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(200):
        if b - a < 1e-10:
            break
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = f(d)
    return (a + b) / 2


def _start(lower: np.ndarray, upper: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    """Mean and cv of each bucket's geometric midpoint (open ends: a factor 2 out)."""
    finite = upper[np.isfinite(upper)]
    lo = np.where(lower > 0, lower, finite[0] / 2 if finite.size else 1.0)
    hi = np.where(np.isfinite(upper), upper, lower * 2)
    mid = np.sqrt(lo * np.maximum(hi, lo))
    weights = counts / counts.sum()
    mean = float(np.sum(weights * mid))
    return mean, max(math.sqrt(float(np.sum(weights * (mid - mean) ** 2))) / mean, 0.05)


def _fit(
    family: Family, cells: tuple[np.ndarray, np.ndarray, np.ndarray], mean: float
) -> _Fitted | None:
    """``family`` fitted to ``cells``: its cv only when ``mean`` is given (finite), else both."""
    low, high = (math.log(v) for v in family.cv_range)
    if math.isfinite(mean):
        best = _golden(
            lambda c: _negative_log_likelihood(family, mean, math.exp(c), cells), low, high
        )
        fitted = _Fitted(family, mean, math.exp(best), 0.0, True, False)
    else:
        start_mean, start_cv = _start(*cells)
        start_cv = min(max(start_cv, family.cv_range[0] * 2), family.cv_range[1] / 2)
        point = _nelder_mead(
            lambda p: _negative_log_likelihood(family, math.exp(p[0]), math.exp(p[1]), cells),
            np.array([math.log(start_mean), math.log(start_cv)]),
            np.array([0.3, 0.3]),
        )
        fitted = _Fitted(family, math.exp(point[0]), math.exp(point[1]), 0.0, False, False)
    nll = _negative_log_likelihood(family, fitted.mean, fitted.cv, cells)
    if not math.isfinite(nll):
        return None
    ends = (_profile(family, cells, fitted, end) for end in family.cv_range)
    open_end = min(ends) - nll <= _PROFILE_95
    return _Fitted(family, fitted.mean, fitted.cv, nll, fitted.mean_given, open_end)


def _profile(
    family: Family, cells: tuple[np.ndarray, np.ndarray, np.ndarray], fitted: _Fitted, cv: float
) -> float:
    """The profile negative log-likelihood at ``cv``: the mean the data's, or the best one."""
    if fitted.mean_given:
        return _negative_log_likelihood(family, fitted.mean, cv, cells)
    centre = math.log(fitted.mean)
    best = _golden(
        lambda m: _negative_log_likelihood(family, math.exp(m), cv, cells), centre - 10, centre + 10
    )
    return _negative_log_likelihood(family, math.exp(best), cv, cells)


def _standard_errors(
    fitted: _Fitted, cells: tuple[np.ndarray, np.ndarray, np.ndarray], n: float
) -> tuple[float, float]:
    """Standard errors of ``fitted``'s mean and 95th percentile (see the module docstring)."""

    def nll(p: np.ndarray) -> float:
        return _negative_log_likelihood(fitted.family, math.exp(p[0]), math.exp(p[1]), cells)

    def p95(p: np.ndarray) -> float:
        return fitted.family.quantile(0.95, math.exp(p[0]), math.exp(p[1]))

    at = np.array([math.log(fitted.mean), math.log(fitted.cv)])
    h = 1e-4
    information = np.empty((2, 2))
    for i in range(2):
        for j in range(2):
            ei, ej = np.eye(2)[i] * h, np.eye(2)[j] * h
            information[i, j] = (
                nll(at + ei + ej) - nll(at + ei - ej) - nll(at - ei + ej) + nll(at - ei - ej)
            ) / (4 * h * h)
    try:
        covariance = np.linalg.inv(information)
    except np.linalg.LinAlgError:
        covariance = np.full((2, 2), np.nan)
    gradient = np.array([(p95(at + e * h) - p95(at - e * h)) / (2 * h) for e in np.eye(2)])
    out = []
    for grad in (np.array([fitted.mean, 0.0]), gradient):
        variance = float(grad @ covariance @ grad)
        out.append(math.sqrt(variance) if variance >= 0 else math.nan)
    mean_se, p95_se = out
    if fitted.mean_given:
        mean_se = fitted.mean * fitted.cv / math.sqrt(n)  # the sample mean's, with the fit's spread
    return mean_se, p95_se


def _around(value: float, se: float) -> tuple[float, float] | None:
    """``value`` +- 1.96 standard errors, kept >= 0; None without a standard error."""
    if not math.isfinite(se):
        return None
    return max(0.0, value - _Z975 * se), value + _Z975 * se


def bucket_quantile(hist: ServiceHistogram, q: float) -> float:
    """The ``q`` quantile (0 < q < 1) linear within buckets, as PromQL's ``histogram_quantile``."""
    lower, upper, counts = _cells(hist)
    total = float(counts.sum())
    rank = q * total
    cumulative = np.cumsum(counts)
    j = int(min(np.searchsorted(cumulative, rank, side="left"), len(counts) - 1))
    if not np.isfinite(upper[j]):
        return float(lower[j])
    below = float(cumulative[j] - counts[j])
    share = (rank - below) / counts[j] if counts[j] > 0 else 1.0
    return float(lower[j] + (upper[j] - lower[j]) * share)


def fit_histogram(hist: ServiceHistogram, *, family: str = "auto") -> HistogramServiceFit:
    """Model service times given as a cumulative histogram (see the module docstring).

    Args:
        hist: the buckets (and the sum, when known).
        family: ``"auto"`` (a family when one passes its test, else the
            buckets) or ``"buckets"`` (the bucketed distribution always).

    Raises:
        ValueError: the histogram counts no observation, or an unknown ``family``.
    """
    if family not in ("auto", "buckets"):
        raise ValueError(f"family must be 'auto' or 'buckets', got {family!r}")
    lower, upper, counts = _cells(hist)
    n = float(counts.sum())
    if not n > 0:
        raise ValueError("the service histogram counts no observation in the window")
    observed_mean = hist.sum_s / n if math.isfinite(hist.sum_s) and hist.sum_s > 0 else math.nan
    used = counts > 0  # an empty bucket adds count * log(p) = 0 to the likelihood
    cells = (lower[used], upper[used], counts[used])
    fits = {f.family.name: f for f in (_fit(family, cells, observed_mean) for family in FAMILIES)
            if f is not None}  # fmt: skip
    lognormal = fits.get("lognormal")
    common: dict = {
        "observed_mean_s": observed_mean,
        "log_likelihoods": {name: -f.nll for name, f in fits.items()},
        "lognormal": None if lognormal is None else LogNormal(mean=lognormal.mean, cv=lognormal.cv),
    }
    if not fits:
        return _bucketed(hist, None, _UNTESTED, common)
    best = min(fits.values(), key=lambda f: f.nll)
    expected = n * _probabilities(best.family, best.mean, best.cv, lower, upper)
    test = chi2_goodness_of_fit(counts, expected, fitted_parameters=1 if best.mean_given else 2)
    mean_se, p95_se = _standard_errors(best, cells, n)
    distribution = best.family.distribution(best.mean, best.cv)
    common.update(best=distribution, mean_se_s=mean_se, p95_se_s=p95_se, bounded=best.bounded)
    if family == "auto" and not best.bounded and test.df > 0 and test.p_value >= _LEVEL:
        p95 = best.family.quantile(0.95, best.mean, best.cv)
        return HistogramServiceFit(
            best.family.name, distribution, round(n), best.mean, math.nan, math.nan, {},
            chi2=test, p95_s=p95, mean_interval_s=_around(best.mean, mean_se),
            p95_interval_s=_around(p95, p95_se), mean_matched=best.mean_given, **common,
        )  # fmt: skip
    return _bucketed(hist, best, test, common)


def _bucketed(
    hist: ServiceHistogram, base: _Fitted | None, test: ChiSquareTest, common: dict
) -> HistogramServiceFit:
    """The buckets' own distribution (:class:`~.bucketed.BucketedShape`), at the data's mean."""
    lower, upper, counts = _cells(hist)
    n = float(counts.sum())
    shape = BucketedShape(
        lower, upper, counts, None if base is None else (base.family, base.mean, base.cv)
    )
    observed_mean = common["observed_mean_s"]
    if math.isfinite(observed_mean):
        points, theta, matched = shape.matched(QUANTILE_POINTS, observed_mean)
        if not matched and base is not None:
            # A family too narrow to tilt (all in one bucket, a spike inside it): an even
            # base reaches every mean the buckets allow.
            even = BucketedShape(lower, upper, counts, None)
            tried = even.matched(QUANTILE_POINTS, observed_mean)
            if tried[2]:
                shape, (points, theta, matched), base = even, tried, None
    else:
        points, theta, matched = shape.points(QUANTILE_POINTS), 0.0, False
    mean = observed_mean if matched else float(points.mean())
    p95 = float(shape.quantile(np.array([0.95]), theta)[0])
    mean_interval = p95_interval = None
    if n >= _MIN_INTERVAL:
        # The mean: the sample mean's normal interval, the spread the fitted shape's. The
        # p95: the distribution-free binomial interval of a quantile's rank, through the
        # fitted quantile function (its shape within a bucket is the model's, not data).
        mean_interval = _around(mean, float(points.std()) / math.sqrt(n))
        half = _Z975 * math.sqrt(0.95 * 0.05 / n)
        if 0.95 + half < 1:
            low, high = shape.quantile(np.array([0.95 - half, 0.95 + half]), theta).tolist()
            # With no family's tail, the +Inf bucket's share sits at the last finite bound.
            unknown = base is None and counts[-1] > 0 and high >= lower[-1]
            p95_interval = None if unknown else (low, high)
    return HistogramServiceFit(
        "buckets", Empirical(tuple(points.tolist())), round(n), mean, math.nan, math.nan, {},
        chi2=test, p95_s=p95, mean_interval_s=mean_interval, p95_interval_s=p95_interval,
        mean_matched=matched, even=base is None, **common,
    )  # fmt: skip
