"""Numbers too large for a float are bad values like any other: a ValueError naming them.

A Python int (or Fraction) can be finite and still too large to convert to a
float (``10**400``); ``math.isfinite`` and ``float()`` then raise
``OverflowError``. Every constructor that validates a number must answer such a
value the way it answers ``-1`` or ``nan``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from pipeline import Backoff, PipelineConfig, RateLimit
from pipeline.sim import Scenario
from pipeline.sim.vloop import VirtualEventLoop
from pipeline.sim.workloads.arrivals import (
    DailyCurve,
    Deterministic,
    MarkovModulated,
    OnOff,
    PiecewiseLinear,
    Poisson,
    TimeVarying,
    Trace,
)
from pipeline.sim.workloads.distributions import (
    Constant,
    Empirical,
    Exponential,
    Gamma,
    LogNormal,
    Uniform,
)
from pipeline.sim.workloads.failures import Hangs, IndependentFailures, Overload, TokenQuota
from pipeline.sim.workloads.traces.service import ServiceTrace

HUGE = 10**400


def _scenario(**overrides):
    base = dict(arrivals=Poisson(rate=1.0), service=Exponential(mean=1.0), n_items=1)
    base.update(overrides)
    return Scenario(**base)


# (name the message must contain, constructor taking the bad value)
CASES = [
    ("drain_timeout_s", lambda v: PipelineConfig(drain_timeout_s=v)),
    ("attempt_timeout_s", lambda v: PipelineConfig(attempt_timeout_s=v)),
    ("base_s", lambda v: Backoff(base_s=v)),
    ("cap_s", lambda v: Backoff(cap_s=v)),
    ("factor", lambda v: Backoff(factor=v)),
    ("base_s", lambda v: Backoff.constant(v)),
    ("requests_per_minute", lambda v: RateLimit(requests_per_minute=v)),
    ("tokens_per_minute", lambda v: RateLimit(tokens_per_minute=v)),
    ("tokens_per_item", lambda v: RateLimit(tokens_per_minute=100, tokens_per_item=v)),
    ("tokens_per_item", lambda v: RateLimit(requests_per_minute=100, tokens_per_item=v)),
    ("rate", lambda v: Poisson(rate=v)),
    ("rate", lambda v: Deterministic(rate=v)),
    ("rates[1]", lambda v: MarkovModulated(rates=(1.0, v), mean_durations_s=(1.0, 1.0))),
    ("mean_durations_s[0]", lambda v: MarkovModulated(rates=(1.0, 2.0), mean_durations_s=(v, 1.0))),
    ("mean_on_s", lambda v: OnOff(rate_on=1.0, rate_off=0.0, mean_on_s=v, mean_off_s=1.0)),
    ("times_s[1]", lambda v: PiecewiseLinear(times_s=(0.0, v), rates=(1.0, 1.0))),
    ("peak_rate", lambda v: DailyCurve(base_rate=1.0, peak_rate=v)),
    ("max_rate", lambda v: TimeVarying(rate_fn=lambda t: t * 0 + 1.0, max_rate=v)),
    ("times", lambda v: Trace([0.0, v])),
    ("value", lambda v: Constant(value=v)),
    ("mean", lambda v: Exponential(mean=v)),
    ("cv", lambda v: LogNormal(mean=1.0, cv=v)),
    ("mean", lambda v: Gamma(mean=v, cv=1.0)),
    ("high", lambda v: Uniform(low=0.0, high=v)),
    ("samples", lambda v: Empirical(samples=(1.0, v))),
    ("p", lambda v: IndependentFailures(p=v)),
    ("hang_s", lambda v: Hangs(p=0.5, hang_s=v)),
    ("refuse_s", lambda v: Overload(limit=4, refuse_s=v)),
    ("tokens_per_minute", lambda v: TokenQuota(tokens_per_minute=v, tokens=(1.0,))),
    ("tokens[0]", lambda v: TokenQuota(tokens_per_minute=100.0, tokens=(v,))),
    ("service time of item 0", lambda v: ServiceTrace((v,))),
    ("duration_s", lambda v: _scenario(n_items=None, duration_s=v)),
    ("warmup_s", lambda v: _scenario(warmup_s=v)),
    ("start_s", lambda v: VirtualEventLoop(start_s=v)),
]


@pytest.mark.parametrize(
    "value",
    [HUGE, -HUGE, Fraction(HUGE), 10**5000],
    ids=["10**400", "-10**400", "Fraction(10**400)", "10**5000"],
)
@pytest.mark.parametrize(("name", "make"), CASES, ids=[name for name, _ in CASES])
def test_a_number_too_large_for_a_float_is_a_value_error_naming_the_parameter(name, make, value):
    with pytest.raises(ValueError) as caught:
        make(value)
    message = str(caught.value)
    assert name in message
    assert "got" in message
    # The value is shown (compactly: 10**5000 has more digits than repr() will print).
    assert "digits" in message or "e+400" in message or "inf" in message
    assert len(message) < 400


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: PipelineConfig(drain_timeout_s=HUGE), ["drain_timeout_s", ">= 0", "401 digits"]),
        (lambda: PipelineConfig(attempt_timeout_s=HUGE), ["attempt_timeout_s", "401 digits"]),
        (lambda: Backoff(factor=HUGE), ["factor", ">= 1", "<= 1.8e+308"]),
        (lambda: RateLimit(requests_per_minute=-HUGE), ["requests_per_minute", "> 0"]),
        (lambda: Poisson(rate=HUGE), ["rate", "arrivals per second", "401 digits"]),
    ],
)
def test_the_message_says_what_is_allowed(make, words):
    with pytest.raises(ValueError) as caught:
        make()
    for word in words:
        assert word in str(caught.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: PipelineConfig(drain_timeout_s=1e308, attempt_timeout_s=10**300),
        lambda: Backoff(base_s=10**300, cap_s=1e308, factor=10**300),
        lambda: RateLimit(requests_per_minute=10**300, tokens_per_minute=1e308),
        lambda: Poisson(rate=10**300),
        lambda: _scenario(warmup_s=10**300),
    ],
)
def test_large_numbers_that_fit_a_float_are_still_accepted(make):
    make()


def test_a_large_integer_factor_does_not_make_the_backoff_compute_a_huge_integer():
    backoff = Backoff(kind="exponential", base_s=1, factor=10**300, cap_s=30)
    assert backoff.delay(1) == 1.0
    assert backoff.delay(1000) == 30.0


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("concurrency", lambda v: PipelineConfig(concurrency=v)),
        ("queue_maxsize", lambda v: PipelineConfig(queue_maxsize=v)),
        ("max_attempts", lambda v: PipelineConfig(max_attempts=v)),
        ("n_items", lambda v: _scenario(n_items=v)),
        ("seed", lambda v: _scenario(seed=v)),
        ("size", lambda v: Exponential(mean=1.0).sample(np.random.default_rng(1), v)),
    ],
)
def test_an_integer_too_large_to_print_is_still_named_in_the_message(name, make):
    # repr() refuses ints of more than 4300 digits: the message must not depend on it.
    with pytest.raises(ValueError) as caught:
        make(-(10**5000))
    assert name in str(caught.value) and "5001 digits" in str(caught.value)


def test_a_huge_worker_count_is_refused_before_any_task_exists():
    with pytest.raises(ValueError, match=r"concurrency must be >= 1 and <= 1,000,000 workers"):
        PipelineConfig(concurrency=10**400)
