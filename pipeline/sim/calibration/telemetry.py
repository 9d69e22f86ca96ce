"""``calibrate_observed``: fit a Scenario from telemetry (an ``Observed``), whatever its format.

Each part is fitted from the finest grain the data has, and the fit says how
(:attr:`TelemetryCalibration.how`, one sentence per part):

- **arrivals** (:mod:`~pipeline.sim.calibration.arrivals`) one by one as
  :func:`~pipeline.sim.calibrate` does (Poisson when the gaps pass a
  Kolmogorov-Smirnov test, else counted per interval); counts per interval:
  Poisson at the mean rate when a dispersion test is consistent with one rate
  at 5%, else :meth:`TimeVarying.from_counts <pipeline.sim.TimeVarying.from_counts>`;
- **service** one by one: :func:`~pipeline.sim.calibration.service.fit_service`
  (a log-normal or an exponential passing a KS test, else the samples);
  histogram buckets: :func:`~pipeline.sim.calibration.histogram.fit_histogram`
  (a log-normal or a gamma of the data's exact mean passing a chi-square
  test, else the bucketed distribution at that mean); quantiles (and a mean):
  :func:`~pipeline.sim.workloads.percentiles.fit_lognormal` from the levels it
  knows (p50, p90, p95, p99). When the times are *response* times (a load
  test's client, a server's request span: the wait for a worker included),
  the service is instead fitted through the twin
  (:func:`~pipeline.sim.calibration.response.fit_response_times`): a
  log-normal whose twin, on the given workers, gives back the recorded
  response times' mean and quantiles (``service_fit``
  ``"response_times_deconvolved"``, else ``"service_times"``). That needs the
  worker count, which a client cannot see: without it the fit is refused.
- **failures**: each attempt fails independently at the observed share,
  with its Wilson interval (:func:`~pipeline.sim.stats.proportion_ci`).
- **workers**: the concurrency, from the data or given (``concurrency=``,
  which wins when both are there).
- **attempts**: ``max_attempts``, what the data shows: 1 when each record is
  one request (k6, Locust, server spans: a failed request is not retried by
  the twin either), the most attempts one item made in the engine's spans;
  the engine's default (3) only where the data cannot tell; with retries seen
  one by one (the engine's spans), the backoff: constant at the first retries'
  median gap, or exponential when second retries wait markedly longer.
- **backlog**: the items waiting at the window's end (``backlog``), for a
  warm start.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...config import PipelineConfig
from ...retry import Backoff
from ..stats.intervals import ProportionCI, proportion_ci
from ..workloads.distributions import Distribution, Empirical, Exponential, Gamma, LogNormal
from ..workloads.failures import FailureModel, IndependentFailures, NoFailures
from ..workloads.percentiles import fit_lognormal, lognormal_quantile
from ..workloads.scenario import Scenario
from ..workloads.stages import StageSpec
from ..workloads.telemetry.observed import Observed
from .arrivals import CountsArrivalFit, fit_observed_arrivals
from .families import FAMILIES
from .histogram import HistogramServiceFit, fit_histogram
from .records import Calibration, ServiceFit, StageFit, json_float
from .response import ResponseFit, fit_response_times, quantile_targets, response_statistics
from .service import fit_service

__all__ = ["SERVICE_FITS", "TelemetryCalibration", "calibrate_observed", "service_quantile"]

SERVICE_FITS = ("service_times", "response_times_deconvolved")
"""How the service was fitted: to the service times measured, or through the twin to the
response times measured (the wait for a worker taken out)."""

_LEVEL = 0.05
_STAGE = "service"
_MIN_SECOND_RETRIES = 5  # fewer second retries than this: no growth can be seen
_QUANTILE_NAMES = {0.5: "p50", 0.9: "p90", 0.95: "p95", 0.99: "p99"}


@dataclass(frozen=True)
class TelemetryCalibration(Calibration):
    """A scenario fitted to telemetry, and how each part was fitted.

    Attributes (beyond :class:`~pipeline.sim.calibration.records.Calibration`'s):
        source: where the data came from (``"prometheus run.json"``).
        window_s: the window the data covers, seconds (the scenario's duration).
        concurrency: the workers the scenario has.
        failure_rate: the attempts' failure share, ``None`` when the data has none.
        failures_counted: ``(failed, attempts)`` behind it.
        service_p95_s: the fitted service's 95th percentile, seconds.
        backlog: items waiting at the window's end, ``None`` when unknown.
        how: one sentence per part: ``arrivals``, ``service``, ``failures``,
            ``workers``, ``attempts``, ``backlog``.
        max_attempts: the attempts each item has in the twin (``config.max_attempts``).
        backoff: the twin's :class:`~pipeline.Backoff` (``config.backoff``).
        service_fit: one of :data:`SERVICE_FITS`.
        response_fit: with ``"response_times_deconvolved"``, the
            :class:`~pipeline.sim.calibration.response.ResponseFit`.
        notes: what the reader assumed or converted.
    """

    source: str = ""
    window_s: float = math.nan
    concurrency: int = 1
    failure_rate: ProportionCI | None = None
    failures_counted: tuple[int, int] | None = None
    service_p95_s: float = math.nan
    backlog: int | None = None
    how: dict[str, str] = dataclasses.field(default_factory=dict)
    notes: tuple[str, ...] = ()
    max_attempts: int = 1
    backoff: Backoff = dataclasses.field(default_factory=Backoff)
    service_fit: str = "service_times"
    response_fit: ResponseFit | None = None

    @property
    def service(self) -> ServiceFit:
        """The service's fit (the one stage's)."""
        return self.stages[_STAGE].service

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready object: the headline numbers, then each part and how it was fitted."""
        a, s = self.arrivals, self.service
        half = a.rate_ci95
        arrivals: dict[str, Any] = {
            "fitted": a.kind, "process": repr(a.process) if a.kind == "poisson" else
            f"TimeVarying.from_counts({len(a.counts)} counts, interval_s={a.interval_s:g})"
            if isinstance(a, CountsArrivalFit) and a.kind == "time_varying" else a.kind,
            "n": a.n, "how": self.how["arrivals"],
        }  # fmt: skip
        if isinstance(a, CountsArrivalFit):
            arrivals.update(
                interval_s=a.interval_s, intervals=len(a.counts),
                dispersion=json_float(a.dispersion.statistic), dispersion_df=a.dispersion.df,
                dispersion_p_value=json_float(a.dispersion.p_value),
            )  # fmt: skip
        else:
            arrivals.update(
                ks_statistic=json_float(a.ks_statistic), ks_critical=json_float(a.ks_critical)
            )
        service: dict[str, Any] = {
            "fitted": s.family,
            "distribution": _short(s.distribution),
            "n": s.n,
            "how": self.how["service"],
        }
        if isinstance(s, HistogramServiceFit):
            service.update(
                chi2=json_float(s.chi2.statistic), chi2_df=s.chi2.df,
                chi2_p_value=json_float(s.chi2.p_value),
                observed_mean_s=json_float(s.observed_mean_s),
                lognormal=None if s.lognormal is None else _short(s.lognormal),
                best=None if s.best is None else _short(s.best),
                log_likelihoods={k: json_float(v) for k, v in s.log_likelihoods.items()},
            )  # fmt: skip
        elif s.family != "lognormal" or s.candidates:
            service.update(
                ks_statistic=json_float(s.ks_statistic), ks_critical=json_float(s.ks_critical)
            )
        if self.response_fit is not None:
            service.update(
                response_times_recorded=self.response_fit.targets,
                response_times_reproduced=self.response_fit.reproduced,
                twin_utilisation=self.response_fit.utilisation,
            )
        rate = self.failure_rate
        counted = self.failures_counted
        return {
            "source": self.source,
            "window_s": json_float(self.window_s),
            "arrival_rate_per_s": json_float(a.rate_per_s),
            "arrival_rate_interval": [
                json_float(a.rate_per_s - half),
                json_float(a.rate_per_s + half),
            ],
            "service_mean_s": json_float(s.mean_s),
            "service_mean_interval": _interval(s, "mean_interval_s", s.mean_s),
            "service_p95_s": json_float(self.service_p95_s),
            "service_p95_interval": _interval(s, "p95_interval_s", self.service_p95_s),
            "failure_rate": None if rate is None else rate.estimate,
            "failure_rate_interval": None if rate is None else [rate.low, rate.high],
            "concurrency": self.concurrency,
            "max_attempts": self.max_attempts,
            "service_fit": self.service_fit,
            "backlog": self.backlog,
            "arrivals": arrivals,
            "service": service,
            "failures": {
                "fitted": "none" if rate is None or rate.estimate == 0 else "independent",
                "failed": None if counted is None else counted[0],
                "attempts": None if counted is None else counted[1],
                "how": self.how["failures"],
            },
            "workers": {"concurrency": self.concurrency, "how": self.how["workers"]},
            "attempts": {
                "max_attempts": self.max_attempts,
                "backoff": repr(self.backoff),
                "how": self.how["attempts"],
            },
            "backlog_how": self.how["backlog"],
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        d = self.to_dict()
        lines = [f"calibrated from {self.source}, a window of {self.window_s:g} s"]
        for key in ("arrivals", "service", "failures", "workers", "attempts"):
            lines.append(f"{key}: {d[key]['how']}")
        lines.append(f"backlog: {d['backlog_how']}")
        return "\n".join(lines)


def _interval(fit: ServiceFit, attribute: str, value: float) -> list[float | None] | None:
    """A histogram fit's own interval; else value +- 1.96 standard errors of a log-normal."""
    if isinstance(fit, HistogramServiceFit):
        interval = getattr(fit, attribute)
        return None if interval is None else [json_float(interval[0]), json_float(interval[1])]
    se = getattr(fit, attribute.replace("_interval_s", "_se_s"), math.nan)
    if fit.family != "lognormal" or not math.isfinite(se):
        return None
    return [json_float(value - 1.96 * se), json_float(value + 1.96 * se)]


def _short(distribution: Distribution) -> str:
    if isinstance(distribution, Empirical):
        return f"Empirical(n={len(distribution.samples)})"
    return repr(distribution)


def service_quantile(distribution: Distribution, q: float) -> float:
    """The ``q`` quantile of a fitted service (log-normal, exponential or empirical), seconds."""
    if isinstance(distribution, LogNormal):
        return lognormal_quantile(distribution.mean, distribution.cv, q)
    if isinstance(distribution, Exponential):
        return -distribution.mean * math.log1p(-q)
    if isinstance(distribution, Gamma):
        return FAMILIES[1].quantile(q, distribution.mean, distribution.cv)
    if isinstance(distribution, Empirical):
        return float(np.quantile(np.asarray(distribution.samples), q))
    raise TypeError(f"no quantile for {distribution!r}")


def _service(observed: Observed) -> tuple[ServiceFit, str, float]:
    if observed.service_s is not None:
        fit = fit_service(observed.service_s)
        p95 = service_quantile(fit.distribution, 0.95)
        if fit.family == "empirical":
            how = f"the {fit.n} measured times themselves (no family passes a KS test at 5%)"
        else:
            how = (
                f"{fit.family} fitted to {fit.n} measured times, KS D={fit.ks_statistic:.3f} <= "
                f"{fit.ks_critical:.3f} (5% critical)"
            )
        return fit, how, p95
    if observed.histogram is not None:
        fit = fit_histogram(observed.histogram)
        return fit, _histogram_how(fit, observed.histogram.upper_bounds_s.size), fit.p95_s
    if observed.quantiles_s:
        known: dict[str, float] = {}
        for level, value in observed.quantiles_s.items():
            name = next((n for q, n in _QUANTILE_NAMES.items() if abs(q - level) < 1e-9), None)
            if name is not None and value > 0:
                known[name] = float(value)
        if observed.mean_service_s is not None and observed.mean_service_s > 0:
            known["mean"] = float(observed.mean_service_s)
        if len(known) < 2:
            raise ValueError(
                f"{observed.source}: a log-normal needs two of mean, p50, p90, p95, p99 > 0; "
                f"the data gives {', '.join(known) or 'none'}"
            )
        given = ", ".join(f"{k}={v:.4g} s" for k, v in known.items())
        try:
            mean, cv = fit_lognormal(known)
        except ValueError as exc:
            # The file's numbers, not fit_lognormal's arguments, are what the user can check.
            raise ValueError(
                f"{observed.source}: its service times ({given}) admit no log-normal: {exc}"
            ) from None
        distribution = LogNormal(mean=mean, cv=cv)
        n = observed.attempts or 0
        fit = ServiceFit("lognormal", distribution, n, mean, math.nan, math.nan, {})
        how = f"log-normal from {given} (fit_lognormal)"
        return fit, how, service_quantile(distribution, 0.95)
    raise ValueError(f"{observed.source}: no service times (samples, buckets or quantiles) to fit")


def _histogram_how(fit: HistogramServiceFit, buckets: int) -> str:
    """One sentence: which family (or the buckets), how it was tested, and its mean."""
    test = (
        f"chi-square {fit.chi2.statistic:.4g} on {fit.chi2.df} df, p={fit.chi2.p_value:.3g}"
        if fit.chi2.df
        else "too few buckets hold data for a chi-square test"
    )
    tried = ", ".join(f"{name} {value:.6g}" for name, value in fit.log_likelihoods.items())
    if fit.mean_matched:
        mean = f"its mean the observed {fit.mean_s:.4g} s (_sum / _count)"
    elif math.isfinite(fit.observed_mean_s):
        mean = (
            f"its mean {fit.mean_s:.4g} s, the nearest this shape allows to the observed "
            f"{fit.observed_mean_s:.4g} s (_sum / _count)"
        )
    else:
        mean = f"its mean {fit.mean_s:.4g} s (no _sum, so no observed mean)"
    if fit.family != "buckets":
        return (
            f"{fit.family} fitted to {fit.n} observations in {buckets} buckets by "
            f"interval-censored maximum likelihood (log-likelihood {tried}), {mean}; "
            f"{test} >= {_LEVEL}"
        )
    if fit.best is None:
        within = "spread evenly within each bucket (no family fits at all)"
    elif fit.bounded:
        within = (
            f"shaped within each bucket as the best family, {_short(fit.best)}, whose cv the "
            f"data do not bound (an end of the range searched is in its 95% likelihood "
            f"interval), so it is no fit whatever its test ({test})"
        )
    elif fit.even:
        within = (
            f"spread evenly within each bucket: the best family, {_short(fit.best)}, does not "
            f"fit across them ({test}) and is too narrow to reach the mean"
        )
    else:
        within = (
            f"shaped within each bucket as the best family, {_short(fit.best)} (log-likelihood "
            f"{tried}), which does not fit across them ({test})"
        )
    return (
        f"the bucketed distribution: each of {buckets} buckets holding its share of {fit.n} "
        f"observations, {within}, tilted to make {mean}; 1,000 quantile points"
    )


def calibrate_observed(
    observed: Observed,
    *,
    concurrency: int | None = None,
    seed: int = 1,
) -> TelemetryCalibration:
    """Fit a single-stage :class:`~pipeline.sim.Scenario` to telemetry (see the module docstring).

    Args:
        observed: what a reader made of the data.
        concurrency: the workers, when the data does not say (or to override it).
        seed: the scenario's seed.

    Returns:
        A :class:`TelemetryCalibration`: ``.scenario`` (over the observed
        window, ``duration_s``) and how each part was fitted.

    Raises:
        ValueError: the data lacks arrivals, service times or (without
            ``concurrency``) workers, or its numbers cannot be fitted.
    """
    if not isinstance(observed, Observed):
        raise TypeError(f"observed must be an Observed, got {type(observed).__name__}")
    arrivals, arrivals_how, window = fit_observed_arrivals(observed)
    # Response times are fitted through the twin below, once its other parts are known.
    deconvolve = observed.response_times and observed.histogram is None
    if deconvolve:
        recorded = observed.service_s.size if observed.service_s is not None else None
        n = recorded if recorded is not None else int(observed.attempts or 0)
        service = ServiceFit("lognormal", LogNormal(mean=1.0, cv=1.0), n, math.nan,
                             math.nan, math.nan, {})  # fmt: skip
        service_how, p95 = "", math.nan
    else:
        service, service_how, p95 = _service(observed)
    if concurrency is not None:
        workers = int(concurrency)
        workers_how = f"{workers}, as given" + (
            f" (the data says {observed.workers})"
            if observed.workers not in (None, workers)
            else ""
        )
    elif observed.workers:
        workers = int(observed.workers)
        workers_how = f"{workers}, from the data"
    elif observed.response_times:
        raise ValueError(
            f"{observed.source}: the data are response times (the wait for a worker "
            "included), and a client cannot tell how many workers the server has; give the "
            "server's concurrency (--concurrency N) so that the service time can be fitted "
            "apart from the queueing (a count far above the real one fits the queueing as "
            "service time)"
        )
    else:
        raise ValueError(
            f"{observed.source}: the data does not say how many workers serve it; "
            "give the concurrency (--concurrency N)"
        )
    rate: ProportionCI | None = None
    counted: tuple[int, int] | None = None
    failures: FailureModel = NoFailures()
    if observed.attempts:
        counted = (int(observed.failed or 0), int(observed.attempts))
        rate = proportion_ci(*counted)
        if rate.estimate >= 1:
            raise ValueError(
                f"{observed.source}: every one of {counted[1]} attempts failed; a twin would "
                "never complete an item"
            )
        if rate.estimate > 0:
            failures = IndependentFailures(rate.estimate)
        failures_how = (
            f"each attempt fails independently with p={rate.estimate:.4g} ({counted[0]} of "
            f"{counted[1]}; 95% Wilson interval {rate.low:.4g} to {rate.high:.4g})"
        )
    else:
        # A reader that knows why none were counted says so in a note; the printout shows it.
        said = [n.removeprefix("failures: ") for n in observed.notes if n.startswith("failures: ")]
        failures_how = said[0] if said else "the data counts no attempts' results: none assumed"
    max_attempts, attempts_how = _attempts(observed)
    backoff, backoff_how = _backoff(observed)
    if backoff_how:
        attempts_how += f"; {backoff_how}"
    config = PipelineConfig(concurrency=workers, max_attempts=max_attempts, backoff=backoff)
    backlog = observed.backlog
    # The items waiting now start the twin: "how long until they drain" is its question.
    scenario = Scenario(
        arrivals=arrivals.process, service=service.distribution, config=config,
        failures=failures, duration_s=window, seed=seed, initial_backlog=backlog or 0,
    )  # fmt: skip
    response: ResponseFit | None = None
    if deconvolve:
        try:
            response = fit_response_times(scenario, _targets(observed), recorded=service.n)
        except ValueError as error:
            raise ValueError(f"{observed.source}: {error}") from None
        distribution = response.distribution
        service = ServiceFit("lognormal", distribution, service.n, distribution.mean,
                             math.nan, math.nan, {})  # fmt: skip
        p95 = service_quantile(distribution, 0.95)
        service_how = (
            f"log-normal (mean {distribution.mean:.4g} s, cv {distribution.cv:.3g}) fitted so "
            f"that the twin on {workers} worker(s) reproduces the recorded response times "
            f"(wait + service): {response.describe()}"
        )
        scenario = scenario.replace(service=distribution)
    stage = StageFit(
        _STAGE, service, workers, rate if rate is not None else proportion_ci(0, 1),
        proportion_ci(0, 1), 1,
        StageSpec(name=_STAGE, service=service.distribution, config=config, failures=failures),
    )  # fmt: skip
    backlog_how = (
        "unknown (no queue-depth gauge in the data)"
        if backlog is None
        else f"{backlog} item(s) waiting at the window's end"
    )
    return TelemetryCalibration(
        scenario, arrivals, {_STAGE: stage},
        source=observed.source, window_s=window, concurrency=workers, failure_rate=rate,
        failures_counted=counted, service_p95_s=p95, backlog=backlog,
        how={"arrivals": arrivals_how, "service": service_how, "failures": failures_how,
             "workers": workers_how, "attempts": attempts_how, "backlog": backlog_how},
        notes=observed.notes, max_attempts=max_attempts, backoff=backoff,
        service_fit=SERVICE_FITS[response is not None], response_fit=response,
    )  # fmt: skip


def _attempts(observed: Observed) -> tuple[int, str]:
    """The twin's ``max_attempts`` and a sentence saying how the data gave it."""
    most = observed.max_attempts
    if most is None:
        default = PipelineConfig().max_attempts
        return default, f"{default}, the engine's default: the data does not say"
    if most == 1:
        return 1, (
            "1: each recorded request is one attempt, and the data shows no retries (a "
            "failed request is not retried by the twin either)"
        )
    return most, f"{most}: the most attempts one item made in the data"


def _backoff(observed: Observed) -> tuple[Backoff, str]:
    """The twin's backoff from the gaps before retries, and a sentence ("" when none seen)."""
    if observed.retry_gaps_s is None or not observed.retry_gaps_s.size:
        return Backoff(), ""
    gaps, numbers = observed.retry_gaps_s, observed.retry_numbers
    first = gaps[numbers == 1]
    base = float(np.median(first)) if first.size else float(np.median(gaps))
    second = gaps[numbers == 2]
    # Medians: a retry that waited in the queue after its backoff lengthens its gap.
    if base > 0 and second.size >= _MIN_SECOND_RETRIES and np.median(second) >= 1.5 * base:
        factor = float(np.median(second)) / base
        cap = max(Backoff().cap_s, float(gaps.max()))
        backoff = Backoff(kind="exponential", base_s=base, factor=factor, cap_s=cap)
        return backoff, (
            f"backoff exponential from {base:.4g} s by {factor:.3g} per retry: the median gaps "
            f"before {first.size} first and {second.size} second retries"
        )
    return Backoff.constant(base), (
        f"backoff constant {base:.4g} s: the median gap before {gaps.size} retries"
    )


def _targets(observed: Observed) -> dict[str, float]:
    """The recorded response times' mean and quantiles, seconds."""
    if observed.service_s is not None:
        return response_statistics(observed.service_s)
    return quantile_targets(observed.mean_service_s, observed.quantiles_s or {})
