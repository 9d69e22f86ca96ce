"""Golden traces for CoDel (RFC 8289's pseudocode) and adaptive LIFO, computed by hand.

target 5 ms, interval 100 ms (Facebook's defaults, CoDel()). A fake FIFO gives CoDel
``(item, sojourn_s, items left behind)`` for each head it pops.
"""

from __future__ import annotations

import math
from collections import deque

import pytest

from pipeline import CoDel
from pipeline.codelqueue import CoDelWorkQueue


class Fifo:
    """Items (name, entered_s) in FIFO order, taken by CoDel at given times."""

    def __init__(self, state, entered):
        self.state = state
        self.queue = deque(entered)
        self.shed: list[str] = []

    def take(self, now):
        def pop():
            if not self.queue:
                return None
            name, entered_s = self.queue.popleft()
            return name, now - entered_s, len(self.queue)

        return self.state.dequeue(now, pop, self.shed.append)


def backlog(n=50, at=0.0):
    return [(f"i{k}", at) for k in range(n)]


def test_below_target_nothing_is_shed():
    # sojourn 4 ms < 5 ms: served, no "first above" time
    fifo = Fifo(CoDel().start(), backlog())
    assert fifo.take(0.004) == "i0"
    assert fifo.shed == [] and fifo.state.first_above_s is None and not fifo.state.standing


def test_first_shed_only_after_a_full_interval_above_target():
    # 0.010: sojourn 10 ms > 5 ms, first time: first_above = 0.010 + 0.1 = 0.110, serve i0
    # 0.109: above, but now < first_above: serve i1
    # 0.110: now >= first_above: shed i2, dropping, count 1, drop_next = 0.110 + 0.1/1; serve i3
    fifo = Fifo(CoDel().start(), backlog())
    assert fifo.take(0.010) == "i0"
    assert fifo.state.first_above_s == pytest.approx(0.110)
    assert fifo.take(0.109) == "i1" and fifo.shed == []
    assert fifo.take(0.110) == "i3"
    assert fifo.shed == ["i2"]
    state = fifo.state
    assert state.dropping and state.count == 1
    assert state.drop_next_s == pytest.approx(0.210)


def test_sheds_follow_interval_over_sqrt_count():
    # After the first shed at 0.110 (count 1, drop_next 0.110 + 0.1 = 0.21000000000000002):
    # 0.200 < drop_next: serve, no shed
    # 0.2101: shed, count 2, drop_next += 0.1/sqrt(2) (about 0.280711)
    # 0.2807 < drop_next: no shed; 0.2808: shed, count 3, drop_next += 0.1/sqrt(3)
    fifo = Fifo(CoDel().start(), backlog())
    fifo.take(0.010)
    fifo.take(0.110)
    first = 0.110 + 0.1
    # (0.010 served i0; 0.110 shed i1 and served i2)
    assert fifo.take(0.200) == "i3" and fifo.shed == ["i1"]
    assert fifo.take(0.2101) == "i5"
    assert fifo.state.count == 2 and fifo.shed == ["i1", "i4"]
    assert fifo.state.drop_next_s == first + 0.1 / math.sqrt(2)
    fifo.take(0.2807)
    assert len(fifo.shed) == 2
    fifo.take(0.2808)
    assert fifo.state.count == 3 and len(fifo.shed) == 3
    assert fifo.state.drop_next_s == first + 0.1 / math.sqrt(2) + 0.1 / math.sqrt(3)


def test_a_late_take_sheds_every_overdue_head_in_one_go():
    # Dropping with drop_next 0.210 (count 1) and a take at 0.5: shed while now >= drop_next,
    # drop_next += 0.1/sqrt(count) after each: counts 2..7 give drop_next
    # .2807, .3385, .3885, .4332, .4740, .5118 > .5: six sheds (count 1 -> 7) at this take.
    fifo = Fifo(CoDel().start(), backlog())
    fifo.take(0.010)
    fifo.take(0.110)  # shed 1
    fifo.take(0.5)
    assert len(fifo.shed) == 1 + 6 and fifo.state.count == 7
    expected = 0.210 + sum(0.1 / math.sqrt(k) for k in range(2, 8))
    assert fifo.state.drop_next_s == pytest.approx(expected, abs=1e-12)


def test_leaves_the_dropping_state_when_the_head_is_below_target():
    # Dropping after 0.110; then a fresh item entered at 0.3 is the head at 0.302 (2 ms)
    fifo = Fifo(CoDel().start(), [*backlog(3), ("new", 0.3), ("new2", 0.3), ("new3", 0.3)])
    fifo.take(0.010)  # i0 served, first_above .110
    fifo.take(0.110)  # i1 shed, i2 served: dropping
    assert fifo.state.dropping
    assert fifo.take(0.302) == "new" and not fifo.state.dropping and fifo.shed == ["i1"]


