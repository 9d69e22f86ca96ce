"""Bad settings of AIMD, Gradient2 and CoDel: one error at construction, naming what and why."""

from __future__ import annotations

import decimal
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline import AIMD, CoDel, Gradient2, PipelineConfig

BAD = [
    (AIMD, "min_limit", 0, ValueError, "min_limit must be >= 1"),
    (AIMD, "min_limit", -3, ValueError, "min_limit must be >= 1"),
    (AIMD, "min_limit", 2.0, TypeError, "min_limit must be an integer"),
    (AIMD, "min_limit", True, TypeError, "min_limit must be an integer"),
    (AIMD, "initial_limit", 0, ValueError, "initial_limit must be >= 1"),
    (AIMD, "backoff_ratio", 0.4, ValueError, "backoff_ratio must be >= 0.5"),
    (AIMD, "backoff_ratio", 1.0, ValueError, "backoff_ratio must be >= 0.5 and < 1"),
    (AIMD, "backoff_ratio", math.nan, ValueError, "backoff_ratio must be finite"),
    (AIMD, "backoff_ratio", True, TypeError, "backoff_ratio must be a real number"),
    (AIMD, "timeout_s", 0, ValueError, "timeout_s must be > 0"),
    (AIMD, "timeout_s", -1.0, ValueError, "timeout_s must be > 0"),
    (AIMD, "timeout_s", math.inf, ValueError, "timeout_s must be finite"),
    (AIMD, "timeout_s", decimal.Decimal("NaN"), ValueError, "timeout_s must be finite"),
    (AIMD, "timeout_s", "5", TypeError, "timeout_s must be a real number"),
    (Gradient2, "smoothing", 0.0, ValueError, "smoothing must be > 0"),
    (Gradient2, "smoothing", 1.5, ValueError, "smoothing must be <= 1"),
    (Gradient2, "queue_size", -1, ValueError, "queue_size must be >= 0"),
    (Gradient2, "long_window", 0, ValueError, "long_window must be >= 1"),
    (Gradient2, "rtt_tolerance", 0.9, ValueError, "rtt_tolerance must be >= 1"),
    (Gradient2, "rtt_tolerance", -math.inf, ValueError, "rtt_tolerance must be finite"),
    (CoDel, "target_s", 0, ValueError, "target_s must be > 0"),
    (CoDel, "target_s", math.nan, ValueError, "target_s must be finite"),
    (CoDel, "interval_s", -0.1, ValueError, "interval_s must be > 0"),
    (CoDel, "interval_s", 10**400, ValueError, "interval_s must be"),
    (CoDel, "lifo", 1, TypeError, "lifo must be True or False"),
]


@pytest.mark.parametrize(("cls", "name", "value", "error", "message"), BAD)
def test_a_bad_value_is_one_error_naming_it(cls, name, value, error, message):
    with pytest.raises(error, match=message) as caught:
        cls(**{name: value})
    assert "\n" not in str(caught.value)


def test_min_above_initial_is_refused():
    with pytest.raises(ValueError, match=r"initial_limit must be >= min_limit \(5\), got 3"):
        AIMD(min_limit=5, initial_limit=3)


def test_min_above_concurrency_is_refused_by_the_config():
    with pytest.raises(ValueError, match=r"min_limit=5\) must be <= concurrency \(4\)"):
        PipelineConfig(concurrency=4, concurrency_limit=Gradient2(min_limit=5))
    with pytest.raises(ValueError, match=r"initial_limit=9\) must be <= concurrency \(4\)"):
        PipelineConfig(concurrency=4, concurrency_limit=AIMD(initial_limit=9))


def test_numpy_and_decimal_numbers_are_taken_as_numbers():
    limit = AIMD(
        min_limit=np.int64(2), backoff_ratio=np.float32(0.75), timeout_s=decimal.Decimal("2.5")
    )
    assert (limit.min_limit, limit.backoff_ratio, limit.timeout_s) == (2, 0.75, 2.5)
    assert type(limit.min_limit) is int and type(limit.timeout_s) is float
    assert CoDel(target_s=decimal.Decimal("0.01")).target_s == 0.01


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(codel=CoDel(), priority=lambda x: x), "codel cannot be combined with priority"),
        (dict(codel=CoDel(), max_wait_s=1.0), "codel cannot be combined with max_wait_s"),
        (dict(codel=CoDel(), prefetch=2), "prefetch must be 1 with codel"),
        (dict(concurrency_limit=AIMD(), prefetch=3), "prefetch must be 1 with concurrency_limit"),
    ],
)
def test_combinations_the_engine_does_not_define_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        PipelineConfig(**settings)


@pytest.mark.parametrize("field", ["concurrency_limit", "codel"])
def test_a_wrong_type_names_the_field(field):
    with pytest.raises(TypeError, match=f"{field} must be"):
        PipelineConfig(**{field: 3})
    with pytest.raises(TypeError, match=f"{field} must be"):
        PipelineConfig(**{field: CoDel() if field == "concurrency_limit" else AIMD()})


def test_priority_and_deadlines_are_defined_with_a_limit():
    # The limit only gates workers; the queue's order and the deadlines are unchanged.
    PipelineConfig(concurrency_limit=AIMD(), priority=lambda x: x, max_wait_s=1.0)


samples = st.lists(
    st.tuples(
        st.one_of(st.floats(0, 1e300), st.just(0.0)),
        st.integers(0, 10_000),
        st.booleans(),
    ),
    max_size=200,
)


@given(samples, st.integers(1, 50), st.integers(1, 50))
def test_aimd_limit_never_leaves_its_bounds(trace, low, high):
    low, high = min(low, high), max(low, high)
    state = AIMD(min_limit=low).start(max_limit=high)
    for sample in trace:
        assert low <= state.on_sample(*sample) <= high


@given(samples, st.integers(1, 50), st.integers(1, 50), st.integers(1, 700))
def test_gradient2_limit_never_leaves_its_bounds(trace, low, high, window):
    low, high = min(low, high), max(low, high)
    state = Gradient2(min_limit=low, long_window=window).start(max_limit=high)
    for sample in trace:
        assert low <= state.on_sample(*sample) <= high
        assert not math.isnan(state.estimate)


def test_a_limit_with_an_autoscaler_is_refused():
    from pipeline import Autoscaler

    with pytest.raises(ValueError, match="concurrency_limit cannot be combined with autoscale"):
        PipelineConfig(concurrency_limit=AIMD(), autoscale=Autoscaler())
    PipelineConfig(codel=CoDel(), autoscale=Autoscaler())  # CoDel works on the queue alone
