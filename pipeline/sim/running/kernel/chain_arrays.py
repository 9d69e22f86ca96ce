"""The kernel's chain path over flat arrays: the same replay, compiled by numba when it is there.

:mod:`pipeline.sim.running.kernel.chain` replays a chain's tasks step by step
with closures, deques and a heap of tuples. This module plays the very same
steps in one function, :func:`_play`, over numpy arrays only: per-stage
counters in a table, queues as ring buffers, the timer heap as four parallel
arrays, every stage's events in one log with a stage column. Random values
that the closures draw on demand (retry service times, independent failure
outcomes, backoff jitter) are drawn ahead in blocks, by the same callables and
in the same order, so each attempt sees the value it would have seen.

:func:`_play` is written for numba's ``nopython`` mode and runs unchanged as
plain Python (slowly: it is there so the equality tests check the one source
on both). With the ``[fast]`` extra installed, :func:`play_chain` compiles it
once (cached on disk) when the work is worth it (:data:`LOAD_AFTER_ITEMS`), so a
short run never pays numba's import or compile time.

It resumes where it stopped: when a block of draws runs out or an array is
full, :func:`_play` returns a code, the caller refills or grows, and calls again.

Domain (:func:`eligible`): every stage of a chain inside the kernel's domain
whose failures are none, :class:`IndependentFailures`,
:class:`PermanentFailures` or :class:`ScriptedFailures` (not combined) and
whose jitter stream is a :class:`random.Random`; anything else stays on the
closures' path.
"""

from __future__ import annotations

import dataclasses
import math
import random
from array import array
from typing import Any

import numpy as np

from pipeline.errors import PermanentError
from pipeline.records import AttemptError, DeadLetter, ShedLog

from ...workloads.failures import AttemptFailures, SimulatedFailure
from ...workloads.traces.service import ServiceTrace
from ..workload import StageWorkload
from .kinds import (
    ADMITTED,
    COMPLETED,
    DEAD_LETTERED,
    PRODUCER_BLOCKED,
    PRODUCER_UNBLOCKED,
    READMITTED,
    RETRY_SCHEDULED,
    SHED,
    STARTED,
)
from .paths import current

__all__ = [
    "COMPILED_MIN_ITEMS",
    "LOAD_AFTER_ITEMS",
    "choose",
    "compiled_available",
    "eligible",
    "play_chain",
]

COMPILED_MIN_ITEMS = 2_000
"""Stage items (summed over the stages) from which ``auto`` runs the compiled replay, once
numba is loaded in this process."""

LOAD_AFTER_ITEMS = 200_000
"""Stage items after which ``auto`` loads numba: one run this long, or the runs of this process
so far with this one. Importing numba and loading the cached replay cost about 0.5-1 s of CPU
(compiling it the first time, about 10 s), what the closures spend on about this many stage
items: a short run, or a few, never pay it; a sweep pays it once."""

_played = 0  # stage items the closures played in this process (towards LOAD_AFTER_ITEMS)

# What codes the ready queue and the timer heap carry, with their argument.
_K_PRODUCER, _K_WORKER, _K_READMIT, _K_FIRED_PRODUCER, _K_FIRED_WORKER = 0, 1, 2, 3, 4
# Where the producer resumes (as in chain.py).
_TOP, _SLOT, _ARRIVED = 0, 1, 2
# What a worker waits on (as in chain.py).
_GETTING, _SERVING, _HANDING, _TURN = 0, 1, 2, 3
# Failure models a stage can have here, and what a failed attempt raised.
_F_NONE, _F_INDEPENDENT, _F_PERMANENT, _F_SCRIPTED = 0, 1, 2, 3
_E_NONE, _E_SIMULATED, _E_PERMANENT = 0, 1, 2

# _play's return codes: done, or what the caller must do before calling again.
_DONE, _GROW_LOG, _GROW_READY, _GROW_HEAP = 0, 1, 2, 3
_REFILL = 4  # + 3 * stage + pool (_P_RETRY, _P_FAILS, _P_JITTER)
_P_RETRY, _P_FAILS, _P_JITTER = 0, 1, 2
_DELAYS = 1024  # backoff delays by attempt: Backoff caps the exponent at 1023

# Global scalars, ints (iv) and floats (fv).
_SEQ, _NEXT, _RHEAD, _RLEN, _HSIZE, _LLEN, _LEFT, _N = range(8)
_NOW, _BLOCKED_SINCE, _CLOSED = range(3)

