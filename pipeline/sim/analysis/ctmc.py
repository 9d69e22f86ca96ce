"""A finite CTMC's stationary distribution, and the rates a retry-loop chain is built from.

Shared by :mod:`.retry_loop` (Metafor's reduced chain), :mod:`.retry_chain` (the exact
chain of a small loop) and :mod:`.setup_chain` (M/M/k/setup).
"""

from __future__ import annotations

import numpy as np

from ..._validate import real

__all__ = ["loop_rates", "stationary"]


def loop_rates(arrival_rate: object, mu: object, timeout_s: object) -> tuple[float, float, float]:
    """The loop's arrival rate and service rate (per second) and timeout (seconds), checked.

    Raises:
        TypeError: not a real number.
        ValueError: not finite and > 0 (the message names the argument).
    """
    return (
        real("arrival_rate", arrival_rate, "per second", above=0),
        real("mu", mu, "services per second", above=0),
        real("timeout_s", timeout_s, "seconds", above=0),
    )


def stationary(rates: np.ndarray) -> np.ndarray:
    """The stationary distribution ``pi`` of the chain whose off-diagonal rates are ``rates``.

    Solves ``pi Q = 0`` with ``sum(pi) = 1`` (one balance equation replaced by the
    normalisation), ``Q`` being ``rates`` with the diagonal set to minus each row's
    sum; a dense solve, for an irreducible chain of up to some 20,000 states.
    """
    generator = np.array(rates, dtype=np.float64)
    np.fill_diagonal(generator, 0.0)
    np.fill_diagonal(generator, -generator.sum(axis=1))
    system = generator.T.copy()
    system[-1, :] = 1.0
    right = np.zeros(len(generator))
    right[-1] = 1.0
    return np.linalg.solve(system, right)
