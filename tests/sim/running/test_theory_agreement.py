"""The simulator against outside truth: queueing formulas, exact identities and SimPy.

How the statistical tolerances are derived (no tolerance here was tuned):

- A replication is one run with its own random streams (``SeedSequence([seed, r])``),
  so the R replications of a scenario are independent and identically
  distributed. Each run starts empty; items arriving before ``warmup_s`` are
  left out of its statistics. The warm-up is five relaxation times
  ``1 / (c mu (1 - sqrt(rho))**2)`` (the classical heavy-traffic estimate); the
  start-up deficit decays like ``exp(-t / tau)``, so the bias left in a run's
  mean is below 0.1% of the value, far below the sampling error.
- Inside one run waits are strongly autocorrelated, so a run's mean is one
  observation, not thousands. Over replications the run means are close to
  normal (each averages thousands of items), and ``mean_ci`` gives the
  Student t interval with R - 1 degrees of freedom.
- Every interval is a 99.9% interval: a correct simulator falls outside it
  with probability about 0.1% per assertion (about 2% for the whole file).
  The seeds are fixed up front (never re-drawn to make a test pass), so the
  outcome is deterministic: a failure means a change in behaviour, not bad luck.
- Where items are independent by construction (attempt failures drawn
  i.i.d. per attempt), pooled counts are exactly binomial and the Wilson
  interval on them is valid. Shed items are not independent (one busy period
  sheds many in a row), so the shed fraction uses replication means.
- Each agreement test also checks its own power: the half-width must stay
  below a bound (about twice the half-width a correct simulator gives; the
  sample standard deviation of 10 runs exceeds twice its true value with
  probability below 1e-4), so a broken simulator cannot pass by being so noisy that
  its interval covers everything. With R = 10 runs of 15,000 items the 99.9%
  half-width (t = 4.78 with 9 degrees of freedom) is about 5-30% of Erlang C's
  mean wait and 1-2% of the utilisation: these tests catch a wrong formula, a
  lost server or a broken queue discipline, not a 3% drift. Even one
  100,000-item run is noisy: at M/M/4, rho = 0.8, seed 1 gives a mean wait 9.3%
  above Erlang C's 0.7455 s (bench/RESULTS.md), while ten such replications give
  0.746 +- 0.031 s (95% interval). From that interval one run's standard
  deviation is about 0.031 * sqrt(10) / 2.26 = 0.043 s, so a 3% bias (0.022 s)
  needs on the order of 100 runs before a 99.9% interval resolves it.
- Each (c, rho) case has its own seed: with a shared seed, Poisson arrivals at
  rate 1.6 and 3.2 are the same draws rescaled, and the cases would not be
  independent evidence.

Exact identities (Little's law, waits that do not depend on ``maxsize``, trace
replay against SimPy, reproducibility) are asserted exactly or to 1e-9.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading

import numpy as np
import pandas as pd
import pytest

from pipeline import PipelineConfig
from pipeline.retry import Backoff
from pipeline.sim import (
    Constant,
    Exponential,
    IndependentFailures,
    LogNormal,
    Poisson,
    Scenario,
    Trace,
    simulate,
)
from pipeline.sim.analysis.theory import dead_letter_rate, mmc, mmck, retry_amplification
from pipeline.sim.running.reference import simpy_fcfs_waits
from pipeline.sim.running.replications import Replications
from pipeline.sim.running.result import SimulationResult
from pipeline.sim.stats.intervals import mean_ci, proportion_ci, t_quantile
from pipeline.sim.stats.stepstats import time_weighted_mean
from pipeline.sim.workloads.traces.replay import exact_fcfs_waits
from pipeline.sim.workloads.traces.service import ServiceTrace

LEVEL = 0.999
SEED = 2026
REPLICATIONS = 10
ITEMS = 15_000
YEAR_S = 365 * 86_400.0


def warmup_s(c: int, rho: float, service_mean_s: float = 1.0) -> float:
    """Five relaxation times of M/M/c, at least 50 mean service times (seconds)."""
    relaxation = service_mean_s / (c * (1.0 - math.sqrt(rho)) ** 2)
    return max(5.0 * relaxation, 50.0 * service_mean_s)


def mmc_scenario(
    c: int,
    rho: float,
    maxsize: int | None = None,
    *,
    on_full: str = "block",
    n_items: int = ITEMS,
    seed: int = SEED,
    warmup: float | None = None,
) -> Scenario:
    """M/M/c (or M/M/c/K with ``on_full="reject"``) with mean service 1 s."""
    return Scenario(
        arrivals=Poisson(rate=rho * c),
        service=Exponential(mean=1.0),
        config=PipelineConfig(
            concurrency=c, queue_maxsize=maxsize, on_full=on_full, drain_timeout_s=None
        ),
        n_items=n_items,
        seed=seed,
        warmup_s=warmup_s(c, rho) if warmup is None else warmup,
    )


@functools.cache
def replications(scenario: Scenario, r: int = REPLICATIONS) -> Replications:
    """Simulated once per test session: several tests read the same runs."""
    return simulate(scenario, replications=r)


def waits(result: SimulationResult) -> np.ndarray:
    """Per-item wait from arrival to first start, seconds (NaN if it never started)."""
    return result.columns.start_s - result.columns.arrival_s


def counted(result: SimulationResult) -> np.ndarray:
    """Mask of the items that arrived after the warm-up."""
    return result.columns.arrival_s >= result.scenario.warmup_s


def assert_covers(samples: np.ndarray, expected: float, what: str, *, power: float) -> None:
    """The 99.9% replication interval covers ``expected`` and is narrower than ``power``."""
    ci = mean_ci(samples, level=LEVEL)
    detail = f"{what}: expected {expected:.6g}, simulated {ci.mean:.6g} +- {ci.half_width:.3g}"
    assert ci.contains(expected), detail
    assert ci.half_width <= power * abs(expected), f"too little power; {detail}"


# -- M/M/c: Erlang C ---------------------------------------------------------------------

MMC_CASES = [(1, 0.5), (2, 0.8), (4, 0.8), (8, 0.9), (16, 0.7)]


@pytest.mark.parametrize(("c", "rho"), MMC_CASES)
def test_mmc_mean_wait_is_erlang_c(c, rho):
    reps = replications(mmc_scenario(c, rho, seed=SEED + c))
    theory = mmc(rho * c, 1.0, c)
    assert_covers(reps.values("wait_mean_s"), theory.wait_mean_s, f"M/M/{c} wait", power=0.5)


@pytest.mark.parametrize(("c", "rho"), MMC_CASES)
def test_mmc_utilisation_is_offered_load_per_worker(c, rho):
    # Busy workers averaged over [warm-up, last arrival]: in steady state the
    # expected number in service is lambda E[S] at every instant, so this window
    # is unbiased (the drain after the last arrival would bias it low).
    busy = []
    for run in replications(mmc_scenario(c, rho, seed=SEED + c)).results:
        series = run.series
        last_arrival = float(run.columns.arrival_s[-1])
        mean = time_weighted_mean(
            series.time_s, series.in_flight, last_arrival, t_start=run.scenario.warmup_s
        )
        busy.append(mean / c)
    assert_covers(np.array(busy), rho, f"M/M/{c} utilisation", power=0.05)


def test_mmc_wait_tail_probability():
    c, rho, t = 4, 0.8, 1.0
    shares = [
        float(np.mean(waits(run)[counted(run)] > t))
        for run in replications(mmc_scenario(c, rho, seed=SEED + c)).results
    ]
    expected = mmc(rho * c, 1.0, c).p_wait_longer_than(t)
    assert_covers(np.array(shares), expected, f"P(wait > {t} s)", power=0.3)


# -- bounded queue, on_full="block" ------------------------------------------------------


def test_blocking_queue_waits_are_identical_for_every_maxsize():
    # FCFS with a bound >= 1: an item is admitted no later than a worker could
    # take it, so its start time -- and its wait from arrival -- is the same
    # whatever the bound. Same seed, same samples: equality is exact.
    c, rho = 2, 0.8
    unbounded = replications(mmc_scenario(c, rho, seed=SEED + c)).results
    tight = replications(mmc_scenario(c, rho, maxsize=1, seed=SEED + c)).results
    for r, (free, bounded) in enumerate(zip(unbounded, tight, strict=True)):
        np.testing.assert_array_equal(waits(bounded), waits(free), err_msg=f"replication {r}")
        assert bounded.summary["producer_blocked_s"] > 0  # the bound really did bite
    for maxsize in (5, 50):
        run = simulate(mmc_scenario(c, rho, maxsize=maxsize, seed=SEED + c))
        np.testing.assert_array_equal(waits(run), waits(unbounded[0]), err_msg=f"{maxsize=}")


def test_blocking_queue_mean_wait_from_arrival_is_erlang_c():
    c, rho = 2, 0.8
    reps = replications(mmc_scenario(c, rho, maxsize=1, seed=SEED + c))
    expected = mmc(rho * c, 1.0, c).wait_mean_s
    assert_covers(reps.values("wait_mean_s"), expected, "M/M/2 wait, maxsize=1", power=0.5)


# -- on_full="reject": M/M/c/K -----------------------------------------------------------


@pytest.mark.parametrize("rho", [0.9, 1.5])
def test_shed_fraction_is_mmck_blocking_probability(rho):
    # K = 5 states above empty: the chain forgets its empty start within a few
    # service times, so 50 s of warm-up is ample at any load.
    c, maxsize = 2, 3
    scenario = mmc_scenario(c, rho, maxsize, on_full="reject", n_items=5_000, warmup=50.0)
    shares = []
    for run in replications(scenario, 10).results:
        mask = counted(run)
        shares.append(float(np.mean(run.columns.outcome[mask] == 2)))  # 2 = shed
    expected = mmck(rho * c, 1.0, c, maxsize + c).blocking_probability
    assert_covers(np.array(shares), expected, f"shed share at rho={rho}", power=0.2)


# -- independent attempt failures --------------------------------------------------------


@pytest.mark.parametrize(("p", "k"), [(0.3, 3), (0.5, 2)])
def test_dead_letters_and_attempts_follow_independent_failures(p, k):
    # Ample workers and an unbounded queue; each attempt draws a fresh uniform,
    # so items' fates are i.i.d. and pooled counts are exactly binomial.
    n = 20_000
    run = simulate(
        Scenario(
            arrivals=Poisson(rate=10.0),
            service=Exponential(mean=1.0),
            config=PipelineConfig(
                concurrency=64,
                queue_maxsize=None,
                max_attempts=k,
                backoff=Backoff.none(),
                drain_timeout_s=None,
            ),
            failures=IndependentFailures(p),
            n_items=n,
            seed=SEED,
        )
    )
    dead = run.summary["items_dead_lettered"]
    assert run.summary["items_completed"] + dead == n
    share = proportion_ci(dead, n, level=LEVEL)
    assert share.contains(dead_letter_rate(p, k)), (share, dead_letter_rate(p, k))
    attempts = run.columns.attempts
    assert attempts.sum() == run.summary["attempts_total"]
    assert attempts.min() >= 1 and attempts.max() <= k
    per_item = mean_ci(attempts, level=LEVEL)
    assert per_item.contains(retry_amplification(p, k)), (per_item, retry_amplification(p, k))
    assert per_item.half_width <= 0.02 * retry_amplification(p, k)
    # the dead-lettered items are exactly those that used their whole budget and failed
    dead_mask = run.columns.outcome == 1
    assert (attempts[dead_mask] == k).all()


# -- Little's law ------------------------------------------------------------------------


@pytest.mark.parametrize("maxsize", [None, 10])
def test_littles_law_holds_exactly_on_the_recorded_series(maxsize):
    # The integral of the number in system over [0, T] is the sum of the items'
    # sojourns, so L = (admitted / T) * mean sojourn is an identity of the
    # records, with retries, backpressure and dead letters in the mix.
    run = simulate(
        Scenario(
            arrivals=Poisson(rate=3.6),
            service=Exponential(mean=1.0),
            config=PipelineConfig(
                concurrency=4,
                queue_maxsize=maxsize,
                max_attempts=3,
                backoff=Backoff.constant(0.5),
                drain_timeout_s=None,
            ),
            failures=IndependentFailures(0.2),
            n_items=5_000,
            seed=SEED,
        )
    )
    c, series = run.columns, run.series
    end = series.end_s
    assert series.in_system[0] == 0 and series.in_system[-1] == 0  # starts and ends empty
    assert run.summary["items_dead_lettered"] > 0 and run.summary["retries_total"] > 0
    admitted = ~np.isnan(c.admitted_s)
    finish = np.where(np.isnan(c.finish_s), end, c.finish_s)
    sojourn = (finish - c.admitted_s)[admitted]
    in_system = series.time_mean(series.in_system)
    assert in_system == pytest.approx(admitted.sum() / end * sojourn.mean(), rel=1e-9)
    assert run.summary["in_system_mean"] == pytest.approx(in_system, rel=1e-12)
    # The same from arrival at the source: backlog upstream counts as lag.
    lag = series.time_mean(series.lag_items)
    assert lag == pytest.approx(len(c.arrival_s) / end * (finish - c.arrival_s).mean(), rel=1e-9)
    if maxsize is not None:
        assert run.summary["producer_blocked_s"] > 0 and lag > in_system


# -- SimPy cross-check: M/LogNormal(cv=2)/3 ----------------------------------------------

SIMPY_C = 3
SIMPY_RHO = 0.8
LOGNORMAL_CV = 2.0


def draw_workload(n: int, seed: int) -> tuple[list[float], list[float], list[float]]:
    """(gaps, arrival times, service times) in seconds, drawn with numpy from ``seed``."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / (SIMPY_RHO * SIMPY_C), n).tolist()
    sigma2 = math.log1p(LOGNORMAL_CV**2)
    services = rng.lognormal(-sigma2 / 2, math.sqrt(sigma2), n).tolist()
    # Sum one gap at a time, exactly as SimPy's clock does: env.now + gap.
    return gaps, list(itertools.accumulate(gaps)), services


