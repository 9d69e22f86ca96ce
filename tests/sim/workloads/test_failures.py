"""Failure models: frequencies within Wilson intervals, semantics and streams."""

from __future__ import annotations

import asyncio
import dataclasses
import pickle
import random

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.errors import PermanentError, RateLimited
from pipeline.sim import Constant, Poisson, Scenario, run_virtual, simulate
from pipeline.sim.stats.intervals import proportion_ci
from pipeline.sim.workloads import failures
from pipeline.sim.workloads.failures import (
    BLOCK,
    CombinedFailures,
    Failure,
    Hangs,
    IndependentFailures,
    NoFailures,
    Overload,
    PermanentFailures,
    SimulatedFailure,
    SimulatedHang,
    TokenQuota,
)
from pipeline.sim.workloads.failures.uniforms import randoms

# Frequencies are checked against a 99.99% Wilson interval (about 3.9 standard
# errors): with fixed seeds the tests are deterministic, and a correct model
# would fall outside it for only 1 seed in 10,000.
LEVEL = 0.9999
N = 50_000


def bind(model, seed=1, n_items=N):
    return model.bind(np.random.default_rng(seed), n_items)


def decisions(bound, n=N, attempt=1, in_flight=1):
    return [bound.check(i, attempt, in_flight) for i in range(n)]


def test_no_failures():
    bound = bind(NoFailures())
    assert all(f is None for f in decisions(bound, 1000))


@pytest.mark.parametrize("p", [0.0, 0.01, 0.3, 1.0])
def test_independent_failure_frequency(p):
    got = decisions(bind(IndependentFailures(p)))
    failed = [f for f in got if f is not None]
    assert proportion_ci(len(failed), N, level=LEVEL).contains(p)
    for f in failed[:10]:
        assert isinstance(f.error, SimulatedFailure) and isinstance(f.error, RuntimeError)
        assert f.hang_s is None and "simulated failure" in str(f.error)
    # a fresh exception per attempt: raising one must not chain into another
    assert len({id(f.error) for f in failed[:10]}) == len(failed[:10])


@pytest.mark.parametrize("seed", [0, 1, 2**63 + 5])
def test_randoms_are_the_streams_own_draws_bit_for_bit(seed):
    # The kernel draws the backoff jitter a block at a time: every value, and the stream
    # left behind, must be what as many calls of random() give, whatever the count.
    one, bulk = random.Random(seed), random.Random(seed)
    for count in (0, 1, 2, 7, 4096, 10_001, 0, 3):
        drawn = randoms(bulk, count)
        assert drawn.dtype == np.float64 and drawn.shape == (count,)
        assert drawn.tolist() == [one.random() for _ in range(count)]
        assert bulk.getstate() == one.getstate()
    assert bulk.random() == one.random() and bulk.uniform(0, 3.5) == one.uniform(0, 3.5)


def test_independent_failures_are_reproducible_and_cross_blocks():
    a = [f is None for f in decisions(bind(IndependentFailures(0.5), seed=4), 3 * BLOCK + 5)]
    b = [f is None for f in decisions(bind(IndependentFailures(0.5), seed=4), 3 * BLOCK + 5)]
    c = [f is None for f in decisions(bind(IndependentFailures(0.5), seed=5), 3 * BLOCK + 5)]
    assert a == b and a != c


def test_permanent_failures_poison_whole_items():
    model = PermanentFailures(0.1)
    bound = bind(model)
    first = [bound.check(i, 1, 1) is not None for i in range(N)]
    again = [bound.check(i, 3, 1) is not None for i in range(N)]
    assert first == again  # every attempt of a poisoned item fails, others never
    assert proportion_ci(sum(first), N, level=LEVEL).contains(0.1)
    f = bound.check(first.index(True), 2, 1)
    assert isinstance(f.error, PermanentError) and f.hang_s is None


def test_permanent_failures_do_not_depend_on_call_order_or_n_items():
    forward = bind(PermanentFailures(0.3), seed=9, n_items=10)
    backward = bind(PermanentFailures(0.3), seed=9, n_items=10)
    ids = range(3 * BLOCK)
    a = [forward.check(i, 1, 1) is None for i in ids]
    b = [backward.check(i, 1, 1) is None for i in reversed(ids)][::-1]
    sized = bind(PermanentFailures(0.3), seed=9, n_items=BLOCK)
    c = [sized.check(i, 1, 1) is None for i in ids]
    assert a == b
    assert a == c
    with pytest.raises(ValueError, match="item_id must be >= 0"):
        forward.check(-1, 1, 1)


def test_hangs():
    got = [f for f in decisions(bind(Hangs(0.05, 30.0))) if f is not None]
    assert proportion_ci(len(got), N, level=LEVEL).contains(0.05)
    assert all(f.hang_s == 30.0 and isinstance(f.error, SimulatedHang) for f in got)
    assert "30 s" in str(got[0].error)


