"""Queueing formulas against closed forms, textbook values and brute-force CTMCs."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from pipeline.sim.analysis.theory import (
    dead_letter_rate,
    erlang_b,
    erlang_c,
    expected_in_system,
    littles_law,
    mmc,
    mmck,
    retry_amplification,
)


def birth_death_stationary(lam: float, mu: float, c: int, K: int) -> np.ndarray:
    """Stationary law of the M/M/c/K CTMC, solved from its generator (pi Q = 0)."""
    q = np.zeros((K + 1, K + 1))
    for n in range(K + 1):
        if n < K:
            q[n, n + 1] = lam
        if n > 0:
            q[n, n - 1] = min(n, c) * mu
        q[n, n] = -q[n].sum()
    # replace one balance equation by the normalisation sum(pi) = 1
    a = np.vstack([q.T[:-1], np.ones(K + 1)])
    b = np.zeros(K + 1)
    b[-1] = 1.0
    return np.linalg.solve(a, b)


def erlang_c_exact(c: int, a: Fraction) -> Fraction:
    """The textbook sum formula in exact rational arithmetic."""
    top = a**c / math.factorial(c) * Fraction(c) / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


@pytest.mark.parametrize(
    ("c", "a", "expected"),
    [(1, 0.5, 1 / 3), (5, 2.0, 0.036697), (10, 5.0, 0.018385), (20, 15.0, 0.045593)],
)
def test_erlang_b_table_values(c, a, expected):
    # values from standard Erlang B tables (e.g. Gross et al., table of B(c, a))
    assert erlang_b(c, a) == pytest.approx(expected, abs=5e-6)


@pytest.mark.parametrize(("c", "a"), [(1, "1/2"), (2, "1"), (3, "2"), (8, "13/2"), (30, "27")])
def test_erlang_c_matches_exact_formula(c, a):
    assert erlang_c(c, float(Fraction(a))) == pytest.approx(
        float(erlang_c_exact(c, Fraction(a))), rel=1e-12
    )


def test_erlang_c_known_values():
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert erlang_c(3, 2.0) == pytest.approx(4 / 9)
    assert erlang_c(1, 0.8) == pytest.approx(0.8)  # M/M/1: P(wait) = rho
    assert erlang_c(4, 4.0) == 1.0 and erlang_c(4, 9.0) == 1.0  # unstable limit


@pytest.mark.parametrize(("c", "rho"), [(1, 0.5), (2, 0.9), (4, 0.8), (8, 0.7), (16, 0.95)])
def test_erlang_c_matches_a_brute_force_ctmc(c, rho):
    lam, mu = rho * c, 1.0
    # truncate the infinite queue where the tail is negligible: rho**extra < 1e-14
    K = c + math.ceil(math.log(1e-14) / math.log(rho))
    pi = birth_death_stationary(lam, mu, c, K)
    # PASTA: an arrival waits iff it finds all c servers busy
    assert erlang_c(c, lam / mu) == pytest.approx(pi[c:].sum(), abs=1e-9)
    assert mmc(lam, 1 / mu, c).queue_len_mean == pytest.approx(
        (np.maximum(np.arange(K + 1) - c, 0) * pi).sum(), rel=1e-7
    )


@pytest.mark.parametrize(("c", "a"), [(500, 480.0), (500, 450.0), (2000, 1990.0)])
def test_erlang_c_is_stable_for_many_servers(c, a):
    # reference: the sum formula in log space (lgamma), normalised by its largest term
    k = np.arange(c)
    log_terms = k * math.log(a) - np.array([math.lgamma(x + 1) for x in k])
    log_top = c * math.log(a) - math.lgamma(c + 1) + math.log(c / (c - a))
    peak = max(log_terms.max(), log_top)
    top = math.exp(log_top - peak)
    expected = top / (np.exp(log_terms - peak).sum() + top)
    got = erlang_c(c, a)
    assert 0 < got < 1 and got == pytest.approx(expected, rel=1e-9)


def test_mm1_values():
    r = mmc(0.8, 1.0, 1)
    assert r.rho == pytest.approx(0.8) and r.p_wait == pytest.approx(0.8)
    assert r.wait_mean_s == pytest.approx(4.0) and r.latency_mean_s == pytest.approx(5.0)
    assert r.queue_len_mean == pytest.approx(3.2) and r.in_system_mean == pytest.approx(4.0)


def test_mm2_textbook_example():
    # lambda = 1/s, mean service 1 s, 2 servers: C = 1/3, Wq = C / (2 - 1) = 1/3 s
    r = mmc(1.0, 1.0, 2)
    assert r.p_wait == pytest.approx(1 / 3)
    assert r.wait_mean_s == pytest.approx(1 / 3) and r.latency_mean_s == pytest.approx(4 / 3)
    assert r.queue_len_mean == pytest.approx(1 / 3) and r.in_system_mean == pytest.approx(4 / 3)


def test_mmc_scales_with_the_time_unit():
    # the same system measured in ms: times scale by 1000, probabilities do not
    s, ms = mmc(3.2, 1.0, 4), mmc(0.0032, 1000.0, 4)
    assert ms.p_wait == pytest.approx(s.p_wait)
    assert ms.wait_mean_s == pytest.approx(1000 * s.wait_mean_s)


def test_wait_distribution():
    r = mmc(3.2, 1.0, 4)
    decay = 4 / 1.0 - 3.2
    assert r.p_wait_longer_than(0) == pytest.approx(r.p_wait)
    assert r.p_wait_longer_than(2.0) == pytest.approx(r.p_wait * math.exp(-decay * 2.0))
    assert r.wait_quantile(0.0) == 0.0
    assert r.wait_quantile(1 - r.p_wait) == 0.0
    for q in (0.5, 0.9, 0.99):
        t = r.wait_quantile(q)
        assert 1 - r.p_wait_longer_than(t) == pytest.approx(q)
    # the mean of the wait law is the Erlang C mean: integral of P(Wq > t)
    assert r.p_wait / decay == pytest.approx(r.wait_mean_s)
    with pytest.raises(ValueError, match="q must be < 1"):
        r.wait_quantile(1.0)
    with pytest.raises(ValueError, match="t must be >= 0"):
        r.p_wait_longer_than(-1)


def test_mmc_rejects_unstable_and_bad_inputs():
    with pytest.raises(ValueError, match=r"unstable: rho = .* = 1 >= 1"):
        mmc(4.0, 1.0, 4)
    with pytest.raises(ValueError, match="unstable"):
        mmc(5.0, 1.0, 4)
    with pytest.raises(ValueError, match=r"arrival_rate must be > 0 \(arrivals per second\)"):
        mmc(0, 1.0, 1)
    with pytest.raises(ValueError, match=r"c must be >= 1 \(servers\), got 0"):
        mmc(1.0, 0.5, 0)
    with pytest.raises(TypeError, match="c must be an integer"):
        mmc(1.0, 0.5, 2.0)
    with pytest.raises(ValueError, match="offered_load must be >= 0"):
        erlang_c(2, -1.0)


@pytest.mark.parametrize(("lam", "c", "K"), [(0.5, 1, 5), (3.2, 4, 104), (6.0, 4, 10), (4.0, 4, 9)])
def test_mmck_matches_the_ctmc(lam, c, K):
    s = 1.0
    pi = birth_death_stationary(lam, 1 / s, c, K)
    n = np.arange(K + 1)
    r = mmck(lam, s, c, K)
    assert r.blocking_probability == pytest.approx(pi[K], abs=1e-12)
    assert r.throughput == pytest.approx(lam * (1 - pi[K]))
    assert r.in_system_mean == pytest.approx((n * pi).sum(), rel=1e-9)
    assert r.queue_len_mean == pytest.approx((np.maximum(n - c, 0) * pi).sum(), rel=1e-9)
    assert r.latency_mean_s == pytest.approx(r.wait_mean_s + s)  # W = Wq + E[S]
    assert r.utilisation == pytest.approx((np.minimum(n, c) * pi).sum() / c)
    assert r.p_wait == pytest.approx(pi[c:K].sum() / (1 - pi[K]))


def test_mm1k_closed_form():
    rho, K = 0.8, 5
    r = mmck(rho, 1.0, 1, K)
    assert r.blocking_probability == pytest.approx((1 - rho) * rho**K / (1 - rho ** (K + 1)))
    assert mmck(1.0, 1.0, 1, K).blocking_probability == pytest.approx(1 / (K + 1))  # rho = 1


def test_mmck_overloaded_and_large_K():
    r = mmck(10.0, 1.0, 2, 5000)  # rho = 5, huge K: no overflow
    assert r.blocking_probability == pytest.approx(0.8, rel=1e-9)  # sheds the excess
    assert r.throughput == pytest.approx(2.0) and r.utilisation == pytest.approx(1.0)
    # K -> infinity with rho < 1 is M/M/c
    big, inf = mmck(3.2, 1.0, 4, 2000), mmc(3.2, 1.0, 4)
    assert big.blocking_probability < 1e-12
    assert big.wait_mean_s == pytest.approx(inf.wait_mean_s, rel=1e-9)
    assert big.p_wait == pytest.approx(inf.p_wait, rel=1e-9)
    # M/M/c/c is the Erlang loss system
    assert mmck(5.0, 1.0, 10, 10).blocking_probability == pytest.approx(erlang_b(10, 5.0))
    with pytest.raises(ValueError, match="K must be >= c"):
        mmck(1.0, 1.0, 4, 3)


def test_littles_law():
    assert expected_in_system(3.2, 1.5) == pytest.approx(4.8)
    assert littles_law(arrival_rate=3.2, mean_time_s=1.5) == pytest.approx(4.8)
    assert littles_law(mean_number=4.8, mean_time_s=1.5) == pytest.approx(3.2)
    assert littles_law(arrival_rate=3.2, mean_number=4.8) == pytest.approx(1.5)
    r = mmc(3.2, 1.0, 4)
    assert littles_law(arrival_rate=3.2, mean_time_s=r.latency_mean_s) == pytest.approx(
        r.in_system_mean
    )
    with pytest.raises(ValueError, match="exactly two"):
        littles_law(arrival_rate=1.0)
    with pytest.raises(ValueError, match="arrival_rate must be > 0"):
        littles_law(arrival_rate=0.0, mean_number=1.0)
    with pytest.raises(TypeError):
        littles_law(3.2, 1.5)  # type: ignore[misc]


def test_retry_formulas():
    assert retry_amplification(0.0, 3) == 1.0
    assert retry_amplification(1.0, 3) == 3.0
    assert retry_amplification(0.5, 3) == pytest.approx(1 + 0.5 + 0.25)
    for p in (0.1, 0.9, 0.999999):
        assert retry_amplification(p, 4) == pytest.approx(sum(p**i for i in range(4)))
    assert dead_letter_rate(0.1, 3) == pytest.approx(1e-3)
    assert dead_letter_rate(1.0, 5) == 1.0
    with pytest.raises(ValueError, match=r"p must be <= 1"):
        retry_amplification(1.5, 3)
    with pytest.raises(ValueError, match=r"k must be >= 1 \(attempts per item"):
        dead_letter_rate(0.1, 0)
