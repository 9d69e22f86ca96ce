"""The single-server timeout-and-retry loop: exact timeout probabilities, and Metafor's CTMC.

Metafor (Sabbaghi et al., arXiv 2510.03551; github.com/mpi-sws-rse/metafor,
``metafor/model/single_server/ctmc.py``) models one server, a FIFO queue of
``Q`` and clients that time out and retry as a CTMC over ``(n, r)``: ``n``
requests at the server, ``r`` clients in the retry orbit. Its key quantity is
the probability that a request which finds ``n`` requests at the server is
not served within the client's timeout ``T``. With exponential service at
rate ``mu`` that is exactly the probability that ``n`` services take longer than
``T``, an Erlang tail::

    P(Erlang(n, mu) > T) = P(Poisson(mu T) <= n - 1) = sum_{j<n} e^{-mu T} (mu T)^j / j!

which Metafor replaces ("the exact method is unstable for large values") by
Chebyshev's bound ``(sigma / (T - m))**2`` with ``m = n / mu``,
``sigma = sqrt(n) / mu``, and 1 once ``T - m <= sigma``. This module computes
the exact tail stably (in log space, :func:`timeout_probability`), its
phase-type version for an Erlang-k timeout (a race of two Poisson streams,
:func:`timeout_probability` with ``k``), the bound (:func:`chebyshev_bound`),
and Metafor's ``(n, r)`` chain with either (:func:`metafor_chain`), so the
distance between the two is a number:

- on Metafor's example (``mu = 10/s``, ``T = 3 s``) the bound is 9.1x the exact
  tail at n = 20 (0.200 against 0.0219), 72x at n = 15 (0.0667 against
  0.00092), and 1 from n = 25 on, where the exact tail is 0.157;
- in Metafor's chain for its example (lambda = 9.5/s, Q = 100, orbit 20, 4
  retries) the stationary means are nonetheless the same to 8 digits with
  either tail (queue 96.863, orbit 10.582): the chain sits at the full queue,
  where both tails are 1 and the transitions do not read them. The bound
  matters for the way up there (the hitting time of the stuck state from an
  empty queue), not for where the chain stays.

What this is not: an exact CTMC of the loop as the simulator runs it. In the
real loop each queued request is live (its client waits, with its own timer
and attempt count) or orphaned, and whether the request at the head is live
depends on the whole sequence, so an exact state is that sequence:
``(1 + phases x attempts)**Q`` states for a queue of ``Q``, beyond any solver
at Q = 100. Metafor's ``(n, r)`` chain decides each request's timeout at its
arrival (a coin with the tail's probability) and lets the orbit retry at the
rates ``retries / ((retries + 1) T)`` and drop at ``1 / ((retries + 1) T)``:
those are its modelling choices, kept here as they are, so only the tail differs.
The exact chain of the loop, for queues small enough to hold every request's
state, is :mod:`.retry_chain`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..._validate import integer, real
from .ctmc import loop_rates, stationary

__all__ = ["ChainMeans", "chebyshev_bound", "metafor_chain", "timeout_probability"]


def timeout_probability(ahead: int, *, mu: float, timeout_s: float, k: int | None = None) -> float:
    """Probability that ``ahead`` exponential services (rate ``mu``) outlast the timeout.

    Args:
        ahead: services to wait for (the requests at the server, the own included), >= 0.
        mu: service rate, per second (> 0).
        timeout_s: the timeout's mean, seconds (> 0).
        k: None for a deterministic timeout; else the number of phases of an
            Erlang-k timeout of mean ``timeout_s`` (>= 1; k -> infinity tends to the
            deterministic one).

    Returns:
        Deterministic: ``P(Poisson(mu T) <= ahead - 1)``. Erlang-k: the
        probability that the timer's k phases (rate ``k / T`` each) end before
        ``ahead`` services, ``sum_{j<ahead} C(k - 1 + j, j) q**k p**j`` with
        ``q = (k/T) / (k/T + mu)`` and ``p = 1 - q``. Both summed in log space.
    """
    ahead = integer("ahead", ahead, "services to wait for")
    mu = real("mu", mu, "services per second", above=0)
    timeout_s = real("timeout_s", timeout_s, "seconds", above=0)
    if ahead == 0:
        return 0.0
    j = np.arange(ahead, dtype=np.float64)
    if k is None:
        x = mu * timeout_s
        logs = -x + j * math.log(x) - np.array([math.lgamma(v + 1.0) for v in j])
    else:
        k = integer("k", k, "phases of the timeout", at_least=1)
        rate = k / timeout_s
        log_q = math.log(rate / (rate + mu))
        log_p = math.log(mu / (rate + mu))
        log_binomial = np.array(
            [math.lgamma(k + v) - math.lgamma(k) - math.lgamma(v + 1.0) for v in j]
        )
        logs = log_binomial + k * log_q + j * log_p
    top = float(logs.max())
    return float(min(1.0, math.exp(top) * float(np.exp(logs - top).sum())))


def chebyshev_bound(ahead: int, *, mu: float, timeout_s: float) -> float:
    """Metafor's bound on :func:`timeout_probability` (deterministic timeout).

    ``(sigma / (T - m))**2`` with ``m = ahead / mu`` and ``sigma = sqrt(ahead) / mu``
    when ``T - m > sigma``, else 1 (and 0 for ``ahead = 0``): Chebyshev's inequality
    on the sum of ``ahead`` services, one-sided use of a two-sided bound.
    """
    ahead = integer("ahead", ahead, "services to wait for")
    if ahead == 0:
        return 0.0
    mean = ahead / mu
    sigma = math.sqrt(ahead) / mu
    if timeout_s - mean > sigma:
        return (sigma / (timeout_s - mean)) ** 2
    return 1.0


class ChainMeans(NamedTuple):
    """Stationary means of Metafor's chain: requests at the server, clients in the orbit."""

    queue_mean: float
    orbit_mean: float