def test_an_item_with_at_most_one_behind_it_is_never_shed():
    # RFC 8289's bytes() <= maxpacket: one item is a "packet" here. Three old items:
    # 0.010: i0 has 2 behind: first_above .110; 1.0: i1 has 1 behind: below, reset; i2 served
    fifo = Fifo(CoDel().start(), backlog(3))
    assert fifo.take(0.010) == "i0" and fifo.state.first_above_s is not None
    assert fifo.take(1.0) == "i1" and fifo.state.first_above_s is None
    assert fifo.take(2.0) == "i2" and fifo.shed == []


def test_an_empty_queue_leaves_the_dropping_state():
    fifo = Fifo(CoDel().start(), backlog(4))
    fifo.take(0.010)
    fifo.take(0.110)  # shed i1, serve i2: dropping
    assert fifo.state.dropping
    fifo.queue.clear()
    assert fifo.take(0.111) is None and not fifo.state.dropping


def test_reentering_soon_resumes_the_last_drop_rate():
    # Linux rule in RFC 8289: count = count - lastcount when > 1 and now - drop_next < 16*interval.
    # First state: shed at .110 (count 1, lastcount 1), then .210 (2), .2808 (3); leave at .3.
    # Re-enter: delta = 3 - 1 = 2 > 1 and within 1.6 s: count 2, drop_next = now + .1/sqrt(2)
    fifo = Fifo(CoDel().start(), backlog(200))
    for now in (0.010, 0.110, 0.210, 0.2808):
        fifo.take(now)
    assert fifo.state.count == 3
    fifo.queue.appendleft(("fresh", 0.299))
    fifo.take(0.300)  # head 1 ms: leave the dropping state
    assert not fifo.state.dropping
    fifo.take(0.301)  # head i.. long waiting: first_above = .401
    fifo.take(0.401)  # ok to drop: re-enter
    assert fifo.state.dropping and fifo.state.count == 2
    assert fifo.state.drop_next_s == pytest.approx(0.401 + 0.1 / math.sqrt(2), abs=1e-15)


def test_reentering_late_starts_over_at_count_one():
    # Same, but re-entering more than 16 intervals (1.6 s) after drop_next: count 1
    fifo = Fifo(CoDel().start(), backlog(200))
    for now in (0.010, 0.110, 0.210, 0.2808):
        fifo.take(now)
    fifo.queue.appendleft(("fresh", 0.299))
    fifo.take(0.300)
    fifo.take(3.0)
    fifo.take(3.1)
    assert fifo.state.dropping and fifo.state.count == 1


# -- adaptive LIFO in the engine's queue


def lifo_queue(lifo=True):
    queue = CoDelWorkQueue(None, CoDel(lifo=lifo).start(), lifo)
    now = [0.0]
    shed = []
    queue.start(lambda: now[0], lambda item, at: shed.append(item))
    for name in ("a", "b", "c", "d", "e"):
        queue.put_nowait(name)
    return queue, now, shed


def test_lifo_serves_the_newest_while_the_queue_stands_and_fifo_otherwise():
    # 0.001: head a waited 1 ms < target: FIFO, a.
    # 0.010: head b waited 10 ms, 3 behind: above target (first_above .110): the queue
    # stands, so the newest, e, is served; b stays the head.
    queue, now, shed = lifo_queue()
    now[0] = 0.001
    assert queue.get_nowait() == "a"
    now[0] = 0.010
    assert queue.get_nowait() == "e"
    assert queue.live() == ["b", "c", "d"] and shed == []
    # 0.110: b still the head, above target for an interval: shed, and CoDel enters its
    # dropping state (c, judged next with only d behind it, is below: no shed). Dropping
    # holds until a later take judges a head below target, so the queue still stands and
    # the newest, d, is served; c stays.
    now[0] = 0.110
    assert queue.get_nowait() == "d"
    assert shed == ["b"] and queue.live() == ["c"]
    # 0.111: c is the head, nothing behind it: below, leave dropping, FIFO: c
    now[0] = 0.111
    assert queue.get_nowait() == "c" and not queue.codel.standing


def test_without_lifo_the_head_is_served():
    queue, now, _ = lifo_queue(lifo=False)
    now[0] = 0.010
    assert queue.get_nowait() == "a" and queue.codel.standing


def test_an_item_put_back_returns_to_its_place_with_its_entry_time():
    # A worker that took an item while the limit fell puts it back (unget): FIFO at the
    # head, LIFO at the tail, and its sojourn still counts from its admission.
    queue, now, _ = lifo_queue()
    now[0] = 0.001
    head = queue.get_nowait()
    queue.unget(head)
    assert queue.live() == ["a", "b", "c", "d", "e"]
    now[0] = 0.010  # the queue stands: LIFO takes e
    newest = queue.get_nowait()
    queue.unget(newest)
    assert newest == "e" and queue.live() == ["a", "b", "c", "d", "e"]
    assert len(queue) == 5
    now[0] = 0.2  # a, 0.2 s old, is shed: its entry time was kept through the unget
    queue.get_nowait()
    assert queue.codel.shed == 1
