"""Every bad setting fails at construction, naming the parameter, the value and what is allowed."""

from __future__ import annotations

import pytest

from pipeline import Backoff, PipelineConfig, RateLimit, RetryPolicy


@pytest.mark.parametrize(
    ("overrides", "error", "words"),
    [
        ({"concurrency": 0}, ValueError, ["concurrency", "0", ">= 1"]),
        ({"concurrency": 2.5}, TypeError, ["concurrency", "2.5", "integer"]),
        ({"concurrency": True}, TypeError, ["concurrency", "True"]),
        ({"queue_maxsize": 0}, ValueError, ["queue_maxsize", "0", ">= 1", "unbounded", "None"]),
        ({"queue_maxsize": -5}, ValueError, ["queue_maxsize", "-5", "backpressure"]),
        ({"queue_maxsize": "big"}, TypeError, ["queue_maxsize", "'big'"]),
        ({"on_full": "drop"}, ValueError, ["on_full", "'drop'", "'block'", "'reject'"]),
        ({"max_attempts": 0}, ValueError, ["max_attempts", "0", ">= 1"]),
        ({"attempt_timeout_s": 0}, ValueError, ["attempt_timeout_s", "0", "> 0"]),
        ({"attempt_timeout_s": float("nan")}, ValueError, ["attempt_timeout_s", "nan"]),
        ({"drain_timeout_s": -1}, ValueError, ["drain_timeout_s", "-1", ">= 0"]),
        ({"drain_timeout_s": "30"}, TypeError, ["drain_timeout_s", "'30'"]),
        ({"prefetch": 0}, ValueError, ["prefetch", "0", ">= 1"]),
        ({"backoff": 1.0}, TypeError, ["backoff", "1.0", "Backoff"]),
        ({"retry": (ValueError,)}, TypeError, ["retry", "RetryPolicy"]),
        ({"rate_limit": 60}, TypeError, ["rate_limit", "60", "RateLimit"]),
    ],
)
def test_config_errors_name_parameter_value_and_what_is_allowed(overrides, error, words):
    with pytest.raises(error) as caught:
        PipelineConfig(**overrides)
    message = str(caught.value)
    for word in words:
        assert word in message


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: Backoff(kind="linear"), ["kind", "'linear'", "'constant'", "'exponential'"]),
        (lambda: Backoff(base_s=-1.0), ["base_s", "-1.0", ">= 0"]),
        (lambda: Backoff(factor=0.5), ["factor", "0.5", ">= 1"]),
        (lambda: Backoff(cap_s=float("inf")), ["cap_s", "inf"]),
        (lambda: RateLimit(), ["requests_per_minute", "tokens_per_minute"]),
        (lambda: RateLimit(requests_per_minute=0), ["requests_per_minute", "0", "> 0"]),
        (
            lambda: RateLimit(tokens_per_minute=100, tokens_per_item=500),
            ["tokens_per_item", "500", "tokens_per_minute"],
        ),
        (lambda: RetryPolicy(retry_on=ValueError), ["retry_on", "tuple"]),
    ],
)
def test_component_errors_name_the_parameter(make, words):
    with pytest.raises((ValueError, TypeError)) as caught:
        make()
    for word in words:
        assert word in str(caught.value)


def test_config_is_frozen_and_keyword_only():
    cfg = PipelineConfig(concurrency=8, queue_maxsize=None)
    assert cfg.capacity is None
    assert PipelineConfig(concurrency=4, queue_maxsize=10).capacity == 14
    with pytest.raises(AttributeError):
        cfg.concurrency = 1
    with pytest.raises(TypeError):
        PipelineConfig(4)


def test_large_values_are_allowed_for_capacity_planning():
    assert PipelineConfig(concurrency=500, queue_maxsize=1_000_000).concurrency == 500


def test_backoff_delays():
    exp = Backoff(kind="exponential", base_s=0.5, factor=3.0, cap_s=10.0)
    assert [exp.delay(n) for n in range(1, 6)] == [0.5, 1.5, 4.5, 10.0, 10.0]
    assert Backoff.constant(2.0).delay(9) == 2.0
    assert exp.delay(10_000) == 10.0
    with pytest.raises(ValueError, match="rng"):
        Backoff(jitter=True).delay(1)
