"""Exact statistics of a right-continuous step function (queue depth, in flight, memory).

- :func:`time_weighted_mean` -- the time average over a window;
- :func:`time_weighted_quantile` -- a percentile of the value under time;
- :func:`step_durations` -- how long each step holds inside a window (seconds);
- :func:`weighted_sum` -- ``sum(values * weights)``, bit for bit on every machine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pipeline._validate import real

__all__ = [
    "step_durations",
    "time_weighted_mean",
    "time_weighted_quantile",
    "weighted_sum",
]


def step_durations(times: np.ndarray, t_end: float, t_start: float = -math.inf) -> np.ndarray:
    """How long each step ``[times[i], times[i+1])`` holds inside ``[t_start, t_end]``, seconds.

    The last step runs to ``t_end``. No validation: ``times`` must be a float
    array, non-decreasing (see :func:`time_weighted_mean`).
    """
    # In place where possible: a long run's series has tens of millions of rows.
    durations = np.append(times[1:], max(t_end, float(times[-1])))
    np.minimum(durations, t_end, out=durations)
    durations -= np.maximum(times, t_start) if t_start > times[0] else times
    return np.clip(durations, 0.0, None, out=durations)


def _segments(
    times: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    t_end: float,
    t_start: float | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Values and their durations inside ``[t_start, t_end]``."""
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if t.ndim != 1 or t.shape != v.shape or t.size == 0:
        raise ValueError(
            f"times and values must be non-empty 1-D arrays of one length, "
            f"got shapes {t.shape} and {v.shape}"
        )
    if not (np.isfinite(t).all() and np.isfinite(v).all()):
        raise ValueError("times and values must be finite")
    bad = np.flatnonzero(np.diff(t) < 0)
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"times must be non-decreasing (seconds), got times[{i}]={float(t[i])!r} "
            f"then times[{i + 1}]={float(t[i + 1])!r}"
        )
    start = (
        float(t[0])
        if t_start is None
        else real("t_start", t_start, f"seconds, >= times[0]={float(t[0])!r}", at_least=float(t[0]))
    )
    end = real("t_end", t_end, f"seconds, > t_start={start!r}", above=start)
    return v, step_durations(t, end, start)


def weighted_sum(values: np.ndarray, weights: np.ndarray) -> float:
    """``sum(values * weights)``, bit for bit the same on every machine and process.

    numpy's own loop (``einsum``), not BLAS's ``dot``: OpenBLAS splits a long
    dot product across its threads, so the rounding depended on how many it
    had (a Dask worker runs with one, a notebook's kernel with several, and
    their sweeps differed in the last digit). No temporary array either.
    """
    return float(np.einsum("i,i->", values, weights))


def time_weighted_mean(
    times: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    t_end: float,
    *,
    t_start: float | None = None,
) -> float:
    """Time average of a right-continuous step function over ``[t_start, t_end]``.

    The function is ``values[i]`` on ``[times[i], times[i+1])`` and
    ``values[-1]`` from ``times[-1]`` to ``t_end``; equal times are allowed
    (the later value wins). ``t_start`` defaults to ``times[0]`` (start the
    series at 0 to average from 0; pass a later ``t_start`` to skip warm-up).
    Changes after ``t_end`` are ignored. Result: ``sum(v_i * d_i) / (t_end - t_start)``.

    Raises:
        ValueError: mismatched, empty, non-finite or decreasing input,
            ``t_start < times[0]`` or ``t_end <= t_start``.
    """
    v, d = _segments(times, values, t_end, t_start)
    return weighted_sum(v, d) / float(d.sum())


def time_weighted_quantile(
    times: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    t_end: float,
    q: float,
    *,
    t_start: float | None = None,
) -> float:
    """The ``q``-quantile of a step function's value under time (see :func:`time_weighted_mean`).

    Returns the smallest value ``v`` such that the function is ``<= v`` for at
    least a share ``q`` of ``[t_start, t_end]`` (so ``q=0.5`` is the time
    median, ``q=1`` the maximum over the window, ``q=0`` the minimum held for
    a positive time).

    Raises:
        ValueError: as :func:`time_weighted_mean`, or ``q`` not in [0, 1].
    """
    q = real("q", q, "probability in [0, 1]", at_least=0, at_most=1)
    v, d = _segments(times, values, t_end, t_start)
    held = d > 0
    v, d = v[held], d[held]
    order = np.argsort(v, kind="stable")
    cumulative = np.cumsum(d[order])
    total = cumulative[-1]
    # a relative slack so that exact ties (q = 1/2 of two equal halves) are not
    # pushed to the next value by rounding in the cumulative sum
    i = int(np.searchsorted(cumulative, q * total - 1e-12 * total, side="left"))
    return float(v[order][min(i, v.size - 1)])