def test_trace_replay_matches_simpy_item_for_item():
    gaps, arrivals, services = draw_workload(20_000, seed=SEED)
    run = simulate(
        Scenario(
            arrivals=Trace(arrivals),
            service=ServiceTrace(services),
            config=PipelineConfig(concurrency=SIMPY_C, queue_maxsize=None, drain_timeout_s=None),
            n_items=len(arrivals),
        )
    )
    ours = waits(run)
    theirs = np.array(simpy_fcfs_waits(gaps, services, SIMPY_C))
    assert not np.isnan(ours).any() and not np.isnan(theirs).any()
    assert np.abs(ours - theirs).max() <= 1e-9
    assert (
        np.abs(ours - exact_fcfs_waits(np.array(arrivals), np.array(services), SIMPY_C)).max()
        <= 1e-9
    )
    assert (theirs > 0).mean() > 0.3  # a real queue formed


@pytest.mark.slow  # Welch interval against SimPy: 2 s
def test_mean_wait_agrees_with_simpy_on_independent_samples():
    # Two independent sets of replications (our streams; numpy seeds for SimPy),
    # compared by Welch's t interval (99.9%) for the difference of the means.
    # Log-normal service with cv = 2 makes waits heavy-tailed, so SimPy, which is
    # cheap, gets twice the replications: that shrinks its share of the variance.
    warm = warmup_s(SIMPY_C, SIMPY_RHO)
    n = ITEMS
    ours = replications(
        Scenario(
            arrivals=Poisson(rate=SIMPY_RHO * SIMPY_C),
            service=LogNormal(mean=1.0, cv=LOGNORMAL_CV),
            config=PipelineConfig(concurrency=SIMPY_C, queue_maxsize=None, drain_timeout_s=None),
            n_items=n,
            seed=SEED,
            warmup_s=warm,
        )
    ).values("wait_mean_s")
    theirs = []
    for r in range(2 * REPLICATIONS):
        gaps, arrivals, services = draw_workload(n, seed=SEED + 1 + r)
        w = np.array(simpy_fcfs_waits(gaps, services, SIMPY_C))
        theirs.append(float(w[np.array(arrivals) >= warm].mean()))
    a, b = np.asarray(ours), np.asarray(theirs)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = t_quantile((1 + LEVEL) / 2, df) * math.sqrt(va + vb)
    detail = f"ours {a.mean():.4g}, SimPy {b.mean():.4g}, difference allowed {half:.3g}"
    assert abs(a.mean() - b.mean()) <= half, detail
    assert half <= 0.5 * b.mean(), f"too little power; {detail}"


