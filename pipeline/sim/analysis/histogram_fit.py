"""Service times from a cumulative histogram: a fitted log-normal, or the buckets themselves.

A Prometheus histogram says how many observations fell at or below each
bound (``le``), not what they were. :func:`fit_histogram` fits a log-normal
to those counts by **interval-censored maximum likelihood**: each bucket
``(lower, upper]`` contributes ``count * log(F(upper) - F(lower))``, with
``F`` the log-normal's CDF, the first bucket starting at 0 and the ``+Inf``
bucket ending at infinity. The likelihood is maximised over ``(mu,
log sigma)`` by Nelder-Mead, from the log-midpoints' moments; the standard
errors of the mean and the 95th percentile come from the observed
information (a numerical Hessian) by the delta method.

The fit is then judged by Pearson's chi-square over the buckets (cells
merged until each expects 5 observations, two fitted parameters,
:func:`~pipeline.sim.stats.chisquare.chi2_goodness_of_fit`). When the test
passes at 5% the log-normal is the service; when it fails, or cannot be run
(too few buckets hold data), the service is the **bucketed distribution
itself**: an :class:`~pipeline.sim.Empirical` of 1,000 quantile points,
linear within each bucket (as PromQL's ``histogram_quantile``), the
``+Inf`` bucket's share placed at the last finite bound (its values are
unknown beyond it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from ..stats.chisquare import ChiSquareTest, chi2_goodness_of_fit
from ..workloads.distributions import Empirical, LogNormal
from ..workloads.telemetry.observed import ServiceHistogram
from .calibrate import ServiceFit

__all__ = ["HistogramServiceFit", "bucket_quantile", "fit_histogram"]

_LEVEL = 0.05  # the goodness-of-fit test's level, as calibrate's KS tests
_POINTS = 1000  # quantile points of the bucketed distribution
_Z95 = NormalDist().inv_cdf(0.95)
_SQRT2 = math.sqrt(2.0)
_UNTESTED = ChiSquareTest(math.nan, 0, math.nan)


@dataclass(frozen=True)
class HistogramServiceFit(ServiceFit):
    """A :class:`~pipeline.sim.analysis.calibrate.ServiceFit` made from histogram buckets.

    ``ks_statistic`` and ``ks_critical`` are NaN (there are no samples to
    test); the chi-square test replaces them.

    Attributes:
        chi2: the log-normal's goodness-of-fit test over the buckets.
        p95_s: the service's 95th percentile, seconds.
        mean_se_s: standard error of the fitted log-normal's mean (NaN if none was fitted).
        p95_se_s: standard error of its 95th percentile (NaN if none was fitted).
        observed_mean_s: ``_sum / _count`` when the sum was given, else NaN.
        lognormal: the fitted log-normal, whether or not it was chosen.
    """

    chi2: ChiSquareTest = _UNTESTED
    p95_s: float = math.nan
    mean_se_s: float = math.nan
    p95_se_s: float = math.nan
    observed_mean_s: float = math.nan
    lognormal: LogNormal | None = None

    @property
    def fits(self) -> bool:
        """True when the log-normal passed its chi-square test at 5%."""
        return self.family == "lognormal"


def _phi(z: np.ndarray) -> np.ndarray:
    # math.erf one by one: a histogram has a few dozen buckets, and numpy has no erf.
    return 0.5 * (1.0 + np.array([math.erf(v / _SQRT2) for v in z.tolist()]))


def _cells(hist: ServiceHistogram) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each bucket's lower and upper bound and its own count (not cumulative)."""
    upper = np.asarray(hist.upper_bounds_s, dtype=np.float64)
    cumulative = np.asarray(hist.cumulative_counts, dtype=np.float64)
    counts = np.diff(np.concatenate([[0.0], cumulative]))
    lower = np.concatenate([[0.0], upper[:-1]])
    return lower, upper, counts


def _probabilities(lower: np.ndarray, upper: np.ndarray, mu: float, sigma: float) -> np.ndarray:
    with np.errstate(divide="ignore"):
        lo = np.where(lower > 0, (np.log(np.maximum(lower, 1e-300)) - mu) / sigma, -np.inf)
        hi = np.where(np.isfinite(upper), (np.log(np.minimum(upper, 1e300)) - mu) / sigma, np.inf)
    return np.clip(_phi(hi) - _phi(lo), 0.0, 1.0)


def _negative_log_likelihood(
    params: np.ndarray, lower: np.ndarray, upper: np.ndarray, counts: np.ndarray
) -> float:
    """Minus the log-likelihood; the buckets given should be those holding observations."""
    mu, log_sigma = float(params[0]), float(params[1])
    if not -30 < log_sigma < 5:
        return math.inf
    p = _probabilities(lower, upper, mu, math.exp(log_sigma))
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


