"""An autoscaled pool's part of the replay's arrays (see :mod:`.replay`): its worker slots,
its settings, the arrays of its workers and windows, and its statistics at the close."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pipeline.config import PipelineConfig

from . import replay as R

__all__ = ["pool_read", "scale_arrays", "slots"]


def slots(config: PipelineConfig) -> int:
    """The most workers a pool has at once: its ``concurrency``, or its autoscaler's most."""
    return config.concurrency if config.autoscale is None else config.autoscale.max_workers


def scale_arrays(state: Any, config: PipelineConfig) -> list[np.ndarray]:
    """An autoscaled pipeline's settings (into ``state.iv``, ``state.fv``) and its arrays.

    Its workers' start times (NaN: the slot is free), the free slots (a stack), the
    workers in their cold start (a ring) and the desired counts its windows still see
    (times and counts, a ring). Without an autoscaler: arrays of one element.
    """
    scaler, iv, conc = config.autoscale, state.iv, config.concurrency
    state.fv = np.concatenate([state.fv, np.zeros(R.COLD_S + 1 - len(state.fv))])
    if scaler is None:
        return [np.zeros(1), np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1), np.zeros(1)]
    cap = scaler.max_workers
    keep = max(scaler.scale_up_stabilization_s, scaler.scale_down_stabilization_s)
    kept = int(keep / scaler.sync_s) + 3  # the syncs a window sees, and the one it adds
    iv[[R.SIZE, R.SIZE_PEAK, R.NFREE, R.METRIC, R.MIN_W, R.MAX_W, R.PODS]] = (
        conc, conc, cap - conc, scaler.metric == "oldest_age_s", scaler.min_workers, cap,
        scaler.max_scale_up[0],
    )  # fmt: skip
    iv[[R.CCAP, R.HCAP]] = cap, kept
    state.fv[[R.DESIRED, R.TARGET, R.SYNC_S, R.TOLERANCE, R.UP_S, R.DOWN_S, R.FRACTION,
              R.COLD_S]] = (np.nan, scaler.target, scaler.sync_s, scaler.tolerance,
                            scaler.scale_up_stabilization_s, scaler.scale_down_stabilization_s,
                            scaler.max_scale_up[1], scaler.cold_start_s)  # fmt: skip
    born = np.full(cap, np.nan)
    born[:conc] = 0.0
    free = np.arange(cap - 1, -1, -1, dtype=np.int64)  # popped from its end: conc first
    return [born, free, np.zeros(cap, np.int64), np.zeros(kept), np.zeros(kept)]


def pool_read(state: Any, config: PipelineConfig, now: float) -> dict[str, Any] | None:
    """An autoscaled pipeline's pool statistics at its close (None without an autoscaler)."""
    if config.autoscale is None:
        return None
    iv, fv = state.iv, state.fv
    born = np.asarray(state.W[10], np.float64)
    alive = born[~np.isnan(born)]  # every worker still there stops at the close
    desired = float(fv[R.DESIRED])
    return {
        "workers": int(iv[R.SIZE] + iv[R.RETIRING]),
        "workers_peak": int(iv[R.SIZE_PEAK]),
        "worker_seconds": float(fv[R.WORKER_S]) + float(np.sum(now - alive)),
        "scale_events": int(iv[R.SCALES]),
        "workers_desired": None if math.isnan(desired) else int(desired),
    }