# Per-stage int table columns (si[stage, column]).
(
    _REJECT,
    _BOUND,
    _TURNS,
    _FAN,
    _IOFF,
    _IHEAD,
    _ITAIL,
    _QOFF,
    _QCAP,
    _QHEAD,
    _QLEN,
    _RESERVED,
    _HELD,
    _GOFF,
    _GCAP,
    _GHEAD,
    _GLEN,
    _WOFF,
    _WCAP,
    _WHEAD,
    _WLEN,
    _UNSETTLED,
    _INFLIGHT,
    _OFFERED,
    _ADMITTED,
    _COMPLETED,
    _ATTEMPTS,
    _RETRIED,
    _PEAK,
    _OUTPUTS,
    _HANDED,
    _DEAD,
    _SHEDN,
    _FOFF,
    _AOFF,
    _FKIND,
    _DOFF,
    _RSIM,
    _RPERM,
    _MAXATT,
    _JITTER,
    _RTRACE,
    _PIDX,
    _UIDX,
    _JIDX,
    _CANFAIL,
    _MARGIN,
) = range(47)
_SI = 47
# Per-stage float table columns (sf[stage, column]).
_PBLOCKED, _HBLOCKED, _LASTSETTLE = range(3)
_SF = 3

_INF_BOUND = 2**62


