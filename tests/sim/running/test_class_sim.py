"""Item classes in simulation: an exact replay, Cobham's formula, Erlang A and Ciw.

- **Exact replay.** With deterministic patience, given arrival and service
  times, the run is a function of its inputs: a small event replay written
  here (non-preemptive priority, FIFO among equals, an item expires at its
  deadline unless a server took it strictly before) gives every item's start,
  finish and outcome, compared item by item (1e-9) with the engine's run.
- **Theory, by coverage.** Each of ``SEEDS`` scenario seeds gives ``R``
  independent replications, hence one Student t interval at ``LEVEL`` (95%)
  for a class's mean wait (Cobham) or for the abandonment share and the mean
  wait of served items (Erlang A). A correct simulator misses with
  probability 5% per interval, so the misses over the seeds are
  Binomial(SEEDS, 0.05); the test allows up to the count that a correct one
  exceeds with probability below 0.1% (:func:`allowed_misses`). Items
  arriving before a warm-up of five relaxation times are left out (the
  start-empty bias is then far below an interval's width). A power bound
  keeps a noisy simulator from passing by wide intervals.
- **Ciw.** The same queues in Ciw (priority classes; reneging), through the
  helpers of ``tests/sim/analysis/test_theory_who_waits.py``: a Welch
  interval on the difference of the two simulators' replication means, at
  99.9% per quantity, must cover 0.

The statistical tests simulate a few hundred thousand items each: marked ``slow``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Constant, Exponential, ItemClass, Poisson, Scenario, Trace, simulate
from pipeline.sim.analysis.theory import mmc_abandonment, mmc_priority
from pipeline.sim.stats.intervals import mean_ci
from pipeline.sim.stats.tdist import t_quantile
from pipeline.sim.workloads.traces.service import ServiceTrace

LEVEL = 0.95
SEEDS = 20
R = 5
FALSE_ALARM = 1e-3


def allowed_misses(n: int, level: float = LEVEL, alarm: float = FALSE_ALARM) -> int:
    """The fewest misses m with P(Binomial(n, 1 - level) > m) <= alarm."""
    p = 1.0 - level
    tail = 1.0
    for m in range(n + 1):
        tail -= math.comb(n, m) * p**m * (1 - p) ** (n - m)
        if tail <= alarm:
            return m
    return n


def test_the_binomial_tolerance_is_the_stated_tail():
    m = allowed_misses(SEEDS)
    p = 1 - LEVEL
    beyond = sum(math.comb(SEEDS, k) * p**k * (1 - p) ** (SEEDS - k) for k in range(m + 1, SEEDS))
    assert beyond <= FALSE_ALARM < beyond + math.comb(SEEDS, m) * p**m * (1 - p) ** (SEEDS - m)


# -- an exact replay ---------------------------------------------------------------------------


def replay(arrival, service, priority, deadline, c):
    """Start, finish and outcome of each item on c servers (unbounded queue, one attempt).

    A free server takes the waiting item of lowest (priority, arrival order); an item
    waiting at its deadline (arrival + patience) leaves unstarted (``expired``).
    """
    n = len(arrival)
    start, finish = [math.nan] * n, [math.nan] * n
    outcome = ["completed"] * n
    busy: list[float] = []  # the finish times of the attempts running
    waiting: set[int] = set()
    nxt = 0
    while nxt < n or waiting or busy:
        t_arrive = arrival[nxt] if nxt < n else math.inf
        t_free = min(busy) if busy else math.inf
        t_expire = min((deadline[i] for i in waiting), default=math.inf)
        now = min(t_arrive, t_free, t_expire)
        if now == t_expire:
            gone = min(waiting, key=lambda i: deadline[i])
            waiting.remove(gone)
            outcome[gone] = "expired"
            continue
        if now == t_free:
            busy.remove(t_free)
        else:
            waiting.add(nxt)
            nxt += 1
        while waiting and len(busy) < c:
            item = min(waiting, key=lambda i: (priority[i], i))
            waiting.remove(item)
            start[item], finish[item] = now, now + service[item]
            busy.append(finish[item])
    return start, finish, outcome


@pytest.mark.parametrize("case", range(12))
def test_deterministic_patience_matches_an_exact_replay_item_by_item(case):
    rng = np.random.default_rng(case)
    n, c = 14, 1 + case % 3
    arrival = np.cumsum(rng.exponential(0.3, n))
    service = rng.exponential(0.8, n)
    classes = [
        ItemClass(name="gold", share=1, priority=0),
        ItemClass(name="silver", share=2, priority=1, patience=Constant(0.7)),
        ItemClass(name="bronze", share=2, priority=1, patience=Constant(1.3)),
    ]
    result = simulate(
        Scenario(
            arrivals=Trace(arrival.tolist()),
            service=ServiceTrace(tuple(service.tolist())),
            config=PipelineConfig(concurrency=c, queue_maxsize=None, drain_timeout_s=None),
            classes=classes,
            n_items=n,
            seed=case,
        )
    )
    items = result.items
    by_name = {k.name: k for k in classes}
    names = list(items["class"])
    priority = [by_name[k].priority for k in names]
    patience = [by_name[k].patience.value if by_name[k].patience else math.inf for k in names]
    deadline = [a + p for a, p in zip(arrival, patience, strict=True)]
    start, finish, outcome = replay(arrival.tolist(), service.tolist(), priority, deadline, c)
    assert list(items["outcome"]) == outcome
    np.testing.assert_allclose(items["start_s"], start, rtol=0, atol=1e-9)
    np.testing.assert_allclose(items["finish_s"], finish, rtol=0, atol=1e-9)
    assert result.summary["items_expired"] == outcome.count("expired")


def test_the_replay_sees_priority_and_expiry_at_all():
    # The replay tests above would pass vacuously if nothing waited, or nothing expired.
    seen = {"expired": 0, "overtaken": 0}
    for case in range(12):
        rng = np.random.default_rng(case)
        arrival = np.cumsum(rng.exponential(0.3, 14))
        service = rng.exponential(0.8, 14)
        priority = [0 if k % 3 == 0 else 1 for k in range(14)]
        deadline = [a + 0.7 for a in arrival]
        start, _, outcome = replay(arrival.tolist(), service.tolist(), priority, deadline, 1)
        seen["expired"] += outcome.count("expired")
        order = [i for i in np.argsort(start) if not math.isnan(start[i])]
        seen["overtaken"] += sum(b < a for a, b in itertools.pairwise(order))
    assert seen["expired"] > 0 and seen["overtaken"] > 0


# -- summaries --------------------------------------------------------------------------------


def test_class_summaries_add_up_to_the_run_and_match_the_items_table():
    classes = [
        ItemClass(name="high", share=1, priority=0),
        ItemClass(name="low", share=3, priority=1, patience=Exponential(mean=1.0)),
    ]
    result = simulate(
        Scenario(
            arrivals=Poisson(rate=2.5),
            service=Exponential(mean=1.0),
            config=PipelineConfig(concurrency=3, queue_maxsize=None, drain_timeout_s=None),
            classes=classes,
            n_items=3000,
            seed=9,
            warmup_s=50.0,
        )
    )
    s, items = result.summary, result.items
    own = s["classes"]
    assert own["high"]["items"] + own["low"]["items"] == s["items_offered"] == 3000
    assert own["high"]["completed"] + own["low"]["completed"] == s["items_completed"]
    assert own["low"]["expired"] == s["items_expired"] == len(result.report.expired) > 0
    assert own["high"]["expired"] == 0
    assert s["expired_fraction"] == s["items_expired"] / s["items_offered"]
    for name in ("high", "low"):
        mine = items[(items["class"] == name) & (items["arrival_s"] >= 50.0)]
        done = mine[mine["outcome"] == "completed"]
        assert own[name]["wait_mean_s"] == pytest.approx(mine["wait_s"].mean(), rel=1e-12)
        assert own[name]["latency_p95_s"] == pytest.approx(
            np.percentile(done["latency_s"], 95), rel=1e-12
        )
        assert own[name]["expired_fraction"] == own[name]["expired"] / own[name]["items"]


# -- theory, by coverage over seeds -----------------------------------------------------------


def warmup_s(c: int, rho: float) -> float:
    return 5.0 / (c * (1.0 - math.sqrt(rho)) ** 2)


def covers(values: list[float], truth: float) -> tuple[bool, float]:
    ci = mean_ci(np.asarray(values), level=LEVEL)
    return ci.contains(truth), ci.half_width


@pytest.mark.slow
def test_simulated_class_waits_cover_cobham():
    rates, c, n = (0.5, 0.9), 2, 3000
    truth = mmc_priority(rates, 1.0, c).wait_mean_s
    classes = [
        ItemClass(name="high", share=rates[0], priority=0),
        ItemClass(name="low", share=rates[1], priority=1),
    ]
    misses, widths = {"high": 0, "low": 0}, {"high": [], "low": []}
    for seed in range(SEEDS):
        runs = simulate(
            Scenario(
                arrivals=Poisson(rate=sum(rates)),
                service=Exponential(mean=1.0),
                config=PipelineConfig(concurrency=c, queue_maxsize=None, drain_timeout_s=None),
                classes=classes,
                n_items=n,
                seed=1000 + seed,
                warmup_s=warmup_s(c, sum(rates) / c),
            ),
            replications=R,
            processes=1,
            progress=False,
        )
        for k, name in enumerate(("high", "low")):
            inside, half = covers(
                [r.summary["classes"][name]["wait_mean_s"] for r in runs.results], truth[k]
            )
            misses[name] += not inside
            widths[name].append(half)
    allowed = allowed_misses(SEEDS)
    for k, name in enumerate(("high", "low")):
        assert misses[name] <= allowed, f"{name}: {misses[name]} of {SEEDS} intervals miss"
        assert np.mean(widths[name]) < 0.5 * truth[k], f"{name}: intervals too wide to tell"


@pytest.mark.slow
def test_simulated_abandonment_and_served_wait_cover_erlang_a():
    lam, c, patience, n = 2.0, 2, 2.0, 2000
    truth = mmc_abandonment(lam, 1.0, c, patience)
    classes = [ItemClass(name="callers", patience=Exponential(mean=patience))]
    misses = {"p_abandon": 0, "wait_served_mean_s": 0}
    widths: dict[str, list[float]] = {"p_abandon": [], "wait_served_mean_s": []}
    for seed in range(SEEDS):
        runs = simulate(
            Scenario(
                arrivals=Poisson(rate=lam),
                service=Exponential(mean=1.0),
                config=PipelineConfig(concurrency=c, queue_maxsize=None, drain_timeout_s=None),
                classes=classes,
                n_items=n,
                seed=2000 + seed,
                warmup_s=50.0,
            ),
            replications=R,
            processes=1,
            progress=False,
        )
        found = abandonment(runs.results)
        for name, value in (
            ("p_abandon", truth.p_abandon),
            ("wait_served_mean_s", truth.wait_served_mean_s),
        ):
            inside, half = covers(found[name], value)
            misses[name] += not inside
            widths[name].append(half)
    allowed = allowed_misses(SEEDS)
    for name, value in (
        ("p_abandon", truth.p_abandon),
        ("wait_served_mean_s", truth.wait_served_mean_s),
    ):
        assert misses[name] <= allowed, f"{name}: {misses[name]} of {SEEDS} intervals miss"
        assert np.mean(widths[name]) < 0.5 * value, f"{name}: intervals too wide to tell"


def abandonment(results) -> dict[str, list[float]]:
    """Per run, over items arrived after the warm-up: the share expired, the served wait."""
    out: dict[str, list[float]] = {"p_abandon": [], "wait_served_mean_s": []}
    for result in results:
        items = result.items
        counted = items[items["arrival_s"] >= result.scenario.warmup_s]
        out["p_abandon"].append(float((counted["outcome"] == "expired").mean()))
        out["wait_served_mean_s"].append(result.summary["classes"]["callers"]["wait_mean_s"])
    return out


# -- against Ciw ------------------------------------------------------------------------------

CIW_LEVEL = 0.999
CIW_REPS = 8


def welch_covers_zero(ours: list[float], theirs: list[float]) -> tuple[bool, str]:
    a, b = np.asarray(ours), np.asarray(theirs)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = t_quantile((1 + CIW_LEVEL) / 2, df) * math.sqrt(va + vb)
    gap = a.mean() - b.mean()
    return abs(gap) <= half, f"ours {a.mean():.4f}, Ciw {b.mean():.4f}, gap {gap:.4f} +- {half:.4f}"


@pytest.mark.slow
def test_class_waits_agree_with_ciw_priority_classes():
    from tests.sim.analysis.test_theory_who_waits import WARMUP, ciw_priority_waits

    rates, c, horizon = (0.5, 0.9), 2, 2000.0
    theirs = ciw_priority_waits(rates, c, range(CIW_REPS), horizon=horizon)
    runs = simulate(
        Scenario(
            arrivals=Poisson(rate=sum(rates)),
            service=Exponential(mean=1.0),
            config=PipelineConfig(concurrency=c, queue_maxsize=None, drain_timeout_s=None),
            classes=[
                ItemClass(name="c0", share=rates[0], priority=0),
                ItemClass(name="c1", share=rates[1], priority=1),
            ],
            duration_s=horizon,
            seed=31,
            warmup_s=WARMUP,
        ),
        replications=CIW_REPS,
        processes=1,
        progress=False,
    )
    for k in range(2):
        ours = [r.summary["classes"][f"c{k}"]["wait_mean_s"] for r in runs.results]
        ok, text = welch_covers_zero(ours, theirs[k])
        assert ok, f"class {k}: {text}"


@pytest.mark.slow
def test_abandonment_agrees_with_ciw_reneging():
    from tests.sim.analysis.test_theory_who_waits import WARMUP, ciw_reneging

    lam, c, patience, horizon = 2.0, 2, 2.0, 2000.0
    theirs = ciw_reneging(lam, c, patience, range(200, 200 + CIW_REPS), horizon=horizon)
    runs = simulate(
        Scenario(
            arrivals=Poisson(rate=lam),
            service=Exponential(mean=1.0),
            config=PipelineConfig(concurrency=c, queue_maxsize=None, drain_timeout_s=None),
            classes=[ItemClass(name="callers", patience=Exponential(mean=patience))],
            duration_s=horizon,
            seed=32,
            warmup_s=WARMUP,
        ),
        replications=CIW_REPS,
        processes=1,
        progress=False,
    )
    ours = abandonment(runs.results)
    for name in ("p_abandon", "wait_served_mean_s"):
        ok, text = welch_covers_zero(ours[name], theirs[name])
        assert ok, f"{name}: {text}"


# -- chains -----------------------------------------------------------------------------------


def chain_with_classes(seed: int = 1) -> Scenario:
    from pipeline.sim import StageSpec

    return Scenario(
        arrivals=Poisson(rate=1.8),
        stages=[
            StageSpec(
                name="a",
                service=Exponential(mean=1.0),
                config=PipelineConfig(concurrency=2, queue_maxsize=None, drain_timeout_s=None),
                fan_out=2,
            ),
            StageSpec(
                name="b",
                service=Exponential(mean=0.45),
                config=PipelineConfig(concurrency=2, queue_maxsize=8, drain_timeout_s=None),
            ),
        ],
        classes=[
            ItemClass(name="high", share=1, priority=0),
            ItemClass(name="low", share=2, priority=1, patience=Exponential(mean=2.0)),
        ],
        n_items=2000,
        seed=seed,
    )


def test_in_a_chain_priority_orders_every_stage_and_patience_the_first():
    result = simulate(chain_with_classes())
    assert result.summary["engine"] == "asyncio" and result.report.balanced
    first, second = result.stages["a"], result.stages["b"]
    # A fan-out's children are of their item's class.
    source = result.items["source_item_id"].to_numpy()
    assert (result.items["class"].to_numpy() == first.items["class"].to_numpy()[source]).all()
    # Patience applies at the first stage only; priority at both.
    assert first.summary["items_expired"] == result.summary["items_expired"] > 0
    assert second.summary["items_expired"] == 0
    waits = second.summary["classes"]
    assert waits["high"]["wait_mean_s"] < waits["low"]["wait_mean_s"]
    own = result.summary["classes"]
    assert own["high"]["items"] + own["low"]["items"] == 2000
    assert own["low"]["expired"] == result.summary["items_expired"]
    completed = result.items[result.items["outcome"] == "completed"]
    for name in ("high", "low"):
        assert own[name]["completed"] == (completed["class"] == name).sum()
        assert own[name]["latency_p95_s"] == pytest.approx(
            np.percentile(completed[completed["class"] == name]["latency_s"], 95), rel=1e-12
        )
    again = simulate(chain_with_classes())
    assert again.items.equals(result.items)