def metafor_chain(
    *,
    arrival_rate: float,
    mu: float,
    timeout_s: float,
    retries: int,
    queue_size: int = 100,
    orbit_size: int = 20,
    tail: str = "chebyshev",
    alpha: float = 0.25,
) -> ChainMeans:
    """Solve Metafor's single-server ``(n, r)`` CTMC exactly (a dense linear solve).

    States ``n`` in ``0 .. queue_size - 1`` (requests at the server) and ``r`` in
    ``0 .. orbit_size - 1`` (clients waiting to retry); its transitions, with
    ``tau = tail(n)``, ``a = retries / ((retries + 1) T)`` (retry) and
    ``d = 1 / ((retries + 1) T)`` (drop), one server:

    - an arrival: to ``(n + 1, r)`` at ``lambda`` (and, below the full queue,
      ``r a tau``), and to ``(n + 1, r + 1)`` at ``alpha lambda tau`` (Metafor's
      ``alpha`` weights the arrivals that will time out);
    - a retry that will not time out: ``(n + 1, r - 1)`` at ``r a (1 - tau)``;
      a drop: ``(n, r - 1)`` at ``r d``; at ``n = 0`` a retry is ``(1, r - 1)`` at
      ``r a``; with a full queue the orbit only shrinks, at ``r (a + d)``;
    - a service: ``(n - 1, r)`` at ``mu``.

    ``tail`` is ``"chebyshev"`` (Metafor's :func:`chebyshev_bound`) or ``"exact"``
    (:func:`timeout_probability`, deterministic), both of ``n`` services, as
    Metafor indexes them.
    """
    lam, mu, timeout_s = loop_rates(arrival_rate, mu, timeout_s)
    retries = integer("retries", retries, "retries per request", at_least=0)
    q_size = integer("queue_size", queue_size, "states of the queue", at_least=2)
    r_size = integer("orbit_size", orbit_size, "states of the orbit", at_least=1)
    if tail not in ("chebyshev", "exact"):
        raise ValueError(f"tail must be 'chebyshev' or 'exact', got {tail!r}")
    if q_size * r_size > 20_000:
        raise ValueError(
            "queue_size x orbit_size must be <= 20000 states (a dense solve), "
            f"got {q_size * r_size}"
        )
    if tail == "chebyshev":
        tails = [chebyshev_bound(n, mu=mu, timeout_s=timeout_s) for n in range(q_size)]
    else:
        tails = [timeout_probability(n, mu=mu, timeout_s=timeout_s) for n in range(q_size)]
    retry = retries / ((retries + 1) * timeout_s)
    drop = 1.0 / ((retries + 1) * timeout_s)
    size = q_size * r_size
    generator = np.zeros((size, size))

    def index(n: int, r: int) -> int:
        return r * q_size + n

    def add(source: int, n: int, r: int, rate: float) -> None:
        if rate > 0:
            generator[source, index(n, r)] += rate

    for r in range(r_size):
        for n in range(q_size):
            here = index(n, r)
            tau = tails[n]
            if n == 0:
                add(here, 1, r, lam)
                if r > 0:
                    add(here, 0, r - 1, r * drop)
                    add(here, 1, r - 1, r * retry)
            elif n == q_size - 1:
                add(here, n - 1, r, mu)
                if r > 0:
                    add(here, n, r - 1, r * (drop + retry))
            else:
                if r < r_size - 1:
                    add(here, n + 1, r + 1, alpha * lam * tau)
                add(here, n + 1, r, lam + r * retry * tau)
                if r > 0:
                    add(here, n + 1, r - 1, r * retry * (1.0 - tau))
                    add(here, n, r - 1, r * drop)
                add(here, n - 1, r, mu)
    pi = stationary(generator)
    states = np.arange(size)
    return ChainMeans(
        queue_mean=float(pi @ (states % q_size)), orbit_mean=float(pi @ (states // q_size))
    )
