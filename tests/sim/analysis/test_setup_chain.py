"""M/M/k/setup: the exact chain, and a pool driven through ``Pipeline.resize`` against it.

The policy of Gandhi et al. (2014) runs on the real engine, in virtual time, through its
public surface only: a listener counts the items queued and busy, and keeps
``min(queued, k - busy)`` set-ups running as timers on the loop (``loop.call_later``,
exponential); a set-up that ends grows the pool by one (``resize``), and its new worker
takes the first queued item; a worker that finishes with nothing queued shrinks the
pool by one, so it leaves before its next item. A pool has at least one worker, so one
extra worker holds a blocking item for the whole run and the servers are the others.

Each setting runs ``REPLICATIONS`` independent replications (each its own seeds) of
a setting's number of items, the first ``WARMUP`` of each left out (the pool starts empty) and
the last ``COOLDOWN`` (later arrivals start set-ups that serve earlier items, and
after the last one none come). The engine's mean response
time must lie within the replications' 99% Student t interval of the chain's
(``T_995``), and that interval's half-width must be at most 1% of the chain's value, so
that a true 2% gap would fall outside it with probability above 99%: the check sees a
2% error, and passes a correct engine with probability 99% per setting.
"""

from __future__ import annotations

import asyncio
import math
import random
import statistics

import pytest

from pipeline import EventKind, Pipeline, PipelineConfig
from pipeline.sim import run_virtual
from pipeline.sim.analysis import setup_chain as setup_chain_module
from pipeline.sim.analysis.setup_chain import setup_chain
from tests.docs.figures import quoted

REPLICATIONS, WARMUP, COOLDOWN = 10, 2_000, 1_000
T_995_9 = 3.250  # Student t, 99.5% quantile, 9 degrees of freedom


# -- the chain alone ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lam", "mu", "alpha"), [(0.5, 1.0, 2.0), (0.3, 1.0, 0.5), (0.9, 1.0, 5.0)]
)
def test_one_server_is_welchs_formula(lam, mu, alpha):
    # M/M/1 with an exponential set-up after each idle spell: E[T] = 1/(mu - lam) + 1/alpha.
    chain = setup_chain(arrival_rate=lam, mu=mu, setup_rate=alpha, k=1)
    exact = 1 / (mu - lam) + 1 / alpha
    assert abs(chain.response_time_s - exact) <= chain.response_time_error + 1e-11 * exact
    assert chain.busy_mean == pytest.approx(lam / mu, rel=1e-10)


def test_the_error_bound_shrinks_with_the_truncation_and_holds():
    # The bound of a coarse truncation covers the distance to a much finer one.
    args = dict(arrival_rate=5.0, mu=1.0, setup_rate=2.0, k=8)
    coarse = setup_chain(**args, tolerance=1e-3)
    fine = setup_chain(**args, tolerance=1e-12)
    assert coarse.levels < fine.levels and fine.response_time_error <= 1e-12
    gap = abs(coarse.response_time_s - fine.response_time_s)
    assert gap <= coarse.response_time_error + fine.response_time_error + 1e-12
    assert abs(coarse.setting_up_mean - fine.setting_up_mean) <= coarse.setting_up_error + 1e-12


@pytest.mark.parametrize(
    ("settings", "error", "words"),
    [
        (dict(arrival_rate=0.0), ValueError, "arrival_rate must be > 0"),
        (dict(mu=float("nan")), ValueError, "mu must be finite"),
        (dict(setup_rate=-1.0), ValueError, "setup_rate must be > 0"),
        (dict(k=0), ValueError, "k must be >= 1"),
        (dict(k=2.0), TypeError, "k must be an integer"),
        (dict(tolerance=0), ValueError, "tolerance must be > 0"),
        (dict(arrival_rate=4.0), ValueError, r"arrival_rate must be below k x min\(mu, setup"),
    ],
)
def test_bad_arguments_are_refused(settings, error, words):
    args = dict(arrival_rate=1.0, mu=1.0, setup_rate=1.0, k=4) | settings
    with pytest.raises(error, match=words):
        setup_chain(**args)


def test_a_tolerance_out_of_reach_is_refused(monkeypatch):
    monkeypatch.setattr(setup_chain_module, "MAX_SETUP_STATES", 200)
    with pytest.raises(ValueError, match="no truncation within 200 states bounds the error"):
        setup_chain(arrival_rate=3.9, mu=1.0, setup_rate=1.0, k=4, tolerance=1e-300)


# -- the engine, resized by the policy ------------------------------------------------------


