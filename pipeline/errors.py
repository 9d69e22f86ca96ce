"""Exceptions raised by pipeline-lab.

One base class, :class:`PipelineError`. Expected conditions carry no suffix
(:class:`QueueFull`, :class:`PipelineClosed`); real failures end in ``Error``.
Bad arguments are plain :class:`ValueError` / :class:`TypeError` raised at
construction, never a subclass of :class:`PipelineError`.
"""

from __future__ import annotations

from ._validate import real

__all__ = [
    "DeadlockError",
    "PermanentError",
    "PipelineClosed",
    "PipelineError",
    "QueueFull",
    "RateLimited",
    "RetryLater",
    "SourceError",
]


class PipelineError(Exception):
    """Base class of every exception this package raises on purpose."""


class QueueFull(PipelineError):
    """Raised when ``put_nowait`` finds the bounded queue at its ``maxsize``."""


class PipelineClosed(PipelineError):
    """Raised when an item is offered to a pipeline that has stopped intake."""


class PermanentError(PipelineError):
    """Raised by a handler to say an item can never succeed.

    The default retry policy never retries it: the item goes straight to the
    dead-letter store after this attempt.
    """


class RetryLater(PipelineError):
    """Raised by a handler when the downstream said when to try again (HTTP 429 or 503
    with ``Retry-After``).

    It is retryable like any ``Exception``, and the next attempt waits at least
    ``retry_after_s`` seconds of loop time (or the backoff, if longer). The
    engine honours any exception with a ``retry_after_s`` attribute this way;
    this class is the ready-made one.

    Args:
        message: what the downstream said.
        retry_after_s: seconds to wait before the next attempt: any real
            number >= 0 that fits a float (``int``, ``float``, numpy numbers,
            ``Decimal``, ``Fraction``; kept as a float), or None for the
            backoff alone.

    Raises:
        ValueError: ``retry_after_s`` is negative, NaN, infinite or too large
            for a float (``10**400``).
        TypeError: ``retry_after_s`` is not a real number (a ``bool`` or a
            string is not).
    """

    def __init__(self, message: str = "", *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        if retry_after_s is not None:
            retry_after_s = real("retry_after_s", retry_after_s, "seconds, or None", at_least=0)
        self.retry_after_s = retry_after_s


class RateLimited(RetryLater):
    """Raised by a downstream that refuses a call, like HTTP 429.

    It is retryable: the pipeline backs off and tries again, no sooner than
    ``retry_after_s`` when one is given (see :class:`RetryLater`).
    """


class DeadlockError(PipelineError):
    """Raised when a virtual-time run can never make progress.

    Every task waits on another, no timer is pending and no thread is working:
    in real time this program would hang forever. The message lists each
    waiting task and what it waits on.
    """


class SourceError(PipelineError):
    """Raised by ``Pipeline.run`` when the source itself raised an ``Exception``.

    Intake stops at the failure; everything already admitted is drained as
    usual and accounted for in :attr:`report`. The source's exception is the
    ``__cause__``. A ``BaseException`` that is not an ``Exception`` (from the
    source, or from the ``priority`` or ``max_wait_s`` function) is never
    wrapped: ``run`` raises it as itself.
    """

    def __init__(self, message: str, report: object) -> None:
        super().__init__(message)
        self.report = report
