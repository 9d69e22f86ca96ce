"""Runs :mod:`.replay` on one pipeline or chain: builds its arrays, refills, grows, reads them back.

The replay runs as plain Python over lists, or compiled by numba over numpy arrays
(:func:`compiled`, its machine code cached on disk), as does the FCFS recursion
(:mod:`.fcfs`). ``auto`` loads numba only once this process's stage items in the kernel
(replayed or through that recursion) reach :data:`LOAD_AFTER_ITEMS`: a short run never
pays its import, a long run or a sweep pays it once.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import operator
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.config import PipelineConfig
from pipeline.errors import PermanentError
from pipeline.records import ShedLog

from ...workloads.downstream import DownstreamFull
from ...workloads.failures import AttemptFailures, SimulatedFailure
from ...workloads.failures.uniforms import randoms
from . import replay as R
from .cuts import Cuts, cut_state, downstream_read_back
from .guard import grow_budgets, guard_rows
from .letters import dead_letters, failure_parts
from .paths import current
from .pool import pool_read, scale_arrays, slots

__all__ = [
    "LOAD_AFTER_ITEMS", "StageInput", "anticipate", "compiled", "replay", "take_compiled",
]  # fmt: skip

LOAD_AFTER_ITEMS = 50_000
"""Stage items this process runs in the kernel before ``auto`` loads numba (in one run or
all so far): loading it and the cached replay costs about 0.4 s of CPU once, what the plain
replay spends on about this many items (``bench/RESULTS.md``); once loaded, every run is
compiled."""
BLOCK = 4096
"""Draws per refill of a pool row, unless :func:`~.paths.kernel_path` sets ``block``."""
# Stage items (in replayed items' CPU) this process has run in the kernel or announced
# (anticipate), while numba is not loaded; and of those, the ones run.
_SEEN, _RUN = [0], [0]
_COMPILED: dict[str, Any] = {}


@dataclass(frozen=True)
class StageInput:
    """One stage (or the one pipeline) as the replay needs it.

    Attributes:
        name: the stage's name (for messages).
        config: its :class:`~pipeline.PipelineConfig` (inside the kernel's domain).
        fan_out: outputs per completed item (child *j* of item *i* is ``i * fan_out + j``).
        first_attempt_s: service time of each item's first attempt here, seconds.
        retry_times: the next ``count`` retry service times, as the engine draws them.
        traced: the service is a trace (a retry repeats the item's own time).
        failures: the stage's bound failure model, or None when no attempt can fail.
        rng: the stage's jitter stream (what its backoff draws from).
        cuts: its attempt timeout and downstream (one pipeline's), or None.
    """

    name: str
    config: PipelineConfig
    fan_out: int
    first_attempt_s: Any
    retry_times: Callable[[int], np.ndarray]
    traced: bool
    failures: AttemptFailures | None
    rng: random.Random
    cuts: Cuts | None = None


def compiled() -> Any:
    """The replay module compiled by numba, or None without numba (or under NUMBA_DISABLE_JIT)."""
    if "replay" not in _COMPILED:
        try:
            import numba
        except ImportError:
            numba = None
        _COMPILED["replay"] = module = None
        if numba is not None and not numba.config.DISABLE_JIT:
            name = f"{R.__name__}_compiled"
            spec = importlib.util.spec_from_file_location(name, R.__file__)
            _COMPILED["replay"] = sys.modules[name] = module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    return _COMPILED["replay"]


def anticipate(items: int) -> None:
    """Count ``items`` stage items that this process is about to run in the kernel, first.

    For a caller that knows it will run many short runs (a widget re-simulates
    a few thousand items on every slider move): ``auto`` then loads the compiled
    replay at the first run instead of after many. Nothing is loaded before that
    run, nor ever without numba; every path gives the same run.

    Raises:
        TypeError: ``items`` is not an integer (a float, a Decimal, a bool).
        ValueError: ``items`` is negative.
    """
    if isinstance(items, bool) or not hasattr(items, "__index__"):
        raise TypeError(f"items must be an int >= 0, got {items!r}")
    if operator.index(items) < 0:
        raise ValueError(f"items must be >= 0, got {items}")
    _SEEN[0] += operator.index(items)


def take_compiled(items: int, *, announced: bool = True) -> bool:
    """Whether the next run, of ``items`` stage items, runs compiled (see :mod:`.paths`).

    ``announced=False``: ``auto`` weighs only the items this process has run, not those a
    caller announced (:func:`anticipate`: a widget's many runs of the replay), for a run
    whose plain loop is cheap (the FCFS recursion's) and should not load numba for them.

    Raises:
        RuntimeError: the path in force is ``compiled`` and numba is not there.
    """
    path = current().path
    if path == "compiled":
        if compiled() is None:
            raise RuntimeError("the compiled replay needs numba: pip install 'pipeline-lab[fast]'")
        return True
    if path == "plain":
        return False
    if "replay" in _COMPILED:
        return _COMPILED["replay"] is not None
    _SEEN[0] += items
    _RUN[0] += items
    return (_SEEN if announced else _RUN)[0] >= LOAD_AFTER_ITEMS and compiled() is not None


def _delays(config: PipelineConfig) -> np.ndarray:
    """Backoff delay after failed attempt *a* (index a - 1), before jitter."""
    plain = dataclasses.replace(config.backoff, jitter=False)
    table = np.zeros(R.DELAYS)
    for a in range(1, min(config.max_attempts, R.DELAYS + 1)):
        delay = plain.delay(a)
        if not (isinstance(delay, int | float) and 0.0 <= delay < math.inf):
            raise ValueError(
                f"the backoff delay must be a finite number of seconds >= 0, got {delay!r} "
                f"(from {config.backoff!r})"
            )
        table[a - 1] = delay
    return table


def _itemwise(part: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A permanent or scripted part per item: its last failing attempt, the first permanent one.

    A poisoned item fails every attempt, each permanently; a scripted item fails its
    first ``fails`` attempts, the last permanently if it is marked (0: none is).
    """
    if part.model_kind == "permanent":
        poisoned = part.poisoned(n).astype(np.int64)
        return poisoned * 2**62, poisoned
    last = np.zeros(n, np.int64)
    last[: len(part.fails[:n])] = part.fails[:n]
    first = np.zeros(n, np.int64)
    marked = [item for item in part.permanent if item < n]
    first[marked] = last[marked]
    return last, first


_RINGS = [R.IOFF, R.MOFF, R.QOFF, R.AOFF, R.GOFF, R.WOFF]


def _stage_rows(stages: list[StageInput], reaching: list[int], single: bool, block: int | None):
    """Each stage's int row, the rings' sizes, the failure parts' tables and the pools' rows.

    The lanes, queued retries and held ones are never more than the queue's bound plus the
    items in service (an item is admitted below the bound; one that fails waits its retry).
    A stage's items start at IOFF in the per-item columns (no ring), its attempts at AOFF.

    A stage that can fail has pool rows (refilled by the driver): its retry service
    times, its jitter, and one per independent part (failure outcomes, 1.0 when the
    attempt fails: a row of what the stage's first attempts and a block more need,
    unless ``block`` is set). A part's ``krow`` is its pool row, 0 for an item-wise part
    (its columns in ``last`` and ``first`` from ``koff``).
    """
    si = np.zeros((len(stages), R.SI), np.int64)
    pool_of: list[tuple[int, Any]] = []  # pool row -> (stage, what refills it)
    sizes, read = [0], []  # each row's size after a 0 (their sums: where rows start), is it read
    koff, krow, last, first = [], [], [np.zeros(1, np.int64)], [np.zeros(1, np.int64)]
    delays = np.zeros((len(stages), R.DELAYS))
    for s, (spec, r) in enumerate(zip(stages, reaching, strict=True)):
        config, row, parts = spec.config, si[s], failure_parts(spec.failures)
        conc, most = config.concurrency, slots(config)  # an autoscaled pool's most workers
        lane = min(r, (config.queue_maxsize or r) + most) + 1
        waiters = 1 + (1 if s == 0 else stages[s - 1].config.concurrency)  # upstream's tasks
        fails = bool(parts) or spec.cuts is not None  # (a cut attempt fails too)
        row[_RINGS] = r, lane, lane if fails else 1, r if fails or single else 0, most, waiters
        row[[R.MCAP, R.QCAP, R.GCAP, R.WCAP]] = row[[R.MOFF, R.QOFF, R.GOFF, R.WOFF]]
        row[R.REJECT] = config.on_full == "reject"
        row[R.BOUND] = 2**62 if config.queue_maxsize is None else config.queue_maxsize
        row[R.TURNS] = row[R.REJECT] or config.queue_maxsize is None
        row[R.FAN], row[R.CONC], row[R.MAXATT] = spec.fan_out, conc, config.max_attempts
        row[R.RSIM] = config.retry.is_retryable(SimulatedFailure("x"))
        row[R.RPERM] = config.retry.is_retryable(PermanentError("x"))
        row[R.RTMO] = config.retry.is_retryable(TimeoutError())
        row[R.RFULL] = config.retry.is_retryable(DownstreamFull("x"))
        row[R.JITTER], row[R.RTRACE] = bool(config.backoff.jitter), spec.traced
        row[R.PARTOFF], row[R.NPARTS], row[R.POFF] = len(krow), len(parts), len(pool_of)
        if not parts and spec.cuts is None:
            continue
        delays[s] = _delays(config)
        pool_of += [(s, "retry"), (s, "jitter")]
        sizes += [block or BLOCK] * 2
        read += [not spec.traced, bool(row[R.JITTER])]
        for part in parts:
            independent = part.model_kind == "independent"
            koff.append(0 if independent else sum(map(len, last)))
            krow.append(len(pool_of) if independent else 0)
            if independent:
                pool_of.append((s, part))
                sizes.append(block or r + BLOCK)
                read.append(True)
            else:
                columns = _itemwise(part, r)
                last.append(columns[0])
                first.append(columns[1])
        if spec.cuts is not None and spec.cuts.downstream is not None:
            from ..downstream import DRAW_BLOCK

            pool_of.append((s, "downstream"))  # in the engine's blocks: the very same draws
            sizes.append(DRAW_BLOCK)
            read.append(True)
        row[R.NPOOLS] = len(pool_of) - row[R.POFF]
    totals = dict(zip(_RINGS, si[:, _RINGS].sum(axis=0).tolist(), strict=True))
    si[:, _RINGS] = np.cumsum(si[:, _RINGS], axis=0) - si[:, _RINGS]
    rows = np.cumsum(sizes)
    # a row read is first refilled (read from its end); one never read, never
    used = np.array([rows[r + 1] if r_read else rows[r] for r, r_read in enumerate(read)] + [0])
    pool = np.zeros(max(1, rows[-1]))
    tables = [np.concatenate(last), np.concatenate(first), delays.ravel(), pool,
              used.astype(np.int64), np.array([*koff, 0], np.int64), np.array([*krow, 0], np.int64),
              rows]  # fmt: skip
    return si, totals, pool_of, tables


class _State:
    """The replay's state for one run: the bundles :func:`.replay.play` takes, as numpy arrays."""

    def __init__(
        self, arrival: np.ndarray, stages: list[StageInput], single: bool, log: bool,
        drain_s: float | None, warmup_s: float,
    ) -> None:  # fmt: skip
        sizes, nst = current(), len(stages)
        reaching = [len(arrival)]
        for spec in stages[:-1]:
            reaching.append(reaching[-1] * spec.fan_out)
        si, totals, self.pool_of, tables = _stage_rows(stages, reaching, single, sizes.block)
        conc, seats = si[:, R.CONC], si[:, R.GCAP]  # workers at the start, worker slots
        workers = int(seats.sum())
        margin = max(spec.fan_out for spec in stages) + workers + 2
        head = stages[0].config
        if head.on_full == "block" and head.queue_maxsize:
            margin = max(margin, head.queue_maxsize + workers + 2)
        self.iv = np.zeros(R.NIV, np.int64)
        self.iv[[R.N, R.SINGLE, R.MARGIN, R.ACCEPTING, R.LOG_ALL]] = (
            len(arrival), single, margin, 1, log,
        )  # fmt: skip
        drain_s = np.nan if drain_s is None else drain_s  # NOW, BLOCKED_SINCE, CLOSED_S, ...:
        self.fv = np.array([0.0, 0.0, np.nan, drain_s, warmup_s, np.inf])
        sf = np.zeros((nst, R.SF))
        sf[:, R.LASTSETTLE] = np.nan
        guard = guard_rows(stages, reaching, si, sf, sizes.budget)
        self.si, self.sf = si.ravel(), sf.ravel()
        # Chain._build starts every stage after the head first; then the head's workers, then
        # its producer (a pipeline: its workers, then its producer).
        starts = np.cumsum([0, *seats])
        order = [g for s in [*range(1, nst), 0] for g in range(starts[s], starts[s] + conc[s])]
        scaler = head.autoscale
        if scaler is not None:  # _start_pool: its workers, then the autoscaler's task
            order.append(-1)
        rcap = 1
        while rcap < max(workers + 2, sizes.ready or 2 * (workers + 2 * margin + 64)):
            rcap *= 2
        rk, ra = np.zeros(rcap, np.int64), np.zeros(rcap, np.int64)
        rk[: len(order)], ra[: len(order)] = R.K_WORKER, order
        if scaler is not None:
            rk[len(order) - 1], ra[len(order) - 1] = R.K_SCALE, 0
        rk[len(order)], ra[len(order)] = R.K_PRODUCER, R.TOP
        self.iv[R.RLEN] = len(order) + 1
        hcap = sizes.heap or workers + 64
        self.T = [rk, ra, np.zeros(hcap), *(np.zeros(hcap, np.int64) for _ in range(3))]
        lcap = sizes.log or max(1024, 4 * sum(reaching) * log + 2 * margin + 64)
        n = len(arrival) if single else 1  # a pipeline's item columns (see replay._log)
        # the log's kinds, times, ids and stages are written before read (below LLEN): not zeroed
        self.L = [np.empty(lcap, np.int8), np.empty(lcap), np.empty(lcap, np.int64),
                  np.empty(lcap, np.int8), np.zeros(lcap, np.int8),
                  *(np.full(n, np.nan) for _ in range(3)), np.full(n, 4, np.int8)]  # fmt: skip
        self.Q = [np.zeros(max(1, totals[column]), np.int64)
                  for column in (R.MOFF, R.QOFF, R.GOFF, R.WOFF, R.AOFF)]  # fmt: skip
        ints = [np.zeros(workers, np.int64) for _ in range(8)]
        stage_of = np.repeat(np.arange(nst, dtype=np.int64), seats)
        self.W = [stage_of, *ints[:3], np.zeros(workers), *ints[3:], *scale_arrays(self, head)]
        first = [np.asarray(spec.first_attempt_s, np.float64) for spec in stages]
        first = first[0] if single else np.concatenate(first)  # one stage: no copy
        self.D = [np.asarray(arrival, np.float64), first, *tables]
        cut_state(self, stages)
        self.D += guard  # the overload controls' arrays (replay.GFIRSTS ...)


@dataclass
class Replayed:
    """What a replay hands back: per stage its log and counts, and how the run ended.

    ``stages[s]`` holds ``kinds``, ``times``, ``ids`` (numpy), the counters of its
    report (``offered`` ... ``producer_blocked_s``), ``dead_letters``, ``shed`` and the
    hand-off's ``outputs``, ``handed_on`` and ``hand_off_blocked_s``.
    """

    stages: list[dict[str, Any]]
    last_settle: list[float | None]
    closed_s: float
    finished_s: float
    drain_timed_out: bool
    held_peak: int
    pool: dict[str, Any] | None = None
    downstream: dict[str, Any] | None = None


def _grow(x: Any) -> Any:
    return np.concatenate([x, np.zeros_like(x)]) if isinstance(x, np.ndarray) else x + x


def _resume(state: _State, code: int, stages: list[StageInput], refills: dict) -> None:
    """Do what ``code`` asks (grow an array, refill a pool) so the replay can go on."""
    T, L, D, iv = state.T, state.L, state.D, state.iv
    if code == R.GROW_BUDGET:
        grow_budgets(state)
    elif code == R.GROW_LOG:
        state.L = [*(_grow(x) for x in L[:5]), *L[5:]]
    elif code == R.GROW_HEAP:
        state.T = [*T[:2], *(_grow(x) for x in T[2:])]
    elif code == R.GROW_READY:
        head = int(iv[R.RHEAD])  # the ring from its head on, then twice as long, or more
        ring = [_grow(np.concatenate([x[head:], x[:head]]) if isinstance(x, np.ndarray)
                      else x[head:] + x[:head]) for x in T[:2]]  # fmt: skip
        while len(ring[0]) < iv[R.RLEN] + iv[R.HSIZE] + 2 * iv[R.MARGIN] + 64:
            ring = [_grow(x) for x in ring]
        state.T = [*ring, *T[2:]]
        iv[R.RHEAD] = 0
    else:
        row = code - R.REFILL
        s, what = state.pool_of[row]
        spec, size = stages[s], int(D[R.D_ROWS][row + 1] - D[R.D_ROWS][row])
        if what == "retry":
            values = spec.retry_times(size)
        elif what == "downstream":  # a request per draw: room for as many more requests
            values = spec.cuts.downstream.service.sample(spec.cuts.rng, size)
            while len(state.D[R.D_SENT]) < iv[R.DS_REQ] + size:
                requests = slice(R.D_SENT, R.D_STARTS)  # the requests' columns, grown
                grown = [_grow(x) for x in state.D[requests]]
                state.D = [*state.D[: requests.start], *grown, *state.D[requests.stop :]]
        elif what == "jitter":
            refills[row] = spec.rng.getstate()
            values = randoms(spec.rng, size)
        else:
            values = what.failing(size)  # bools: the pool holds 1.0 where the attempt fails
        fast = isinstance(D[R.D_POOL], np.ndarray)
        D[R.D_POOL][D[R.D_ROWS][row] : D[R.D_ROWS][row + 1]] = values if fast else values.tolist()
        D[R.D_USED][row] = D[R.D_ROWS][row]


def replay(
    arrival_s: np.ndarray,
    stages: list[StageInput],
    *,
    single: bool,
    drain_timeout_s: float | None = None,
    warmup_s: float = 0.0,
    fast: bool = False,
    log: bool = True,
) -> Replayed:
    """Replay one run (``single``: a pipeline, with its drain and close; else a chain).

    ``fast``: run the compiled replay (:func:`compiled` must not be None), else the plain
    one over lists. ``log``: log every event (a chain always does); else only the sheds,
    retries and dead letters the report reads (a pipeline's item columns say the rest).

    Raises:
        RuntimeError: the replay stopped with work left (a bug; the engine would deadlock).
    """
    arrival_s = np.asarray(arrival_s, np.float64)
    state = _State(arrival_s, stages, single, log or not single, drain_timeout_s, warmup_s)
    module = compiled() if fast else R
    if not fast:  # lists: plain Python indexes them several times faster than numpy arrays
        for name in ("iv", "fv", "si", "sf"):
            setattr(state, name, getattr(state, name).tolist())
        for name in "TLQWD":
            setattr(state, name, [x.tolist() for x in getattr(state, name)])
    refills: dict[int, tuple] = {}  # jitter row -> its stream's state before its last refill
    while True:
        code = module.play(
            state.iv, state.fv, state.si, state.sf,
            *(tuple(getattr(state, name)) for name in "TLQWD"),
        )  # fmt: skip
        if code in (R.DONE, R.STUCK):
            break
        _resume(state, code, stages, refills)
    for row, saved in refills.items():  # leave each jitter stream where the engine does
        rng = stages[state.pool_of[row][0]].rng
        rng.setstate(saved)
        used = state.D[R.D_USED][row] - state.D[R.D_ROWS][row]
        randoms(rng, int(used))  # the last block's draws used
    si = np.asarray(state.si, np.int64).reshape(len(stages), R.SI)
    left = math.isnan(state.fv[R.CLOSED_S]) or si[:, R.UNSETTLED].any() or si[:, R.WLEN].any()
    if code == R.STUCK or (left and not single):
        raise RuntimeError("kernel replay: the run stopped with work left (a bug)")
    return _read_back(state, stages, si, single)


_COUNTERS = {"offered": R.OFFERED, "admitted": R.ADMITS, "completed": R.COMPLETES,
             "attempts": R.ATTEMPTS, "retried": R.RETRIED, "queue_peak": R.PEAK,
             "outputs": R.OUTPUTS, "handed_on": R.HANDED, "timed_out": R.TIMEDOUT}  # fmt: skip
"""A stage's counters in its :class:`Replayed` account, and their columns of its int row."""


def _read_back(state: _State, stages: list[StageInput], si: np.ndarray, single: bool) -> Replayed:
    """Each stage's log, counters, shed log and dead letters, out of the replay's arrays."""
    ln = int(state.iv[R.LLEN])
    kinds = np.asarray(state.L[0][:ln], np.int8)
    times = np.asarray(state.L[1][:ln], np.float64)
    ids = np.asarray(state.L[2][:ln], np.int64)
    sf = np.asarray(state.sf, np.float64).reshape(len(stages), R.SF)
    out, last_settle = [], []
    for s, spec in enumerate(stages):
        at = slice(None) if single else np.flatnonzero(np.asarray(state.L[3][:ln], np.int8) == s)
        k, t, i = kinds[at], times[at], ids[at]
        row = si[s]
        run: dict[str, Any] = {name: int(row[column]) for name, column in _COUNTERS.items()}
        run.update(kinds=k, times=t, ids=i, shed=ShedLog(spec.config.keep_shed), dead_letters=[],
                   producer_blocked_s=float(sf[s, R.PBLOCKED]),
                   hand_off_blocked_s=float(sf[s, R.HBLOCKED]))  # fmt: skip
        if row[R.GUARD]:  # what make_report's overload statistics read
            run["guard"] = (int(row[R.DENIED]), int(row[R.KREFUSED]), int(row[R.KSTATE]),
                            float(sf[s, R.KOPENED_S]), float(sf[s, R.KOPEN_TOTAL_S]))  # fmt: skip
        for item in i[k == R.SHED].tolist() if row[R.SHEDS] else ():
            run["shed"].append(item)
        if row[R.DEAD]:
            part = np.asarray(state.L[4][:ln], np.int8)[at]
            run["dead_letters"] = dead_letters(spec, k, t, i, part)
        if single:  # admitted, first start, finish (s), attempts, outcome
            n = len(state.D[R.D_ARRIVALS])
            columns = [*state.L[5:8], state.Q[4][:n], state.L[8]]
            run["columns"] = [np.asarray(x, c) for x, c in zip(columns, "dddqb", strict=True)]
        out.append(run)
        settled = float(sf[s, R.LASTSETTLE])
        last_settle.append(None if math.isnan(settled) else settled)
    iv, fv = state.iv, state.fv
    now = float(fv[R.NOW])
    # the last instant's row holds the dead letters alone
    held = max(iv[R.HELD_PEAK], si[0, R.DEAD], iv[R.HELD_BEFORE]) if now >= fv[R.WARMUP_S] else 0
    downstream = downstream_read_back(state) if iv[R.DS_ON] else None
    pool = pool_read(state, stages[0].config, now)
    return Replayed(out, last_settle, float(fv[R.CLOSED_S]), now, bool(iv[R.TIMED_OUT]), int(held),
                    pool=pool, downstream=downstream)  # fmt: skip