async def _setup_pool(lam: float, mu: float, alpha: float, k: int, items: int, seed: int) -> dict:
    """One replication: the mean response time of items WARMUP.., and time-average set-ups."""
    loop = asyncio.get_running_loop()
    arrivals, services, setups_rng = (random.Random(f"{seed}-{part}") for part in "abc")
    hold = loop.create_future()  # the blocking item's: released at the end
    admitted: dict[int, float] = {}
    responses: list[float] = []
    state = {"queued": 0, "busy": 0, "on": 0, "area": 0.0, "since": 0.0}
    setups: list[asyncio.TimerHandle] = []
    pipe: Pipeline

    async def handle(item: int | None) -> None:
        if item is None:
            await hold
        else:
            await asyncio.sleep(services.expovariate(mu))

    def count_setups(now: float) -> None:
        state["area"] += len(setups) * (now - state["since"])
        state["since"] = now

    def balance(now: float) -> None:
        # Gandhi et al.'s rule: min(queued, k - busy) servers in set-up at every instant.
        count_setups(now)
        wanted = min(state["queued"], k - state["busy"])
        while len(setups) < wanted:
            mine: list[asyncio.TimerHandle] = []
            mine.append(loop.call_later(setups_rng.expovariate(alpha), set_up, mine))
            setups.append(mine[0])
        while len(setups) > wanted:
            setups.pop().cancel()  # the newest: memoryless, any one would do

    def set_up(mine: list[asyncio.TimerHandle]) -> None:
        count_setups(loop.time())
        setups.remove(mine[0])
        state["on"] += 1
        pipe.resize(1 + state["on"])  # the new worker takes the first queued item

    def listen(kind: EventKind, now: float, item) -> None:
        if item is None or item.payload is None:
            return  # producer events, and the blocking item
        if kind is EventKind.ADMITTED:
            admitted[item.payload] = now
            state["queued"] += 1
            balance(now)
        elif kind is EventKind.STARTED:
            state["queued"] -= 1
            state["busy"] += 1
            balance(now)
        elif kind is EventKind.COMPLETED:
            responses.append((item.payload, now - admitted.pop(item.payload)))
            state["busy"] -= 1
            if state["queued"] == 0:
                state["on"] -= 1
                pipe.resize(1 + state["on"])  # it leaves before its next item: off when idle
            # else it takes the next item at once (STARTED follows)

    config = PipelineConfig(concurrency=1, queue_maxsize=None, drain_timeout_s=None)
    pipe = Pipeline(handle, config, on_event=listen, name="setup-pool")
    async with pipe:
        pipe.put_nowait(None)
        for item in range(items):
            await asyncio.sleep(arrivals.expovariate(lam))
            pipe.put_nowait(item)
        while len(responses) < items:
            await asyncio.sleep(1.0)
        stats = pipe.statistics()
        count_setups(loop.time())
        hold.set_result(None)
    kept = [took for item, took in responses if WARMUP <= item < items - COOLDOWN]
    return {
        "response_s": statistics.fmean(kept),
        "setting_up": state["area"] / loop.time(),
        "listener_errors": stats.listener_errors,
        "most_workers": stats.workers_peak,
    }


SETTINGS = [
    # lambda, mu, alpha, k, items per replication (enough for the 1% half-width)
    (2.0, 1.0, 1.0, 4, 40_000),
    (1.5, 1.0, 0.5, 4, 40_000),
    (5.0, 1.0, 2.0, 8, 70_000),
    (0.4, 1.0, 2.0, 1, 60_000),
]


@pytest.mark.slow
@pytest.mark.parametrize(("lam", "mu", "alpha", "k", "items"), SETTINGS)
def test_the_engine_with_set_up_servers_matches_the_chain(lam, mu, alpha, k, items):
    chain = setup_chain(arrival_rate=lam, mu=mu, setup_rate=alpha, k=k)
    runs = [
        run_virtual(_setup_pool(lam, mu, alpha, k, items, seed)) for seed in range(REPLICATIONS)
    ]
    assert all(run["listener_errors"] == 0 and run["most_workers"] <= k + 1 for run in runs)
    means = [run["response_s"] for run in runs]
    half = T_995_9 * statistics.stdev(means) / math.sqrt(REPLICATIONS)
    assert half <= 0.01 * chain.response_time_s, "too few items to see a 2% gap"
    assert abs(statistics.fmean(means) - chain.response_time_s) <= half
    # The servers in set-up (the policy's idle cost), time-averaged over each whole run.
    setting_up = [run["setting_up"] for run in runs]
    spread = T_995_9 * statistics.stdev(setting_up) / math.sqrt(REPLICATIONS)
    assert abs(statistics.fmean(setting_up) - chain.setting_up_mean) <= spread


def test_the_autoscaling_guide_quotes_this_check():
    found = quoted(
        "docs/guide/autoscaling.md",
        r"within the engine's (\d+)% interval over (\w+) replications, an interval narrower than"
        r" (\d+)% of it",
    )
    # The 99% interval is T_995_9's (Student's t, 9 = REPLICATIONS - 1 degrees of freedom).
    assert found.groups() == ("99", "ten", "1") and REPLICATIONS == 10