def _play(
    iv, fv, si, sf, arrival, first, fdata, fperm, delays,
    rpool, upool, jpool,
    items, retries, getters, waiters, attempts,
    wstage, wstate, wcurrent, wchild, wsince, wfail,
    rk, ra, hw, hs, hk, ha,
    lk, lt, li, ls,
):  # fmt: skip
    """Run the replay until it ends or needs something (see the module docstring)."""
    nstages = si.shape[0]
    seq = iv[_SEQ]
    rhead = iv[_RHEAD]
    rlen = iv[_RLEN]
    rmask = rk.shape[0] - 1
    hsize = iv[_HSIZE]
    hcap = hw.shape[0]
    ln = iv[_LLEN]
    lcap = lk.shape[0]
    block = rpool.shape[1]
    left = iv[_LEFT]
    n = iv[_N]
    now = fv[_NOW]
    # Timers a step creates, pushed onto the heap after it (a step makes at most two).
    pend_w = np.empty(2)
    pend_s = np.empty(2, np.int64)
    pend_k = np.empty(2, np.int64)
    pend_a = np.empty(2, np.int64)
    code = _DONE
    while True:
        if left == 0:
            # A new iteration of the loop: jump the clock if nothing is ready, fire timers.
            if rlen + hsize > rmask + 1:
                code = _GROW_READY
                break
            if rlen == 0:
                if hsize == 0:
                    code = _DONE
                    break
                if hw[0] > now:
                    now = hw[0]
            while hsize > 0 and hw[0] <= now:
                kind = hk[0]
                arg = ha[0]
                # pop the heap's root: move the last entry down from the top
                hsize -= 1
                if hsize > 0:
                    lw, lsq, lkd, la = hw[hsize], hs[hsize], hk[hsize], ha[hsize]
                    i = 0
                    while True:
                        c = 2 * i + 1
                        if c >= hsize:
                            break
                        if c + 1 < hsize and (
                            hw[c + 1] < hw[c] or (hw[c + 1] == hw[c] and hs[c + 1] < hs[c])
                        ):
                            c += 1
                        if hw[c] < lw or (hw[c] == lw and hs[c] < lsq):
                            hw[i], hs[i], hk[i], ha[i] = hw[c], hs[c], hk[c], ha[c]
                            i = c
                        else:
                            break
                    hw[i], hs[i], hk[i], ha[i] = lw, lsq, lkd, la
                slot = (rhead + rlen) & rmask
                rk[slot] = kind
                ra[slot] = arg
                rlen += 1
            left = rlen
            if left == 0:
                continue
        # One step. First make sure it has room and draws for what it may do.
        kind = rk[rhead]
        arg = ra[rhead]
        if rmask + 1 - rlen < 16 + si[0, _MARGIN]:
            code = _GROW_READY
            break
        if lcap - ln < 16 + si[0, _MARGIN]:
            code = _GROW_LOG
            break
        if hcap - hsize < 2:
            code = _GROW_HEAP
            break
        if kind == _K_WORKER:
            s = wstage[arg]
            if si[s, _CANFAIL]:
                if si[s, _RTRACE] == 0 and si[s, _PIDX] >= block:
                    code = _REFILL + 3 * s + _P_RETRY
                    break
                if si[s, _FKIND] == _F_INDEPENDENT and si[s, _UIDX] >= block:
                    code = _REFILL + 3 * s + _P_FAILS
                    break
                if si[s, _JITTER] and si[s, _JIDX] >= block:
                    code = _REFILL + 3 * s + _P_JITTER
                    break
        rhead = (rhead + 1) & rmask
        rlen -= 1
        left -= 1
        npend = 0

        if kind in (_K_FIRED_PRODUCER, _K_FIRED_WORKER):
            # a timer fired: its task runs in the next iteration
            slot = (rhead + rlen) & rmask
            rk[slot] = _K_PRODUCER if kind == _K_FIRED_PRODUCER else _K_WORKER
            ra[slot] = arg
            rlen += 1

        elif kind == _K_READMIT:
            s = arg % nstages
            item = arg // nstages
            si[s, _HELD] -= 1
            q = si[s, _QOFF] + (si[s, _QHEAD] + si[s, _QLEN]) % si[s, _QCAP]
            retries[q] = item
            si[s, _QLEN] += 1
            size = si[s, _ITAIL] - si[s, _IHEAD] + si[s, _QLEN]
            if size > si[s, _PEAK]:
                si[s, _PEAK] = size
            if si[s, _GLEN] > 0:
                g = getters[si[s, _GOFF] + si[s, _GHEAD]]
                si[s, _GHEAD] = (si[s, _GHEAD] + 1) % si[s, _GCAP]
                si[s, _GLEN] -= 1
                slot = (rhead + rlen) & rmask
                rk[slot] = _K_WORKER
                ra[slot] = g
                rlen += 1
            lk[ln] = READMITTED
            lt[ln] = now
            li[ln] = item
            ls[ln] = s
            ln += 1

        elif kind == _K_PRODUCER:
            # Pipeline._produce over the source, at the head (stage 0)
            resume = arg
            while True:
                if resume != _ARRIVED:
                    full = (
                        si[0, _ITAIL] - si[0, _IHEAD] + si[0, _QLEN] + si[0, _RESERVED]
                        + si[0, _HELD] >= si[0, _BOUND]
                    )  # fmt: skip
                    if resume == _SLOT:
                        # woken in queue.reserve(): look again, the queue may have refilled
                        if full:
                            at = si[0, _WOFF] + (si[0, _WHEAD] + si[0, _WLEN]) % si[0, _WCAP]
                            waiters[at] = -1
                            si[0, _WLEN] += 1
                            break
                        si[0, _RESERVED] += 1
                        lk[ln] = PRODUCER_UNBLOCKED
                        lt[ln] = now
                        li[ln] = -1
                        ls[ln] = 0
                        ln += 1
                        sf[0, _PBLOCKED] += now - fv[_BLOCKED_SINCE]
                    elif si[0, _REJECT] == 0:
                        if full:
                            fv[_BLOCKED_SINCE] = now
                            lk[ln] = PRODUCER_BLOCKED
                            lt[ln] = now
                            li[ln] = -1
                            ls[ln] = 0
                            ln += 1
                            at = si[0, _WOFF] + (si[0, _WHEAD] + si[0, _WLEN]) % si[0, _WCAP]
                            waiters[at] = -1
                            si[0, _WLEN] += 1
                            break
                        si[0, _RESERVED] += 1
                    if iv[_NEXT] == n:  # the source is exhausted: intake stops at this instant
                        if si[0, _REJECT] == 0:
                            si[0, _RESERVED] -= 1
                        fv[_CLOSED] = now
                        break
                    when = arrival[iv[_NEXT]]
                    if when > now:
                        seq += 1
                        pend_w[npend] = when
                        pend_s[npend] = seq
                        pend_k[npend] = _K_FIRED_PRODUCER
                        pend_a[npend] = _ARRIVED
                        npend += 1
                        break
                item = iv[_NEXT]
                iv[_NEXT] = item + 1
                if si[0, _REJECT]:
                    if (
                        si[0, _ITAIL] - si[0, _IHEAD] + si[0, _QLEN] + si[0, _RESERVED]
                        + si[0, _HELD] >= si[0, _BOUND]
                    ):  # fmt: skip
                        si[0, _OFFERED] += 1
                        si[0, _SHEDN] += 1
                        lk[ln] = SHED
                        lt[ln] = now
                        li[ln] = item
                        ls[ln] = 0
                        ln += 1
                        slot = (rhead + rlen) & rmask
                        rk[slot] = _K_PRODUCER
                        ra[slot] = _TOP
                        rlen += 1
                        break
                    si[0, _RESERVED] += 1
                # admit (Pipeline._admit with its slot reserved)
                si[0, _OFFERED] += 1
                si[0, _ADMITTED] += 1
                lk[ln] = ADMITTED
                lt[ln] = now
                li[ln] = item
                ls[ln] = 0
                ln += 1
                si[0, _UNSETTLED] += 1
                si[0, _RESERVED] -= 1
                items[si[0, _IOFF] + si[0, _ITAIL]] = item
                si[0, _ITAIL] += 1
                size = si[0, _ITAIL] - si[0, _IHEAD] + si[0, _QLEN]
                if size > si[0, _PEAK]:
                    si[0, _PEAK] = size
                if si[0, _GLEN] > 0:
                    g = getters[si[0, _GOFF] + si[0, _GHEAD]]
                    si[0, _GHEAD] = (si[0, _GHEAD] + 1) % si[0, _GCAP]
                    si[0, _GLEN] -= 1
                    slot = (rhead + rlen) & rmask
                    rk[slot] = _K_WORKER
                    ra[slot] = g
                    rlen += 1
                if si[0, _TURNS]:
                    slot = (rhead + rlen) & rmask  # asyncio.sleep(0): one turn of the loop
                    rk[slot] = _K_PRODUCER
                    ra[slot] = _TOP
                    rlen += 1
                    break
                resume = _TOP

        else:  # a worker
            g = arg
            s = wstage[g]
            status = wstate[g]
            hand = False
            pending = False  # a blocked hand-off got its slot: admit its child first
            parked = False
            if status == _SERVING:
                item = wcurrent[g]
                failure = wfail[g]
                si[s, _INFLIGHT] -= 1
                if failure == _E_NONE:
                    si[s, _COMPLETED] += 1
                    lk[ln] = COMPLETED
                    lt[ln] = now
                    li[ln] = item
                    ls[ln] = s
                    ln += 1
                    si[s, _OUTPUTS] += si[s, _FAN]
                    if s + 1 < nstages:
                        wchild[g] = 0
                        hand = True
                    else:
                        si[s, _UNSETTLED] -= 1
                        sf[s, _LASTSETTLE] = now
                else:
                    attempt = attempts[si[s, _AOFF] + item]
                    can_retry = si[s, _RSIM] if failure == _E_SIMULATED else si[s, _RPERM]
                    if can_retry and attempt < si[s, _MAXATT]:
                        delay = delays[s, min(attempt, _DELAYS) - 1]
                        if si[s, _JITTER] and delay > 0.0:
                            delay = 0.0 + delay * jpool[s, si[s, _JIDX]]  # Random.uniform(0, d)
                            si[s, _JIDX] += 1
                        si[s, _RETRIED] += 1
                        si[s, _HELD] += 1
                        seq += 1
                        pend_w[npend] = now + delay
                        pend_s[npend] = seq
                        pend_k[npend] = _K_READMIT
                        pend_a[npend] = item * nstages + s
                        npend += 1
                        lk[ln] = RETRY_SCHEDULED
                    else:
                        si[s, _DEAD] += 1
                        lk[ln] = DEAD_LETTERED
                        si[s, _UNSETTLED] -= 1
                        sf[s, _LASTSETTLE] = now
                    lt[ln] = now
                    li[ln] = item
                    ls[ln] = s
                    ln += 1
            elif status == _HANDING:
                # woken in the next stage's queue.reserve(): look again
                d = s + 1
                if (
                    si[d, _ITAIL] - si[d, _IHEAD] + si[d, _QLEN] + si[d, _RESERVED]
                    + si[d, _HELD] >= si[d, _BOUND]
                ):  # fmt: skip
                    waiters[si[d, _WOFF] + (si[d, _WHEAD] + si[d, _WLEN]) % si[d, _WCAP]] = g
                    si[d, _WLEN] += 1
                    parked = True
                else:
                    si[d, _RESERVED] += 1
                    waited = now - wsince[g]
                    lk[ln] = PRODUCER_UNBLOCKED
                    lt[ln] = now
                    li[ln] = -1
                    ls[ln] = d
                    ln += 1
                    sf[d, _PBLOCKED] += waited
                    sf[s, _HBLOCKED] += waited
                    hand = True
                    pending = True
            elif status == _TURN:
                hand = True  # the turn after an output is over: the next child, or settle
            if hand:
                # HandOff.send from the current child on
                d = s + 1
                fan = si[s, _FAN]
                base = wcurrent[g] * fan
                j = wchild[g]
                while j < fan:
                    admit = True
                    if pending:
                        pending = False
                    elif si[d, _REJECT]:
                        if (
                            si[d, _ITAIL] - si[d, _IHEAD] + si[d, _QLEN] + si[d, _RESERVED]
                            + si[d, _HELD] >= si[d, _BOUND]
                        ):  # fmt: skip
                            si[d, _OFFERED] += 1
                            si[d, _SHEDN] += 1
                            lk[ln] = SHED
                            lt[ln] = now
                            li[ln] = base + j
                            ls[ln] = d
                            ln += 1
                            admit = False
                        else:
                            si[d, _RESERVED] += 1
                    elif (
                        si[d, _ITAIL] - si[d, _IHEAD] + si[d, _QLEN] + si[d, _RESERVED]
                        + si[d, _HELD] >= si[d, _BOUND]
                    ):  # fmt: skip
                        wsince[g] = now
                        wchild[g] = j
                        wstate[g] = _HANDING
                        lk[ln] = PRODUCER_BLOCKED
                        lt[ln] = now
                        li[ln] = -1
                        ls[ln] = d
                        ln += 1
                        waiters[si[d, _WOFF] + (si[d, _WHEAD] + si[d, _WLEN]) % si[d, _WCAP]] = g
                        si[d, _WLEN] += 1
                        parked = True
                        break
                    else:
                        si[d, _RESERVED] += 1
                    if admit:
                        child = base + j
                        si[d, _OFFERED] += 1
                        si[d, _ADMITTED] += 1
                        lk[ln] = ADMITTED
                        lt[ln] = now
                        li[ln] = child
                        ls[ln] = d
                        ln += 1
                        si[d, _UNSETTLED] += 1
                        si[d, _RESERVED] -= 1
                        items[si[d, _IOFF] + si[d, _ITAIL]] = child
                        si[d, _ITAIL] += 1
                        size = si[d, _ITAIL] - si[d, _IHEAD] + si[d, _QLEN]
                        if size > si[d, _PEAK]:
                            si[d, _PEAK] = size
                        if si[d, _GLEN] > 0:
                            h = getters[si[d, _GOFF] + si[d, _GHEAD]]
                            si[d, _GHEAD] = (si[d, _GHEAD] + 1) % si[d, _GCAP]
                            si[d, _GLEN] -= 1
                            slot = (rhead + rlen) & rmask
                            rk[slot] = _K_WORKER
                            ra[slot] = h
                            rlen += 1
                    si[s, _HANDED] += 1
                    j += 1
                    if si[d, _TURNS]:
                        # asyncio.sleep(0) in HandOff.send: the next child one turn later
                        wchild[g] = j
                        wstate[g] = _TURN
                        slot = (rhead + rlen) & rmask
                        rk[slot] = _K_WORKER
                        ra[slot] = g
                        rlen += 1
                        parked = True
                        break
                if not parked:
                    si[s, _UNSETTLED] -= 1
                    sf[s, _LASTSETTLE] = now
            if not parked:
                if si[s, _ITAIL] == si[s, _IHEAD] and si[s, _QLEN] == 0:
                    wstate[g] = _GETTING
                    getters[si[s, _GOFF] + (si[s, _GHEAD] + si[s, _GLEN]) % si[s, _GCAP]] = g
                    si[s, _GLEN] += 1
                else:
                    # take the next item (retry lane first) and start an attempt
                    if si[s, _QLEN] > 0:
                        item = retries[si[s, _QOFF] + si[s, _QHEAD]]
                        si[s, _QHEAD] = (si[s, _QHEAD] + 1) % si[s, _QCAP]
                        si[s, _QLEN] -= 1
                    else:
                        item = items[si[s, _IOFF] + si[s, _IHEAD]]
                        si[s, _IHEAD] += 1
                    if si[s, _WLEN] > 0:
                        w = waiters[si[s, _WOFF] + si[s, _WHEAD]]
                        si[s, _WHEAD] = (si[s, _WHEAD] + 1) % si[s, _WCAP]
                        si[s, _WLEN] -= 1
                        slot = (rhead + rlen) & rmask
                        if w < 0:
                            rk[slot] = _K_PRODUCER
                            ra[slot] = _SLOT
                        else:
                            rk[slot] = _K_WORKER
                            ra[slot] = w
                        rlen += 1
                    si[s, _ATTEMPTS] += 1
                    lk[ln] = STARTED
                    lt[ln] = now
                    li[ln] = item
                    ls[ln] = s
                    ln += 1
                    si[s, _INFLIGHT] += 1
                    failure = _E_NONE
                    if si[s, _CANFAIL]:
                        a = si[s, _AOFF] + item
                        attempt = attempts[a] + 1
                        attempts[a] = attempt
                        if attempt == 1 or si[s, _RTRACE]:
                            seconds = first[si[s, _FOFF] + item]
                        else:
                            seconds = rpool[s, si[s, _PIDX]]
                            si[s, _PIDX] += 1
                        fkind = si[s, _FKIND]
                        if fkind == _F_INDEPENDENT:
                            if upool[s, si[s, _UIDX]]:
                                failure = _E_SIMULATED
                            si[s, _UIDX] += 1
                        elif fkind == _F_PERMANENT:
                            if fdata[si[s, _DOFF] + item]:
                                failure = _E_PERMANENT
                        elif fkind == _F_SCRIPTED:
                            fails = fdata[si[s, _DOFF] + item]
                            if attempt <= fails:
                                failure = _E_SIMULATED
                                if attempt == fails and fperm[si[s, _DOFF] + item]:
                                    failure = _E_PERMANENT
                    else:
                        seconds = first[si[s, _FOFF] + item]
                    wfail[g] = failure
                    wcurrent[g] = item
                    wstate[g] = _SERVING
                    seq += 1
                    pend_w[npend] = now + seconds
                    pend_s[npend] = seq
                    pend_k[npend] = _K_FIRED_WORKER
                    pend_a[npend] = g
                    npend += 1

        # push the step's timers onto the heap, in the order it made them
        for p in range(npend):
            pw = pend_w[p]
            psq = pend_s[p]
            i = hsize
            hsize += 1
            while i > 0:
                parent = (i - 1) >> 1
                if pw < hw[parent] or (pw == hw[parent] and psq < hs[parent]):
                    hw[i], hs[i], hk[i], ha[i] = hw[parent], hs[parent], hk[parent], ha[parent]
                    i = parent
                else:
                    break
            hw[i], hs[i], hk[i], ha[i] = pw, psq, pend_k[p], pend_a[p]

    iv[_SEQ] = seq
    iv[_RHEAD] = rhead
    iv[_RLEN] = rlen
    iv[_HSIZE] = hsize
    iv[_LLEN] = ln
    iv[_LEFT] = left
    fv[_NOW] = now
    return code


