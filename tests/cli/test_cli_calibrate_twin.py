"""``calibrate`` then ``simulate``: the twin predicts what the recorded service did.

Each load or tracing tool's file is written from a simulated service of known
truth, request by request as the tool records it (the readers' own tests check
the files line by line), then calibrated and simulated from its ``--out``:

- **attempts**: k6, Locust and server spans record each request once, so the
  twin must not retry a failed one (``max_attempts = 1``); the engine's own
  spans show its retries, and the twin keeps them;
- **queueing**: a load test's response times hold the wait for a worker; on
  four workers at 60% busy the twin must take it out of the service time, not
  queue it a second time, and predict the service at a higher rate.
"""

from __future__ import annotations

import functools
import json
import math
import tomllib
from statistics import NormalDist

import numpy as np
import pytest

from pipeline import Backoff
from pipeline.sim import Scenario, simulate
from pipeline.sim.calibration.response import ResponseFitWarning
from pipeline.sim.calibration.telemetry import calibrate_observed
from pipeline.sim.workloads.telemetry.observed import Observed
from tests.cli.test_cli_calibrate_formats import k6_file, locust_file
from tests.sim.workloads.telemetry import known, test_otlp

WORKERS, RATE, MEAN = known.QUEUED_WORKERS, known.QUEUED_RATE, known.QUEUED_MEAN
Z = NormalDist().inv_cdf(1 - 0.001 / 2)  # each check fails by chance once in a thousand
LONG = 200_000  # items of a long run: its p95 is the truth to 1%
WHAT_IF_FACTOR = 1.3  # the what-if's arrival rate over the recorded one
AGREEMENT = 0.25  # the twin's p95 against the truth's, relative
_truth = known.queued_scenario
requests = known.requests


def server_spans_file(folder, run):
    spans = test_otlp.server_spans(run)
    return test_otlp.write(folder / "spans.json", test_otlp.export_lines(spans, run.end_ns))


CLIENTS = [
    ("k6", k6_file, ()),
    ("locust", locust_file, ()),
    ("otlp", server_spans_file, ("--span-name", "GET /orders")),
]


def _calibrate(run_main, folder, format, path, extra, *flags):
    out = folder / "twin.toml"
    status, text, err = run_main(
        "calibrate", path, "--format", format, *extra, *flags, "--json", "--out", out
    )
    assert status == 0, err
    return json.loads(text), out


def _p95(run_main, scenario_file, *flags) -> float:
    status, text, err = run_main("simulate", scenario_file, *flags, "--engine", "kernel", "--json")
    assert status == 0, err
    return json.loads(text)["latency_p95_s"]


def _long_p95(scenario: Scenario) -> float:
    columns = simulate(scenario, engine="kernel").columns
    ended = np.isin(columns.outcome, (0, 1))
    return float(np.quantile((columns.finish_s - columns.arrival_s)[ended], 0.95))


@functools.cache
def _truth_p95(factor: float) -> float:
    """The truth's long-run p95 at ``factor`` times the recorded rate: the same run for
    every format, so simulated once for the module."""
    return _long_p95(_truth(RATE * factor, n_items=LONG, seed=11))


@pytest.mark.parametrize(("format", "writer", "extra"), CLIENTS, ids=[c[0] for c in CLIENTS])
def test_each_recorded_request_is_one_attempt(run_main, tmp_path, format, writer, extra):
    """No queueing (64 workers): the twin's p95 is the requests' own, not inflated by retries."""
    run = known.run(n_items=3000, seed=5)  # 5% of attempts fail; each attempt a request
    fitted, out = _calibrate(run_main, tmp_path, format, writer(tmp_path, run), extra,
                             "--concurrency", "64")  # fmt: skip
    recorded = np.quantile(run.duration_ns / 1e9, 0.95)
    # The recorded p95 and the fitted one are each within Z standard deviations of the
    # truth's (the sample p95's, from the known log-normal's density); the twin's long run
    # adds a twentieth of that variance.
    sd = known.p95_sd(run.item.size)
    slack = 0.002 if format == "locust" else 0.0  # Locust rounds its percentiles
    items = str(20 * run.item.size)
    predicted = _p95(run_main, out, "--items", items)
    assert abs(predicted - recorded) <= Z * sd * 2 + slack, (predicted, recorded)
    assert fitted["max_attempts"] == 1
    assert fitted["attempts"]["how"].startswith("1: each recorded request is one attempt")
    assert tomllib.loads(out.read_text())["max_attempts"] == 1


