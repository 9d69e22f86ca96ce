"""Record, calibrate, predict, verify: the ingestion and its digital twin.

:func:`run_loop` does the whole loop on one machine:

1. starts the partner API (a child process on loopback) and records a real
   baseline ingestion into the database (a file in a temporary folder unless
   a path or a DSN is given);
2. fits the twin to the recording (:func:`~pipeline.sim.calibrate`);
3. applies a what-if to the twin and simulates it, ``replications`` times;
4. makes the same change for real and measures it (``repeats`` times);
5. compares predicted and measured throughput, p95 latency and peak queue.

What-ifs (:class:`WhatIf`): ``concurrency=N`` gives the write stage N
workers (the twin gives it ``min(N, writers)`` servers: the database's real
concurrency, 1 for SQLite); ``api_latency=F`` makes the partner answer in F
times its time (the twin subtracts ``(1 - F)`` times the partner's mean
``Server-Timing`` from each fetch: what the client spends itself does not
change).

Intervals: the twin's ``predicted`` interval is the range in which the mean
of ``repeats`` real runs should fall with 95% probability if the twin is
right (a prediction interval from the replications' spread: ``mean +- t *
s * sqrt(1/repeats + 1/replications)``); the ``measured`` interval is the
t interval of the real runs' mean (null for one run). Both are cut to the
metric's range (:func:`~pipeline._units.metric_range`): a peak queue's
interval never reaches below 0. A metric *agrees* when
the measured value is within the prediction interval widened by
``tolerance`` (a share of the predicted value) for what no twin models: a
loaded machine, connection set-up, the GIL.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..._units import metric_range
from ...sim.analysis.sweep import simulate_replication
from ...sim.calibration.recorded import calibrate
from ...sim.calibration.records import Calibration
from ...sim.stats.intervals import MeanCI
from ...sim.stats.tdist import t_quantile
from ...sim.workloads.distributions import Empirical
from .chain import IngestConfig
from .record import METRICS, Recording, record_run
from .server import PartnerConfig, PartnerProcess

__all__ = [
    "WhatIf",
    "apply_to_config",
    "apply_to_twin",
    "compare",
    "default_what_if",
    "predict",
    "run_loop",
]

MAX_RECORDS = 1_000_000
MAX_CONCURRENCY = 10_000


@dataclass(frozen=True)
class WhatIf:
    """A change to try: write workers, or the partner's speed.

    Attributes:
        concurrency: the write stage's workers, or None to keep them.
        api_latency: factor on the partner's latency (0.5 halves it), or None.
    """

    concurrency: int | None = None
    api_latency: float | None = None

    def __post_init__(self) -> None:
        if self.concurrency is not None and (
            isinstance(self.concurrency, bool)
            or not isinstance(self.concurrency, int)
            or not 1 <= self.concurrency <= MAX_CONCURRENCY
        ):
            raise ValueError(
                f"what-if concurrency must be an integer from 1 to {MAX_CONCURRENCY}, "
                f"got {self.concurrency!r}"
            )
        if self.api_latency is not None and not (
            isinstance(self.api_latency, int | float)
            and not isinstance(self.api_latency, bool)
            and 0 < self.api_latency <= 100
        ):
            raise ValueError(
                f"what-if api_latency must be a factor > 0 and <= 100, got {self.api_latency!r}"
            )

    @classmethod
    def parse(cls, specs: Sequence[str]) -> WhatIf:
        """From ``["concurrency=40", "api_latency=0.5"]``; ValueError naming a bad one."""
        fields: dict[str, Any] = {}
        for spec in specs:
            name, sep, value = spec.partition("=")
            name = name.strip()
            if not sep or name not in ("concurrency", "api_latency"):
                raise ValueError(
                    f"--what-if must be concurrency=N or api_latency=FACTOR, got {spec!r}"
                )
            try:
                fields[name] = int(value) if name == "concurrency" else float(value)
            except ValueError:
                kind = "an integer" if name == "concurrency" else "a number"
                raise ValueError(f"--what-if {name} must be {kind}, got {value!r}") from None
        return cls(**fields)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def __str__(self) -> str:
        return ", ".join(f"{k}={v:g}" for k, v in self.to_dict().items()) or "no change"


def default_what_if(config: IngestConfig) -> WhatIf:
    """The what-if tried when none is asked for: double the write workers, at most 10,000."""
    return WhatIf(concurrency=min(2 * config.write.concurrency, MAX_CONCURRENCY))


def apply_to_config(config: IngestConfig, what_if: WhatIf) -> IngestConfig:
    """The ingestion configured with the what-if's write workers."""
    if what_if.concurrency is None:
        return config
    write = dataclasses.replace(config.write, concurrency=what_if.concurrency)
    return dataclasses.replace(config, write=write)


