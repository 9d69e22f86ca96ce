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
  independent attempt failures.

References: Gross, Shortle, Thompson & Harris, *Fundamentals of Queueing
Theory* (4th ed.), sections 2.3 (M/M/c), 2.5 (M/M/c/K), 1.4 (Little's law).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pipeline._validate import integer, real

__all__ = [
    "MMcKResult",
    "MMcResult",
    "dead_letter_rate",
    "erlang_b",
    "erlang_c",
    "expected_in_system",
    "littles_law",
    "mmc",
    "mmck",
    "retry_amplification",
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