def _p95_interval(latencies: np.ndarray) -> tuple[float, float]:
    """Where the sample's p95 and a fitted twin's each lie, at Z: ranks n p +- 2 Z sqrt(n p q).

    Distribution-free (order statistics); twice the sample's own width, since the twin's
    parameters carry an error of their own from the same sample.
    """
    x = np.sort(latencies)
    half = 2 * Z * math.sqrt(x.size * 0.95 * 0.05)
    lo, hi = math.floor(0.95 * x.size - half), math.ceil(0.95 * x.size + half)
    return float(x[max(lo, 0)]), float(x[min(hi, x.size - 1)])


RETRIES = [
    ("none", 0.05, known.BACKOFF, 1),
    ("constant", 0.05, known.BACKOFF, 3),
    ("exponential", 0.3, Backoff(kind="exponential", base_s=0.05, factor=3.0), 3),
]


@pytest.mark.parametrize(("kind", "p_fail", "backoff", "max_attempts"), RETRIES,
                         ids=[r[0] for r in RETRIES])  # fmt: skip
def test_the_engines_spans_give_the_attempts_and_backoff_they_show(
    run_main, tmp_path, kind, p_fail, backoff, max_attempts
):
    """Spans of the engine's own attempts: retries seen are kept with their backoff."""
    run = known.run(n_items=3000, seed=5, p_fail=p_fail, backoff=backoff)
    if kind == "none":  # the same service, had nothing been retried: first attempts only
        keep = run.first
        run = known.Run(run.arrival_ns, np.arange(int(keep.sum())), run.first[keep],
                        run.start_ns[keep], run.end_ns[keep], run.failed[keep])  # fmt: skip
    path = test_otlp.write(
        tmp_path / "spans.json",
        test_otlp.export_lines(test_otlp.pipeline_spans(run), run.end_ns),
    )
    fitted, out = _calibrate(run_main, tmp_path, "otlp", path, (), "--concurrency", "64")
    last_end = np.zeros(run.arrival_ns.size, dtype=np.int64)
    np.maximum.at(last_end, run.item, run.end_ns)
    lo, hi = _p95_interval((last_end - run.arrival_ns) / 1e9)
    predicted = _p95(run_main, out, "--items", "200000")
    assert lo <= predicted <= hi, (predicted, lo, hi)
    assert fitted["max_attempts"] == max_attempts
    assert fitted["service_fit"] == "service_times"
    written = tomllib.loads(out.read_text())
    assert written["max_attempts"] == max_attempts
    assert written["backoff"].startswith(kind if kind != "none" else "exponential")


def test_without_the_worker_count_response_times_are_refused(run_main, tmp_path):
    run = requests(_truth(n_items=500, seed=1))
    status, _, err = run_main("calibrate", k6_file(tmp_path, run), "--format", "k6")
    assert status == 2
    assert "response times" in err and "--concurrency N" in err
    assert len(err.strip().splitlines()) == 1


def _batch_se(values: np.ndarray, batches: int = 30) -> float:
    """Standard error of the mean by batch means: the queue makes neighbours alike."""
    means = np.array([b.mean() for b in np.array_split(values, batches)])
    return float(means.std(ddof=1) / math.sqrt(batches))


@pytest.mark.parametrize(
    ("format", "writer", "extra"),
    # Each format's recording and fit: 1-2 s of a core; the others run in make test only.
    [pytest.param(*c, id=c[0], marks=() if c[0] == "k6" else pytest.mark.slow) for c in CLIENTS],
)
def test_queueing_in_response_times_is_not_counted_twice(run_main, tmp_path, format, writer, extra):
    run = requests(_truth(n_items=10_000, seed=3))
    fitted, out = _calibrate(run_main, tmp_path, format, writer(tmp_path, run), extra,
                             "--concurrency", str(WORKERS))  # fmt: skip
    # The response time's mean is the service's plus the wait, which grows faster than the
    # service: the fitted service mean is off by less than the recorded mean is (batch means,
    # the queue's correlation included), plus the twin's own run of 4x the items.
    response = (run.end_ns - run.start_ns) / 1e9
    slack = 0.001 if format == "locust" else 0.0  # Locust's mean of whole milliseconds
    tolerance = Z * _batch_se(response) * math.sqrt(1 + 1 / 4) + slack
    assert abs(fitted["service_mean_s"] - MEAN) <= tolerance, fitted["service_mean_s"]
    # The twin then predicts the service at its recorded rate and at 30% more (78% busy).
    items = str(LONG)
    for factor in (1.0, WHAT_IF_FACTOR):
        truth = _truth_p95(factor)
        arrivals = f"poisson:rate={fitted['arrival_rate_per_s'] * factor!r}"
        predicted = _p95(run_main, out, "--items", items, "--arrivals", arrivals)
        assert abs(predicted / truth - 1) <= AGREEMENT, (factor, predicted, truth)
    assert fitted["service_fit"] == "response_times_deconvolved"
    assert fitted["max_attempts"] == 1
    assert "reproduces the recorded response times" in fitted["service"]["how"]


