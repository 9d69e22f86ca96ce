"""Attempt timeouts and a downstream in the replay's arrays (see :mod:`.replay`): what the
replay takes (:class:`Cuts`), its columns and arrays, and the downstream's account read back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...workloads.downstream import Downstream
from . import replay as R

__all__ = ["Cuts", "cut_state", "downstream_read_back"]


@dataclass(frozen=True)
class Cuts:
    """A pipeline's attempt timeout and the downstream its attempts call (see :mod:`.replay`).

    Attributes:
        timeout_s: ``attempt_timeout_s``, or None.
        downstream: the :class:`~pipeline.sim.Downstream`, or None.
        rng: its service-time stream (``downstream_rng``).
        starts, factors: its servers' speed profile, piece by piece (``SpeedProfile.segments``).
        client: the attempt sleeps its service time before the call (``Scenario.service``).
    """

    timeout_s: float | None
    downstream: Downstream | None = None
    rng: np.random.Generator | None = None
    starts: tuple[float, ...] = (0.0,)
    factors: tuple[float, ...] = (1.0,)
    client: bool = True


def cut_state(state: Any, stages: list) -> None:
    """The columns and arrays of the stages' attempt timeouts and a pipeline's downstream
    (:class:`Cuts`): ``D[D_SENT:D_STARTS]`` its requests (sent, start, end, abandoned, work,
    caller), then its speed profile and each stage's timeout (the requests' arrays
    grow as the downstream's draws are refilled)."""
    cuts, iv = stages[0].cuts, state.iv
    state.fv = np.concatenate([state.fv, [0.0, 0.0, 0.0]])  # DS_SINCE, the areas
    timeouts = [np.nan if s.cuts is None or s.cuts.timeout_s is None else s.cuts.timeout_s
                for s in stages]  # fmt: skip
    iv[R.CUTS] = any(spec.cuts is not None for spec in stages)
    profile = [(0.0,), (1.0,)]
    if cuts is not None and cuts.downstream is not None:
        ds = cuts.downstream
        iv[[R.DS_ON, R.CLIENT, R.DS_C, R.DS_FREE]] = 1, cuts.client, ds.concurrency, ds.concurrency
        iv[R.DS_QMAX] = -1 if ds.queue_maxsize is None else ds.queue_maxsize
        iv[R.DS_ROW] = [what for _, what in state.pool_of].index("downstream")
        iv[R.DS_CONST] = all(factor == 1.0 for factor in cuts.factors)
        profile = [cuts.starts, cuts.factors]
    state.D += [*(np.zeros(1) for _ in range(5)), np.zeros(1, np.int64),
                *(np.array(x, np.float64) for x in [*profile, timeouts])]  # fmt: skip


def downstream_read_back(state: Any) -> dict[str, Any]:
    """The downstream's counts, its areas up to now and each request's times (NaN: none yet)."""
    iv, fv, D = state.iv, state.fv, state.D
    sent, started = int(iv[R.DS_REQ]), int(iv[R.DS_STARTED])
    columns = [np.array(D[k][:sent], np.float64) for k in (10, 11, 12, 13)]
    for column in columns[1:3]:
        column[started:] = np.nan
    counts = {name: int(iv[k]) for name, k in (("requests", R.DS_REQ), ("served", R.DS_SERVED),
              ("orphaned", R.DS_ORPH), ("rejected", R.DS_REJ), ("concurrency", R.DS_C),
              ("free", R.DS_FREE))}  # fmt: skip
    areas = {name: float(fv[k]) for name, k in (("since", R.DS_SINCE), ("queue_area", R.DS_QAREA),
             ("busy_area", R.DS_BAREA))}  # fmt: skip
    return {**counts, **areas, "waiting": sent - started, "log": columns}
