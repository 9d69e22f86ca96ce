"""A long run's memory: what keeps 10 million items within 1 GB changes no result.

- the step series' columns that no event moves are left to the allocator's
  zeroed pages, and the FCFS path's streams are masks of its columns, not copies;
- the summary reads a long series a block of rows at a time (``summary._ROWS``)
  and partitions its waits in place;
- the FCFS path's ``attempts`` column is a read-only view (every item made one).

The blocks and windows are made tiny here, so short runs take every path; a
subprocess then bounds the peak RSS per item of a 1,000,000-item run.
``bench/bench_memory.py`` measures 1, 3 and 10 million.
"""

import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.events import EventKind
from pipeline.sim import (
    Exponential,
    IndependentFailures,
    LogNormal,
    Poisson,
    Scenario,
)
from pipeline.sim import simulate as _simulate
from pipeline.sim.running import recorder, summary
from pipeline.sim.stats.quantiles import percentiles

ROOT = Path(__file__).resolve().parents[3]

SCENARIOS = {
    "fcfs": Scenario(
        arrivals=Poisson(rate=3.5),
        service=LogNormal(mean=1.0, cv=1.2),
        config=PipelineConfig(concurrency=4, queue_maxsize=3),
        n_items=3000,
        seed=5,
    ),
    "fcfs, warm-up and a drain that times out": Scenario(
        arrivals=Poisson(rate=4.5),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=50, drain_timeout_s=3.0),
        n_items=2000,
        warmup_s=60.0,
        seed=2,
    ),
    "events: failures, dead letters, retries": Scenario(
        arrivals=Poisson(rate=3.0),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=5, max_attempts=2),
        failures=IndependentFailures(0.3),
        n_items=2000,
        seed=3,
    ),
    "reject, upstream never held": Scenario(
        arrivals=Poisson(rate=5.0),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=2, on_full="reject"),
        n_items=2000,
        seed=4,
    ),
    "initial backlog": Scenario(
        arrivals=Poisson(rate=2.0),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=10),
        n_items=1500,
        initial_backlog=300,
        seed=6,
    ),
}


def simulate(scenario):
    with warnings.catch_warnings():  # the drain that times out does so on purpose
        warnings.simplefilter("ignore")
        return _simulate(scenario)


def _same(got, want, rel):
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    if isinstance(want, float):
        return got == pytest.approx(want, rel=rel, abs=0.0)
    return got == want


@pytest.mark.parametrize("rows", [1, 3, 64, 1 << 18])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_summary_read_in_blocks_is_the_same(monkeypatch, name, rows):
    result = simulate(SCENARIOS[name])
    want = dict(result.summary)
    monkeypatch.setattr(summary, "_ROWS", rows)
    got = summary.summarise(result)
    assert got.keys() == want.keys()
    single_block = rows >= len(result.series.time_s)
    for key in want:
        # One block is the very computation it was; blocks move a sum by rounding only.
        assert _same(got[key], want[key], 0.0 if single_block else 1e-12), (key, got[key])
        assert type(got[key]) is type(want[key]), key
    s = result.series
    start = max(SCENARIOS[name].warmup_s, float(s.time_s[0]))
    if s.end_s > start:
        for column in ("queue_depth", "in_flight"):
            exact = s.time_mean(getattr(s, column), SCENARIOS[name].warmup_s)
            key = "queue_depth_mean" if column == "queue_depth" else "utilisation"
            scale = 1 if column == "queue_depth" else SCENARIOS[name].config.concurrency
            assert got[key] * scale == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_summary_matches_the_series_own_statistics(name):
    result = simulate(SCENARIOS[name])
    s, warm = result.series, SCENARIOS[name].warmup_s
    got = result.summary
    assert got["queue_depth_max"] == int(s.time_max(s.queue_depth, warm))
    assert got["upstream_backlog_max"] == int(s.time_max(s.upstream_backlog, warm))
    held = s.time_max(s.in_system + s.dead_letters, warm)
    assert got["memory_peak_bytes"] == int(held) * SCENARIOS[name].item_size_bytes
    if s.end_s > max(warm, float(s.time_s[0])):
        assert got["in_system_mean"] == s.time_mean(s.in_system, warm)