def test_the_fit_reproduces_what_it_was_given():
    """On the Python side: the twin's statistics agree with the recorded ones it was fitted to."""
    run = requests(_truth(n_items=5000, seed=2))
    response = (run.end_ns - run.start_ns) / 1e9
    observed = Observed(
        source="test", arrivals_s=(run.start_ns - run.start_ns[0]) / 1e9, service_s=response,
        attempts=response.size, failed=int(run.failed.sum()), max_attempts=1,
        response_times=True,
    )  # fmt: skip
    fit = calibrate_observed(observed, concurrency=WORKERS)
    assert fit.service_fit == "response_times_deconvolved"
    assert fit.scenario.config.max_attempts == 1
    assert fit.response_fit is not None and fit.response_fit.worst_error < 0.05
    assert fit.to_dict()["service_mean_s"] == fit.scenario.service.mean


def test_response_times_of_zero_are_one_line_naming_the_file(run_main, tmp_path):
    run = requests(_truth(n_items=200, seed=1))
    run = known.Run(run.arrival_ns, run.item, run.first, run.start_ns, run.start_ns, run.failed)
    path = k6_file(tmp_path, run)
    status, _, err = run_main("calibrate", path, "--format", "k6", "--concurrency", "4",
                              "--out", tmp_path / "twin.toml")  # fmt: skip
    assert status == 2
    assert err.startswith(f"pipeline: error: k6 {path}: the response times give no service")
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "twin.toml").exists()


@pytest.mark.slow  # a fit and its runs: 2 s of a core
def test_response_times_the_twin_cannot_reproduce_are_warned_about():
    """Hours-long responses to requests 0.1 s apart: no service on 4 workers gives them."""
    n = 200
    observed = Observed(
        source="test", arrivals_s=np.arange(n) * 0.1, service_s=np.full(n, 3600.0),
        attempts=n, failed=0, max_attempts=1, response_times=True,
    )  # fmt: skip
    with pytest.warns(ResponseFitWarning, match=r"cannot reproduce the recorded response times"):
        calibrate_observed(observed, concurrency=WORKERS)


@pytest.mark.slow
def test_the_service_fitted_through_the_twin_is_unbiased_over_many_seeds():
    """Twenty recordings with a queue: the fitted service means centre on the truth."""
    errors = []
    for seed in range(20):
        run = requests(_truth(n_items=3000, seed=100 + seed))
        response = (run.end_ns - run.start_ns) / 1e9
        observed = Observed(
            source="test", arrivals_s=(run.start_ns - run.start_ns[0]) / 1e9,
            service_s=response, attempts=response.size, failed=int(run.failed.sum()),
            max_attempts=1, response_times=True,
        )  # fmt: skip
        fit = calibrate_observed(observed, concurrency=WORKERS, seed=seed)
        errors.append(fit.service.mean_s - MEAN)
    errors = np.asarray(errors)
    t = 3.883  # Student's t at 19 degrees of freedom, two-sided 0.999
    assert abs(errors.mean()) <= t * errors.std(ddof=1) / math.sqrt(errors.size), errors


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_attempts": 0}, r"max_attempts must be >= 1, got 0"),
        ({"max_attempts": 2.5}, r"max_attempts must be a whole number"),
        ({"retry_gaps_s": [0.1]}, r"retry_gaps_s and retry_numbers go together"),
        ({"retry_gaps_s": [-0.1], "retry_numbers": [1]}, r"retry_gaps_s must be >= 0"),
        ({"retry_gaps_s": [math.nan], "retry_numbers": [1]}, r"retry_gaps_s must be finite"),
        ({"retry_gaps_s": [0.1], "retry_numbers": [0]}, r"retry_numbers must be > 0"),
        ({"retry_gaps_s": [0.1], "retry_numbers": [1.5]}, r"one whole number >= 1 per retry"),
        ({"retry_gaps_s": [0.1, 0.2], "retry_numbers": [1]}, r"one whole number >= 1 per retry"),
        ({"response_times": "yes"}, r"response_times must be True or False"),
    ],
)
def test_what_a_reader_says_of_attempts_is_checked(fields, message):
    with pytest.raises(ValueError, match=message):
        Observed(source="test", **fields)