def test_overload_only_fails_above_its_limit():
    bound = bind(Overload(limit=4))
    for in_flight in range(1, 5):
        assert all(bound.check(i, 1, in_flight) is None for i in range(2000))
    for in_flight in (5, 6, 50):
        f = bound.check(0, 1, in_flight)
        assert isinstance(f.error, RateLimited) and "limit 4" in str(f.error)
        assert f.hang_s is None


def test_overload_with_probability():
    bound = bind(Overload(limit=2, p=0.25))
    assert all(f is None for f in decisions(bound, 5000, in_flight=2))
    got = sum(f is not None for f in decisions(bound, N, in_flight=3))
    assert proportion_ci(got, N, level=LEVEL).contains(0.25)


def test_combined_first_failure_wins_and_or_flattens():
    a, b, c = IndependentFailures(0.2), Overload(limit=1), Hangs(0.1, 5.0)
    combined = a | b | c
    assert combined == CombinedFailures(a, b, c) and combined.models == (a, b, c)
    bound = bind(combined)
    got = decisions(bound, 20_000, in_flight=2)  # above the limit: Overload always fails
    kinds = {type(f.error) for f in got}
    assert kinds <= {SimulatedFailure, RateLimited}  # Hangs (last) never wins here
    share = sum(type(f.error) is SimulatedFailure for f in got)
    assert proportion_ci(share, 20_000, level=LEVEL).contains(0.2)
    with pytest.raises(TypeError, match=r"models\[1\] must be a FailureModel"):
        CombinedFailures(a, 0.1)  # type: ignore[arg-type]


def test_combined_models_keep_their_own_streams():
    # adding a model must not change the decisions of the ones before it
    a = IndependentFailures(0.3)
    alone = bind(CombinedFailures(a), seed=2)
    with_more = bind(a | Hangs(0.5, 1.0), seed=2)
    x = [alone.check(i, 1, 1) is None for i in range(5000)]
    y = [
        (
            f is None
            or not isinstance(f.error, SimulatedFailure)
            or isinstance(f.error, SimulatedHang)
        )
        for f in (with_more.check(i, 1, 1) for i in range(5000))
    ]
    assert x == y


MODELS = [
    NoFailures(),
    IndependentFailures(0.1),
    PermanentFailures(0.05),
    Hangs(0.01, 30),
    Overload(8),
    Overload(limit=8, p=0.5),
    IndependentFailures(0.1) | Overload(4),
    TokenQuota(100, (60, 50.5)),
    Overload(4, refuse_s=0.2) | TokenQuota(1000, [1, 2, 3], refuse_s=None),
]


@pytest.mark.parametrize("model", MODELS, ids=repr)
def test_repr_rebuilds(model):
    again = eval(repr(model), vars(failures))
    assert again == model and hash(again) == hash(model) and repr(again) == repr(model)


@pytest.mark.parametrize("model", MODELS, ids=repr)
def test_models_pickle(model):
    # sweep(processes=...) ships scenarios, failure model included, to worker processes
    assert pickle.loads(pickle.dumps(model)) == model


def test_reprs():
    assert repr(IndependentFailures(0.1)) == "IndependentFailures(p=0.1)"
    assert repr(Overload(8)) == "Overload(limit=8, p=1.0, refuse_s=None)"
    assert repr(NoFailures() | Hangs(0.5, 2)) == (
        "CombinedFailures(NoFailures(), Hangs(p=0.5, hang_s=2.0))"
    )


