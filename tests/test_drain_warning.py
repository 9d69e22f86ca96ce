"""A run whose drain timed out says so: ``DrainTimeoutWarning`` from ``simulate()``."""

from __future__ import annotations

import warnings

import pytest

from pipeline import PipelineConfig
from pipeline.sim import DrainTimeoutWarning, Exponential, Poisson, Scenario, simulate

# Twice what 4 workers serve, into an unbounded queue: about 750 items are still queued when
# the arrivals end, far more than 30 seconds of work.
OVERLOADED = Scenario(
    arrivals=Poisson(rate=8.0),
    service=Exponential(mean=1.0),
    config=PipelineConfig(concurrency=4, queue_maxsize=None),
    n_items=1500,
    seed=2,
)


def test_a_timed_out_drain_warns_with_the_count_and_the_remedy():
    with pytest.warns(DrainTimeoutWarning) as caught:
        result = simulate(OVERLOADED)
    (warning,) = caught
    left = len(result.report.unfinished)
    assert result.summary["drain_timed_out"] and left == result.summary["items_unfinished"] > 0
    message = str(warning.message)
    assert f"{left:,} item(s) were left unfinished" in message
    assert "missing from the latency statistics" in message
    assert "drain_timeout_s=None" in message and "fewer items" in message
    assert warning.filename == __file__  # points at the caller of simulate()
    assert issubclass(DrainTimeoutWarning, UserWarning)


def test_replications_name_how_many_runs_timed_out():
    with pytest.warns(DrainTimeoutWarning, match=r"in 2 of 2 replications: [\d,]+ item\(s\)"):
        runs = simulate(OVERLOADED, replications=2, processes=1, progress=False)
    total = sum(len(r.report.unfinished) for r in runs.results)
    with pytest.warns(DrainTimeoutWarning, match=f"{total:,} item"):
        simulate(OVERLOADED, replications=2, processes=1, progress=False)


def test_a_drain_that_finishes_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = simulate(OVERLOADED.replace(drain_timeout_s=None))
        assert not result.summary["drain_timed_out"]
        assert result.summary["items_completed"] == 1500


def test_the_warning_can_be_silenced_on_purpose():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DrainTimeoutWarning)
        assert simulate(OVERLOADED).summary["drain_timed_out"]


def test_the_unfinished_tail_is_what_the_statistics_miss():
    # Why it matters: the items cut off are the latest, longest-waiting ones.
    with pytest.warns(DrainTimeoutWarning):
        cut = simulate(OVERLOADED)
    whole = simulate(OVERLOADED.replace(drain_timeout_s=None))
    assert cut.summary["latency_p99_s"] < whole.summary["latency_p99_s"]
    assert cut.summary["latency_mean_s"] < whole.summary["latency_mean_s"]
