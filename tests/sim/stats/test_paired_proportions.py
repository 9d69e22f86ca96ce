"""``paired_proportion_difference``: Newcombe's paired score interval, its coverage measured.

The pairs are drawn with a known difference of fractions (two correlated yes/no
outcomes per pair, thresholds of correlated normals), so whether each interval
covers the truth is exact; misses are then Binomial(TRIALS, 1 - LEVEL) at most.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from pipeline.sim.stats.proportions import paired_proportion_difference
from tests.sim.running.test_class_sim import allowed_misses

LEVEL = 0.95
TRIALS = 1000
FALSE_ALARM = 1e-3  # the chance this test fails when the interval covers at LEVEL


@pytest.mark.parametrize(
    "p_a, p_b, correlation, pairs",
    [(0.3, 0.7, 0.5, 20), (0.5, 0.6, 0.0, 8), (0.5, 0.5, 0.9, 20), (0.05, 0.95, 0.0, 20)],
)
def test_the_interval_covers_the_true_difference_at_its_level(p_a, p_b, correlation, pairs):
    rng = np.random.default_rng(20261206)
    cut_a, cut_b = NormalDist().inv_cdf(p_a), NormalDist().inv_cdf(p_b)
    misses = 0
    for _ in range(TRIALS):
        z = rng.standard_normal((pairs, 2))
        other = correlation * z[:, 0] + np.sqrt(1 - correlation**2) * z[:, 1]
        found = paired_proportion_difference(z[:, 0] < cut_a, other < cut_b, LEVEL)
        misses += not found.low <= p_b - p_a <= found.high
    assert misses <= allowed_misses(TRIALS, LEVEL, FALSE_ALARM), misses


def test_hand_counts():
    # 4 pairs, only b says yes in 2 of them: (2 - 0) / 4
    found = paired_proportion_difference([1, 0, 1, 0], [1, 1, 1, 1])
    assert found.estimate == 0.5 and -1 <= found.low < 0.5 < found.high <= 1
    # every pair agrees: a difference of 0, yet an interval of some width
    agree = paired_proportion_difference([0] * 4, [0] * 4)
    assert agree.estimate == 0 and agree.low < 0 < agree.high
    assert paired_proportion_difference([0] * 4, [1] * 4).high == 1.0


@pytest.mark.parametrize("a, b", [([], []), ([1], [1, 0])])
def test_unpaired_outcomes_are_refused(a, b):
    with pytest.raises(ValueError, match="must pair up"):
        paired_proportion_difference(a, b)