def apply_to_twin(fit: Calibration, recording: Recording, what_if: WhatIf) -> Any:
    """The calibrated scenario with the what-if applied."""
    stages = []
    for spec in fit.scenario.stages:
        if spec.name == "write" and what_if.concurrency is not None:
            servers = min(what_if.concurrency, recording.writers)
            config = dataclasses.replace(spec.config, concurrency=servers)
            spec = dataclasses.replace(spec, config=config)
        if spec.name == "fetch" and what_if.api_latency is not None:
            spent = recording.run.server_s_mean
            saved = (1.0 - what_if.api_latency) * (spent if math.isfinite(spent) else 0.0)
            service = recording.trace.stages["fetch"].service_s()
            spec = dataclasses.replace(
                spec, service=Empirical(tuple(np.maximum(service - saved, 0.0).tolist()))
            )
        stages.append(spec)
    return fit.scenario.replace(stages=stages)


def _prediction_interval(values: np.ndarray, repeats: int, key: str) -> tuple[float, float, float]:
    """Mean and 95% prediction interval, cut to the metric's range (no negative depth)."""
    mean = float(values.mean())
    if values.size < 2:
        return mean, math.nan, math.nan
    half = t_quantile(0.975, values.size - 1) * float(values.std(ddof=1))
    half *= math.sqrt(1.0 / repeats + 1.0 / values.size)
    low, high = MeanCI(mean, half).within(*metric_range(key))
    return mean, low, high


def predict(scenario: Any, *, replications: int = 20, repeats: int = 1) -> dict[str, Any]:
    """The twin's prediction of :data:`METRICS` for the mean of ``repeats`` real runs.

    The replications run one at a time, each dropped once its three numbers are
    read (``simulate(scenario, replications=R).results[r]`` gives the same), so
    the twin holds one run's items at a time, not ``replications`` runs' worth.
    """
    per_run: dict[str, list[float]] = {key: [] for key in METRICS}
    for replication in range(replications):
        run = simulate_replication(scenario, replication)
        per_run["throughput_per_s"].append(run.summary["throughput_per_s"])
        per_run["latency_p95_s"].append(run.summary["latency_p95_s"])
        per_run["queue_depth_max"].append(run.stages["write"].summary["queue_depth_max"])
        del run
    predicted: dict[str, Any] = {"replications": replications}
    for key in METRICS:
        mean, low, high = _prediction_interval(np.asarray(per_run[key], float), repeats, key)
        predicted[key] = mean
        predicted[f"{key}_interval"] = [_finite(low), _finite(high)]
    return predicted


def _measured(recordings: Sequence[Recording]) -> dict[str, Any]:
    measured: dict[str, Any] = {"repeats": len(recordings)}
    for key in METRICS:
        values = np.array([r.measured[key] for r in recordings], dtype=float)
        mean = float(values.mean())
        measured[key] = mean
        if values.size >= 2:
            half = t_quantile(0.975, values.size - 1) * float(values.std(ddof=1))
            half /= math.sqrt(values.size)
            measured[f"{key}_interval"] = list(MeanCI(mean, half).within(*metric_range(key)))
        else:
            measured[f"{key}_interval"] = None
    return measured


