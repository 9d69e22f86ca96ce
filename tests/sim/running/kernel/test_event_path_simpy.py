"""The kernel's event path and SimPy, on the same model with retries, give the same mean wait.

``bench/simpy_retry.py`` is the SimPy peer that ``bench/bench_events.py``
times: M/M/4 at rho 0.8, attempts failing independently with p = 0.1, three
attempts, exponential backoff with full jitter, the retry lane first. Its
random numbers are its own, so the two agree in distribution: for each of
five seeds the two mean waits (20,000 items each) must differ by less than
the 95% interval of their difference (batch means on each run, combined as
independent). A wrong retry rule on either side (no jitter, no retry lane,
retries at the back of the queue, a budget off by one) shifts the mean by
more than that. At most two of five may miss: with a 95% interval, three or
more misses have probability about 0.001.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

from pipeline.sim import simulate
from pipeline.sim.running.summary import BATCHES
from pipeline.sim.stats.intervals import batch_means_ci

_PATH = Path(__file__).resolve().parents[4] / "bench"
_SPEC = importlib.util.spec_from_file_location("simpy_retry", _PATH / "simpy_retry.py")
simpy_retry = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(simpy_retry)
_SPEC = importlib.util.spec_from_file_location("bench_events", _PATH / "bench_events.py")
bench_events = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench_events)

ITEMS = 20_000
SEEDS = range(5)


def test_the_event_path_and_simpy_agree_on_the_mean_wait_with_retries():
    misses = []
    for seed in SEEDS:
        result = simulate(bench_events.retry_scenario(ITEMS).replace(seed=seed))
        assert result.summary["engine"] == "kernel"
        assert result.summary["retries_total"] > 0.09 * ITEMS
        peer = simpy_retry.simpy_retry_model(ITEMS, seed=100 + seed)
        assert abs(peer["retried"] - result.summary["retries_total"]) < 0.02 * ITEMS
        ours = result.summary["wait_mean_s"]
        theirs = float(peer["waits"].mean())
        half = math.hypot(
            result.summary["wait_mean_ci95_s"],
            batch_means_ci(peer["waits"], n_batches=BATCHES).half_width,
        )
        if abs(ours - theirs) > half:
            misses.append((seed, ours, theirs, half))
    assert len(misses) <= 2, misses