@pytest.mark.parametrize("window", [1, 2, 7, 1 << 18])
def test_masked_streams_give_the_series_of_their_copies(monkeypatch, window):
    monkeypatch.setattr(recorder, "_WINDOW", window)
    rng = np.random.default_rng(8)
    arrival = np.sort(np.round(rng.uniform(0, 50, 400), 1))  # ties within and across streams
    start = np.sort(arrival + np.round(rng.exponential(1.0, 400), 1))
    finish = np.sort(start + 1.0)
    picked = rng.random(400) < 0.4
    copies = [
        ((recorder.ARRIVAL, EventKind.ADMITTED), arrival[picked]),
        (recorder.ARRIVAL, arrival[~picked]),
        (EventKind.ADMITTED, arrival[~picked]),
        (EventKind.STARTED, start),
        (EventKind.COMPLETED, finish),
    ]
    masked = [
        ((recorder.ARRIVAL, EventKind.ADMITTED), arrival, lambda lo, hi: picked[lo:hi]),
        (recorder.ARRIVAL, arrival, lambda lo, hi: ~picked[lo:hi]),
        (EventKind.ADMITTED, arrival, lambda lo, hi: ~picked[lo:hi]),
        (EventKind.STARTED, start, lambda lo, hi: np.ones(hi - lo, bool)),
        (EventKind.COMPLETED, finish),
        (EventKind.RETRY_SCHEDULED, start, lambda lo, hi: np.zeros(hi - lo, bool)),  # none
    ]
    want = recorder.stream_series(copies, 60.0)
    got = recorder.stream_series(masked, 60.0)
    for column in ("time_s", *recorder.StepSeries.COLUMNS):
        assert np.array_equal(getattr(got, column), getattr(want, column)), column
        assert getattr(got, column).dtype == getattr(want, column).dtype


def test_fcfs_attempts_are_a_read_only_column_of_ones():
    result = simulate(SCENARIOS["fcfs"])
    attempts = result.columns.attempts
    assert result.engine == "kernel" and attempts.dtype == np.int64
    assert len(attempts) == 3000 and (attempts == 1).all()
    with pytest.raises(ValueError, match="read-only"):
        attempts[0] = 2
    items = result.items  # a DataFrame of its own, writable
    assert (items["attempts"] == 1).all()
    items.loc[0, "attempts"] = 2
    assert attempts[0] == 1


@pytest.mark.parametrize("qs", [(95,), (50, 95, 99), (0, 100), (0.1,)])
@pytest.mark.parametrize("n", [1, 2, 17, 1000])
def test_percentiles_in_place_are_the_copys(qs, n):
    values = np.random.default_rng(n).lognormal(0, 1, n)
    want = percentiles(values, qs)
    assert want == np.percentile(values, qs).tolist()
    scratch = values.copy()
    assert percentiles(scratch, qs, overwrite=True) == want
    assert sorted(scratch.tolist()) == sorted(values.tolist())  # reordered, not changed
    with_nan = np.append(values, np.nan)
    assert all(math.isnan(v) for v in percentiles(with_nan, qs, overwrite=True))


PEAK = """
import json, resource, sys
import pipeline.sim  # numpy and the simulator loaded: what is measured is the run
from pipeline.cli import main
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
status = main(sys.argv[1:])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"status": status, "before_kib": before, "after_kib": after}))
"""


@pytest.mark.slow  # a million items in a process
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB on Linux")
def test_a_million_items_peak_far_below_what_they_did():
    # 10,000,000 items peak at 867 MiB (bench/bench_memory.py; 1,544 MiB before), about
    # 87 bytes per item above the imports. A million items cost more per item: their
    # 8 MB arrays are below glibc's mmap threshold, and the holes they leave in the heap
    # stay resident (about 117 bytes per item measured; 178 before these changes).
    n = 1_000_000
    done = subprocess.run(
        [sys.executable, "-c", PEAK, "simulate", "--arrivals", "poisson:rate=3.2",
         "--service", "exponential:mean=1.0", "--concurrency", "4", "--maxsize", "100",
         "--items", str(n), "--seed", "1", "--json"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    record, result = json.loads(lines[-1]), json.loads(lines[0])
    assert record["status"] == 0 and result["items_completed"] == n
    per_item = (record["after_kib"] - record["before_kib"]) * 1024 / n
    assert per_item <= 130, f"{per_item:.1f} bytes per item"
