"""Fitting a log-normal service time to the numbers users know: a mean and percentiles.

People quote latency as "p50 50 ms, p99 1.2 s" or "mean 80 ms, p99 1.2 s",
not as a mean and a coefficient of variation. :func:`fit_lognormal` turns any
two of ``mean``, ``cv``, ``p50``, ``p90``, ``p95`` and ``p99`` into the
``(mean, cv)`` of a :class:`~pipeline.sim.LogNormal`, so the fitted
distribution draws from the seeded streams exactly as any other log-normal
does. A log-normal with median ``exp(mu)`` and log-spread ``sigma`` has
``p_q = exp(mu + z_q * sigma)`` (``z_q`` the standard normal quantile) and
``mean = exp(mu + sigma**2 / 2)``.

Which two numbers make the fit:

- ``cv`` given: it fixes ``sigma``; the mean, else the highest percentile,
  fixes ``mu``.
- else the mean, if given, with the highest percentile: the mean sets the
  offered load, and the tail is what latency SLOs are about.
- else the lowest and the highest percentile given.

Every other number given is then checked against the fit.

What is an error and what is a warning:

- An error (``ValueError``): a number that is not finite and > 0,
  percentiles that do not increase (``p99 <= p50``), a median at or above the
  mean (every log-normal has its median below its mean), or a mean paired
  with a higher percentile that is not above it.
- An :class:`InconsistentWorkloadWarning`: numbers no log-normal can meet
  together. A mean ``m`` and percentile ``p_q`` hold together only if
  ``p_q / m <= exp(z_q**2 / 2)`` (14.97 for p99); beyond it the fit keeps the
  mean and uses the heaviest tail the family allows there (``sigma = z_q``),
  and the warning says what that implies. A third number more than ``rtol``
  (relative) away from what the fit gives is also a warning; the fit from the
  first two stands.

A mean and a percentile above it are met by two log-normals when
``p_q / m < exp(z_q**2 / 2)``: their ``sigma`` are ``z_q -+ d``. The fit takes
the smaller, on whose side the percentile grows with the spread. The other has
``sigma > z_q`` (cv above 14.9 for p99, 3.7 for p95, 2.0 for p90); for a
workload that variable, give the median (``p50``) with the percentile instead.
"""

from __future__ import annotations

import itertools
import math
import warnings

from ..._validate import real

__all__ = [
    "PERCENTILES",
    "InconsistentWorkloadWarning",
    "fit_lognormal",
    "lognormal_quantile",
    "lognormal_sigma2",
    "lognormal_value",
    "normal_quantile",
]

PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
"""The percentile keywords a fit accepts -> the percentile (0-100) each names."""

_KNOWN = ("mean", "cv", *PERCENTILES)


class InconsistentWorkloadWarning(UserWarning):
    """Warned when the numbers given for a workload cannot all hold for its family.

    The message names the numbers, says why they clash, which fit is used
    instead and what it implies for the others. The command line prints it as
    one line, ``pipeline: warning: ...``.
    """


def normal_quantile(q: float) -> float:
    """The standard normal quantile ``z_q`` for a probability ``q`` in (0, 1)."""
    from statistics import NormalDist  # on first use: statistics costs start-up

    return NormalDist().inv_cdf(q)


def lognormal_sigma2(cv: float) -> float:
    """Variance of the normal under a log-normal of variation ``cv``: ``log(1 + cv**2)``."""
    # cv**2 overflows past cv ~ 1e154, where log(1 + cv**2) is 2 log(cv) to the last bit.
    return math.log1p(cv**2) if cv < 1e150 else 2.0 * math.log(cv)


def lognormal_quantile(mean: float, cv: float, q: float) -> float:
    """The ``q`` quantile (0 < q < 1) of the log-normal of ``mean`` (seconds) and ``cv``."""
    sigma2 = lognormal_sigma2(cv)
    return math.exp(math.log(mean) - sigma2 / 2 + normal_quantile(q) * math.sqrt(sigma2))


def _z(name: str) -> float:
    return normal_quantile(PERCENTILES[name] / 100.0)


def _given(known: dict[str, float], names) -> str:
    return " and ".join(f"{n}={known[n]:g}" + ("" if n == "cv" else " s") for n in names)


def _check_order(known: dict[str, float]) -> None:
    """Raise for orderings no sensible log-normal has (see the module docstring)."""
    percentiles = [n for n in PERCENTILES if n in known]
    for low, high in itertools.pairwise(percentiles):
        if not known[high] > known[low]:
            raise ValueError(
                f"{high} must be > {low} (seconds; percentiles increase), "
                f"got {low}={known[low]:g}, {high}={known[high]:g}"
            )
    mean = known.get("mean")
    if mean is None:
        return
    if "p50" in known and not known["p50"] < mean:
        raise ValueError(
            f"p50 must be < mean (seconds; a log-normal's median is below its mean), "
            f"got p50={known['p50']:g}, mean={mean:g}"
        )
    top = percentiles[-1] if percentiles else None
    if "cv" not in known and top not in (None, "p50") and not known[top] > mean:
        raise ValueError(
            f"{top} must be > mean (seconds) to fit a log-normal from them, "
            f"got mean={mean:g}, {top}={known[top]:g}"
        )