_compiled: Any = None


def compiled_available() -> bool:
    """True when numba (the ``[fast]`` extra) is installed."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _compile() -> Any:
    """:func:`_play` compiled by numba (once per process; cached on disk between processes)."""
    global _compiled
    if _compiled is None:
        import numba

        _compiled = numba.njit(cache=True, nogil=True)(_play)
    return _compiled


def _failure_kind(failures: Any) -> int | None:
    if failures is None or type(failures) is AttemptFailures:  # NoFailures, bound
        return _F_NONE
    return _FAILURE_KINDS.get(getattr(failures, "model_kind", None))


_FAILURE_KINDS = {"independent": _F_INDEPENDENT, "permanent": _F_PERMANENT, "scripted": _F_SCRIPTED}


def _workload(spec: Any) -> StageWorkload | None:
    owner = getattr(spec.retry_time, "__self__", None)
    return owner if type(owner) is StageWorkload else None


def eligible(stages: list) -> bool:
    """True when every stage is in this path's domain (see the module docstring)."""
    if not 0 < len(stages) < 128:  # the log's stage column is an int8
        return False
    for spec in stages:
        if _failure_kind(spec.failures) is None or type(spec.rng) is not random.Random:
            return False
        if spec.failures is not None and _workload(spec) is None:
            return False
    return True


