"""The exact CTMC of the timeout-and-retry loop, for small servers: every request's state.

The loop as the simulator runs it (a :class:`~pipeline.sim.Downstream` of one
server behind clients that time out and retry) is Markov only in the whole
sequence of requests at the server: each is orphaned (its client gave up) or
live, with its client's attempt number and, for an Erlang-k timeout, the
phase its timer is in; whether the request at the head is live decides
whether a service completes an item. This module builds that chain exactly
(the states reachable from an empty server, found breadth first) and solves
it (dense linear solves), for a server small enough: at most
``sum_{n<=C} (1 + A k)**n`` states for ``C`` requests at the server, ``A``
attempts and ``k`` phases (589 reachable at C = 4, A = 4, k = 1; 4,309 at
k = 2; beyond :data:`MAX_CHAIN_STATES` it refuses while building). At
Metafor's size (C = 101, A = 4) the chain has ``5**101`` states even with one
phase, and a fixed timeout is no finite chain at all: there the exact
reference is out of reach, and :mod:`.retry_loop` holds Metafor's reduced
``(n, r)`` chain and how far its timeout bound sits from the exact tail.

The model, state by state (each rate exact, nothing lumped):

- state: the requests at the server in FIFO order, the first in service, each
  ``0`` (orphaned) or ``(a, j)``: live, attempt ``a`` of ``A``, timer phase ``j``
  of ``k``; at most ``C`` of them;
- an arrival (Poisson, ``arrival_rate``) appends ``(1, 1)``; at a full server
  (``C`` requests) its attempts all fail at once (retries follow at once, with
  no backoff) and it is lost;
- the head's service ends at rate ``mu`` (exponential): it leaves; an item
  completes if it was live;
- each live request's timer moves to its next phase at rate ``k / T`` (an
  Erlang-k timeout of mean ``T``); after the last phase the client gives up:
  the request stays, orphaned, and the client retries at once (``a + 1``
  appended; lost at a full server, or after ``A`` attempts).

The retry orbit is empty at every instant (retries are immediate): the
clients' side of the loop is the live requests, and what Metafor's orbit
feeds shows here as orphaned work. Besides the stationary means, the chain
gives ``drain_s``, the expected hitting time of the empty server from a full
one of orphaned requests (the state an outage leaves), one more linear solve.
Without a timeout (``timeout_s=None``) the chain is M/M/1/K.

``tests/sim/analysis/test_retry_chain.py`` checks it against M/M/1/K and by
hand, and the simulator against it (the engine, the downstream and its
orphaned work, the timeout drawn Erlang-k by the handler). On Metafor's
example scaled to a server of 4 (lambda = 9.5/s, mu = 10/s, 4 attempts,
T = 0.12 s, a timeout with Metafor's ratio to a full server's drain):

====  =====  ======================  ============  ============  ========
k     states  mean at the server      orphaned      goodput /s    drain s
====  =====  ======================  ============  ============  ========
1     589    2.799                   1.921         1.703         1.593
2     4309   2.779                   1.849         1.693         1.649
====  =====  ======================  ============  ============  ========
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from ..._validate import integer, real
from .ctmc import stationary

__all__ = ["MAX_CHAIN_STATES", "RetryChain", "retry_chain"]

MAX_CHAIN_STATES = 5_000
"""Most states :func:`retry_chain` builds: its dense solves hold 8 x states**2 bytes
(200 MB here) and take a few seconds."""


@dataclass(frozen=True)
class RetryChain:
    """Stationary means of the exact chain (dense solves: rounding of about 1e-12 relative).

    Attributes:
        capacity: requests the server holds, in service and waiting.
        states: how many states the chain has.
        in_system_mean: mean requests at the server (in service and waiting).
        orphaned_mean: of those, mean orphaned ones (their client gave up on them).
        goodput_per_s: items completed per second (services of live requests).
        timeouts_per_s: attempts the client's timeout cuts, per second.
        lost_per_s: items whose every attempt failed, per second
            (``arrival_rate - goodput_per_s``: every item completes or is lost).
        drain_s: expected seconds from a server full of orphaned requests (``capacity``
            of them: what an outage leaves behind; without a timeout, full of live
            ones) to an empty server, new arrivals and their retries included
            (Metafor's hitting time from the full queue to the empty one).
    """

    capacity: int
    states: int
    in_system_mean: float
    orphaned_mean: float
    goodput_per_s: float
    timeouts_per_s: float
    lost_per_s: float
    drain_s: float


def retry_chain(
    *,
    arrival_rate: float,
    mu: float,
    timeout_s: float | None,
    attempts: int,
    capacity: int,
    k: int = 1,
) -> RetryChain:
    """Build and solve the exact chain of the timeout-and-retry loop (see the module).

    Args:
        arrival_rate: new items per second (Poisson, > 0).
        mu: service rate of the one server, per second (> 0).
        timeout_s: the client timeout's mean, seconds (> 0; Erlang-k), or None for
            no timeout (the chain is then M/M/1/K with ``K = capacity``).
        attempts: attempts per item (>= 1).
        capacity: requests the server holds, in service and waiting (>= 1):
            ``Downstream(concurrency=1, queue_maxsize=capacity - 1)``.
        k: phases of the timeout (>= 1; ``k -> infinity`` tends to a deterministic one).

    Raises:
        TypeError: an argument is not a number of its kind.
        ValueError: a bad argument (the message names it), or more than
            :data:`MAX_CHAIN_STATES` states (found while building, before any solve).

    Example::

        >>> chain = retry_chain(arrival_rate=0.8, mu=1.0, timeout_s=2.0, attempts=1, capacity=1)
        >>> round(chain.goodput_per_s * 2.7, 12)   # 0.8 / 2.7 by hand
        0.8
    """
    lam = real("arrival_rate", arrival_rate, "items per second", above=0)
    mu = real("mu", mu, "services per second", above=0)
    if timeout_s is not None:
        timeout_s = real("timeout_s", timeout_s, "seconds", above=0)
    tries = integer("attempts", attempts, "attempts per item", at_least=1)
    room = integer("capacity", capacity, "requests at the server", at_least=1)
    k = integer("k", k, "phases of the timeout", at_least=1)
    order, rates, cuts = _build(lam, mu, timeout_s, tries, room, k)
    pi = stationary(rates)
    lengths = np.array([len(s) for s in order], dtype=np.float64)
    orphans = np.array([s.count(0) for s in order], dtype=np.float64)
    head_live = np.array([bool(s) and s[0] != 0 for s in order], dtype=np.float64)
    goodput = float(mu * (pi @ head_live))
    full = (0,) * room if timeout_s is not None else (1,) * room
    return RetryChain(
        capacity=room,
        states=len(order),
        in_system_mean=float(pi @ lengths),
        orphaned_mean=float(pi @ orphans),
        goodput_per_s=goodput,
        timeouts_per_s=float(pi @ cuts),
        lost_per_s=lam - goodput,
        drain_s=_hitting_time(rates, order.index(full), target=0),
    )


def _build(
    lam: float, mu: float, timeout_s: float | None, tries: int, room: int, k: int
) -> tuple[list[tuple[int, ...]], np.ndarray, np.ndarray]:
    """Every state reachable from the empty server, the rates between them, and each
    state's rate of timeouts (requests' timers ending)."""
    tick = 0.0 if timeout_s is None else k / timeout_s

    def live(attempt: int, phase: int) -> int:
        return 1 + (attempt - 1) * k + (phase - 1)

    index: dict[tuple[int, ...], int] = {(): 0}
    order: list[tuple[int, ...]] = [()]
    moves: list[tuple[int, tuple[int, ...], float]] = []
    cutting: list[float] = [0.0]
    pending = deque([()])
    while pending:
        if len(order) > MAX_CHAIN_STATES:
            raise ValueError(
                f"the chain has more than {MAX_CHAIN_STATES:_} states; allowed: at most "
                f"{MAX_CHAIN_STATES:_} (a smaller capacity, fewer attempts or phases)"
            )
        state = pending.popleft()
        here = index[state]
        targets: list[tuple[tuple[int, ...], float]] = []
        if len(state) < room:
            targets.append(((*state, live(1, 1)), lam))
        if state:
            targets.append((state[1:], mu))
        for position, kind in enumerate(state if tick else ()):
            if kind == 0:
                continue
            attempt, phase = divmod(kind - 1, k)
            if phase + 1 < k:
                after = (*state[:position], kind + 1, *state[position + 1 :])
            else:
                # The client gives up: its request stays, orphaned; it retries at once
                # (a full server fails the retry at once, and so every later one).
                cutting[here] += tick
                after = (*state[:position], 0, *state[position + 1 :])
                if attempt + 1 < tries and len(after) < room:
                    after = (*after, live(attempt + 2, 1))
            targets.append((after, tick))
        for target, rate in targets:
            if target not in index:
                index[target] = len(order)
                order.append(target)
                cutting.append(0.0)
                pending.append(target)
            moves.append((here, index[target], rate))
    size = len(order)
    rates = np.zeros((size, size))
    for here, there, rate in moves:
        rates[here, there] += rate
    return order, rates, np.array(cutting)


def _hitting_time(rates: np.ndarray, start: int, *, target: int) -> float:
    """Expected time from state ``start`` to state ``target`` of the chain with these
    off-diagonal rates: ``h = 0`` at the target, ``sum_j q_ij (h_j - h_i) = -1`` elsewhere."""
    keep = np.arange(len(rates)) != target
    generator = rates.copy()
    np.fill_diagonal(generator, 0.0)
    np.fill_diagonal(generator, -generator.sum(axis=1))
    times = np.linalg.solve(generator[np.ix_(keep, keep)], -np.ones(int(keep.sum())))
    return float(times[start - (start > target)])
