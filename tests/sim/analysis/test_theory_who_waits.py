"""Who waits: Cobham's priority formula and Erlang A against exact chains and against Ciw.

Cobham's formula is checked against the stationary law of the priority queue's own
continuous-time Markov chain (exact, up to truncation), the conservation law and
textbook values; Erlang A against its two expressions of the abandonment share, its
M/M/c limit, and Ciw's simulation of the same queues (priority classes, reneging).

The Ciw checks are statistical: ``REPS`` independent runs each, a two-sided Student t
interval on the mean of the runs' estimates, at a level chosen so that the whole file's
Ciw checks together fail by chance with probability at most 1% (Bonferroni over the
``CHECKS`` quantities: each at ``1 - 0.01 / CHECKS``).
"""

from __future__ import annotations

import math

import ciw
import numpy as np
import pytest

from pipeline.sim.analysis.theory import mmc, mmc_abandonment, mmc_priority
from pipeline.sim.stats.tdist import t_quantile

REPS = 12
CHECKS = 5  # two class waits, abandonment share, served wait, all-arrival wait
LEVEL = 1 - 0.01 / CHECKS


def priority_chain(rates: tuple[float, float], mu: float, c: int, most: int) -> np.ndarray:
    """Mean queue of each class from the two-class non-preemptive M/M/c chain.

    State: ``b`` busy servers (``b < c`` only with empty queues), then ``(q1, q2)``
    waiting, each truncated at ``most``. A departure takes the head of class 1, else of
    class 2, else frees its server.
    """
    states = [(b, 0, 0) for b in range(c)] + [
        (c, q1, q2) for q1 in range(most + 1) for q2 in range(most + 1)
    ]
    index = {s: i for i, s in enumerate(states)}
    q = np.zeros((len(states), len(states)))
    for i, (b, q1, q2) in enumerate(states):
        for k, lam in enumerate(rates):
            target = (b + 1, 0, 0) if b < c else (c, q1 + (k == 0), q2 + (k == 1))
            if target in index:
                q[i, index[target]] += lam
        if b:
            if q1:
                target = (c, q1 - 1, q2)
            elif q2:
                target = (c, q1, q2 - 1)
            else:
                target = (b - 1, 0, 0)
            q[i, index[target]] += b * mu
        q[i, i] = -q[i].sum()
    a = np.vstack([q.T[:-1], np.ones(len(states))])
    rhs = np.zeros(len(states))
    rhs[-1] = 1.0
    pi = np.linalg.solve(a, rhs)
    queued = np.array([[s[1], s[2]] for s in states], dtype=float)
    return pi @ queued


@pytest.mark.parametrize(
    ("rates", "c"),
    [
        ((0.3, 0.4), 1),
        # Larger chains to solve (1 s of a core each): in make test only.
        pytest.param((0.5, 0.9), 2, marks=pytest.mark.slow),
        pytest.param((1.2, 0.9), 3, marks=pytest.mark.slow),
    ],
)
def test_cobham_equals_the_priority_chain(rates, c):
    # Truncated at 60 waiting per class the chain's tail is below 1e-8 of the waits
    # (at 45 it was 1e-6: the gap shrinks with the truncation, the formula is exact).
    lq = priority_chain(rates, 1.0, c, most=60)
    waits = mmc_priority(rates, 1.0, c).wait_mean_s
    assert waits == pytest.approx(tuple(lq / np.array(rates)), rel=1e-7)


def test_cobham_with_one_class_is_erlang_c_and_conserves_the_wait():
    assert mmc_priority([8.0], 1.0, 10).wait_mean_s[0] == pytest.approx(mmc(8, 1, 10).wait_mean_s)
    r = mmc_priority([2.0, 3.0, 3.0], 1.0, 10)
    mixed = sum(lam * w for lam, w in zip(r.arrival_rates, r.wait_mean_s, strict=True)) / 8.0
    assert mixed == pytest.approx(r.wait_mean_fcfs_s, rel=1e-12)
    assert r.wait_mean_s[0] < r.wait_mean_fcfs_s < r.wait_mean_s[2]
    # M/M/1 at rho 0.8, classes of 0.2 and 0.6: Wq = rho E[S] / ((1 - s0)(1 - s1)).
    assert mmc_priority([0.2, 0.6], 1.0, 1).wait_mean_s == pytest.approx((1.0, 5.0))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([], 1.0, 2), "at least one class"),
        (([0.5, -1.0], 1.0, 2), r"arrival_rates\[1\]"),
        (([0.5, math.nan], 1.0, 2), r"arrival_rates\[1\]"),
        (([1.5, 0.6], 1.0, 2), "unstable"),
        (([0.5], 0.0, 2), "service_mean_s"),
    ],
)
def test_cobham_refuses_bad_input_in_one_line(args, message):
    with pytest.raises(ValueError, match=message) as caught:
        mmc_priority(*args)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("lam", "c", "patience"), [(2.0, 2, 2.0), (10.0, 10, 2.0), (20.0, 10, 0.5), (0.5, 1, 10.0)]
)
def test_erlang_a_abandonment_agrees_with_littles_law_on_the_queue(lam, c, patience):
    r = mmc_abandonment(lam, 1.0, c, patience)
    assert r.p_abandon == pytest.approx(r.queue_len_mean / patience / lam, rel=1e-9)
    assert 0 < r.p_abandon < r.p_wait < 1
    assert r.throughput <= min(lam, c)
    # every arrival's wait is a mix of the served waits and the abandoners' waits
    assert r.wait_mean_s >= (1 - r.p_abandon) * r.wait_served_mean_s