def choose(stages: list, n: int) -> str:
    """The replay to run: ``"closures"``, ``"plain"`` or ``"compiled"`` (see :mod:`.paths`)."""
    mode = current().path
    if mode == "closures" or not eligible(stages):
        return "closures"
    if mode in ("plain", "compiled"):
        return mode
    global _played
    reaching, total = n, 0
    for spec in stages:
        total += reaching
        reaching *= spec.fan_out
    if total >= COMPILED_MIN_ITEMS:
        if _compiled is not None:
            return "compiled"
        if _played + total >= LOAD_AFTER_ITEMS and compiled_available():
            return "compiled"
    _played += total
    return "closures"


def _delays(config: Any) -> np.ndarray:
    """Backoff delay after failed attempt *a* (index a - 1), before jitter."""
    plain = dataclasses.replace(config.backoff, jitter=False)
    table = np.zeros(_DELAYS)
    for a in range(1, min(config.max_attempts, _DELAYS + 1)):
        delay = plain.delay(a)
        if not (isinstance(delay, int | float) and 0.0 <= delay < math.inf):
            raise ValueError(
                f"the backoff delay must be a finite number of seconds >= 0, got {delay!r} "
                f"(from {config.backoff!r})"
            )
        table[a - 1] = delay
    return table


def play_chain(
    arrival_s: list[float], stages: list, compiled: bool
) -> tuple[list[dict[str, Any]], list[float | None], float]:
    """Play a chain over arrays: (each stage's run, each stage's last settle time, closed_s).

    Returns each stage's run as the fields of its
    :class:`~pipeline.sim.running.kernel.chain.StageRun` (its log without the
    intake-closed event, which the caller's close adds), the loop time each
    stage settled its last item (None if none) and the time the head's intake
    closed.
    """
    play = _compile() if compiled else _play
    nst = len(stages)
    n = len(arrival_s)
    si = np.zeros((nst, _SI), np.int64)
    sf = np.zeros((nst, _SF))
    sf[:, _LASTSETTLE] = np.nan
    reaching = []
    r = n
    for spec in stages:
        reaching.append(r)
        r *= spec.fan_out
    conc = [spec.config.concurrency for spec in stages]
    total_items = sum(reaching)
    first = np.empty(total_items)
    items = np.empty(max(1, total_items), np.int64)
    qsizes, dsizes, asizes = [], [], []
    for s, spec in enumerate(stages):
        config = spec.config
        kind = _failure_kind(spec.failures)
        can_fail = kind != _F_NONE
        qsizes.append(reaching[s] + 1 if can_fail else 1)
        asizes.append(reaching[s] if can_fail else 0)
        dsizes.append(reaching[s] if kind in (_F_PERMANENT, _F_SCRIPTED) else 0)
    offsets = np.cumsum([0, *reaching])
    qoff = np.cumsum([0, *qsizes])
    aoff = np.cumsum([0, *asizes])
    doff = np.cumsum([0, *dsizes])
    goff = np.cumsum([0, *conc])
    wcaps = [1 + (1 if s == 0 else conc[s - 1]) for s in range(nst)]
    woff = np.cumsum([0, *wcaps])
    retries = np.zeros(max(1, int(qoff[-1])), np.int64)
    attempts = np.zeros(max(1, int(aoff[-1])), np.int64)
    fdata = np.zeros(max(1, int(doff[-1])), np.int64)
    fperm = np.zeros(max(1, int(doff[-1])), np.int8)
    delays = np.zeros((nst, _DELAYS))
    sizes = current()
    block = sizes.block
    rpool = np.zeros((nst, block))
    upool = np.zeros((nst, block), np.bool_)
    jpool = np.zeros((nst, block))
    wstage = np.repeat(np.arange(nst, dtype=np.int64), conc)
    workers = len(wstage)
    retryable_sim, retryable_perm = [], []
    for s, spec in enumerate(stages):
        config = spec.config
        kind = _failure_kind(spec.failures)
        row = si[s]
        bound = _INF_BOUND if config.queue_maxsize is None else config.queue_maxsize
        row[_REJECT] = config.on_full == "reject"
        row[_BOUND] = bound
        row[_TURNS] = row[_REJECT] or config.queue_maxsize is None
        row[_FAN] = spec.fan_out
        row[_IOFF] = offsets[s]
        row[_QOFF], row[_QCAP] = qoff[s], qsizes[s]
        row[_GOFF], row[_GCAP] = goff[s], conc[s]
        row[_WOFF], row[_WCAP] = woff[s], wcaps[s]
        row[_FOFF] = offsets[s]
        row[_AOFF] = aoff[s]
        row[_DOFF] = doff[s]
        row[_FKIND] = kind
        row[_CANFAIL] = kind != _F_NONE
        first[offsets[s] : offsets[s + 1]] = spec.first_attempt_s
        row[_MAXATT] = config.max_attempts
        sim = config.retry.is_retryable(SimulatedFailure("x"))
        perm = config.retry.is_retryable(PermanentError("x"))
        retryable_sim.append(sim)
        retryable_perm.append(perm)
        row[_RSIM], row[_RPERM] = sim, perm
        row[_JITTER] = bool(config.backoff.jitter)
        work = _workload(spec)
        row[_RTRACE] = work is not None and isinstance(work.spec.service, ServiceTrace)
        row[_PIDX] = row[_UIDX] = row[_JIDX] = block  # nothing drawn yet: refill on demand
        if kind != _F_NONE:
            delays[s] = _delays(config)
        if kind == _F_PERMANENT:
            check = spec.failures.check
            fdata[doff[s] : doff[s + 1]] = [check(i, 1, 1) is not None for i in range(reaching[s])]
        elif kind == _F_SCRIPTED:
            fails = spec.failures.fails[: reaching[s]]
            fdata[doff[s] : doff[s] + len(fails)] = fails
            for i in spec.failures.permanent:
                if i < reaching[s]:
                    fperm[doff[s] + i] = 1
    head_block = 0
    if stages and stages[0].config.on_full == "block" and stages[0].config.queue_maxsize:
        head_block = stages[0].config.queue_maxsize
    margin = max([spec.fan_out for spec in stages] + [head_block]) + sum(conc) + 2
    si[0, _MARGIN] = margin
    iv = np.zeros(8, np.int64)
    fv = np.zeros(3)
    fv[_CLOSED] = np.nan
    iv[_N] = n
    wstate = np.zeros(workers, np.int64)
    wcurrent = np.zeros(workers, np.int64)
    wchild = np.zeros(workers, np.int64)
    wsince = np.zeros(workers)
    wfail = np.zeros(workers, np.int64)
    getters = np.zeros(max(1, workers), np.int64)
    waiters = np.zeros(int(woff[-1]), np.int64)
    rcap = 1
    while rcap < max(workers + 1, sizes.ready or 2 * (workers + 2 * margin + 64)):
        rcap *= 2
    rk = np.zeros(rcap, np.int64)
    ra = np.zeros(rcap, np.int64)
    # Chain._build starts every stage after the head first; then the head's workers, then
    # its producer.
    order = [g for s in [*range(1, nst), 0] for g in range(goff[s], goff[s + 1])]
    for i, g in enumerate(order):
        rk[i], ra[i] = _K_WORKER, g
    rk[len(order)], ra[len(order)] = _K_PRODUCER, _TOP
    iv[_RLEN] = len(order) + 1
    hcap = sizes.heap or workers + 64
    hw, hs, hk, ha = np.zeros(hcap), *(np.zeros(hcap, np.int64) for _ in range(3))
    lcap = sizes.log or max(1024, 4 * total_items + 2 * margin + 64)
    lk, lt = np.zeros(lcap, np.int8), np.zeros(lcap)
    li, ls = np.zeros(lcap, np.int64), np.zeros(lcap, np.int8)  # ls: each event's stage
    arrival = np.asarray(arrival_s, dtype=np.float64)
    while True:
        code = play(
            iv, fv, si, sf, arrival, first, fdata, fperm, delays,
            rpool, upool, jpool,
            items, retries, getters, waiters, attempts,
            wstage, wstate, wcurrent, wchild, wsince, wfail,
            rk, ra, hw, hs, hk, ha,
            lk, lt, li, ls,
        )  # fmt: skip
        if code == _DONE:
            break
        if code == _GROW_LOG:
            lk, lt, li, ls = (np.concatenate([x, np.zeros_like(x)]) for x in (lk, lt, li, ls))
        elif code == _GROW_HEAP:
            hw, hs, hk, ha = (np.concatenate([x, np.zeros_like(x)]) for x in (hw, hs, hk, ha))
        elif code == _GROW_READY:
            head, length = int(iv[_RHEAD]), int(iv[_RLEN])
            index = (head + np.arange(length)) % len(rk)
            size = 2 * len(rk)
            while size < length + int(iv[_HSIZE]) + 2 * margin + 64:
                size *= 2
            new_k, new_a = np.zeros(size, np.int64), np.zeros(size, np.int64)
            new_k[:length], new_a[:length] = rk[index], ra[index]
            rk, ra = new_k, new_a
            iv[_RHEAD] = 0
        else:
            s, pool = divmod(code - _REFILL, 3)
            spec = stages[s]
            if pool == _P_RETRY:
                rpool[s] = _workload(spec).retry_times(block)
                si[s, _PIDX] = 0
            elif pool == _P_FAILS:
                upool[s] = spec.failures.failing(block)  # independent failures only
                si[s, _UIDX] = 0
            else:
                draw = spec.rng.random
                jpool[s] = [draw() for _ in range(block)]
                si[s, _JIDX] = 0

    closed = fv[_CLOSED]
    if math.isnan(closed) or si[:, _UNSETTLED].any() or si[:, _WLEN].any():
        raise RuntimeError("kernel chain path: the run stopped with work left (a bug)")
    ln = int(iv[_LLEN])
    log_stage = ls[:ln]
    runs, last_settle = [], []
    for s, spec in enumerate(stages):
        at = np.flatnonzero(log_stage == s)
        kinds, times, ids = lk[at], lt[at], li[at]
        row = si[s]
        run: dict[str, Any] = dict(
            kinds=array("b", kinds.tobytes()),
            times=array("d", times.tobytes()),
            ids=array("q", ids.tobytes()),
            offered=int(row[_OFFERED]),
            admitted=int(row[_ADMITTED]),
            completed=int(row[_COMPLETED]),
            attempts=int(row[_ATTEMPTS]),
            retried=int(row[_RETRIED]),
            shed=ShedLog(spec.config.keep_shed),
            queue_peak=int(row[_PEAK]),
            producer_blocked_s=float(sf[s, _PBLOCKED]),
            outputs=int(row[_OUTPUTS]),
            handed_on=int(row[_HANDED]),
            hand_off_blocked_s=float(sf[s, _HBLOCKED]),
        )
        if row[_SHEDN]:
            for item in ids[kinds == SHED].tolist():
                run["shed"].append(item)
        if row[_DEAD]:
            run["dead_letters"] = _dead_letters(
                spec, kinds, times, ids, retryable_sim[s], retryable_perm[s]
            )
        runs.append(run)
        settled = float(sf[s, _LASTSETTLE])
        last_settle.append(None if math.isnan(settled) else settled)
    return runs, last_settle, float(closed)


