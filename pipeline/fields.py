"""Every field a :class:`~pipeline.engine.Pipeline` holds, declared once, with its meaning.

One pipeline is one object, written in four files: :mod:`pipeline.engine`
(lifecycle, the close, the report), :mod:`pipeline.intake` (producers,
``put`` and admission), :mod:`pipeline.attempts` (workers and one attempt's
life) and :mod:`pipeline.expiry` (priority keys, deadlines, expiry).
:class:`PipelineFields` is the base of all four: it declares, with its type
and meaning, each attribute that any of them reads or writes, and the few
methods the parts call on one another. ``Pipeline.__init__`` fills
every field; nothing else adds one.

The declarations are annotations only: no default values, no slots, no
properties. An instance keeps its plain ``__dict__``, so an attribute read on
the per-item paths costs what it did before this class existed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio
    import random
    from collections.abc import Callable, Coroutine

    from .attempts import ThreadCall
    from .autoscale import Recommender
    from .config import PipelineConfig
    from .controls import LimitGate
    from .deadlines import DeadlineSweep
    from .events import EventKind, Listener
    from .items import WorkItem
    from .overload.guard import Guard
    from .priority import PriorityKeys
    from .queue import WorkQueue
    from .ratelimit import RateLimiter
    from .records import DeadLetter, RunReport, ShedLog
    from .resultstream import ResultStream
    from .state import State

__all__ = ["PipelineFields"]


class PipelineFields:
    """The shared state of a pipeline's parts (see the module docstring).

    Counters are items or attempts since the start; times are seconds of the
    running loop's clock (``loop.time()``, virtual under simulation).
    """

    # -- what it was made with -------------------------------------------------------

    handler: Callable[[Any], Any]
    """The user's handler: a coroutine function, or a plain function run on threads."""
    config: PipelineConfig
    """The configuration (frozen)."""
    name: str
    """Shown in task names, logs and ``repr``."""
    _on_admitted: Listener | None
    """The listener called directly on the per-item paths for ADMITTED (likewise
    ``_on_started``, ``_on_completed``): ``on_event`` as given, or, with listeners
    attached (an exporter), one that calls each that wants the kind, in isolation."""
    _on_started: Listener | None
    _on_completed: Listener | None
    _clock: Callable[[], float]
    """The running loop's clock, ``loop.time`` or, where that is asyncio's own
    ``time.monotonic()``, ``time.monotonic`` itself (a C call, no Python frame)."""
    _user_listener: Listener | None
    """The ``on_event`` listener as given."""
    _attached: tuple[Any, ...]
    """Listeners attached after construction (:meth:`Pipeline.add_listener`), in order: each a
    listener or a mapping from the event kinds it wants to a listener."""
    _on_kind: tuple[Listener | None, ...]
    """For each event kind (by value), its listener wrapped so that a failure is logged and
    counted, not raised; None where nobody listens."""
    _on_event: Listener | None
    """None when no kind has a listener (the one test the rare events make first)."""
    _rng: random.Random
    """Random generator for backoff jitter."""
    _is_async: bool
    """Whether ``handler`` is awaited (True) or run on a thread (False)."""

    # -- lifecycle -------------------------------------------------------------------

    state: State
    """IDLE -> OPEN -> DRAINING -> CLOSED."""
    report: RunReport | None
    """The run's report, once closed."""
    _loop: asyncio.AbstractEventLoop
    """The running loop, from the start on (None before)."""
    _started_s: float
    """Loop time of the start."""
    _settled: asyncio.Event
    """Set when no admitted item is left and intake has stopped (None before the start)."""
    _closing: asyncio.Task[RunReport] | None
    """The close's task, once it started (see :func:`~pipeline.state.close_once`)."""
    _stop_requested: bool
    """``stop()`` was called before the start: the run stops at once when it starts."""
    _aborted: BaseException | None
    """The first internal failure (a bug, never a handler's error): the run closes on it."""
    _drain_timed_out: bool
    """The drain hit ``drain_timeout_s`` and handed items back unfinished."""
    _signals: tuple[int, ...]
    """The signals whose handlers ``stop_on_signals`` installed, removed at the close."""

    # -- tasks -----------------------------------------------------------------------

    _workers: dict[asyncio.Task[None], float]
    """The worker tasks alive now, each with its start (loop time, seconds)."""
    _workers_made: int
    """Worker tasks made so far, to name each one."""
    _worker_target: int
    """The pool's size: ``concurrency``, or the last resize (the workers alive are this
    many and ``_queue.retiring``, busy workers due to leave)."""
    _workers_peak: int
    """The largest ``statistics().workers`` so far."""
    _starting: dict[asyncio.Task[None], None]
    """The workers still in their cold start (an autoscaler's), oldest first."""
    _worker_s: float
    """Seconds worked by the workers that have ended."""
    _worker_starts_s: float
    """The sum of the live workers' starts (loop time): worker-seconds in O(1)."""
    _recommender: Recommender | None
    """The autoscaler's decisions, or None without ``PipelineConfig(autoscale=...)``."""
    _scale_events: int
    """Syncs that changed the pool's size."""
    _pool_tasks: list[asyncio.Task[None]]
    """The autoscaler's syncing task, if any: cancelled at the close."""
    _producers: list[asyncio.Task[None]]
    """One producer task per source given to ``run``."""
    _own_tasks: set[asyncio.Task[Any]]
    """Every task the pipeline made (workers, producers, thread calls): a handler in one
    of them must not wait for the drain."""
    _unread_sources: dict[int, Any]
    """Sources whose producer has not started yet, by index: closed if it never does."""

    # -- items inside ----------------------------------------------------------------

    _queue: WorkQueue[WorkItem]
    """The bounded queue between intake and the workers."""
    _running: dict[WorkItem, None]
    """Items in an attempt now (a dict as an ordered set)."""
    _retry_timers: dict[WorkItem, asyncio.TimerHandle]
    """Items waiting out a backoff, with the timer that re-admits each."""
    _thread_calls: dict[WorkItem, ThreadCall]
    """Items whose plain-function handler runs on a thread now."""
    _handed_back: list[WorkItem]
    """Items admitted while ``stop()`` ran: unfinished at the close, never queued."""
    _unsettled: int
    """Admitted items not yet completed or dead-lettered (queued, running or waiting)."""
    _keys: PriorityKeys | None
    """Computes each payload's priority key (``config.priority``), or None: first in, first out."""
    _max_wait_s: float | None
    """``config.max_wait_s`` when it is a finite number of seconds, else None."""
    _wait_of: Callable[[Any], Any] | None
    """``config.max_wait_s`` when it is a per-item function, else None."""
    _classified: bool
    """Whether admission computes keys or deadlines (``priority`` or ``max_wait_s`` set)."""
    _sweep: DeadlineSweep | None
    """Expires queued items at their deadlines (made at the start when items have them)."""
    _on_expired: Callable[[Any], None] | None
    """The ``on_expired`` hook, or None."""
    _expired: ShedLog
    """Items that expired (``max_wait_s``): the exact count and the latest payloads."""
    _limiter: RateLimiter | None
    """Spaces attempt starts when ``config.rate_limit`` is set (made at the start)."""
    _guard: Guard | None
    """The retry budget and circuit breaker (``config.retry_budget``, ``config.breaker``),
    made at the start when either is set, else None."""
    _gate: LimitGate | None
    """The concurrency limit's gate when ``config.concurrency_limit`` is set (made at the start)."""
    _codel_shed: int
    """Items CoDel shed from the queue (also counted in ``_shed``)."""
    _worker_loop: Callable[[], Coroutine[Any, Any, None]]
    """The loop each worker runs: ``_work``, or ``_work_controlled`` with a control on."""
    _stream: ResultStream | None
    """Where results go when someone asked for them (``results()``), else None."""

    # -- counts ----------------------------------------------------------------------

    _offered: int
    """Items offered to intake (admitted or shed)."""
    _admitted: int
    """Items admitted to the queue."""
    _completed: int
    """Items whose handler returned."""
    _retried: int
    """Retries scheduled."""
    _attempts: int
    """Attempts started."""
    _attempts_failed: int
    """Attempts that ended in a failure other than a timeout (retried or dead-lettered)."""
    _attempts_timed_out: int
    """Attempts that ended in a ``TimeoutError`` (the attempt timeout, or the handler's own)."""
    _unfinished: int
    """Items the close handed back unfinished (0 until it has)."""
    _busy: int
    """Workers inside an attempt now."""
    _dead_letters: list[DeadLetter]
    """Items that failed for good, in the order they did."""
    _shed: ShedLog
    """Items shed at admission (``on_full="reject"``) or from the queue by CoDel: the count
    and the latest payloads."""
    _listener_errors: int
    """Listener calls that raised (logged once, then counted)."""

    # -- producer blocked time -------------------------------------------------------

    _blocked_s: float
    """Seconds producers spent waiting for a slot, summed over waits that ended."""
    _blocked_now: int
    """Producers waiting for a slot now."""
    _blocked_since_sum: float
    """Sum of the start times of the waits now open: blocked time so far is
    ``_blocked_s + _blocked_now * now - _blocked_since_sum``, with no per-wait state."""

    # -- logging ---------------------------------------------------------------------

    _log_debug: bool
    """Whether the ``pipeline`` logger takes DEBUG records, looked up once at the start."""
    _log_info: bool
    """The same for INFO."""
    _log_warning: bool
    """The same for WARNING."""

    if TYPE_CHECKING:
        # Defined by Pipeline (engine.py); called by Intake and Attempts.

        def stop(self) -> None: ...
        def _accepting(self) -> bool: ...
        def _abort(self, error: BaseException) -> None: ...
        def _emit(self, kind: EventKind, item: Any) -> None: ...
        def _emit_at(self, kind: EventKind, now_s: float, item: Any) -> None: ...
        def _listener_failed(self, kind: EventKind, error: BaseException) -> None: ...
        def _oldest_age_s(self, now_s: float) -> float: ...
        def _now(self) -> float: ...
        def _worker_seconds(self, now_s: float) -> float: ...

        # Defined by Attempts (attempts.py) and Expiry (expiry.py); called across them.

        def _settle(self) -> None: ...
        def _classify(self, item: WorkItem) -> None: ...
        def _expire(self, item: WorkItem, now: float) -> None: ...
        async def _work(self) -> None: ...
        def _expire_queued(self, item: WorkItem, now: float) -> None: ...
        def _note_expired(self, item: WorkItem) -> None: ...
        def _control_statistics(self) -> dict[str, Any]: ...
        def _log(self, level: int, event: str, *, exc_info: Any = None, **fields: Any) -> None: ...
