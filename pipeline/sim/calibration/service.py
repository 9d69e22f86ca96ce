"""Service times measured one by one: a log-normal, an exponential, or the samples themselves.

:func:`fit_service` fits a log-normal (to the logs' mean and spread) and an
exponential (to the mean), keeps whichever is closer in the Kolmogorov-Smirnov
distance ``D`` when ``D`` is below its 5% critical value
(:data:`~.ks.LILLIEFORS_5PCT`), and otherwise, or with ``family="empirical"``,
returns the measured times themselves (:class:`~pipeline.sim.Empirical`
resamples them). Asked for one family, it fits that family whatever the test says.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from ..workloads.distributions import Distribution, Empirical, Exponential, LogNormal
from .ks import LILLIEFORS_5PCT, MIN_FIT, ks_distance
from .records import ServiceFit

__all__ = ["FAMILY_CHOICES", "FamilyChoice", "fit_service"]

FamilyChoice = Literal["auto", "empirical", "lognormal", "exponential"]
FAMILY_CHOICES = ("auto", "empirical", "lognormal", "exponential")
"""What ``family=`` may be: a family tested in turn (auto), the samples, or one family."""


def _lognormal_cdf(x: np.ndarray, mu: float, sigma: float) -> np.ndarray:
    from math import erf, sqrt

    z = (np.log(np.maximum(x, 1e-300)) - mu) / (sigma * sqrt(2.0))
    return 0.5 * (1.0 + np.vectorize(erf)(z))


def fit_service(samples: np.ndarray, family: FamilyChoice = "auto") -> ServiceFit:
    """Model measured service times (seconds): a fitted family, or the samples themselves."""
    x = np.asarray(samples, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        raise ValueError("no service times to fit: the stage ran no attempt that ended")
    x = np.maximum(x, 0.0)
    mean = float(x.mean())
    candidates: dict[str, float] = {}
    fitted: dict[str, Distribution] = {}
    if x.size >= MIN_FIT and mean > 0:
        if family in ("auto", "exponential"):
            fitted["exponential"] = Exponential(mean=mean)
            candidates["exponential"] = ks_distance(x, lambda v: 1.0 - np.exp(-v / mean))
        if family in ("auto", "lognormal") and (x > 0).all():
            logs = np.log(x)
            mu, sigma = float(logs.mean()), float(logs.std(ddof=1))
            if sigma > 0:
                fitted["lognormal"] = LogNormal(
                    mean=math.exp(mu + sigma * sigma / 2), cv=math.sqrt(math.expm1(sigma * sigma))
                )
                candidates["lognormal"] = ks_distance(
                    x, lambda v, mu=mu, sigma=sigma: _lognormal_cdf(v, mu, sigma)
                )
    if family != "empirical" and candidates:
        best = min(candidates, key=candidates.__getitem__)
        critical = LILLIEFORS_5PCT[best] / math.sqrt(x.size)
        if candidates[best] <= critical or family != "auto":
            return ServiceFit(
                best, fitted[best], int(x.size), mean, candidates[best], critical, candidates
            )
    if family in ("lognormal", "exponential") and not candidates:
        raise ValueError(
            f"cannot fit a {family} to {x.size} service times (need at least {MIN_FIT}, "
            "all > 0 for a log-normal, not all equal)"
        )
    return ServiceFit(
        "empirical", Empirical(tuple(x.tolist())), int(x.size), mean, math.nan, math.nan, candidates
    )