def test_erlang_a_with_patient_items_is_erlang_c():
    patient = mmc_abandonment(8.0, 1.0, 10, 1e7)
    exact = mmc(8.0, 1.0, 10)
    assert patient.wait_mean_s == pytest.approx(exact.wait_mean_s, rel=1e-4)
    assert patient.wait_served_mean_s == pytest.approx(exact.wait_mean_s, rel=1e-4)
    assert patient.p_wait == pytest.approx(exact.p_wait, rel=1e-5)


def test_erlang_a_overloaded_serves_at_capacity():
    r = mmc_abandonment(20.0, 1.0, 10, 100.0)
    assert r.throughput == pytest.approx(10.0, rel=1e-3)
    assert r.p_abandon == pytest.approx(0.5, rel=1e-3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((2.0, 1.0, 2, math.inf), "use mmc"),
        ((2.0, 1.0, 2, 0.0), "patience_mean_s"),
        ((2.0, 1.0, 2, math.nan), "patience_mean_s"),
        ((20.0, 1.0, 10, 1e6), "too long for this overload"),
        ((2.0, 1.0, 0, 1.0), "c must be"),
    ],
)
def test_erlang_a_refuses_bad_input_in_one_line(args, message):
    with pytest.raises(ValueError, match=message) as caught:
        mmc_abandonment(*args)
    assert "\n" not in str(caught.value)


# -- against Ciw ---------------------------------------------------------------------------

HORIZON, WARMUP = 4_000.0, 200.0


def _inside(estimates: list[float], truth: float) -> tuple[bool, str]:
    x = np.asarray(estimates)
    half = t_quantile(1 - (1 - LEVEL) / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return abs(x.mean() - truth) <= half, f"{x.mean():.4f} +- {half:.4f} vs {truth:.4f}"


def ciw_priority_waits(
    rates: tuple[float, ...], c: int, seeds: range, horizon: float = HORIZON
) -> list[list[float]]:
    """Ciw's M/M/c with non-preemptive priority classes (0 first), mean service 1 s: each
    class's mean wait of the items arrived after ``WARMUP``, one value per seed."""
    network = ciw.create_network(
        arrival_distributions={
            f"Class {k}": [ciw.dists.Exponential(r)] for k, r in enumerate(rates)
        },
        service_distributions={
            f"Class {k}": [ciw.dists.Exponential(1.0)] for k in range(len(rates))
        },
        number_of_servers=[c],
        priority_classes={f"Class {k}": k for k in range(len(rates))},
    )
    waits: list[list[float]] = [[] for _ in rates]
    for seed in seeds:
        ciw.seed(seed)
        run = ciw.Simulation(network)
        run.simulate_until_max_time(horizon)
        records = [r for r in run.get_all_records() if r.arrival_date > WARMUP]
        for k in range(len(rates)):
            waits[k].append(
                np.mean([r.waiting_time for r in records if r.customer_class == f"Class {k}"])
            )
    return waits


def ciw_reneging(
    lam: float, c: int, patience: float, seeds: range, horizon: float = HORIZON
) -> dict[str, list[float]]:
    """Ciw's M/M/c+M (mean service 1 s, exponential patience): per seed, the share of
    arrivals after ``WARMUP`` that reneged, the mean wait of those served, and of all."""
    network = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(lam)],
        service_distributions=[ciw.dists.Exponential(1.0)],
        number_of_servers=[c],
        reneging_time_distributions=[ciw.dists.Exponential(1 / patience)],
    )
    out: dict[str, list[float]] = {"p_abandon": [], "wait_served_mean_s": [], "wait_mean_s": []}
    for seed in seeds:
        ciw.seed(seed)
        run = ciw.Simulation(network)
        run.simulate_until_max_time(horizon)
        records = [r for r in run.get_all_records() if r.arrival_date > WARMUP]
        served = [r.waiting_time for r in records if r.record_type == "service"]
        gone = [r.exit_date - r.arrival_date for r in records if r.record_type == "renege"]
        out["p_abandon"].append(len(gone) / (len(gone) + len(served)))
        out["wait_served_mean_s"].append(np.mean(served))
        out["wait_mean_s"].append((np.sum(served) + np.sum(gone)) / (len(served) + len(gone)))
    return out


@pytest.mark.slow  # Ciw's runs, many seeds
def test_ciw_priority_classes_wait_as_cobham_says():
    rates, c = (0.5, 0.9), 2
    truth = mmc_priority(rates, 1.0, c).wait_mean_s
    waits = ciw_priority_waits(rates, c, range(REPS))
    for k in range(2):
        ok, text = _inside(waits[k], truth[k])
        assert ok, f"class {k}: {text}"


@pytest.mark.slow  # Ciw's runs, many seeds
def test_ciw_reneging_abandons_and_waits_as_erlang_a_says():
    lam, c, patience = 2.0, 2, 2.0
    truth = mmc_abandonment(lam, 1.0, c, patience)
    found = ciw_reneging(lam, c, patience, range(100, 100 + REPS))
    for name, value in [
        ("p_abandon", truth.p_abandon),
        ("wait_served_mean_s", truth.wait_served_mean_s),
        ("wait_mean_s", truth.wait_mean_s),
    ]:
        ok, text = _inside(found[name], value)
        assert ok, f"{name}: {text}"
