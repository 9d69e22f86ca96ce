"""``Stage``: one step of a :class:`~pipeline.chain.chain.Chain`, and what its handler returns.

A stage is a named handler with its own :class:`~pipeline.PipelineConfig`
(workers, bounded input queue, retries, dead letters, rate limit). What the
handler returns becomes the next stage's input:

- a plain stage hands on the return value, one output per item;
- a **fan-out** stage (``fan_out=True``) returns an iterable (or an async
  iterable) and each element becomes one item of the next stage, in order: a
  page becomes its records. The iterable is read to its end *inside* the
  attempt, so a handler that returns something that is not an iterable, or a
  generator that raises half way, is a failed attempt (retried, then
  dead-lettered), never a half-delivered page;
- a **batching** stage (``batch_size=N``) receives a list of up to N payloads
  (whatever arrived within ``batch_window_s`` of the first one) and returns
  None (each payload goes on unchanged) or one result per payload, in order.
  The batch is retried and dead-lettered as a whole, and accounted per item.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._validate import real, show
from ..config import PipelineConfig
from ..engine import is_async_callable
from ..events import Listener

__all__ = ["MAX_BATCH_SIZE", "Batch", "Stage"]

MAX_BATCH_SIZE = 1_000_000
"""The most items one batch may hold: a batch is one list in memory."""


class Batch(tuple):
    """The payloads a batching stage hands its handler in one call (a tuple).

    The stage's own pipeline queues, retries and dead-letters batches; the
    chain's report counts their payloads one by one.

    Attributes:
        origins: what each lineage hook of the batch former (see
            :class:`~pipeline.chain.handoff.BatchFormer`) said about each payload,
            by hook key, one entry per payload in order; empty when no hook is
            attached (tracing uses it to link a batch's span to its payloads').
            Not part of the batch's value: equality, copies and pickles ignore it.
    """

    origins: dict[Any, tuple[Any, ...]] = {}  # noqa: RUF012 - read-only default, set per batch

    def __reduce__(self) -> tuple[Any, ...]:
        # The payloads only: origins are this process's tracing state, not the batch's value.
        return (Batch, (tuple(self),))


@dataclass(frozen=True, eq=False)
class Stage:
    """One stage of a chain: a name, a handler and its own configuration.

    Args:
        name: unique within the chain; names the stage in reports and logs.
        handler: ``async def handler(payload)`` or a plain function (run on a
            thread), as for :class:`~pipeline.Pipeline`. A batching stage's
            handler receives a list of payloads.
        config: the stage's :class:`~pipeline.PipelineConfig` (defaults if None).
            Its ``drain_timeout_s`` is not used: the chain drains within its own.
            For a batching stage ``queue_maxsize`` counts batches.
        fan_out: the handler returns an iterable (or async iterable) of items
            for the next stage rather than one item. ``str``, ``bytes`` and
            mappings are refused (as a failed attempt): they are iterable by
            accident, not by intent.
        batch_size: up to this many payloads per handler call (1 to 1,000,000;
            1 means no batching).
        batch_window_s: seconds after a batch's first payload at which it is
            sent however full it is (>= 0), or None to wait until it is full
            (a partial batch still goes at the drain). Needs ``batch_size`` > 1.
        on_event: a listener ``f(kind, now_s, item)`` for this stage's pipeline.
        rng: random generator for this stage's backoff jitter.

    Raises:
        ValueError, TypeError: a bad value (named in the message).

    Example:
        >>> Stage("fetch", fetch_page, PipelineConfig(concurrency=2), fan_out=True)
        >>> Stage("write", insert_rows, PipelineConfig(concurrency=20), batch_size=100,
        ...       batch_window_s=0.5)
    """

    name: str
    handler: Callable[[Any], Any] | Callable[[Any], Awaitable[Any]]
    config: PipelineConfig = field(default_factory=PipelineConfig)
    fan_out: bool = field(default=False, kw_only=True)
    batch_size: int = field(default=1, kw_only=True)
    batch_window_s: float | None = field(default=None, kw_only=True)
    on_event: Listener | None = field(default=None, kw_only=True)
    rng: Any = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"stage name must be a non-empty string, got {show(self.name)}")
        if not callable(self.handler):
            raise TypeError(
                f"stage {self.name!r}: handler must be callable, got {show(self.handler)}"
            )
        if self.config is None:
            object.__setattr__(self, "config", PipelineConfig())
        if not isinstance(self.config, PipelineConfig):
            raise TypeError(
                f"stage {self.name!r}: config must be a PipelineConfig, got {show(self.config)}"
            )
        if not isinstance(self.fan_out, bool):
            raise TypeError(
                f"stage {self.name!r}: fan_out must be True or False, got {show(self.fan_out)}"
            )
        size = self.batch_size
        if isinstance(size, bool) or not isinstance(size, int):
            raise TypeError(
                f"stage {self.name!r}: batch_size must be an integer >= 1, got {show(size)}"
            )
        if not 1 <= size <= MAX_BATCH_SIZE:
            raise ValueError(
                f"stage {self.name!r}: batch_size must be >= 1 and <= {MAX_BATCH_SIZE:,}, "
                f"got {show(size)}"
            )
        if self.batch_window_s is not None:
            real(f"stage {self.name!r}: batch_window_s", self.batch_window_s, "seconds", at_least=0)
            if size == 1:
                raise ValueError(
                    f"stage {self.name!r}: batch_window_s={show(self.batch_window_s)} needs "
                    "batch_size > 1 (a batch of one never waits)"
                )
        if self.fan_out and size > 1:
            raise ValueError(
                f"stage {self.name!r}: fan_out=True and batch_size={size} cannot be combined; "
                "split them into two stages"
            )
        if self.on_event is not None and not callable(self.on_event):
            raise TypeError(
                f"stage {self.name!r}: on_event must be callable or None, got {show(self.on_event)}"
            )

    def __repr__(self) -> str:
        extra = " fan_out" if self.fan_out else ""
        if self.batch_size > 1:
            extra += f" batch_size={self.batch_size} batch_window_s={self.batch_window_s}"
        return f"<Stage {self.name!r} concurrency={self.config.concurrency}{extra}>"

    @property
    def batching(self) -> bool:
        """True when the handler receives lists of payloads."""
        return self.batch_size > 1

    @property
    def slots(self) -> int:
        """Items the stage's workers may hold at once: ``concurrency``, times
        ``prefetch`` for a plain-function handler (each call in flight is a slot)."""
        cfg = self.config
        return cfg.concurrency * (1 if is_async_callable(self.handler) else cfg.prefetch)

    def items_bound(self, max_children: int = 1) -> int | None:
        """The most items this stage ever holds at once, or None if its queue is unbounded.

        Held means queued, waiting for a retry, in an attempt, waiting for room
        in the next stage, or (batching) in the batch being formed. A worker
        slot holds one item in an attempt or the outputs of one finished item
        waiting to be handed on, so::

            plain, fan-out:  queue_maxsize + slots * max(1, max_children)
            batching:        (queue_maxsize + slots) * batch_size + batch_size

        Args:
            max_children: the most items one parent yields (fan-out stages; 1 otherwise).
        """
        maxsize = self.config.queue_maxsize
        if maxsize is None:
            return None
        if self.batching:
            return (maxsize + self.slots) * self.batch_size + self.batch_size
        return maxsize + self.slots * max(1, max_children if self.fan_out else 1)

    def call(self) -> Callable[[Any], Any]:
        """The handler the stage's pipeline calls: the user's, made to return outputs.

        A plain stage's handler is used unchanged (a one-stage chain is exactly
        a :class:`~pipeline.Pipeline`). Fan-out and batching stages get a
        wrapper, async exactly when the handler is, that materialises the
        outputs as a tuple inside the attempt.
        """
        if not (self.fan_out or self.batching):
            return self.handler
        handler = self.handler
        collect = _children if self.fan_out else _batch_results
        if is_async_callable(handler):

            async def call_async(payload: Any) -> tuple[Any, ...]:
                value = await handler(_argument(payload))
                return await _collect_async(value, payload, collect)

            return call_async

        def call_on_thread(payload: Any) -> Any:
            value = handler(_argument(payload))
            if inspect.isawaitable(value):
                # A plain function returning a coroutine: the engine awaits this one.
                return _await_then_collect(value, payload, collect)
            if isinstance(value, AsyncIterable):
                return _collect_async(value, payload, collect)  # read on the loop, not here
            return collect(value, payload)

        return call_on_thread


def _argument(payload: Any) -> Any:
    # A fresh list per attempt: a handler that edits its batch cannot change a retry's.
    return list(payload) if isinstance(payload, Batch) else payload


async def _await_then_collect(value: Awaitable[Any], payload: Any, collect: Any) -> Any:
    return await _collect_async(await value, payload, collect)


async def _collect_async(value: Any, payload: Any, collect: Any) -> tuple[Any, ...]:
    if isinstance(value, AsyncIterable):
        value = [each async for each in value]
    return collect(value, payload)


def _children(value: Any, _payload: Any) -> tuple[Any, ...]:
    """A fan-out handler's outputs as a tuple; a TypeError (a failed attempt) if not iterable."""
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise TypeError(
            "a fan_out stage's handler must return an iterable of items (a list, tuple, "
            f"generator or async iterable; not str, bytes or a mapping), got "
            f"{type(value).__name__}: {show(value)}"
        )
    return tuple(value)


def _batch_results(value: Any, payload: Batch) -> tuple[Any, ...]:
    """A batch handler's outputs: its payloads (None) or one result per payload."""
    if value is None:
        return tuple(payload)
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise TypeError(
            "a batching stage's handler must return None or one result per payload, "
            f"got {type(value).__name__}: {show(value)}"
        )
    results = tuple(value)
    if len(results) != len(payload):
        raise TypeError(
            f"a batching stage's handler must return None or one result per payload: "
            f"got {len(results)} results for a batch of {len(payload)}"
        )
    return results
