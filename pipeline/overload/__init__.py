"""Overload controls: optional limits that keep a pipeline from making an overload worse.

Each is a small frozen, validated configuration object set on
:class:`~pipeline.PipelineConfig` (off by default) and a state object the
engine makes per run, driven by the loop's clock, so the same code runs in real
and in virtual time:

- :class:`RetryBudget` (``PipelineConfig(retry_budget=...)``): retries at most
  a share of first attempts plus a floor, over a sliding window (Finagle's).
- :class:`CircuitBreaker` (``PipelineConfig(breaker=...)``): stops calling the
  handler while it keeps failing, and probes before calling it again
  (Resilience4j's count-based breaker).
"""

from .breaker import CircuitBreaker
from .budget import RetryBudget

__all__ = ["CircuitBreaker", "RetryBudget"]
