"""``CoDel``: controlled-delay shedding of queued items, with adaptive LIFO.

The control law is CoDel's (Nichols and Jacobson, "Controlling Queue Delay",
ACM Queue 10(5), 2012), as RFC 8289 (January 2018) gives it in its
pseudocode, section 5, with the Linux re-entry rule it adopts. Each time a
worker takes an item, the item that waited longest (the head, in FIFO order)
is judged by its sojourn time, from entering the queue (admission or
readmission after a backoff) to now:

- sojourn below ``target_s``, or at most one item left behind it (RFC 8289's
  ``bytes() <= maxpacket``, one item being a packet here): the queue is not
  standing; the "first above" time is forgotten;
- otherwise, the first time: note ``first_above = now + interval_s``; once
  ``now >= first_above`` it is OK to drop;
- not dropping and OK to drop: shed the head, enter the dropping state,
  ``count = 1`` (or, when the last dropping state ended less than 16
  intervals ago and dropped more than once since, the drops of that state:
  ``count = count - lastcount``), ``drop_next = now + interval_s / sqrt(count)``;
- dropping: leave the state as soon as the head is not OK to drop; while
  ``now >= drop_next``, shed the head, ``count += 1``,
  ``drop_next += interval_s / sqrt(count)``;
- an empty queue leaves the dropping state.

The defaults, 5 ms and 100 ms, are those of Facebook's queues ("Fail at
Scale", Maurer, ACM Queue 13(8), 2015), whose *adaptive LIFO* this adds with
``lifo=True``: while the queue stands (the head has been above target since
the last time it was below, or CoDel is dropping), a worker takes the newest
item instead of the head. The head is still what CoDel judges, so the oldest
items are the ones shed, and the newest, whose callers most likely still
wait, are served first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._validate import real

__all__ = ["CoDel", "CoDelState"]


@dataclass(frozen=True, slots=True)
class CoDel:
    """Controlled-delay shedding of queued items (CoDel), with adaptive LIFO.

    Args:
        target_s: the sojourn time a queue may keep standing, seconds (> 0).
        interval_s: how long the sojourn must stay above target before the
            first shed, and the base of the shedding schedule
            ``interval_s / sqrt(count)``, seconds (> 0).
        lifo: take the newest item first while the queue stands.

    Raises:
        ValueError: a time that is not finite and > 0 (the message names it).
        TypeError: a time that is not a number, or ``lifo`` that is not a bool.

    Example:
        >>> CoDel()
        CoDel(target_s=0.005, interval_s=0.1, lifo=True)
    """

    target_s: float = 0.005
    interval_s: float = 0.1
    lifo: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "target_s", real("target_s", self.target_s, "seconds", above=0))
        interval = real("interval_s", self.interval_s, "seconds", above=0)
        object.__setattr__(self, "interval_s", interval)
        if not isinstance(self.lifo, bool):
            raise TypeError(f"lifo must be True or False, got {self.lifo!r}")

    def start(self) -> CoDelState:
        """The state of one run."""
        return CoDelState(self.target_s, self.interval_s)


# pop() -> (item, sojourn_s, items left behind it), or None when the queue is empty
Pop = Callable[[], "tuple[Any, float, int] | None"]


class CoDelState:
    """CoDel's state in one run (RFC 8289's variables; ``None`` for its 0 sentinel).

    Attributes:
        first_above_s: when the head will have been above target for an interval,
            or None while it is below.
        dropping: in the dropping state.
        drop_next_s: when the next shed is due while dropping.
        count: sheds in the current dropping state (the schedule's ``count``).
        shed: items shed so far.
    """

    __slots__ = (
        "count",
        "drop_next_s",
        "dropping",
        "first_above_s",
        "interval_s",
        "lastcount",
        "shed",
        "target_s",
    )

    def __init__(self, target_s: float, interval_s: float) -> None:
        self.target_s = target_s
        self.interval_s = interval_s
        self.first_above_s: float | None = None
        self.dropping = False
        self.drop_next_s = 0.0
        self.count = 0
        self.lastcount = 0
        self.shed = 0

    def __repr__(self) -> str:
        return (
            f"<CoDelState dropping={self.dropping} count={self.count} "
            f"first_above_s={self.first_above_s} drop_next_s={self.drop_next_s} shed={self.shed}>"
        )

    @property
    def standing(self) -> bool:
        """Whether a queue stands: above target since last below, or dropping (LIFO then)."""
        return self.dropping or self.first_above_s is not None

    def _judge(self, now: float, head: tuple[Any, float, int] | None) -> bool:
        """RFC 8289's ``dodequeue``: whether it is OK to drop ``head``."""
        if head is None:
            self.first_above_s = None
            return False
        _, sojourn_s, behind = head
        if sojourn_s < self.target_s or behind <= 1:
            self.first_above_s = None
            return False
        if self.first_above_s is None:
            self.first_above_s = now + self.interval_s
            return False
        return now >= self.first_above_s

    def _control_law(self, t: float) -> float:
        return t + self.interval_s / math.sqrt(self.count)

    def dequeue(self, now: float, pop: Pop, shed: Callable[[Any], None]) -> Any:
        """Take the next item at ``now``, shedding heads as CoDel decides.

        Args:
            now: the clock, seconds.
            pop: removes and returns the head as ``(item, sojourn_s, items left
                behind it)``, or None when the queue is empty.
            shed: called with each item shed, in order.

        Returns:
            The head to serve, or None when the queue is (or became) empty.
        """
        head = pop()
        ok = self._judge(now, head)
        if head is None:
            self.dropping = False  # an empty queue leaves the dropping state
            return None
        if self.dropping:
            if not ok:
                self.dropping = False
            while self.dropping and now >= self.drop_next_s:
                self._shed(head, shed)
                self.count += 1
                head = pop()
                if not self._judge(now, head):
                    self.dropping = False
                else:
                    self.drop_next_s = self._control_law(self.drop_next_s)
        elif ok:
            self._shed(head, shed)
            head = pop()
            self._judge(now, head)
            self.dropping = True
            delta = self.count - self.lastcount
            self.count = 1
            if delta > 1 and now - self.drop_next_s < 16 * self.interval_s:
                self.count = delta
            self.drop_next_s = self._control_law(now)
            self.lastcount = self.count
        return None if head is None else head[0]

    def _shed(self, head: tuple[Any, float, int], shed: Callable[[Any], None]) -> None:
        self.shed += 1
        shed(head[0])