# -- reproducibility ---------------------------------------------------------------------


def busy_scenario(seed: int) -> Scenario:
    """Every random stream in use: arrivals, service, failures, retry service, jitter."""
    return Scenario(
        arrivals=Poisson(rate=3.0),
        service=LogNormal(mean=1.0, cv=1.5),
        config=PipelineConfig(
            concurrency=4,
            queue_maxsize=20,
            max_attempts=3,
            backoff=Backoff(kind="exponential", base_s=0.5, jitter=True),
            drain_timeout_s=None,
        ),
        failures=IndependentFailures(0.2),
        n_items=5_000,
        seed=seed,
    )


def test_one_seed_reproduces_a_run_bit_for_bit():
    first, again, other = (simulate(busy_scenario(s)) for s in (SEED, SEED, SEED + 1))
    pd.testing.assert_frame_equal(first.items, again.items, check_exact=True)
    pd.testing.assert_frame_equal(first.timeseries, again.timeseries, check_exact=True)
    drop_wall = [{k: v for k, v in r.summary.items() if k != "wall_time_s"} for r in (first, again)]
    assert drop_wall[0] == drop_wall[1]
    assert first.dead_letters == again.dead_letters
    assert not first.items.equals(other.items)
    assert first.summary["wait_mean_s"] != other.summary["wait_mean_s"]


