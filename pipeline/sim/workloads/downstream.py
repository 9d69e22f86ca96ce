"""``Downstream``: the system a simulated handler calls, with its own servers and FIFO queue.

Real retry storms live in the gap between a client that gives up and a
server that does not notice: the client's ``attempt_timeout_s`` cuts an
attempt, the request it sent stays in the server's queue (or on a server)
and is served to its end, for nobody. A :class:`Downstream` in a
:class:`~pipeline.sim.Scenario` models that server: each attempt of the
simulated handler joins its FIFO queue, waits for one of its ``concurrency``
servers, is served for a draw of ``service`` (seconds at full speed; a
:class:`~pipeline.sim.CapacityDrop` slows it) and returns. Cutting the
attempt never withdraws that work (orphaned work). A queue holding
``queue_maxsize`` requests fails an attempt at once with
:class:`DownstreamFull`, an error the retry policy sees like any other.
The run itself is :mod:`pipeline.sim.running.downstream`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..._validate import integer, show
from .distributions import Distribution

__all__ = ["MAX_DOWNSTREAM_SERVERS", "Downstream", "DownstreamFull"]

MAX_DOWNSTREAM_SERVERS = 1_000_000
"""Most servers a :class:`Downstream` may have (each holds a slot in the run)."""


class DownstreamFull(Exception):
    """Raised (to the simulated handler's caller) when an attempt finds the downstream's
    queue full: the attempt fails at once, and the retry policy decides what follows."""


@dataclass(frozen=True, kw_only=True)
class Downstream:
    """The downstream system: ``concurrency`` servers and a FIFO queue in front of them.

    Args:
        concurrency: servers (an integer, 1 to :data:`MAX_DOWNSTREAM_SERVERS`).
        service: service time of one request at full speed, seconds (a distribution).
        queue_maxsize: requests that may wait for a server (an integer >= 1), or
            None (default) for an unbounded queue. Requests on a server do not count.

    Raises:
        TypeError: a part of the wrong type (a bool is no integer).
        ValueError: a value out of range, named with what is allowed.

    Example:
        >>> from pipeline.sim import Exponential
        >>> Downstream(concurrency=1, service=Exponential(mean=0.1), queue_maxsize=100)
    """

    concurrency: int
    service: Distribution
    queue_maxsize: int | None = None

    def __post_init__(self) -> None:
        servers = integer("concurrency", self.concurrency, "downstream servers", at_least=1)
        if servers > MAX_DOWNSTREAM_SERVERS:
            raise ValueError(
                f"concurrency must be <= {MAX_DOWNSTREAM_SERVERS:_} (downstream servers), "
                f"got {show(servers)}"
            )
        object.__setattr__(self, "concurrency", servers)
        if not isinstance(self.service, Distribution):
            raise TypeError(
                f"service must be a distribution (seconds per request at full speed), "
                f"got {show(self.service)}"
            )
        if self.queue_maxsize is not None:
            size = integer(
                "queue_maxsize",
                self.queue_maxsize,
                "requests waiting downstream, or None",
                at_least=1,
            )
            object.__setattr__(self, "queue_maxsize", size)
