"""Queueing formulas the simulator is checked against (pure functions).

Notation: arrival rate ``lambda`` (arrivals per second), mean service time
``E[S] = 1/mu`` (seconds), ``c`` servers (workers), offered load
``a = lambda * E[S]`` (Erlangs), utilisation ``rho = a / c``.

- :func:`erlang_b`, :func:`erlang_c` -- blocking / waiting probabilities;
- :func:`mmc` -- steady-state M/M/c (Erlang C) means and wait distribution;
- :func:`mmck` -- M/M/c/K, the model of ``on_full="reject"`` with
  ``K = queue_maxsize + concurrency``;
- :func:`littles_law`, :func:`expected_in_system` -- L = lambda * W;
- :func:`retry_amplification`, :func:`dead_letter_rate` -- retries with
  independent attempt failures;
- :func:`mmc_priority` -- non-preemptive priority classes on M/M/c
  (Cobham's formula): who waits how long when some items go first;
- :func:`mmc_abandonment` -- M/M/c+M (Erlang A): impatient items that
  abandon the queue, from the birth-death chain;
- :func:`setup_chain` -- M/M/k/setup: servers that start (after an exponential
  set-up) for waiting items and stop when idle, from its truncated chain
  (:mod:`~pipeline.sim.analysis.setup_chain`);
- :func:`retry_chain` -- one server behind clients that time out (Erlang-k) and retry
  at once, its cut requests served to their end for nobody (orphaned work): the exact
  chain of every request's state, for a server that holds a few requests
  (:mod:`~pipeline.sim.analysis.retry_chain`).

References: Gross, Shortle, Thompson & Harris, *Fundamentals of Queueing
Theory* (4th ed.), sections 2.3 (M/M/c), 2.5 (M/M/c/K), 1.4 (Little's law),
3.4 (priority disciplines); Cobham, "Priority assignment in waiting line
problems", *Operations Research* 2 (1954); Garnett, Mandelbaum & Reiman,
"Designing a call center with impatient customers", *Manufacturing &
Service Operations Management* 4 (2002) (Erlang A).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pipeline._validate import integer, real

from .retry_chain import RetryChain, retry_chain
from .setup_chain import SetupChain, setup_chain

__all__ = [
    "ErlangAResult",
    "MMcKResult",
    "MMcResult",
    "PriorityResult",
    "RetryChain",
    "SetupChain",
    "dead_letter_rate",
    "erlang_b",
    "erlang_c",
    "expected_in_system",
    "littles_law",
    "mmc",
    "mmc_abandonment",
    "mmc_priority",
    "mmck",
    "retry_amplification",
    "retry_chain",
    "setup_chain",
]


def erlang_b(c: int, offered_load: float) -> float:
    """Erlang B: probability that all ``c`` servers are busy in M/M/c/c (loss system).

    ``B(c, a) = (a**c / c!) / sum_{k=0..c} a**k / k!``, computed with the
    stable recursion ``B(0) = 1``, ``B(k) = a B(k-1) / (k + a B(k-1))``
    (no factorials, fine for ``c`` in the thousands).

    Args:
        c: servers, >= 1.
        offered_load: ``a = lambda * E[S]`` in Erlangs, >= 0.
    """
    c = integer("c", c, "servers", at_least=1)
    a = real("offered_load", offered_load, "Erlangs", at_least=0)
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b


def erlang_c(c: int, offered_load: float) -> float:
    """Erlang C: probability that an arrival waits in M/M/c (all servers busy).

    ``C(c, a) = c B / (c - a (1 - B))`` with ``B = erlang_b(c, a)``, for
    ``a < c``; equivalently ``(a**c / c!) (c / (c - a)) / (sum_{k<c} a**k/k!
    + (a**c / c!) (c / (c - a)))``. For ``a >= c`` the queue grows without
    bound and every arrival eventually waits: returns 1.0 (the limit).

    Args:
        c: servers, >= 1.
        offered_load: ``a = lambda * E[S]`` in Erlangs, >= 0.
    """
    b = erlang_b(c, offered_load)
    a = float(offered_load)
    if a >= c:
        return 1.0
    return c * b / (c - a * (1.0 - b))


@dataclass(frozen=True)
class MMcResult:
    """Steady-state M/M/c quantities (FCFS, infinite queue).

    Attributes:
        arrival_rate: lambda (arrivals per second).
        service_mean_s: E[S] = 1/mu (seconds).
        c: servers.
        rho: utilisation lambda / (c mu), < 1.
        p_wait: Erlang C, the probability an arrival waits.
        wait_mean_s: Wq = C / (c mu - lambda) (seconds in queue).
        latency_mean_s: W = Wq + E[S] (seconds in system).
        queue_len_mean: Lq = lambda Wq (items waiting).
        in_system_mean: L = lambda W (items waiting or in service).
    """

    arrival_rate: float
    service_mean_s: float
    c: int
    rho: float
    p_wait: float
    wait_mean_s: float
    latency_mean_s: float
    queue_len_mean: float
    in_system_mean: float

    @property
    def _decay(self) -> float:
        # c mu - lambda: the rate of the exponential tail of the wait (per second)
        return self.c / self.service_mean_s - self.arrival_rate

    def p_wait_longer_than(self, t: float) -> float:
        """P(Wq > t) = C exp(-(c mu - lambda) t) for ``t >= 0`` seconds."""
        t = real("t", t, "seconds", at_least=0)
        return self.p_wait * math.exp(-self._decay * t)

    def wait_quantile(self, q: float) -> float:
        """The ``q``-quantile of the wait in queue (seconds).

        Inverts ``P(Wq <= t) = 1 - C exp(-(c mu - lambda) t)``: 0 when
        ``q <= 1 - C`` (that share of arrivals does not wait), else
        ``log(C / (1 - q)) / (c mu - lambda)``.

        Raises:
            ValueError: ``q`` not in ``[0, 1)``.
        """
        q = real("q", q, "probability in [0, 1)", at_least=0)
        if not q < 1:
            raise ValueError(f"q must be < 1 (the wait is unbounded), got {q!r}")
        if q <= 1.0 - self.p_wait:
            return 0.0
        return math.log(self.p_wait / (1.0 - q)) / self._decay


def _rates(arrival_rate: float, service_mean_s: float) -> tuple[float, float]:
    lam = real("arrival_rate", arrival_rate, "arrivals per second", above=0)
    s = real("service_mean_s", service_mean_s, "seconds", above=0)
    return lam, s


def mmc(arrival_rate: float, service_mean_s: float, c: int) -> MMcResult:
    """Steady-state M/M/c: Poisson arrivals, exponential service, ``c`` servers.

    ``a = lambda E[S]``, ``rho = a / c``, ``C = erlang_c(c, a)``,
    ``Wq = C E[S] / (c - a)``, ``W = Wq + E[S]``, ``Lq = lambda Wq``,
    ``L = lambda W``.

    Raises:
        ValueError: a non-positive rate or mean, ``c < 1``, or ``rho >= 1``
            (unstable: the queue grows without bound; there is no steady state).

    Example::

        >>> round(mmc(0.8, 1.0, 1).wait_mean_s, 6)   # M/M/1, rho = 0.8
        4.0
    """
    lam, s = _rates(arrival_rate, service_mean_s)
    c = integer("c", c, "servers", at_least=1)
    a = lam * s
    rho = a / c
    if rho >= 1:
        raise ValueError(
            f"M/M/c is unstable: rho = arrival_rate * service_mean_s / c = {rho:.4g} >= 1 "
            f"(arrival_rate={lam!r}, service_mean_s={s!r}, c={c}); the queue grows without "
            "bound, there is no steady state (use mmck for a bounded system)"
        )
    p_wait = erlang_c(c, a)
    wq = p_wait * s / (c - a)
    w = wq + s
    return MMcResult(lam, s, c, rho, p_wait, wq, w, lam * wq, lam * w)


@dataclass(frozen=True)
class MMcKResult:
    """Steady-state M/M/c/K quantities (``K`` = total capacity, in service included).

    Attributes:
        arrival_rate, service_mean_s, c, K: the inputs.
        rho: offered utilisation lambda E[S] / c (may be >= 1).
        blocking_probability: p_K, the share of arrivals turned away (shed).
        throughput: lambda (1 - p_K), admitted = completed per second.
        utilisation: throughput E[S] / c, the busy share of each server.
        p_wait: probability an *admitted* arrival waits.
        in_system_mean: L = sum n p_n (items).
        queue_len_mean: Lq = sum (n - c)+ p_n (items).
        latency_mean_s: W = L / throughput (seconds, admitted items).
        wait_mean_s: Wq = Lq / throughput (seconds, admitted items).
    """

    arrival_rate: float
    service_mean_s: float
    c: int
    K: int
    rho: float
    blocking_probability: float
    throughput: float
    utilisation: float
    p_wait: float
    in_system_mean: float
    queue_len_mean: float
    latency_mean_s: float
    wait_mean_s: float


def mmck(arrival_rate: float, service_mean_s: float, c: int, K: int) -> MMcKResult:
    """Steady-state M/M/c/K: arrivals finding ``K`` items in the system are lost.

    ``p_n = p_0 a**n / n!`` for ``n <= c`` and ``p_0 a**c / c! * rho**(n - c)``
    for ``c < n <= K`` (``a = lambda E[S]``, ``rho = a / c``); blocking
    ``p_K``; ``L = sum n p_n``; ``W = L / (lambda (1 - p_K))`` (Little). Valid
    for any ``rho`` (the state space is finite); computed in log space so large
    ``K`` and ``rho > 1`` do not overflow. The pipeline with
    ``on_full="reject"`` is this model with ``K = queue_maxsize + concurrency``.

    Raises:
        ValueError: a non-positive rate or mean, ``c < 1`` or ``K < c``.
    """
    lam, s = _rates(arrival_rate, service_mean_s)
    c = integer("c", c, "servers", at_least=1)
    K = integer("K", K, "total capacity, in service included", at_least=1)
    if c > K:
        raise ValueError(f"K must be >= c (total capacity includes the {c} in service), got {K}")
    a = lam * s
    n = np.arange(K + 1)
    # log of a**min(n,c)/min(n,c)! * (a/c)**(n-c)+, built as cumulative log ratios
    ratio = np.log(a) - np.log(np.maximum(np.minimum(n[1:], c), 1))
    log_p = np.concatenate(([0.0], np.cumsum(ratio)))
    p = np.exp(log_p - log_p.max())
    p /= p.sum()
    p_block = float(p[K])
    throughput = lam * (1.0 - p_block)
    big_l = float((n * p).sum())
    lq = float((np.maximum(n - c, 0) * p).sum())
    p_wait = float(p[c:K].sum()) / (1.0 - p_block) if p_block < 1 else 1.0
    return MMcKResult(
        arrival_rate=lam,
        service_mean_s=s,
        c=c,
        K=K,
        rho=a / c,
        blocking_probability=p_block,
        throughput=throughput,
        utilisation=throughput * s / c,
        p_wait=p_wait,
        in_system_mean=big_l,
        queue_len_mean=lq,
        latency_mean_s=big_l / throughput,
        wait_mean_s=lq / throughput,
    )


def expected_in_system(arrival_rate: float, mean_time_s: float) -> float:
    """Little's law ``L = lambda W``: mean number present (items).

    Args:
        arrival_rate: lambda, arrivals per second entering the system (>= 0).
        mean_time_s: W, mean time an item stays (seconds, >= 0).
    """
    lam = real("arrival_rate", arrival_rate, "arrivals per second", at_least=0)
    return lam * real("mean_time_s", mean_time_s, "seconds", at_least=0)


def littles_law(
    *,
    arrival_rate: float | None = None,
    mean_time_s: float | None = None,
    mean_number: float | None = None,
) -> float:
    """Solve ``L = lambda W`` for whichever of the three is not given.

    Args (exactly two, keyword-only):
        arrival_rate: lambda (per second), mean_time_s: W (seconds),
        mean_number: L (items).

    Example: ``littles_law(arrival_rate=3.2, mean_time_s=1.5)`` is 4.8 items.

    Raises:
        ValueError: not exactly two given, a negative value, or division by 0.
    """
    given = {
        k: v
        for k, v in (
            ("arrival_rate", arrival_rate),
            ("mean_time_s", mean_time_s),
            ("mean_number", mean_number),
        )
        if v is not None
    }
    if len(given) != 2:
        raise ValueError(
            "give exactly two of arrival_rate, mean_time_s, mean_number, "
            f"got {sorted(given) or 'none'}"
        )
    units = {"arrival_rate": "per second", "mean_time_s": "seconds", "mean_number": "items"}
    v = {k: real(k, x, units[k], at_least=0) for k, x in given.items()}
    if mean_number is None:
        return v["arrival_rate"] * v["mean_time_s"]
    divisor_name = "mean_time_s" if arrival_rate is None else "arrival_rate"
    if v[divisor_name] == 0:
        raise ValueError(f"{divisor_name} must be > 0 to solve Little's law, got 0")
    return v["mean_number"] / v[divisor_name]


def _retry_args(p: float, k: int) -> tuple[float, int]:
    p = real("p", p, "failure probability per attempt", at_least=0, at_most=1)
    return p, integer("k", k, "attempts per item (max_attempts)", at_least=1)


def retry_amplification(p: float, k: int) -> float:
    """Expected attempts per item: ``(1 - p**k) / (1 - p)``; ``k`` when ``p = 1``.

    Each attempt fails independently with probability ``p``; an item is tried
    until it succeeds or has used ``k`` attempts. Multiply the arrival rate by
    this to get the load the workers (and the downstream) actually see.
    """
    p, k = _retry_args(p, k)
    if p == 1.0:
        return float(k)
    return (1.0 - p**k) / (1.0 - p)


def dead_letter_rate(p: float, k: int) -> float:
    """Share of items dead-lettered: ``p**k`` (all ``k`` attempts fail independently)."""
    p, k = _retry_args(p, k)
    return p**k


@dataclass(frozen=True)
class PriorityResult:
    """Steady-state waits of non-preemptive priority classes on M/M/c.

    Attributes:
        arrival_rates: lambda of each class (arrivals per second), first class
            served first.
        service_mean_s: E[S], the same for every class (seconds).
        c: servers.
        rho: total utilisation sum(lambda) E[S] / c, < 1.
        p_wait: Erlang C of the total load: the probability an arrival of any
            class finds every server busy (priority does not change it).
        wait_mean_s: the mean wait in queue of each class (seconds).
        latency_mean_s: wait plus E[S], each class (seconds).
        wait_mean_fcfs_s: the mean wait with no priority (Erlang C), for comparison.
    """

    arrival_rates: tuple[float, ...]
    service_mean_s: float
    c: int
    rho: float
    p_wait: float
    wait_mean_s: tuple[float, ...]
    latency_mean_s: tuple[float, ...]
    wait_mean_fcfs_s: float


def mmc_priority(
    arrival_rates: tuple[float, ...] | list[float], service_mean_s: float, c: int
) -> PriorityResult:
    """Cobham's formula: mean waits of non-preemptive priority classes on M/M/c.

    Class ``k`` (0 first) arrives as a Poisson process at ``lambda_k``; every
    class has exponential service with mean ``E[S]`` on ``c`` servers; a
    free server takes the waiting item of the best class, first come first
    served within a class, and never interrupts an attempt (non-preemptive).
    With ``sigma_k = sum_{i<=k} lambda_i E[S] / c`` (``sigma_{-1} = 0``),

        ``Wq_k = (C(c, a) E[S] / c) / ((1 - sigma_{k-1}) (1 - sigma_k))``

    where ``C`` is Erlang C of the total load ``a = sum(lambda) E[S]``. The
    mean over classes, weighted by arrivals, is the FCFS wait (the
    conservation law: priority moves waiting between classes, it does not
    remove any). Needs equal service means; with unequal means the formula
    has residual-work terms this function does not cover.

    Raises:
        ValueError: no class, a non-positive rate or mean, ``c < 1``, or a
            total utilisation >= 1 (the lowest class waits without bound).

    Example::

        >>> r = mmc_priority([0.2, 0.6], 1.0, 1)   # M/M/1, rho = 0.8
        >>> [round(w, 4) for w in r.wait_mean_s]
        [1.0, 5.0]
    """
    if isinstance(arrival_rates, str) or not hasattr(arrival_rates, "__len__"):
        raise TypeError(
            f"arrival_rates must be a sequence of rates (one per class), got {arrival_rates!r}"
        )
    if len(arrival_rates) == 0:
        raise ValueError("arrival_rates must name at least one class, got none")
    rates = tuple(
        real(f"arrival_rates[{i}]", r, "arrivals per second", above=0)
        for i, r in enumerate(arrival_rates)
    )
    total = math.fsum(rates)
    fcfs = mmc(total, service_mean_s, c)
    s, c = fcfs.service_mean_s, fcfs.c
    residual = fcfs.p_wait * s / c
    sigma = np.cumsum([r * s / c for r in rates])
    before = np.concatenate(([0.0], sigma[:-1]))
    waits = tuple(
        float(residual / ((1.0 - b) * (1.0 - a))) for b, a in zip(before, sigma, strict=True)
    )
    return PriorityResult(
        arrival_rates=rates,
        service_mean_s=s,
        c=c,
        rho=fcfs.rho,
        p_wait=fcfs.p_wait,
        wait_mean_s=waits,
        latency_mean_s=tuple(w + s for w in waits),
        wait_mean_fcfs_s=fcfs.wait_mean_s,
    )


_MOST_STATES = 2_000_000  # states of the Erlang A chain summed at most


def _too_long(patience: float, load: float, c: int) -> ValueError:
    return ValueError(
        f"patience_mean_s={patience!r} is too long for this overload ({load:.4g} Erlangs "
        f"on c={c}): the queue settles beyond {_MOST_STATES:,} items; shorten the "
        "patience or add servers"
    )


@dataclass(frozen=True)
class ErlangAResult:
    """Steady-state M/M/c+M (Erlang A) quantities.

    Attributes:
        arrival_rate, service_mean_s, c, patience_mean_s: the inputs.
        p_wait: probability an arrival finds every server busy (it waits).
        p_abandon: share of arrivals that abandon before service.
        wait_mean_s: mean time in queue over all arrivals, those who abandon
            counted until they leave (seconds).
        wait_served_mean_s: mean wait of the arrivals that are served (seconds).
        queue_len_mean: Lq, items waiting (time average).
        throughput: served per second, lambda (1 - p_abandon).
        utilisation: throughput E[S] / c.
    """

    arrival_rate: float
    service_mean_s: float
    c: int
    patience_mean_s: float
    p_wait: float
    p_abandon: float
    wait_mean_s: float
    wait_served_mean_s: float
    queue_len_mean: float
    throughput: float
    utilisation: float


def mmc_abandonment(
    arrival_rate: float, service_mean_s: float, c: int, patience_mean_s: float
) -> ErlangAResult:
    """Erlang A: M/M/c where each waiting item abandons after an exponential patience.

    Poisson arrivals at ``lambda``, exponential service (rate ``mu = 1/E[S]``)
    on ``c`` servers, FCFS, and each item that waits leaves unserved after an
    exponential patience with mean ``1/theta`` if no server has taken it by
    then (an item in service stays). The number in system is a birth-death
    chain with births ``lambda`` and deaths ``min(n, c) mu + (n - c)+ theta``:
    stable for any load, since abandonment grows with the queue. Its
    stationary law is summed until its tail is below 1e-16.

    An arrival that finds ``n >= c`` has ``k = n - c`` items ahead; while
    ``j`` are ahead, the queue in front of it moves at ``r_j = c mu + j
    theta`` and it abandons at ``theta``, so it is served with probability
    ``prod_{j<=k} r_j / (r_j + theta)`` after a wait whose mean, given that,
    is ``sum_{j<=k} 1 / (r_j + theta)`` (the competing exponential clocks'
    holding times do not depend on which one rings). ``p_abandon`` is also
    ``theta Lq / lambda``; the tests check both agree.

    Raises:
        ValueError: a non-positive rate, mean or patience, an infinite patience
            (that is M/M/c: :func:`mmc`), or ``c < 1``.

    Example::

        >>> r = mmc_abandonment(10.0, 1.0, 10, 2.0)   # offered 10 Erlangs, 10 servers
        >>> 0.05 < r.p_abandon < 0.15
        True
    """
    lam, s = _rates(arrival_rate, service_mean_s)
    c = integer("c", c, "servers", at_least=1)
    if isinstance(patience_mean_s, float) and math.isinf(patience_mean_s):
        raise ValueError(
            "patience_mean_s must be finite (an item that never abandons is M/M/c: use mmc), "
            f"got {patience_mean_s!r}"
        )
    patience = real("patience_mean_s", patience_mean_s, "seconds", above=0)
    mu, theta = 1.0 / s, 1.0 / patience
    # Past c the ratio p_{n+1}/p_n = lambda / death(n+1) only falls, so once it is
    # below 1 the tail beyond p_n is under p_n r / (1 - r): stop when that is negligible.
    # Overloaded, the queue settles where abandonment takes the excess: about
    # (lambda - c mu) / theta waiting. Refuse at once when that alone is too many.
    if lam > c * mu and (lam - c * mu) / theta > _MOST_STATES / 4:
        raise _too_long(patience, lam * s, c)
    log_p = [0.0]
    n = 0
    while True:
        n += 1
        log_p.append(log_p[-1] + math.log(lam / (min(n, c) * mu + max(n - c, 0) * theta)))
        ratio = lam / (c * mu + max(n + 1 - c, 0) * theta)
        if n >= c and ratio < 1:
            tail = log_p[-1] + math.log(ratio / (1.0 - ratio))
            if tail - max(log_p) < math.log(1e-17):
                break
        if n > _MOST_STATES:
            raise _too_long(patience, lam * s, c)
    p = np.exp(np.array(log_p) - max(log_p))
    p /= p.sum()
    states = np.arange(p.size)
    waiting = np.maximum(states - c, 0)
    lq = float((waiting * p).sum())
    ahead = np.arange(p.size - c)  # items ahead of an arrival that finds c + k
    rates = c * mu + ahead * theta
    served_from = np.cumprod(rates / (rates + theta))
    mean_given_served = np.cumsum(1.0 / (rates + theta))
    arrival_sees = p[c:]  # PASTA
    p_served_waiting = float((arrival_sees * served_from).sum())
    p_wait = float(arrival_sees.sum())
    p_abandon = p_wait - p_served_waiting
    served = float(p[:c].sum()) + p_served_waiting
    wait_served = float((arrival_sees * served_from * mean_given_served).sum()) / served
    throughput = lam * (1.0 - p_abandon)
    return ErlangAResult(
        arrival_rate=lam,
        service_mean_s=s,
        c=c,
        patience_mean_s=patience,
        p_wait=p_wait,
        p_abandon=p_abandon,
        wait_mean_s=lq / lam,
        wait_served_mean_s=wait_served,
        queue_len_mean=lq,
        throughput=throughput,
        utilisation=throughput * s / c,
    )
