"""Arrivals under :class:`~pipeline.sim.LoadSpike` faults: the rate multiplied, exactly.

A spike multiplies the arrival rate by its factor during ``[at_s, at_s + for_s)``;
overlapping spikes multiply. For a Poisson process (:class:`Poisson`, and the
non-homogeneous :class:`TimeVarying`) the result is again a Poisson process,
with rate ``factor(t) x rate(t)``, drawn exactly in two steps from the
process's own draw:

- where the factor is below 1, each arrival is kept with probability
  ``factor`` (independent thinning of a Poisson process is a Poisson process
  at the thinned rate);
- where it is above 1, an independent Poisson process at
  ``(factor - 1) x rate(t)`` is added (a superposition of independent Poisson
  processes is one at the summed rate); for :class:`TimeVarying` it is drawn
  by thinning candidates at ``(factor - 1) x max_rate``.

Other processes (deterministic, Markov-modulated, a trace) have no one rate to
multiply: a spike on them is a ValueError at the scenario.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .arrivals import ArrivalProcess, Poisson, TimeVarying
from .faults import LoadSpike, SpeedProfile

__all__ = ["MAX_SPIKE_ARRIVALS", "SPIKABLE", "spiked_times"]

MAX_SPIKE_ARRIVALS = 10**9
"""Most arrivals a spike may add (as many as a scenario may have items)."""

SPIKABLE = (Poisson, TimeVarying)
"""Arrival processes a :class:`LoadSpike` applies to (Poisson ones)."""


def spiked_times(
    process: ArrivalProcess,
    spikes: Sequence[LoadSpike],
    rng: np.random.Generator,
    *,
    n: int | None = None,
    duration_s: float | None = None,
) -> np.ndarray:
    """Arrival times of ``process`` with its rate multiplied by ``spikes`` (see the module).

    With ``duration_s``, every arrival in ``[0, duration_s]``; with ``n``, the
    first ``n``: the process is drawn for ``n`` arrivals, spiked, and drawn again
    for twice as many while the spiked draw holds fewer than ``n`` (thinning
    removes some), always from ``rng``, so the result is one seed's.
    """
    profile = SpeedProfile(spikes)
    if duration_s is not None:
        return _spike(process, profile, rng, process.times(rng, duration_s=duration_s), duration_s)
    wanted = n if n is not None else 0
    drawn = wanted
    while True:
        base = process.times(rng, n=drawn)
        horizon = float(base[-1]) if len(base) else 0.0
        out = _spike(process, profile, rng, base, horizon)
        if len(out) >= wanted:
            return out[:wanted]
        drawn *= 2


def _spike(
    process: ArrivalProcess,
    profile: SpeedProfile,
    rng: np.random.Generator,
    base: np.ndarray,
    horizon: float,
) -> np.ndarray:
    """``base`` (the process's arrivals over ``[0, horizon]``) under ``profile``'s factors."""
    keep = np.ones(len(base), dtype=bool)
    added = []
    for start, end, factor in profile.segments():
        end = min(end, horizon)
        if factor == 1.0 or not end > start:
            continue
        if factor < 1.0:
            inside = np.flatnonzero((base >= start) & (base < end))
            keep[inside] = rng.random(len(inside)) < factor
        else:
            added.append(_extra(process, rng, start, end, factor - 1.0))
    out = base[keep]
    if added:
        out = np.sort(np.concatenate([out, *added]), kind="stable")
    return out


def _extra(
    process: ArrivalProcess, rng: np.random.Generator, start: float, end: float, more: float
) -> np.ndarray:
    """An independent Poisson process at ``more x rate(t)`` over ``[start, end)``.

    Raises:
        ValueError: more than :data:`~pipeline.sim.workloads.scenario.MAX_N_ITEMS`
            arrivals expected (a factor no run could hold).
    """
    length = end - start
    expected = more * (getattr(process, "max_rate", None) or process.rate) * length
    if not expected <= MAX_SPIKE_ARRIVALS:
        raise ValueError(
            f"a LoadSpike of factor {more + 1:g} on [{start:g}, {end:g}) s would add about "
            f"{expected:.3g} arrivals; allowed: at most {MAX_SPIKE_ARRIVALS:.0e} (a smaller factor)"
        )
    if isinstance(process, TimeVarying):
        count = rng.poisson(more * process.max_rate * length)
        times = start + rng.random(count) * length
        accept = rng.random(count) * process.max_rate < np.asarray(process.rate_fn(times))
        return np.sort(times[accept])
    count = rng.poisson(more * process.rate * length)
    return np.sort(start + rng.random(count) * length)