def _sigma_from_mean_and(mean: float, name: str, value: float) -> float:
    """``sigma`` of the log-normal with this mean and percentile (the smaller root)."""
    if name == "p50":
        return math.sqrt(2.0 * math.log(mean / value))
    z = _z(name)
    # log(p_q / mean) = z * sigma - sigma**2 / 2: a quadratic in sigma.
    discriminant = z * z - 2.0 * math.log(value / mean)
    if discriminant >= 0:
        return z - math.sqrt(discriminant)
    bound = mean * math.exp(z * z / 2)
    sigma = z
    cv = math.sqrt(math.expm1(sigma * sigma))
    median = mean * math.exp(-sigma * sigma / 2)
    warnings.warn(
        InconsistentWorkloadWarning(
            f"lognormal: mean={mean:g} s and {name}={value:g} s are inconsistent: a log-normal "
            f"with mean {mean:g} s has {name} at most {bound:.4g} s "
            f"({name}/mean <= exp(z**2/2) = {math.exp(z * z / 2):.4g}); keeping the mean "
            f"(it sets the load), the fit uses sigma={sigma:.4g} (cv={cv:.4g}), so {name} "
            f"will be {bound:.4g} s and p50 {median:.4g} s; give p50 and {name} instead "
            "to keep the tail"
        ),
        stacklevel=5,  # the caller of LogNormal.from_quantiles
    )
    return sigma


def _fit_sigma_mu(known: dict[str, float]) -> tuple[tuple[str, str], float, float]:
    """The two names the fit uses, and the fitted ``sigma`` and ``mu``."""
    percentiles = [n for n in PERCENTILES if n in known]
    if "cv" in known:
        sigma = math.sqrt(lognormal_sigma2(known["cv"]))
        anchor = "mean" if "mean" in known else percentiles[-1]
        if anchor == "mean":
            mu = math.log(known["mean"]) - sigma * sigma / 2
        else:
            mu = math.log(known[anchor]) - _z(anchor) * sigma
        return ("cv", anchor), sigma, mu
    if "mean" in known:
        top = percentiles[-1]
        sigma = _sigma_from_mean_and(known["mean"], top, known[top])
        return ("mean", top), sigma, math.log(known["mean"]) - sigma * sigma / 2
    low, high = percentiles[0], percentiles[-1]
    z_low, z_high = _z(low), _z(high)
    sigma = (math.log(known[high]) - math.log(known[low])) / (z_high - z_low)
    return (low, high), sigma, math.log(known[low]) - z_low * sigma


def fit_lognormal(known: dict[str, float], *, rtol: float = 0.05) -> tuple[float, float]:
    """The ``(mean, cv)`` of the log-normal that meets ``known`` (see the module docstring).

    Args:
        known: two or more of ``mean``, ``p50``, ``p90``, ``p95``, ``p99``
            (seconds) and ``cv`` (std / mean); ``None`` values are ignored.
        rtol: how far (relative) a number beyond the two that make the fit may
            be from what the fit gives before it is reported; 0.05 is about the
            rounding of a number quoted to two significant figures.

    Returns:
        ``(mean, cv)``: seconds, and the dimensionless coefficient of variation.

    Raises:
        ValueError: fewer than two numbers, an unknown name, a value that is
            not finite and > 0, an ordering no log-normal has, or numbers whose
            log-normal is too wide for floating point.
        TypeError: a value that is not a real number.

    Warns:
        InconsistentWorkloadWarning: the numbers cannot all hold; the message
            says which fit is used and what it implies.
    """
    unknown = sorted(set(known) - set(_KNOWN))
    if unknown:
        raise ValueError(f"cannot fit a log-normal to {unknown[0]!r}; allowed: {', '.join(_KNOWN)}")
    given = {
        name: real(name, value, "std / mean" if name == "cv" else "seconds", above=0)
        for name, value in known.items()
        if value is not None
    }
    rtol = real("rtol", rtol, "relative tolerance", above=0)
    if len(given) < 2:
        got = ", ".join(given) or "none"
        raise ValueError(
            f"a log-normal needs two of {', '.join(_KNOWN)} (e.g. p50 and p99, or mean and "
            f"cv), got {got}"
        )
    given = {name: given[name] for name in _KNOWN if name in given}  # canonical order
    _check_order(given)
    used, sigma, mu = _fit_sigma_mu(given)
    try:
        mean = given["mean"] if "mean" in given else math.exp(mu + sigma * sigma / 2)
        cv = given["cv"] if "cv" in given else math.sqrt(math.expm1(sigma * sigma))
    except OverflowError:
        mean = cv = math.inf
    if not (math.isfinite(mean) and math.isfinite(cv)):
        raise ValueError(
            f"{_given(given, used)} imply a log-normal too wide for floating point "
            f"(sigma={sigma:.4g}, mean or cv overflows)"
        )
    if not mean > 0:  # exp underflows: a median below 1e-308 s
        raise ValueError(
            f"{_given(given, used)} imply a log-normal whose mean underflows to 0 s "
            f"(sigma={sigma:.4g})"
        )
    _check_the_rest(given, used, mean, cv, rtol)
    return mean, cv


def lognormal_value(name: str, mean: float, cv: float) -> float:
    """``mean``, ``cv`` or a percentile (``p99``) of the log-normal ``(mean, cv)``."""
    if name == "mean":
        return mean
    if name == "cv":
        return cv
    return lognormal_quantile(mean, cv, PERCENTILES[name] / 100.0)


def _check_the_rest(
    given: dict[str, float], used: tuple[str, str], mean: float, cv: float, rtol: float
) -> None:
    for name, value in given.items():
        if name in used:
            continue
        fitted = lognormal_value(name, mean, cv)
        off = abs(fitted - value) / value
        if off > rtol:
            unit = "" if name == "cv" else " s"
            warnings.warn(
                InconsistentWorkloadWarning(
                    f"lognormal: {name}={value:g}{unit} does not fit {_given(given, used)}: "
                    f"the log-normal they give has {name}={fitted:.4g}{unit} ({off:.1%} off, "
                    f"more than rtol={rtol:g}); using the fit from {' and '.join(used)}"
                ),
                stacklevel=4,  # the caller of LogNormal.from_quantiles
            )
