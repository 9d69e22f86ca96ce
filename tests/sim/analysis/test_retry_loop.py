"""The timeout-and-retry loop's exact timeout probabilities against closed forms, their
Erlang-k convergence, Metafor's Chebyshev bound, and Metafor's chain with either."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from pipeline.sim.analysis.retry_loop import chebyshev_bound, metafor_chain, timeout_probability


def _poisson_cdf(x: Fraction, n: int) -> float:
    # P(Poisson(x) <= n - 1), summed as exact rationals times e^{-x}.
    total = sum(x**j / math.factorial(j) for j in range(n))
    return float(total) * math.exp(-float(x))


@pytest.mark.parametrize("ahead", [1, 2, 5, 20, 30, 60])
def test_the_deterministic_tail_is_the_poisson_cdf(ahead):
    exact = _poisson_cdf(Fraction(30), ahead)
    assert timeout_probability(ahead, mu=10.0, timeout_s=3.0) == pytest.approx(exact, rel=1e-12)


def test_the_erlang_race_in_closed_form():
    # One phase against one service: the timer (rate 1/T) first, (1/T) / (1/T + mu).
    assert timeout_probability(1, mu=10.0, timeout_s=3.0, k=1) == pytest.approx(
        (1 / 3) / (1 / 3 + 10.0), rel=1e-14
    )
    # Two phases before two services: q^2 (1 + 2p) with q = rate/(rate + mu), rate = 2/T.
    rate, mu = 2 / 3, 10.0
    q, p = rate / (rate + mu), mu / (rate + mu)
    assert timeout_probability(2, mu=mu, timeout_s=3.0, k=2) == pytest.approx(
        q * q * (1 + 2 * p), rel=1e-14
    )


def test_the_erlang_timeout_converges_to_the_deterministic_one():
    # The gap shrinks as 1/k (the timer's variance is T^2/k): 4x the phases, a quarter
    # of the gap, from k = 64 on; at k = 16384 it is 0.4% of the tail (0.0219).
    deterministic = timeout_probability(20, mu=10.0, timeout_s=3.0)
    gaps = [abs(timeout_probability(20, mu=10.0, timeout_s=3.0, k=k) - deterministic)
            for k in (4, 16, 64, 256, 1024, 4096, 16384)]  # fmt: skip
    assert gaps == sorted(gaps, reverse=True)
    for wider, narrower in itertools.pairwise(gaps[2:]):
        assert narrower == pytest.approx(wider / 4, rel=0.1)
    assert gaps[-1] < 0.005 * deterministic


def test_the_tail_is_stable_far_out():
    # 2,000 services against mu T = 30: the mass is all below; no overflow, no NaN.
    assert timeout_probability(2000, mu=10.0, timeout_s=3.0) == 1.0
    assert timeout_probability(0, mu=10.0, timeout_s=3.0) == 0.0
    assert 0.0 <= timeout_probability(3, mu=1e6, timeout_s=1e3) < 1e-300


def test_metafors_bound_against_the_exact_tail_on_its_example():
    # n = 20: m = 2 s, sigma = sqrt(20)/10 = 0.447 s, (0.447 / 1)^2 = 0.2.
    assert chebyshev_bound(20, mu=10.0, timeout_s=3.0) == pytest.approx(0.2, rel=1e-12)
    assert timeout_probability(20, mu=10.0, timeout_s=3.0) == pytest.approx(0.021873, rel=1e-4)
    # n = 25: T - m = 0.5 <= sigma = 0.5: the bound gives up (1) where the tail is 0.157.
    assert chebyshev_bound(25, mu=10.0, timeout_s=3.0) == 1.0
    assert timeout_probability(25, mu=10.0, timeout_s=3.0) == pytest.approx(0.157242, rel=1e-4)
    for n in range(1, 100):
        assert chebyshev_bound(n, mu=10.0, timeout_s=3.0) >= timeout_probability(
            n, mu=10.0, timeout_s=3.0
        )


def test_metafors_chain_on_its_example_sits_at_the_full_queue_with_either_tail():
    bound = metafor_chain(arrival_rate=9.5, mu=10.0, timeout_s=3.0, retries=4)
    exact = metafor_chain(arrival_rate=9.5, mu=10.0, timeout_s=3.0, retries=4, tail="exact")
    assert bound.queue_mean == pytest.approx(96.8631, rel=1e-5)
    assert bound.orbit_mean == pytest.approx(10.5821, rel=1e-5)
    assert exact.queue_mean == pytest.approx(bound.queue_mean, rel=1e-8)
    assert exact.orbit_mean == pytest.approx(bound.orbit_mean, rel=1e-8)


def test_metafors_chain_at_low_load_feels_the_bound():
    # At lambda = 5 the chain stays near empty, where the bound is far above the tail:
    # its orbit is four orders of magnitude larger with the bound.
    bound = metafor_chain(arrival_rate=5.0, mu=10.0, timeout_s=3.0, retries=4)
    exact = metafor_chain(arrival_rate=5.0, mu=10.0, timeout_s=3.0, retries=4, tail="exact")
    assert bound.orbit_mean > 1000 * exact.orbit_mean
    assert exact.queue_mean == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"tail": "guess"}, ValueError), ({"retries": -1}, ValueError),
     ({"queue_size": 1000, "orbit_size": 100}, ValueError), ({"mu": math.nan}, ValueError),
     ({"arrival_rate": True}, TypeError)],
)  # fmt: skip
def test_metafor_chain_checks_its_arguments(kwargs, error):
    given = {"arrival_rate": 9.5, "mu": 10.0, "timeout_s": 3.0, "retries": 4, **kwargs}
    with pytest.raises(error):
        metafor_chain(**given)
