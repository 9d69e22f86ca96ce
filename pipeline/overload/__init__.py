"""Overload controls: optional limits that keep a pipeline from making an overload worse.

Each is a small frozen, validated configuration object set on
:class:`~pipeline.PipelineConfig` (off by default) and a state object the
engine makes per run, driven by the loop's clock (``now``, seconds, from
``loop.time()``) or the samples the engine measured on it, so the same code runs
in real and in virtual time, and a test can drive it with hand-computed times:

- :class:`RetryBudget` (``PipelineConfig(retry_budget=...)``): retries at most
  a share of first attempts plus a floor, over a sliding window (Finagle's).
- :class:`CircuitBreaker` (``PipelineConfig(breaker=...)``): stops calling the
  handler while it keeps failing, and probes before calling it again
  (Resilience4j's count-based breaker).
- :class:`AIMD` and :class:`Gradient2` (``PipelineConfig(concurrency_limit=...)``):
  adaptive limits on the attempts in flight (Netflix's concurrency-limits).
- :class:`CoDel` (``PipelineConfig(codel=...)``): controlled-delay shedding of
  queued items, with adaptive LIFO while a queue stands.

Standard library only.
"""

from .breaker import CircuitBreaker
from .budget import RetryBudget
from .codel import CoDel
from .limits import AIMD, Gradient2

__all__ = ["AIMD", "CircuitBreaker", "CoDel", "Gradient2", "RetryBudget"]