def compare(measured: dict[str, Any], predicted: dict[str, Any], *, tolerance: float) -> dict:
    """Per metric: both values, the relative error, and whether they agree."""
    out = {}
    for key in METRICS:
        m, p = measured[key], predicted[key]
        low, high = predicted[f"{key}_interval"]
        low = p if low is None else low
        high = p if high is None else high
        slack = tolerance * abs(p)
        out[key] = {
            "measured": m,
            "predicted": p,
            "relative_error": (m - p) / p if p else math.nan,
            "within_interval": bool(low <= m <= high),
            "agrees": bool(low - slack <= m <= high + slack),
        }
    return out


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become null."""
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


async def run_loop(
    records: int,
    what_if: WhatIf | None = None,
    *,
    partner: PartnerConfig | None = None,
    config: IngestConfig | None = None,
    database: str | os.PathLike[str] | None = None,
    replications: int = 20,
    repeats: int = 1,
    tolerance: float = 0.25,
    seed: int = 1,
    on_sample: Callable[[list[dict[str, Any]]], None] | None = None,
    stop_on_sigterm: bool = False,
    twin: bool = True,
    serve_metrics: Callable[[Any], Any] | None = None,
) -> dict[str, Any]:
    """The whole loop: record a baseline, calibrate, predict the what-if, verify it for real.

    Args:
        records: records the partner lists (1 to 1,000,000).
        what_if: the change to predict and verify (None: :func:`default_what_if`).
            Only with ``twin``: without it no what-if runs.
        partner: the partner's behaviour (its ``records`` is replaced by ``records``).
        config: the baseline ingestion.
        database: an SQLite path or a ``postgresql://`` DSN; default: a file in a
            temporary folder, removed afterwards.
        replications: simulated runs per prediction (>= 2).
        repeats: real runs of the what-if (>= 1).
        tolerance: share of the predicted value allowed beyond the interval.
        seed: the twin's seed.
        on_sample: live samples of each real run (a plot).
        stop_on_sigterm: SIGTERM, at any phase, ends the loop: a running
            ingestion drains, fitting and predicting stop, and the result so far
            comes back with ``"ended": "SIGTERM"`` (main thread only).
        twin: False runs the baseline ingestion only.
        serve_metrics: serves each real run's chain while it runs (see
            :func:`~pipeline.examples.ingest.chain.ingest`): the baseline, then
            each repeat of the what-if, one after the other.

    Returns:
        One JSON-ready dict: ``measured``, ``predicted``, ``comparison``,
        ``baseline``, ``calibration``, ``accounting`` and more. Without the
        twin (or when the baseline did not end ``"done"``), only ``measured``
        and ``accounting``; ``what_if`` is there only with the twin.

    Raises:
        ValueError: a bad argument, or a ``what_if`` with ``twin=False``.

    The partner process is stopped and the temporary folder removed whatever
    happens (an error, a cancel, SIGTERM).
    """
    if isinstance(records, bool) or not isinstance(records, int) or not 1 <= records <= MAX_RECORDS:
        raise ValueError(f"records must be an integer from 1 to {MAX_RECORDS:,}, got {records!r}")
    if isinstance(replications, bool) or not isinstance(replications, int) or replications < 2:
        raise ValueError(f"replications must be an integer >= 2, got {replications!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= 100:
        raise ValueError(f"repeats must be an integer from 1 to 100, got {repeats!r}")
    if not (isinstance(tolerance, int | float) and 0 <= tolerance < math.inf):
        raise ValueError(f"tolerance must be a finite share >= 0, got {tolerance!r}")
    if what_if is not None and not isinstance(what_if, WhatIf):
        raise TypeError(f"what_if must be a WhatIf or None, got {what_if!r}")
    if what_if is not None and not twin:
        raise ValueError(f"what_if needs the twin (twin=True), got {what_if} with twin=False")
    config = config or IngestConfig()
    if twin and what_if is None:
        what_if = default_what_if(config)
    partner = dataclasses.replace(
        partner or PartnerConfig(), records=records, page_size=config.page_size
    )
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    signalled: list[str] = []

    def on_sigterm() -> None:
        signalled.append("SIGTERM")
        stopping.set()

    if stop_on_sigterm:
        # One handler for the whole loop, not one per ingestion: between two phases
        # SIGTERM would otherwise meet the default action and kill the process.
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        return await _run_loop(
            records,
            what_if,
            partner=partner,
            config=config,
            database=database,
            replications=replications,
            repeats=repeats,
            tolerance=tolerance,
            seed=seed,
            on_sample=on_sample,
            twin=twin,
            serve_metrics=serve_metrics,
            stopping=stopping,
            signalled=signalled,
        )
    finally:
        if stop_on_sigterm:
            loop.remove_signal_handler(signal.SIGTERM)


async def _off_loop(stopping: asyncio.Event, function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` on a daemon thread, or ``_STOPPED`` once ``stopping`` is set.

    Fitting and simulating are long computations: on the loop's thread they would
    hold off the SIGTERM handler until they end. On a daemon thread the loop stays
    free to stop, and a computation left behind ends with the process.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            (future.set_result if ok else future.set_exception)(value)

    def work() -> None:
        try:
            value = function(*args)
        except BaseException as error:  # handed to the awaiting task, raised there
            loop.call_soon_threadsafe(settle, False, error)
        else:
            loop.call_soon_threadsafe(settle, True, value)

    threading.Thread(target=work, name="ingest-twin", daemon=True).start()
    waiter = loop.create_task(stopping.wait())
    try:
        await asyncio.wait([future, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if future.done():
        return future.result()
    future.cancel()
    return _STOPPED


_STOPPED = object()


async def _run_loop(
    records: int,
    what_if: WhatIf | None,
    *,
    partner: PartnerConfig,
    config: IngestConfig,
    database: str | os.PathLike[str] | None,
    replications: int,
    repeats: int,
    tolerance: float,
    seed: int,
    on_sample: Callable[[list[dict[str, Any]]], None] | None,
    twin: bool,
    serve_metrics: Callable[[Any], Any] | None,
    stopping: asyncio.Event,
    signalled: list[str],
) -> dict[str, Any]:
    began = time.perf_counter()

    def ended(recording: Recording) -> str:
        # A stop that came from the signal says so, whichever phase it met.
        if signalled and recording.run.ended == "stopped":
            recording.run.ended = signalled[0]
        return recording.run.ended

    with contextlib.ExitStack() as stack:
        if database is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="ingest-"))
            database = Path(folder) / "records.sqlite"
        server = stack.enter_context(PartnerProcess(partner))
        options: dict[str, Any] = {
            "on_sample": on_sample,
            "stop_event": stopping,
            "serve_metrics": serve_metrics,
        }
        baseline = await record_run(server.url, database, config, trace=twin, **options)
        result: dict[str, Any] = {
            "records": records,
            **({"what_if": what_if.to_dict()} if twin and what_if is not None else {}),
            "database": "postgres" if "://" in str(database) else "sqlite",
            "writers": baseline.writers,
            "ended": ended(baseline),
            "accounting": baseline.run.accounting(),
        }

        def cut_short() -> dict[str, Any]:
            result["measured"] = baseline.measured
            if signalled:
                result["ended"] = signalled[0]
            result["wall_time_s"] = time.perf_counter() - began
            return _clean(result)

        if not twin or baseline.run.ended != "done" or stopping.is_set():
            return cut_short()

        def fit_and_predict() -> tuple[Calibration, dict, dict]:
            fit = calibrate(baseline.trace, seed=seed)
            base_twin = predict(fit.scenario, replications=replications, repeats=1)
            scenario = apply_to_twin(fit, baseline, what_if)
            predicted = predict(scenario, replications=replications, repeats=repeats)
            return fit, base_twin, predicted

        fitted = await _off_loop(stopping, fit_and_predict)
        if fitted is _STOPPED:
            return cut_short()
        fit, base_twin, predicted = fitted
        if what_if.api_latency is not None:
            server.stop()
            server = stack.enter_context(PartnerProcess(partner.scaled(what_if.api_latency)))
        changed = apply_to_config(config, what_if)
        runs = []
        for _ in range(repeats):
            if stopping.is_set():
                break
            runs.append(await record_run(server.url, database, changed, trace=False, **options))
            if ended(runs[-1]) != "done":
                break
        if not runs or signalled:
            # A what-if run that SIGTERM cut short measures a drain, not the what-if:
            # it is accounted for, never compared with the prediction.
            result["accounting_what_if"] = [r.run.accounting() for r in runs]
            return cut_short()
        measured = _measured(runs)
        result.update(
            measured=measured,
            predicted=predicted,
            comparison=compare(measured, predicted, tolerance=tolerance),
            tolerance=tolerance,
            baseline={
                "measured": baseline.measured,
                "predicted": base_twin,
                "comparison": compare(_measured([baseline]), base_twin, tolerance=tolerance),
            },
            calibration=fit.to_dict(),
            accounting_what_if=[r.run.accounting() for r in runs],
            ended=signalled[0] if signalled else runs[-1].run.ended,
            wall_time_s=time.perf_counter() - began,
        )
        return _clean(result)