def _dead_letters(
    spec: Any, kinds: np.ndarray, times: np.ndarray, ids: np.ndarray, sim: bool, perm: bool
) -> list[DeadLetter]:
    """The stage's dead letters, in order, with every failed attempt's error (from its log)."""
    failed = (kinds == RETRY_SCHEDULED) | (kinds == DEAD_LETTERED)
    dead = ids[kinds == DEAD_LETTERED]
    wanted = failed & np.isin(ids, dead)
    history: dict[int, list[tuple[int, BaseException, float]]] = {}
    failures = spec.failures
    independent = failures.model_kind == "independent"
    for item, at_s in zip(ids[wanted].tolist(), times[wanted].tolist(), strict=True):
        errors = history.setdefault(item, [])
        attempt = len(errors) + 1
        failure = (
            failures.failure(item, attempt) if independent else failures.check(item, attempt, 0)
        )
        errors.append((attempt, failure.error, at_s))
    letters = []
    for item in dead.tolist():
        errors = history[item]
        attempt, error, _ = errors[-1]
        retryable = perm if isinstance(error, PermanentError) else sim
        letters.append(
            DeadLetter(
                payload=item,
                attempts=attempt,
                errors=tuple(AttemptError.from_exception(a, e, t) for a, e, t in errors),
                reason="max_attempts" if retryable else "not_retryable",
            )
        )
    return letters