def test_common_random_numbers_across_configurations():
    # Same seed, different pipeline: the same traffic, item for item.
    base = simulate(busy_scenario(SEED))
    wider = simulate(busy_scenario(SEED).replace(concurrency=8, queue_maxsize=None))
    np.testing.assert_array_equal(base.columns.arrival_s, wider.columns.arrival_s)
    assert base.summary["wait_mean_s"] > wider.summary["wait_mean_s"]


# -- virtual time ------------------------------------------------------------------------


def test_a_year_long_backoff_completes_in_virtual_time():
    # Past 2**24 s, now + 1e-9 == now: a loop that only fires timers at
    # now + resolution would spin forever. Run on a thread so a hang fails.
    scenario = Scenario(
        arrivals=Poisson(rate=1.0),
        service=Constant(1.0),
        config=PipelineConfig(
            concurrency=64,
            queue_maxsize=None,
            max_attempts=2,
            backoff=Backoff.constant(YEAR_S),
            drain_timeout_s=None,
        ),
        failures=IndependentFailures(0.5),
        n_items=50,
        seed=SEED,
    )
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["result"] = simulate(scenario)
        except BaseException as error:  # handed to the test thread below
            box["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    # Liveness guard, not a speed check: the run takes a small fraction of a second, so only
    # a loop that spins forever is still going after a minute.
    thread.join(timeout=60)
    assert not thread.is_alive(), "hung: a year-long backoff never finished (spinning loop?)"
    if "error" in box:
        raise box["error"]
    run = box["result"]
    c = run.columns
    retried = c.attempts == 2
    assert retried.any() and (~retried).any()
    assert run.summary["sim_time_s"] > YEAR_S
    assert run.summary["items_completed"] + run.summary["items_dead_lettered"] == 50
    # first attempt 1 s, a year's backoff, second attempt 1 s; ample workers, no wait
    np.testing.assert_allclose(c.finish_s[retried] - c.start_s[retried], YEAR_S + 2.0, atol=1e-6)
    np.testing.assert_allclose(c.finish_s[~retried] - c.start_s[~retried], 1.0, atol=1e-9)


# -- memory model ------------------------------------------------------------------------


def memory_scenario(maxsize: int | None) -> Scenario:
    """Overload (offered load 1.5 x capacity) with retries and dead letters."""
    return Scenario(
        arrivals=Poisson(rate=6.0),
        service=Exponential(mean=1.0),
        config=PipelineConfig(
            concurrency=4,
            queue_maxsize=maxsize,
            max_attempts=3,
            backoff=Backoff.constant(0.5),
            drain_timeout_s=None,
        ),
        failures=IndependentFailures(0.3),
        n_items=5_000,
        seed=SEED,
        item_size_bytes=1000,
    )


def test_bounded_queue_bounds_modelled_memory():
    maxsize, c, size = 10, 4, 1000
    run = simulate(memory_scenario(maxsize))
    s = run.series
    memory = s.memory_bytes(size)
    np.testing.assert_array_equal(memory, (s.in_system + s.dead_letters) * size)
    # Retries held outside the queue may push it past maxsize, by at most one per worker.
    assert (memory <= (maxsize + 2 * c + s.dead_letters) * size).all()
    # Tighter: an admission needs queued + held < maxsize, and failing or taking an
    # item moves it between the queue and the workers, so in system <= maxsize + c.
    assert s.in_system.max() <= maxsize + c
    assert s.in_system.max() == maxsize + c  # and overload really fills it
    assert run.summary["memory_peak_bytes"] == memory.max()
    assert s.dead_letters[-1] == run.summary["items_dead_lettered"] > 0
    assert s.retry_waiting.max() > 0


def test_unbounded_queue_memory_grows_under_overload():
    c = 4
    bounded = simulate(memory_scenario(10))
    unbounded = simulate(memory_scenario(None))
    s = unbounded.series
    # Offered work: 6/s x 1.42 attempts x 1 s = 8.6 busy workers wanted, 4 available.
    last_arrival = float(unbounded.columns.arrival_s[-1])
    at_last = s.in_system[np.searchsorted(s.time_s, last_arrival, side="right") - 1]
    assert at_last > 0.3 * last_arrival * (6.0 - c / retry_amplification(0.3, 3))
    assert s.in_system.max() > 50 * bounded.series.in_system.max()
    assert unbounded.summary["memory_peak_bytes"] > 10 * bounded.summary["memory_peak_bytes"]
    assert unbounded.summary["upstream_backlog_max"] == 0
    assert bounded.summary["upstream_backlog_max"] > 1000  # the bound moved it upstream