def _start(lower: np.ndarray, upper: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Moments of the log of each bucket's geometric midpoint (open ends: a factor 2 out)."""
    finite = upper[np.isfinite(upper)]
    lo = np.where(lower > 0, lower, finite[0] / 2 if finite.size else 1.0)
    hi = np.where(np.isfinite(upper), upper, lower * 2)
    mid = np.log(np.sqrt(lo * np.maximum(hi, lo)))
    weights = counts / counts.sum()
    mean = float(np.sum(weights * mid))
    spread = math.sqrt(max(float(np.sum(weights * (mid - mean) ** 2)), 1e-4))
    return np.array([mean, math.log(spread)])


def _hessian(f, at: np.ndarray) -> np.ndarray:
    h = np.maximum(np.abs(at), 1.0) * 1e-4
    out = np.empty((2, 2))
    for i in range(2):
        for j in range(2):
            ei, ej = np.eye(2)[i] * h[i], np.eye(2)[j] * h[j]
            out[i, j] = (f(at + ei + ej) - f(at + ei - ej) - f(at - ei + ej) + f(at - ei - ej)) / (
                4 * h[i] * h[j]
            )
    return out


def bucket_quantile(hist: ServiceHistogram, q: float) -> float:
    """The ``q`` quantile (0 < q < 1) linear within buckets, as ``histogram_quantile``."""
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


def _bucketed(hist: ServiceHistogram) -> Empirical:
    levels = (np.arange(_POINTS) + 0.5) / _POINTS
    return Empirical(tuple(bucket_quantile(hist, float(q)) for q in levels))


def fit_histogram(hist: ServiceHistogram) -> HistogramServiceFit:
    """Model service times given as a cumulative histogram (see the module docstring).

    Raises:
        ValueError: the histogram counts no observation.
    """
    lower, upper, counts = _cells(hist)
    n = float(counts.sum())
    if not n > 0:
        raise ValueError("the service histogram counts no observation in the window")
    observed_mean = hist.sum_s / n if math.isfinite(hist.sum_s) else math.nan

    used = counts > 0  # an empty bucket adds count * log(p) = 0 to the likelihood

    def nll(params: np.ndarray) -> float:
        return _negative_log_likelihood(params, lower[used], upper[used], counts[used])

    best = _nelder_mead(nll, _start(lower, upper, counts), np.array([0.5, 0.3]))
    mu, sigma = float(best[0]), math.exp(float(best[1]))
    fitted: LogNormal | None = None
    test = ChiSquareTest(math.nan, 0, math.nan)
    mean_se = p95_se = math.nan
    if math.isfinite(nll(best)) and 1e-12 < sigma < 20:
        mean = math.exp(mu + sigma * sigma / 2)
        fitted = LogNormal(mean=mean, cv=math.sqrt(math.expm1(sigma * sigma)))
        expected = n * _probabilities(lower, upper, mu, sigma)
        test = chi2_goodness_of_fit(counts, expected, fitted_parameters=2)
        # Observed information in (mu, sigma): the log-sigma Hessian, changed variables.
        information = _hessian(
            lambda p: nll(np.array([p[0], math.log(p[1])])), np.array([mu, sigma])
        )
        try:
            covariance = np.linalg.inv(information)
        except np.linalg.LinAlgError:
            covariance = np.full((2, 2), np.nan)
        p95 = math.exp(mu + _Z95 * sigma)
        for grad, name in (
            (mean * np.array([1.0, sigma]), "mean"),
            (p95 * np.array([1.0, _Z95]), "p95"),
        ):
            variance = float(grad @ covariance @ grad)
            se = math.sqrt(variance) if variance >= 0 else math.nan
            if name == "mean":
                mean_se = se
            else:
                p95_se = se
    if fitted is not None and test.df > 0 and test.p_value >= _LEVEL:
        return HistogramServiceFit(
            "lognormal", fitted, round(n), fitted.mean, math.nan, math.nan, {},
            chi2=test, p95_s=math.exp(mu + _Z95 * sigma), mean_se_s=mean_se, p95_se_s=p95_se,
            observed_mean_s=observed_mean, lognormal=fitted,
        )  # fmt: skip
    bucketed = _bucketed(hist)
    return HistogramServiceFit(
        "buckets", bucketed, round(n), bucketed.mean, math.nan, math.nan, {},
        chi2=test, p95_s=bucket_quantile(hist, 0.95), mean_se_s=mean_se, p95_se_s=p95_se,
        observed_mean_s=observed_mean, lognormal=fitted,
    )  # fmt: skip
