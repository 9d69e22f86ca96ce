"""Exceptions raised by pipeline-lab.

One base class, :class:`PipelineError`. Expected conditions carry no suffix
(:class:`QueueFull`, :class:`PipelineClosed`); real failures end in ``Error``.
Bad arguments are plain :class:`ValueError` / :class:`TypeError` raised at
construction, never a subclass of :class:`PipelineError`.
"""

from __future__ import annotations

__all__ = [
    "DeadlockError",
    "PermanentError",
    "PipelineClosed",
    "PipelineError",
    "QueueFull",
    "RateLimited",
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


class RateLimited(PipelineError):
    """Raised by a (simulated) downstream that refuses a call, like HTTP 429.

    It is retryable: the pipeline backs off and tries again.
    """


class DeadlockError(PipelineError):
    """Raised when a virtual-time run can never make progress.

    Every task waits on another, no timer is pending and no thread is working:
    in real time this program would hang forever. The message lists each
    waiting task and what it waits on.
    """


class SourceError(PipelineError):
    """Raised by ``Pipeline.run`` when the source itself raised.

    Intake stops at the failure; everything already admitted is drained as
    usual and accounted for in :attr:`report`. The source's exception is the
    ``__cause__``.
    """

    def __init__(self, message: str, report: object) -> None:
        super().__init__(message)
        self.report = report
