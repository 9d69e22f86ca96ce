"""The exact CTMC of the timeout-and-retry loop, for small queues: every request's state.

The loop as the simulator runs it (a :class:`~pipeline.sim.Downstream` of one
server behind clients that time out and retry) is Markov only in the whole
sequence of requests at the server: each is orphaned (its client gave up) or
live, with its client's attempt number and, for an Erlang-k timeout, the
phase its timer is in; whether the request at the head is live decides
whether a service completes an item. This module builds that chain exactly
and solves it (a dense linear solve), for a queue small enough:
``sum_{n<=C} (1 + A k)**n`` states for ``C`` requests at the server, ``A``
attempts and ``k`` phases (781 at C = 4, A = 2, k = 2; beyond 20,000 it
refuses). At Metafor's size (C = 100) the chain has ``9**100`` states: there
the exact reference is out of reach, and :mod:`.retry_loop` holds the
reduced ``(n, r)`` chain and how far its timeout bound sits from the exact tail.

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

The retry orbit is empty at every instant (retries are immediate), so the
chain's outputs are the mean number of requests at the server, of orphaned
ones, and the goodput. ``tests/sim/analysis/test_retry_chain.py`` checks the
simulator against them: the engine, the downstream and its orphaned work,
with the timeout drawn Erlang-k by the handler. At lambda = 0.8/s, mu = 1/s,
T = 2 s, 2 attempts and 4 places (ten replications of 4,000 s, 95% intervals):

====  =====  ========================  =======================  ==================
k     states  mean at the server, chain  simulated               goodput chain / sim
====  =====  ========================  =======================  ==================
1     113    2.2044                    2.1985 +- 0.0382         0.2960 / 0.3023
2     653    2.1444                    2.1535 +- 0.0490         0.3202 / 0.3172
====  =====  ========================  =======================  ==================
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

import numpy as np

from ..._validate import integer
from .ctmc import loop_rates, stationary

__all__ = ["MAX_CHAIN_STATES", "RetryChain", "retry_chain"]

MAX_CHAIN_STATES = 20_000
"""Most states :func:`retry_chain` builds (a dense solve of this size takes seconds)."""


class RetryChain(NamedTuple):
    """Stationary means of the exact chain.

    Attributes:
        states: how many states the chain has.
        in_system_mean: mean requests at the server (in service and waiting).
        orphaned_mean: of those, mean orphaned ones.
        goodput_per_s: items completed per second (services of live requests).
    """

    states: int
    in_system_mean: float
    orphaned_mean: float
    goodput_per_s: float


def retry_chain(
    *,
    arrival_rate: float,
    mu: float,
    timeout_s: float,
    attempts: int,
    capacity: int,
    k: int = 1,
) -> RetryChain:
    """Build and solve the exact chain of the module docstring.

    Args:
        arrival_rate: new items per second (Poisson, > 0).
        mu: service rate of the one server, per second (> 0).
        timeout_s: the client timeout's mean, seconds (> 0; Erlang-k).
        attempts: attempts per item (>= 1).
        capacity: requests the server holds, in service and waiting (>= 1):
            ``Downstream(queue_maxsize=capacity - 1)``.
        k: phases of the timeout (>= 1).

    Raises:
        ValueError: a bad argument, or more than :data:`MAX_CHAIN_STATES` states.
    """
    lam, mu, timeout_s = loop_rates(arrival_rate, mu, timeout_s)
    tries = integer("attempts", attempts, "attempts per item", at_least=1)
    room = integer("capacity", capacity, "requests at the server", at_least=1)
    k = integer("k", k, "phases of the timeout", at_least=1)
    kinds = 1 + tries * k
    count = sum(kinds**n for n in range(room + 1))
    if count > MAX_CHAIN_STATES:
        raise ValueError(
            f"the chain would have {count:_} states; allowed: at most {MAX_CHAIN_STATES:_} "
            "(a smaller capacity, fewer attempts or phases)"
        )
    tick = k / timeout_s

    def live(attempt: int, phase: int) -> int:
        return 1 + (attempt - 1) * k + (phase - 1)

    index: dict[tuple[int, ...], int] = {(): 0}
    order: list[tuple[int, ...]] = [()]
    moves: list[tuple[int, tuple[int, ...], float]] = []
    pending = deque([()])
    while pending:
        state = pending.popleft()
        here = index[state]
        targets: list[tuple[tuple[int, ...], float]] = []
        if len(state) < room:
            targets.append(((*state, live(1, 1)), lam))
        if state:
            targets.append((state[1:], mu))
        for position, kind in enumerate(state):
            if kind == 0:
                continue
            attempt, phase = divmod(kind - 1, k)
            attempt += 1
            phase += 1
            if phase < k:
                after = (*state[:position], kind + 1, *state[position + 1 :])
            else:
                after = (*state[:position], 0, *state[position + 1 :])
                if attempt < tries and len(after) < room:
                    after = (*after, live(attempt + 1, 1))
            targets.append((after, tick))
        for target, rate in targets:
            if target not in index:
                index[target] = len(order)
                order.append(target)
                pending.append(target)
            moves.append((here, target, rate))
    size = len(order)
    generator = np.zeros((size, size))
    for here, target, rate in moves:
        generator[here, index[target]] += rate
    pi = stationary(generator)
    lengths = np.array([len(s) for s in order], dtype=np.float64)
    orphans = np.array([s.count(0) for s in order], dtype=np.float64)
    head_live = np.array([bool(s) and s[0] != 0 for s in order], dtype=np.float64)
    return RetryChain(
        states=size,
        in_system_mean=float(pi @ lengths),
        orphaned_mean=float(pi @ orphans),
        goodput_per_s=float(mu * (pi @ head_live)),
    )
