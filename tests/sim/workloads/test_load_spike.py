"""LoadSpike multiplies a Poisson rate exactly: window counts over many seeds are Poisson
with the spiked mean (a z-test on the total and a dispersion test, each at the 99.9% level)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pipeline.sim import LoadSpike, Poisson, Scenario, TimeVarying, simulate
from pipeline.sim.stats.chisquare import dispersion_test
from pipeline.sim.workloads.distributions import Constant
from pipeline.sim.workloads.downstream import Downstream
from pipeline.sim.workloads.spikes import spiked_times

SEEDS = 400
Z_999 = 3.2905  # two-sided 99.9% normal quantile
EDGES = [0.0, 10.0, 15.0, 20.0, 25.0, 30.0]


def _counts(process, spikes, duration_s=30.0):
    rows = []
    for seed in range(SEEDS):
        times = spiked_times(process, spikes, np.random.default_rng(seed), duration_s=duration_s)
        assert np.all(np.diff(times) >= 0) and (len(times) == 0 or times[-1] <= duration_s)
        rows.append(np.histogram(times, bins=EDGES)[0])
    return np.array(rows)


def _check(counts, means):
    for column, mean in enumerate(means):
        total = counts[:, column].sum()
        # The sum of SEEDS independent Poisson(mean) counts is Poisson(SEEDS x mean).
        z = (total - SEEDS * mean) / math.sqrt(SEEDS * mean)
        assert abs(z) < Z_999, (column, total, SEEDS * mean, z)
        assert dispersion_test(counts[:, column]).p_value > 0.001, column


@pytest.mark.parametrize("factor", [3.0, 0.4])
def test_a_spike_on_poisson_arrivals_multiplies_the_windows_mean(factor):
    # Rate 5/s; a spike on [10, 20): windows [0,10) [10,15) [15,20) [20,25) [25,30).
    counts = _counts(Poisson(rate=5.0), [LoadSpike(at_s=10.0, for_s=10.0, factor=factor)])
    _check(counts, [50.0, 25.0 * factor, 25.0 * factor, 25.0, 25.0])


def test_overlapping_spikes_multiply():
    # x2 on [10, 20) and x1.5 on [15, 25): x2, x3, x1.5 in the windows from 10 to 25.
    spikes = [LoadSpike(at_s=10.0, for_s=10.0, factor=2.0),
              LoadSpike(at_s=15.0, for_s=10.0, factor=1.5)]  # fmt: skip
    _check(_counts(Poisson(rate=4.0), spikes), [40.0, 40.0, 60.0, 30.0, 20.0])


def test_a_spike_on_time_varying_arrivals_multiplies_their_rate():
    # rate(t) = 2 + t/10: a window's mean is its integral, times the spike's factor.
    process = TimeVarying(lambda t: 2.0 + np.asarray(t) / 10.0, max_rate=5.0)

    def integral(a, b):
        return 2.0 * (b - a) + (b * b - a * a) / 20.0

    means = [integral(a, b) for a, b in itertools.pairwise(EDGES)]
    means[1] *= 2.5
    means[2] *= 2.5
    _check(_counts(process, [LoadSpike(at_s=10.0, for_s=10.0, factor=2.5)]), means)


def test_a_spike_by_count_gives_exactly_n_arrivals_from_the_spiked_process():
    spike = [LoadSpike(at_s=1.0, for_s=100.0, factor=0.1)]  # thinning: drawn again for more
    times = spiked_times(Poisson(rate=10.0), spike, np.random.default_rng(1), n=200)
    assert len(times) == 200 and np.all(np.diff(times) >= 0)
    # 10 per second up to 1 s, 1 per second after: the 200th arrival is near 1 + 190 s.
    assert 100.0 < times[-1] < 300.0
    assert len(spiked_times(Poisson(rate=1.0), spike, np.random.default_rng(1), n=0)) == 0


def test_a_scenario_with_a_spike_runs_the_spiked_arrivals():
    scenario = Scenario(arrivals=Poisson(rate=5.0), duration_s=30.0, seed=2,
                        faults=[LoadSpike(at_s=10.0, for_s=10.0, factor=3.0)],
                        downstream=Downstream(concurrency=50, service=Constant(0.01)))  # fmt: skip
    arrivals = simulate(scenario).items.arrival_s.to_numpy()
    inside = np.count_nonzero((arrivals >= 10) & (arrivals < 20))
    outside = len(arrivals) - inside
    assert inside > outside  # 150 expected against 100


def test_a_spike_no_run_could_hold_is_one_line():
    spike = [LoadSpike(at_s=0.0, for_s=10.0, factor=1e300)]
    with pytest.raises(ValueError, match=r"^a LoadSpike of factor 1e\+300 .*allowed: at most"):
        spiked_times(Poisson(rate=1.0), spike, np.random.default_rng(0), duration_s=20.0)
