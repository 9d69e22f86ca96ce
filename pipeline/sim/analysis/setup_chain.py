"""M/M/k/setup: a pool that starts a server per waiting item and stops it when idle.

The model of Gandhi, Doroudi, Harchol-Balter and Scheller-Wolf ("Exact analysis of
the M/M/k/setup class of Markov chains via recursive renewal reward", Queueing
Systems 77, 2014), the reference for an autoscaled pool with cold starts at its most
eager: items arrive as a Poisson process (``arrival_rate``), each takes an
exponential service (rate ``mu``) on one of at most ``k`` servers, FIFO. A server is
on only while busy: it turns off as soon as it finds the queue empty. A waiting item
with no server for it puts one into set-up (exponential, rate ``setup_rate``), so
with ``i`` servers busy and ``j`` items queued, ``min(j, k - i)`` servers are setting
up; a set-up that ends takes the first queued item, and a set-up no longer needed (a
busy server took the item) is abandoned. Every item waits (no server stays on idle).

The chain on ``(i, j)`` is solved with the queue truncated at ``levels`` items
(arrivals blocked there), and the truncation's error is bounded, not estimated:

1. The tail. For ``n >= k`` the rate down from queue level ``n + 1`` is
   ``i mu + (k - i) setup_rate >= k min(mu, setup_rate)`` in every phase ``i``, so the
   balance of the cut between levels ``n`` and ``n + 1`` gives ``P(j = n + 1) <= r
   P(j = n)`` with ``r = arrival_rate / (k min(mu, setup_rate))``: ``P(j = n) <=
   r**(n - k)`` (this needs ``r < 1``).
2. The last level. Watched only while ``j <= J`` (censored), the chain is the
   truncated one except that an arrival at level ``J`` returns, after its excursion
   above, to level ``J`` in some phase: a perturbation ``E`` of the rows of level
   ``J`` whose rates sum to at most ``arrival_rate``. The censored chain's stationary
   law is the true one conditioned on ``j <= J``, and for a function ``f`` its mean
   differs from the truncated chain's by ``pi_c E Z f``, ``Z = (1 pi - Q)^-1`` the
   truncated chain's fundamental matrix: at most ``P_c(j = J) x arrival_rate x`` the
   spread of ``Z f`` over level ``J``.

The bound adds the two; :func:`setup_chain` doubles ``levels`` until it is below
``tolerance``. For ``k = 1`` the response time is Welch's ``1 / (mu - arrival_rate) +
1 / setup_rate``; ``tests/sim/analysis/test_setup_chain.py`` checks that, and a pool
driven through ``Pipeline.resize`` with the same policy against the chain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..._validate import integer, real
from .ctmc import stationary

__all__ = ["MAX_SETUP_STATES", "SetupChain", "setup_chain"]

MAX_SETUP_STATES = 3_000
"""Most states :func:`setup_chain` builds (its dense solves of this size take about a second)."""


@dataclass(frozen=True)
class SetupChain:
    """Stationary means of M/M/k/setup, each within its ``*_error`` of the exact value
    (the truncation's error; the dense solves add rounding of about 1e-12 relative).

    Attributes:
        levels: the queue's truncation (items queued at most) the means come from.
        states: states of the truncated chain, ``(k + 1) x (levels + 1)``.
        in_system_mean: mean items inside (queued and in service).
        response_time_s: mean seconds from arrival to the end of service (Little's law).
        wait_s: mean seconds waited before service (``response_time_s - 1 / mu``); every
            item waits.
        busy_mean: mean servers busy (``arrival_rate / mu`` exactly, up to the bound).
        setting_up_mean: mean servers in set-up (what the eager policy pays for idle).
        response_time_error: bound on the error of ``response_time_s`` (and ``wait_s``),
            seconds.
        setting_up_error: bound on the error of ``setting_up_mean``.
    """

    levels: int
    states: int
    in_system_mean: float
    response_time_s: float
    wait_s: float
    busy_mean: float
    setting_up_mean: float
    response_time_error: float
    setting_up_error: float


def setup_chain(
    *,
    arrival_rate: float,
    mu: float,
    setup_rate: float,
    k: int,
    tolerance: float = 1e-9,
) -> SetupChain:
    """Solve M/M/k/setup (see the module) with its truncation error below ``tolerance``.

    Args:
        arrival_rate: items per second (Poisson, > 0).
        mu: service rate of one server, per second (> 0).
        setup_rate: one over the mean set-up time, per second (> 0; exponential).
        k: servers at most (>= 1).
        tolerance: the largest error bound accepted, seconds of response time (> 0).

    Raises:
        TypeError: an argument is not a number of its kind.
        ValueError: a bad argument; ``arrival_rate`` not below ``k x min(mu, setup_rate)``
            (the tail bound needs it); or no truncation within :data:`MAX_SETUP_STATES`
            states meets ``tolerance``.

    Example::

        >>> round(setup_chain(arrival_rate=0.5, mu=1.0, setup_rate=2.0, k=1).response_time_s, 9)
        2.5
    """
    lam = real("arrival_rate", arrival_rate, "items per second", above=0)
    mu = real("mu", mu, "services per second", above=0)
    alpha = real("setup_rate", setup_rate, "set-ups per second", above=0)
    k = integer("k", k, "servers", at_least=1)
    tolerance = real("tolerance", tolerance, "seconds", above=0)
    ratio = lam / (k * min(mu, alpha))
    if ratio >= 1:
        raise ValueError(
            f"arrival_rate must be below k x min(mu, setup_rate) = {k * min(mu, alpha):g} "
            f"for the truncation bound, got {lam:g}"
        )
    levels = max(2 * k, 16)
    while True:
        if (k + 1) * (levels + 1) > MAX_SETUP_STATES:
            raise ValueError(
                f"no truncation within {MAX_SETUP_STATES:_} states bounds the error below "
                f"tolerance={tolerance:g}; allowed: a larger tolerance or a lower load"
            )
        chain = _solve(lam, mu, alpha, k, levels, ratio)
        if chain.response_time_error <= tolerance:
            return chain
        levels *= 2


def _solve(lam: float, mu: float, alpha: float, k: int, levels: int, ratio: float) -> SetupChain:
    """The chain truncated at ``levels`` queued items, and its error bounds."""
    phases = k + 1
    count = phases * (levels + 1)
    rates = np.zeros((count, count))
    busy = np.tile(np.arange(phases, dtype=np.float64), levels + 1)
    queued = np.repeat(np.arange(levels + 1, dtype=np.float64), phases)
    for j in range(levels + 1):
        for i in range(phases):
            here = j * phases + i
            if j < levels:
                rates[here, here + phases] = lam  # an arrival joins the queue
            if i and j:
                rates[here, here - phases] += i * mu  # done: the server takes the next item
            elif i:
                rates[here, here - 1] += i * mu  # done, nothing queued: the server turns off
            starting = min(j, k - i)
            if starting:
                rates[here, here - phases + 1] += starting * alpha  # set up: takes an item
    pi = stationary(rates)
    generator = rates.copy()
    np.fill_diagonal(generator, -rates.sum(axis=1))
    fundamental = np.outer(np.ones(count), pi) - generator  # 1 pi - Q, invertible
    top = slice(levels * phases, count)
    # Tail bounds of the untruncated chain: P(j > levels) and sum over j > levels of j P(j).
    above = ratio ** (levels + 1 - k) / (1 - ratio)
    above_queued = ratio ** (levels + 1 - k) * (
        (levels + 1) / (1 - ratio) + ratio / (1 - ratio) ** 2
    )
    last_level = ratio ** (levels - k) / (1 - above)  # P_c(j = levels), censored chain

    def bound(f: np.ndarray, tail: float) -> tuple[float, float]:
        mean = float(pi @ f)
        spread = np.linalg.solve(fundamental, f)[top]
        shift = last_level * lam * float(spread.max() - spread.min())
        return mean, shift + above * (abs(mean) + shift) + tail

    in_system, in_system_error = bound(busy + queued, k * above + above_queued)
    setting_up, setting_up_error = bound(np.minimum(queued, k - busy), k * above)
    response = in_system / lam
    return SetupChain(
        levels=levels,
        states=count,
        in_system_mean=in_system,
        response_time_s=response,
        wait_s=response - 1 / mu,
        busy_mean=float(pi @ busy),
        setting_up_mean=setting_up,
        response_time_error=in_system_error / lam,
        setting_up_error=setting_up_error,
    )