def test_models_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        IndependentFailures(0.1).p = 0.2  # type: ignore[misc]
    with pytest.raises(AttributeError, match="frozen"):
        CombinedFailures().models = ()  # type: ignore[misc]


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: IndependentFailures(1.5), ValueError, r"p must be <= 1 .*got 1.5"),
        (lambda: IndependentFailures(-0.1), ValueError, r"p must be >= 0"),
        (lambda: IndependentFailures("x"), TypeError, "p must be a real number"),
        (lambda: PermanentFailures(2), ValueError, "fraction must be <= 1"),
        (lambda: Hangs(0.1, 0), ValueError, r"hang_s must be > 0 \(seconds\), got 0"),
        (lambda: Overload(0), ValueError, r"limit must be >= 1 \(attempts in flight\), got 0"),
        (lambda: Overload(2.5), TypeError, "limit must be an integer"),
        (lambda: Failure(ValueError, None), TypeError, "error must be an exception instance"),
        (lambda: Failure(ValueError("x"), -1), ValueError, "hang_s must be > 0"),
        (lambda: NoFailures().bind(np.random.default_rng(), -1), ValueError, "n_items"),
        (lambda: NoFailures().bind(1, 10), TypeError, "numpy.random.Generator"),
    ],
)
def test_bad_arguments_are_named(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_overload_with_refuse_s_refuses_quickly_above_its_limit() -> None:
    bound = Overload(limit=2, refuse_s=0.2).bind(np.random.default_rng(0), 10)
    assert bound.check(0, 1, 2) is None
    failure = bound.check(1, 1, 3)
    assert isinstance(failure.error, RateLimited)
    assert failure.hang_s == 0.2


def test_overload_with_refuse_s_in_a_run_refuses_only_calls_above_the_limit() -> None:
    scenario = Scenario(
        arrivals=Poisson(rate=100.0),
        service=Constant(1.0),
        config=PipelineConfig(concurrency=4, max_attempts=1, drain_timeout_s=None),
        failures=Overload(limit=2, refuse_s=0.1),
        n_items=200,
        seed=1,
    )
    result = simulate(scenario)
    refused = result.dead_letters
    assert refused and all(d.errors[0].type == "RateLimited" for d in refused)
    assert result.summary["items_completed"] + len(refused) == 200


def test_overload_with_refuse_s_validates_its_arguments() -> None:
    with pytest.raises(ValueError, match="limit"):
        Overload(limit=0)
    with pytest.raises(ValueError, match="refuse_s"):
        Overload(limit=2, refuse_s=0.0)


# -- TokenQuota: a sliding 60-s window of the tokens of the attempts that started ----------


def at_times(bound, calls):
    """Run ``(time_s, item_id, in_flight)`` checks on the virtual clock; return the failures."""

    async def main():
        loop, got = asyncio.get_running_loop(), []
        for when, item_id, in_flight in calls:
            await asyncio.sleep(when - loop.time())
            got.append(bound.check(item_id, 1, in_flight))
        return got

    return run_virtual(main())


def test_token_quota_refuses_past_the_quota_in_a_sliding_minute():
    bound = bind(TokenQuota(100, [60, 50, 40, 30]))
    got = at_times(bound, [(0, 0, 1), (0, 1, 1), (0, 2, 1), (59.9, 3, 1), (60.0, 1, 1), (60, 3, 1)])
    assert [f is None for f in got] == [True, False, True, False, True, True]
    refused = got[1]
    assert isinstance(refused.error, RateLimited) and refused.hang_s == 0.2
    assert "60 tokens started in the last minute + 50 > 100" in str(refused.error)
    # exactly at the quota is allowed; a refused attempt costs nothing (item 2 fit after item
    # 1 was refused); at t = 60 s the calls of t = 0 have left the window


def test_token_quota_is_not_charged_for_attempts_another_model_refused():
    for provider in (
        Overload(limit=1) | TokenQuota(100, [60, 60]),
        TokenQuota(100, [60, 60]) | Overload(limit=1),
    ):
        bound = bind(provider)
        first, second = at_times(bound, [(0, 0, 2), (1, 1, 1)])
        assert isinstance(first.error, RateLimited) and "in flight" in str(first.error)
        assert second is None  # 60 tokens, not 120: the refused call was never charged


def test_token_quota_in_a_run_keeps_every_minute_under_the_quota():
    quota = TokenQuota(tokens_per_minute=3000, tokens=[100] * 300, refuse_s=0.2)
    scenario = Scenario(
        arrivals=Poisson(rate=2.0),
        service=Constant(1.0),
        config=PipelineConfig(concurrency=8, max_attempts=1, drain_timeout_s=None),
        failures=quota,
        n_items=300,
        seed=1,
    )
    result = simulate(scenario)
    assert result.dead_letters
    assert all(d.errors[0].type == "RateLimited" for d in result.dead_letters)
    items = result.items
    starts = np.sort((items.finish_s - 1.0)[items.outcome == "completed"].to_numpy())
    in_window = np.searchsorted(starts, starts + 60.0) - np.arange(len(starts))
    assert in_window.max() == 30  # 3000 tokens / 100 per call, reached and never exceeded


def test_token_quota_validates_and_shows_long_token_lists_briefly():
    with pytest.raises(ValueError, match=r"tokens_per_minute must be > 0"):
        TokenQuota(0, [1])
    with pytest.raises(ValueError, match=r"tokens\[1\] must be <= 100"):
        TokenQuota(100, [1, 101])
    with pytest.raises(TypeError, match="tokens must be a sequence"):
        TokenQuota(100, "12")
    with pytest.raises(ValueError, match="refuse_s"):
        TokenQuota(100, [1], refuse_s=0)
    model = TokenQuota(400_000, np.full(3000, 1000))
    assert repr(model) == (
        "TokenQuota(tokens_per_minute=400000.0, tokens=<3000 items, 3,000,000 tokens>, "
        "refuse_s=0.2)"
    )
    with pytest.raises(ValueError, match="TokenQuota has token counts for 3000 items"):
        at_times(bind(model), [(0, 3000, 1)])
