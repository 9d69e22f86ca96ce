"""The kernel's one replay of the engine: its tasks' steps over flat arrays.

A :class:`~pipeline.Chain` on the virtual loop (a pipeline is its one-stage case,
plus its run's task and close) is a producer and each stage's workers. This
module plays them as the loop's ``_run_once`` does: a heap of timers by ``(when,
seq)`` and a ring of ready steps run in iterations. Each task is a state machine
whose steps do what its coroutine does between two suspensions, drawing every
random value at the same point, so every event, counter and dead letter is the
engine's, ties included (README, "Ties at equal times"). An attempt timeout is
asyncio.timeout's timer, a downstream's request ends by its server's; a timer cancelled
before it fires (an ended attempt's timeout, a cut attempt's sleep) stays in the heap
and is dropped unseen when it comes up, as the loop drops cancelled handles.

State lives in arrays: globals in ``iv``/``fv``, a row per stage in ``si``/``sf``
(``stage * SI + column``), queues as rings, random values in pools the caller
fills. When a pool runs dry or an array is full, :func:`play` returns a code; the
caller refills or grows and calls again. :mod:`.driver` runs this source as plain
Python over lists, or loads it a second time under numba, over numpy arrays. A stage's
retry budget and circuit breaker (the engine's :class:`~pipeline.overload.guard.Guard`)
are the ``_budget_*`` and ``_breaker_*`` steps at an attempt's gate and its end; an
autoscaled pool's task is the ``_scale_*`` steps (a sync every ``sync_s``, workers added
with their cold start or retired). A feature's rarer steps are compiled once (``rare``),
not inlined into every caller: inlined whole, the replay's IR outgrew memory.
"""

from __future__ import annotations

import math

from pipeline.events import EventKind as K

# The engine's event kinds as ints, as the log stores them (an int compares faster).
ADMITTED, SHED, STARTED, COMPLETED = int(K.ADMITTED), int(K.SHED), int(K.STARTED), int(K.COMPLETED)
RETRY_SCHEDULED, READMITTED = int(K.RETRY_SCHEDULED), int(K.READMITTED)
DEAD_LETTERED, DRAIN_TIMEOUT = int(K.DEAD_LETTERED), int(K.DRAIN_TIMEOUT)
INTAKE_CLOSED, PRODUCER_BLOCKED = int(K.INTAKE_CLOSED), int(K.PRODUCER_BLOCKED)
PRODUCER_UNBLOCKED = int(K.PRODUCER_UNBLOCKED)
SCALED, SYNCED, WORKER_LEFT = int(K.SCALED), int(K.SYNCED), int(K.WORKER_LEFT)
RETRY_DENIED, BREAKER_REFUSED = int(K.RETRY_DENIED), int(K.BREAKER_REFUSED)
BREAKER_EVENTS = (int(K.BREAKER_CLOSED), int(K.BREAKER_OPEN), int(K.BREAKER_HALF_OPEN))


def _jit(inline: str, nrt: bool = False):
    """numba.njit in the compiled copy of this module, else nothing.

    The steps allocate nothing, so they run without reference counting (``_nrt``): with it,
    every array taken out of a bundle was counted, and the replay ran 15 times slower.
    """
    if __name__.endswith("_compiled"):
        import numba

        return numba.njit(cache=True, nogil=True, inline=inline, _nrt=nrt)
    return lambda function: function


jit = _jit("always")
entry = _jit("never")
rare = _jit("never")  # a step's rarer part: compiled once, not once per call site
merge = _jit("never", nrt=True)

# Steps in the ready ring and the timer heap (kind, arg). A K_FIRED_* step (a timer fired,
# or gather()'s callback) readies its task's step (FIRED_AFTER kinds lower) a turn later.
K_PRODUCER, K_WORKER, K_RUN, K_FIRED_PRODUCER, K_FIRED_WORKER, K_GATHERED = 0, 1, 2, 3, 4, 5
FIRED_AFTER, K_READMIT, K_TIMEOUT, K_CLOSE = 3, 6, 7, 8
K_HALF_OPEN = 12  # a breaker's open spell is over (arg: its spell x stages + stage)
K_CUT, K_ANSWER = 9, 10  # an attempt's timeout fires (arg: worker + workers x seq); a request ends
# The autoscaler's task (arg 0: its start, 1: a sync), its sync's timer.
K_SCALE, K_FIRED_SCALE = 11, 11 + FIRED_AFTER
TOP, _SLOT, _ARRIVED = 0, 1, 2  # where the producer resumes: the top, a slot, an arrival
_DRAIN, _WOKEN = 0, 1  # where the run's task resumes
# What a worker waits on: an item, its attempt, a slot downstream, a turn of the loop.
_GETTING, _SERVING, _HANDING, _TURN, _CANCELLED = 0, 1, 2, 3, 4
# An attempt that can be cut (all after _CANCELLED: one test tells them from the rest) waits
# on its sleep or the downstream's answer; or its step is due: answered, cut, refused (full).
_SLEEPING, _CALLING, _ANSWERED, _CUT, _REFUSED = 5, 6, 7, 8, 9
E_NONE, E_SIMULATED, E_PERMANENT, E_TIMEOUT, E_FULL = 0, 1, 2, 3, 4  # what a failed attempt raised
PART_TIMEOUT, PART_FULL = -1, -2  # the log's part of a TimeoutError, of a DownstreamFull
# An autoscaled pool's worker: new, in its cold start, retired while idle, gone.
_FRESH, _COLD, _LEAVING, _GONE = 10, 11, 12, 13
# A breaker's stage's worker: waiting for it (its item asks again when woken), or serving a
# call it let through (whose end it records; a call that can be cut records it so too).
_GATED, _GUARDED = 14, 15
# play()'s codes: done, stuck, or what the caller must do before calling again.
DONE, STUCK, GROW_LOG, GROW_READY, GROW_HEAP, REFILL = 0, 1, 2, 3, 4, 5  # REFILL + pool row
GROW_BUDGET = -2  # a retry budget's ring of times is full
DELAYS = 1024  # backoff delays by attempt per stage: Backoff caps the exponent at 1023

# Global ints (iv) and floats (fv).
(SEQ, RHEAD, RLEN, HSIZE, LLEN, LEFT, N, NEXT, SINGLE, MARGIN, ACCEPTING, RUN_WOKEN, CANCELLED,
 CLOSED, TIMED_OUT, HELD_PEAK, HELD_BEFORE, LOG_ALL, ARRIVAL_SEQ, POOL_SAFE,
 RETIRING, SIZE, SIZE_PEAK, SCALES, SYNCS, NFREE, OLDEST, METRIC, MIN_W, MAX_W, PODS,
 COFF, CCAP, CHEAD, CLEN, HOFF, HCAP, HHEAD, HLEN,
 CUTS, DS_ON, CLIENT, DS_C, DS_FREE, DS_QMAX, DS_REQ, DS_STARTED, DS_SERVED, DS_ORPH,
 DS_REJ, DS_ROW, DS_CONST, NIV) = range(53)  # fmt: skip
NOW, BLOCKED_SINCE, CLOSED_S, DRAIN_S, WARMUP_S, ARRIVAL = range(6)
WORKER_S, DESIRED, TARGET, SYNC_S, TOLERANCE, UP_S, DOWN_S, FRACTION, COLD_S = range(6, 15)
DS_SINCE, DS_QAREA, DS_BAREA = range(15, 18)
# An autoscaled pool (see _scale_sync): RETIRING busy workers due to leave, SIZE the pool's
# size, SIZE_PEAK (with those leaving), SCALES syncs that changed it, SYNCS the last sync's
# number, NFREE free worker slots, OLDEST the oldest item that may be inside; its rings
# (OFF, CAP, HEAD, LEN): C the workers in their cold start, H the desired counts kept;
# its workers' W[10:15] (see driver._scale_arrays).
# The D bundle's arrays (built in driver): the arrival times, the first attempts' service
# times; an item-wise failure part's last failed and first permanent attempt by item, from
# each part's offset (a part with a pool row draws instead); the backoff delays by attempt;
# the pools of random values, a row per stream: the values, each row's next, its bounds.
(D_ARRIVALS, D_FIRST_S, D_LAST_FAILED, D_FIRST_PERMANENT, D_DELAYS, D_POOL, D_USED, D_PART_OFF,
 D_PART_ROW, D_ROWS) = range(10)  # fmt: skip
# CUTS: attempts can be cut (a timeout) or call a downstream, whose requests' columns follow:
# sent, start, end, abandoned (s), work (s), caller (-1: none); its speed profile (the starts
# and factors of its spells); each stage's attempt timeout (NaN: none).
(D_SENT, D_START, D_END, D_ABANDONED, D_WORK, D_CALLER, D_STARTS, D_FACTORS,
 D_TIMEOUTS) = range(10, 19)  # fmt: skip
# A worker's W[7:10]: the request it awaits, the seq of its timeout's timer, of its sleep's.
# ARRIVAL(_SEQ): the producer's timer, (when, seq), kept out of the heap (seq 0: none).
# A stage's int row (si[stage * SI + column]) and float row (sf[stage * SF + column]).
(REJECT, BOUND, TURNS, FAN, IOFF, MOFF, MCAP, MHEAD, MLEN, QOFF, QCAP, QHEAD, QLEN, RESERVED, HELD,
 GOFF, GCAP, GHEAD, GLEN, WOFF, WCAP, WHEAD, WLEN, UNSETTLED, OFFERED, ADMITS, COMPLETES,
 ATTEMPTS, RETRIED, PEAK, OUTPUTS, HANDED, DEAD, SHEDS, AOFF, RSIM, RPERM, MAXATT, JITTER,
 RTRACE, POFF, NPOOLS, PARTOFF, NPARTS, CONC, RTMO, RFULL, TIMEDOUT,
 # A retry budget (GUARD & 1): its first attempts' and retries' times, rings in D[GFIRSTS] and
 # D[GRETRIES]; retries + 1 <= ratio * firsts + floor is (retries + 1) * BQB <= BPB * firsts + BAQ.
 # A breaker (GUARD & 2): its window's outcomes (failed + 2 * slow) in D[GCALLS], the workers
 # waiting for it in D[GWAITING]; a rate p/q is reached when count * q >= p * calls.
 GUARD, BFOFF, BFCAP, BFHEAD, BFLEN, BROFF, BRCAP, BRHEAD, BRLEN, BQB, BPB, BAQ, DENIED,
 KOFF, KCAP, KHEAD, KLEN, KWOFF, KWCAP, KWHEAD, KWLEN, KSTATE, KGEN, KPROBES, KFAILED, KSLOW,
 KREFUSED, KWINDOW, KMIN, KHALF, KRNUM, KRDEN, KSNUM, KSDEN, SI) = range(83)  # fmt: skip
PBLOCKED, HBLOCKED, LASTSETTLE, BWINDOW_S, KOPEN_S, KOPENED_S, KOPEN_TOTAL_S, KSLOW_S, SF = range(9)
# The overload controls' arrays, at the end of the D bundle; a worker's permit and start (s).
GFIRSTS, GRETRIES, GCALLS, GWAITING, GPERMIT, GSTART = range(19, 25)
B_CLOSED, B_OPEN, B_HALF_OPEN = 0, 1, 2  # a breaker's state, its index in overload.breaker.STATES


@jit
def _push(T, iv, when, kind, arg):
    """Set a timer: (when, the next seq) onto the heap."""
    hw, hs, hk, ha = T[2], T[3], T[4], T[5]
    seq, i = iv[SEQ] + 1, iv[HSIZE]
    iv[SEQ], iv[HSIZE] = seq, i + 1
    while i > 0:
        up = (i - 1) >> 1
        if hw[up] < when or (hw[up] == when and hs[up] < seq):
            break
        hw[i], hs[i], hk[i], ha[i] = hw[up], hs[up], hk[up], ha[up]
        i = up
    hw[i], hs[i], hk[i], ha[i] = when, seq, kind, arg


@jit
def _pop(T, iv):
    """Drop the heap's root (the caller has read it)."""
    hw, hs, hk, ha = T[2], T[3], T[4], T[5]
    iv[HSIZE] = last = iv[HSIZE] - 1
    when, seq, kind, arg = hw[last], hs[last], hk[last], ha[last]
    i = 0
    while True:
        down = 2 * i + 1
        if down >= last:
            break
        if down + 1 < last and (
            hw[down + 1] < hw[down] or (hw[down + 1] == hw[down] and hs[down + 1] < hs[down])
        ):
            down += 1
        if when < hw[down] or (when == hw[down] and seq < hs[down]):
            break
        hw[i], hs[i], hk[i], ha[i] = hw[down], hs[down], hk[down], ha[down]
        i = down
    hw[i], hs[i], hk[i], ha[i] = when, seq, kind, arg


@jit
def _ready(T, iv, kind, arg):
    """Schedule a step for this iteration's end (the ring's tail)."""
    slot = (iv[RHEAD] + iv[RLEN]) & (len(T[0]) - 1)
    T[0][slot], T[1][slot] = kind, arg
    iv[RLEN] += 1


@jit
def _log(L, iv, kind, now, item, stage):
    """Log one event and take it into a pipeline's item columns.

    Without ``iv[LOG_ALL]`` (no series asked for) only sheds, retries and dead letters are logged.
    """
    if iv[SINGLE]:  # L[5:]: admitted, first start, finish, outcome (Q[4]: attempts)
        if kind == ADMITTED:
            L[5][item] = now
        elif kind == STARTED and math.isnan(L[6][item]):
            L[6][item] = now
        elif kind in (COMPLETED, DEAD_LETTERED):
            L[7][item] = now
            L[8][item] = 0 if kind == COMPLETED else 1
        elif kind == SHED:
            L[8][item] = 2
    if iv[LOG_ALL] or kind in (SHED, RETRY_SCHEDULED, DEAD_LETTERED):
        i = iv[LLEN]
        L[0][i], L[1][i], L[2][i], L[3][i] = kind, now, item, stage
        iv[LLEN] = i + 1


@jit
def _draw(D, row):
    """The next value of the pool's row ``row`` (play() saw one left)."""
    D[D_USED][row] += 1
    return D[D_POOL][D[D_USED][row] - 1]


@jit
def _put(si, r, ring, value):
    """Append ``value`` to a stage's ring, its OFF, CAP, HEAD and LEN columns from ``si[r]``."""
    at = si[r + 2] + si[r + 3]  # head + length, wrapped (no division: this runs per item)
    ring[si[r] + (at - si[r + 1] if at >= si[r + 1] else at)] = value
    si[r + 3] += 1


@jit
def _get(si, r, ring):
    """Take the first value of a stage's ring (see :func:`_put`)."""
    value = ring[si[r] + si[r + 2]]
    si[r + 2] = 0 if si[r + 2] + 1 == si[r + 1] else si[r + 2] + 1
    si[r + 3] -= 1
    return value


@jit
def _enqueue(si, iv, T, Q, b, lane, item):
    """Queue ``item`` in a lane (MOFF, QOFF: retries) of stage row ``b``; wake an idle worker."""
    _put(si, b + lane, Q[0] if lane == MOFF else Q[1], item)
    si[b + PEAK] = max(si[b + PEAK], si[b + MLEN] + si[b + QLEN])
    if si[b + GLEN] > 0 and iv[CLOSED] == 0:
        _ready(T, iv, K_WORKER, _get(si, b + GOFF, Q[2]))


@jit
def _admit(si, iv, fv, T, L, Q, d, item):
    """Pipeline._admit at stage ``d`` with its slot reserved: queue, count, wake a worker."""
    b = d * SI
    si[b + OFFERED] += 1
    si[b + ADMITS] += 1
    _log(L, iv, ADMITTED, fv[NOW], item, d)
    si[b + UNSETTLED] += 1
    si[b + RESERVED] -= 1
    _enqueue(si, iv, T, Q, b, MOFF, item)


@jit
def _reserve(si, sf, iv, fv, L, Q, d, item, waiter, since):
    """Queue.reserve at stage ``d`` for ``item`` (or a rejecting queue's offer) by ``waiter``.

    ``waiter`` is the task (-1: the producer, else a worker handing on); ``since``: when
    it blocked, seconds, if it is woken in line (else -1.0). Returns 1 when reserved, 0
    when a rejecting queue shed the item, -1 when the queue is full: it waits in line.
    """
    b = d * SI
    if si[b + MLEN] + si[b + QLEN] + si[b + RESERVED] + si[b + HELD] >= si[b + BOUND]:
        if si[b + REJECT]:
            si[b + OFFERED] += 1
            si[b + SHEDS] += 1
            _log(L, iv, SHED, fv[NOW], item, d)
            return 0
        if since < 0:
            _log(L, iv, PRODUCER_BLOCKED, fv[NOW], -1, d)
        _put(si, b + WOFF, Q[3], waiter)
        return -1
    si[b + RESERVED] += 1
    if since >= 0:
        _log(L, iv, PRODUCER_UNBLOCKED, fv[NOW], -1, d)
        sf[d * SF + PBLOCKED] += fv[NOW] - since
        if waiter >= 0:
            sf[(d - 1) * SF + HBLOCKED] += fv[NOW] - since
    return 1


@jit
def _settle(si, sf, iv, fv, T, s):
    """An item of stage ``s`` is done there; a pipeline that stopped intake may now be settled."""
    si[s * SI + UNSETTLED] -= 1
    sf[s * SF + LASTSETTLE] = fv[NOW]
    if iv[ACCEPTING] == 0 and si[UNSETTLED] == 0 and iv[RUN_WOKEN] == 0:  # a chain accepts
        iv[RUN_WOKEN] = 1
        _ready(T, iv, K_RUN, _WOKEN)


@jit
def _trim(si, r, ring, edge):
    """Drop the times at or before ``edge`` from the head of a ring of times (see :func:`_put`)."""
    while si[r + 3] > 0 and ring[si[r] + si[r + 2]] <= edge:
        _get(si, r, ring)


@rare
def _budget_trim(si, sf, D, s, now):
    """BudgetState's trim: stage ``s`` forgets the times out of ``(now - window_s, now]``."""
    b = s * SI
    edge = now - sf[s * SF + BWINDOW_S]
    _trim(si, b + BFOFF, D[GFIRSTS], edge)
    _trim(si, b + BROFF, D[GRETRIES], edge)


@jit
def _budget_ok(si, sf, iv, L, D, s, now, item):
    """Guard.may_retry at stage ``s``: True (the retry counted) if it fits, else RETRY_DENIED."""
    b = s * SI
    _budget_trim(si, sf, D, s, now)
    if (si[b + BRLEN] + 1) * si[b + BQB] <= si[b + BPB] * si[b + BFLEN] + si[b + BAQ]:
        _put(si, b + BROFF, D[GRETRIES], now)
        return True
    si[b + DENIED] += 1
    _log(L, iv, RETRY_DENIED, now, item, s)
    return False


@rare
def _breaker_enter(si, sf, iv, T, L, D, s, state, at):
    """BreakerState._enter and Guard._changed: the new state, its event and timer; waiters woken."""
    b, f = s * SI, s * SF
    if si[b + KSTATE] == B_OPEN:
        sf[f + KOPEN_TOTAL_S] += sf[f + KOPEN_S]  # a spell lasts open_s exactly
    for column in (KHEAD, KLEN, KFAILED, KSLOW, KPROBES):
        si[b + column] = 0
    si[b + KSTATE] = state
    si[b + KGEN] += 1
    if state == B_OPEN:  # the timer that turns it half-open (K_HALF_OPEN: its spell, its stage)
        sf[f + KOPENED_S] = at
        _push(T, iv, at + sf[f + KOPEN_S], K_HALF_OPEN, si[b + KGEN] * (len(si) // SI) + s)
    _log(L, iv, BREAKER_EVENTS[state], at, -1, s)
    while si[b + KWLEN] > 0:  # Event.set(): every worker waiting asks again, in order
        _ready(T, iv, K_WORKER, _get(si, b + KWOFF, D[GWAITING]))


@rare
def _breaker_advance(si, sf, iv, T, L, D, s, now):
    """BreakerState.advance: an open spell over by ``now`` turns half-open, at its end."""
    until = sf[s * SF + KOPENED_S] + sf[s * SF + KOPEN_S]
    state = si[s * SI + KSTATE]
    if state == B_OPEN and now >= until:
        _breaker_enter(si, sf, iv, T, L, D, s, state + 1, until)  # B_HALF_OPEN, not a constant


@jit
def _breaker_timer(si, sf, iv, T, L, D, arg):
    """Guard._half_open: the open spell's timer (a spell already over cancelled it)."""
    spell, s = divmod(arg, len(si) // SI)
    if si[s * SI + KGEN] == spell:  # still open: it turns half-open at the spell's end
        _breaker_advance(si, sf, iv, T, L, D, s, math.inf)


@rare
def _breaker_record(si, sf, iv, fv, T, L, D, g, s, failure):
    """Guard.ended: worker ``g``'s call ended now (``failure``: E_NONE or what it raised);
    the breaker records it."""
    b, now, failed = s * SI, fv[NOW], 0 if failure == E_NONE else 1
    _breaker_advance(si, sf, iv, T, L, D, s, now)
    if D[GPERMIT][g] != si[b + KGEN]:
        return  # let through in a state (or spell) that has since ended
    slow = 1 if now - D[GSTART][g] >= sf[s * SF + KSLOW_S] else 0
    if si[b + KSTATE] == B_CLOSED and si[b + KLEN] == si[b + KWINDOW]:
        old = _get(si, b + KOFF, D[GCALLS])
        si[b + KFAILED] -= old & 1
        si[b + KSLOW] -= old >> 1
    _put(si, b + KOFF, D[GCALLS], failed + 2 * slow)
    si[b + KFAILED] += failed
    si[b + KSLOW] += slow
    n = si[b + KLEN]
    trips = si[b + KFAILED] * si[b + KRDEN] >= si[b + KRNUM] * n
    trips = trips or si[b + KSLOW] * si[b + KSDEN] >= si[b + KSNUM] * n
    # Closed: the window, once it holds min_calls; half-open: the probes' verdict. One call
    # of _breaker_enter here: numba compiles a copy for each constant argument.
    closed = si[b + KSTATE] == B_CLOSED
    if (closed and n >= si[b + KMIN] and trips) or (not closed and n == si[b + KHALF]):
        _breaker_enter(si, sf, iv, T, L, D, s, B_OPEN if trips else B_CLOSED, now)


@rare
def _guard_start(si, sf, iv, fv, T, L, Q, D, g, s, item, first):
    """Guard.admit, then Guard.starting, for worker ``g``'s next attempt at ``item``: _GATED
    while the breaker refuses it (BREAKER_REFUSED at the ``first`` refusal; it waits in
    line), else the status it is served in (_GUARDED: the breaker records its end)."""
    b, now = s * SI, fv[NOW]
    if si[b + GUARD] & 2:
        _breaker_advance(si, sf, iv, T, L, D, s, now)
        state = si[b + KSTATE]
        if state == B_OPEN or (state == B_HALF_OPEN and si[b + KPROBES] >= si[b + KHALF]):
            if first:
                si[b + KREFUSED] += 1
                _log(L, iv, BREAKER_REFUSED, now, item, s)
            _put(si, b + KWOFF, D[GWAITING], g)
            return _GATED
        si[b + KPROBES] += 1 if state == B_HALF_OPEN else 0  # a probe
        D[GPERMIT][g], D[GSTART][g] = si[b + KGEN], now  # its permit; the attempt starts now
    if si[b + GUARD] & 1 and si[b + NPOOLS] and Q[4][si[b + AOFF] + item] == 0:
        _budget_trim(si, sf, D, s, now)  # a first attempt (the budget asks only if it can fail)
        _put(si, b + BFOFF, D[GFIRSTS], now)
    return _GUARDED if si[b + GUARD] & 2 else _SERVING


@jit
def _producer(si, sf, iv, fv, T, L, Q, arrival, resume):
    """Pipeline._produce over the source, into stage 0, from ``resume`` to its next wait."""
    now = fv[NOW]
    reject = si[REJECT]
    while True:
        if resume != _ARRIVED:  # a blocking queue: a slot first, then the next item
            since = fv[BLOCKED_SINCE] if resume == _SLOT else -1.0
            if reject == 0 and _reserve(si, sf, iv, fv, L, Q, 0, -1, -1, since) < 0:
                fv[BLOCKED_SINCE] = now if since < 0 else since
                return
            if iv[NEXT] == iv[N]:  # the source is exhausted: intake stops at this instant
                si[RESERVED] -= 1 - reject  # the slot no item takes
                fv[CLOSED_S] = now
                if iv[SINGLE]:
                    _ready(T, iv, K_GATHERED, _DRAIN)
                return
            when = arrival[iv[NEXT]]
            if when > now:  # a timer as _push sets one, kept out of the heap
                iv[SEQ] = iv[ARRIVAL_SEQ] = iv[SEQ] + 1
                fv[ARRIVAL] = when
                return
        item = iv[NEXT]
        iv[NEXT] = item + 1
        if reject == 0 or _reserve(si, sf, iv, fv, L, Q, 0, item, -1, -1.0) > 0:  # not shed
            _admit(si, iv, fv, T, L, Q, 0, item)
        if si[TURNS]:  # asyncio.sleep(0): one turn of the loop (a rejecting queue's too)
            _ready(T, iv, K_PRODUCER, TOP)
            return
        resume = TOP


@jit
def _hand_on(si, sf, iv, fv, T, L, Q, W, g, since):
    """HandOff.send from the current child on; False when it waits (``since``: see _reserve)."""
    s, j = W[0][g], W[3][g]
    d, fan = s + 1, si[s * SI + FAN] if s + 1 < len(si) // SI else 0  # the last hands none on
    while j < fan:
        got = _reserve(si, sf, iv, fv, L, Q, d, W[2][g] * fan + j, g, since)
        if got < 0:
            W[1][g], W[3][g], W[4][g] = _HANDING, j, fv[NOW] if since < 0 else since
            return False
        since = -1.0
        if got:
            _admit(si, iv, fv, T, L, Q, d, W[2][g] * fan + j)
        si[s * SI + HANDED] += 1
        j += 1
        if si[d * SI + TURNS]:  # asyncio.sleep(0) in HandOff.send: the next child a turn later
            W[1][g], W[3][g] = _TURN, j
            _ready(T, iv, K_WORKER, g)
            return False
    return True


@jit
def _ready_first(T, iv, kind, arg):
    """Schedule a step to run next, ahead of the ring (the rest of the running step)."""
    iv[RHEAD] = (iv[RHEAD] - 1) & (len(T[0]) - 1)
    T[0][iv[RHEAD]], T[1][iv[RHEAD]] = kind, arg
    iv[RLEN] += 1
    iv[LEFT] += 1


@jit
def _downstream_account(iv, fv):
    """DownstreamRun._account: the areas under its queue and its busy servers, up to now."""
    span = fv[NOW] - fv[DS_SINCE]
    if span > 0:
        fv[DS_QAREA] += span * (iv[DS_REQ] - iv[DS_STARTED])
        fv[DS_BAREA] += span * (iv[DS_C] - iv[DS_FREE])
        fv[DS_SINCE] = fv[NOW]


@rare
def _downstream_start(iv, T, D, r, now):
    """A server takes request ``r``; its end by the speed profile (as SpeedProfile.finish_s)."""
    work, starts, factors = D[D_WORK][r], D[D_STARTS], D[D_FACTORS]
    end = now + work
    if iv[DS_CONST] == 0:
        index, last = 0, len(starts) - 1
        while index < last and starts[index + 1] <= now:
            index += 1
        t, end = now, math.nan
        while index < last:
            room = (starts[index + 1] - t) * factors[index]
            if work <= room:
                end = t + work / factors[index]
                break
            work -= room
            t = starts[index + 1]
            index += 1
        if math.isnan(end):
            end = t + work / factors[last]
    D[D_START][r], D[D_END][r] = now, end
    iv[DS_STARTED] = r + 1
    _push(T, iv, end, K_ANSWER, r)


@jit
def _downstream_full(iv):
    """Whether a call now finds no server free and the downstream's queue full."""
    return iv[DS_FREE] == 0 and 0 <= iv[DS_QMAX] <= iv[DS_REQ] - iv[DS_STARTED]


@rare
def _downstream_call(iv, fv, T, W, D, g):
    """DownstreamRun.call by worker ``g``, which then waits for the answer (not full)."""
    _downstream_account(iv, fv)
    r = iv[DS_REQ]
    iv[DS_REQ] = r + 1
    D[D_SENT][r], D[D_ABANDONED][r], D[D_CALLER][r] = fv[NOW], math.nan, g
    D[D_WORK][r] = _draw(D, iv[DS_ROW])
    W[1][g], W[7][g] = _CALLING, r
    if iv[DS_FREE] > 0:
        iv[DS_FREE] -= 1
        _downstream_start(iv, T, D, r, fv[NOW])


@rare
def _downstream_answer(iv, fv, T, W, D, r):
    """DownstreamRun._finish: request ``r``'s service ends; its caller wakes, if it still waits."""
    _downstream_account(iv, fv)
    iv[DS_SERVED] += 1
    g = D[D_CALLER][r]
    if g < 0:  # orphaned: its caller gave up on it
        iv[DS_ORPH] += 1
    else:
        W[1][g] = _ANSWERED
        _ready(T, iv, K_WORKER, g)
    if iv[DS_STARTED] < iv[DS_REQ]:
        _downstream_start(iv, T, D, iv[DS_STARTED], fv[NOW])
    else:
        iv[DS_FREE] += 1


@rare
def _cut_begin(iv, fv, T, W, D, g, seconds):
    """An attempt that can be cut starts: asyncio.timeout's timer, then its sleep or its call."""
    calls, timeout_s = iv[DS_ON] and iv[CLIENT] == 0, D[D_TIMEOUTS][W[0][g]]
    if calls and _downstream_full(iv):
        iv[SEQ] += not math.isnan(timeout_s)  # the timeout's timer, set and cancelled at once
        iv[DS_REJ] += 1
        W[1][g], W[5][g], W[6][g] = _REFUSED, E_FULL, PART_FULL
        _ready_first(T, iv, K_WORKER, g)  # the failure: what the engine's step does next
        return
    if not math.isnan(timeout_s):
        W[8][g] = iv[SEQ] + 1
        _push(T, iv, fv[NOW] + timeout_s, K_CUT, g + len(W[0]) * W[8][g])
    if calls:
        _downstream_call(iv, fv, T, W, D, g)
    elif seconds <= 0 and not math.isnan(timeout_s):  # asyncio.sleep(0): a turn, no timer
        W[1][g] = _SLEEPING
        _ready(T, iv, K_WORKER, g)
    else:
        W[1][g] = _SLEEPING
        _push(T, iv, fv[NOW] + seconds, K_FIRED_WORKER, g)
        W[9][g] = iv[SEQ]


@rare
def _cut_step(si, iv, fv, T, W, D, g, status):
    """What woke worker ``g`` in an attempt that can be cut: the status its step goes on with."""
    if status == _CUT:
        W[5][g], W[6][g] = E_TIMEOUT, PART_TIMEOUT
        si[W[0][g] * SI + TIMEDOUT] += 1
        return _SERVING
    if status == _SLEEPING and iv[DS_ON]:  # the client-side time is over: the call
        if not _downstream_full(iv):
            _downstream_call(iv, fv, T, W, D, g)
            return _CALLING
        iv[DS_REJ] += 1
        W[5][g], W[6][g] = E_FULL, PART_FULL
    W[8][g] = 0  # the attempt is over (slept, answered or refused): its timeout is cancelled
    return _SERVING


@rare
def _cut(iv, fv, T, W, D, arg):
    """Timeout._on_timeout: the worker's task is cancelled; the request it sent stays."""
    g, seq = arg % len(W[0]), arg // len(W[0])
    if W[8][g] != seq or W[1][g] == _CANCELLED:  # its attempt ended first: cancelled
        return
    W[8][g] = 0
    if W[1][g] == _CALLING:  # the request's future is cancelled: orphaned from now on
        D[D_CALLER][W[7][g]], D[D_ABANDONED][W[7][g]] = -1, fv[NOW]
        _ready(T, iv, K_WORKER, g)
    elif W[1][g] == _SLEEPING:  # the sleep's future is cancelled (its timer with it)
        W[9][g] = 0
        _ready(T, iv, K_WORKER, g)
    W[1][g] = _CUT  # answered: its wake-up is due already, and throws the cancel in


@rare
def _cut_close(fv, W, D):
    """The close cancels the workers: a request still awaited is given up on now."""
    for g in range(len(W[1])):
        if W[1][g] == _CALLING:
            D[D_CALLER][W[7][g]], D[D_ABANDONED][W[7][g]] = -1, fv[NOW]


@jit
def _live(W, seq, kind, arg):
    """Whether a timer is still set: a cut attempt's sleep, a cold start cut short by a shrink
    and an ended attempt's timeout were cancelled (the loop drops them unseen)."""
    if kind == K_FIRED_WORKER:
        return W[9][arg] == seq
    if kind == K_CUT:
        return W[8][arg % len(W[0])] == seq
    return True


@jit
def _take(si, sf, iv, fv, T, L, Q, W, D, g, gated):
    """An idle worker takes the next item (retry lane first) and starts an attempt, or waits.

    ``gated``: the worker holds an item the breaker refused, and asks again.
    """
    s = W[0][g]
    b = s * SI
    if iv[RETIRING] and not gated and (W[1][g] != _GETTING or si[b + MLEN] + si[b + QLEN] == 0):
        _scale_leave(iv, fv, L, W, g)  # due to leave: _work's check, or get()'s before a wait
        return
    if gated:
        item = W[2][g]
    else:
        if si[b + MLEN] == 0 and si[b + QLEN] == 0:
            W[1][g] = _GETTING
            _put(si, b + GOFF, Q[2], g)
            return
        item = _get(si, b + QOFF, Q[1]) if si[b + QLEN] > 0 else _get(si, b + MOFF, Q[0])
        if si[b + WLEN] > 0:  # a slot opened: wake the first in line for it
            w = _get(si, b + WOFF, Q[3])  # -1: the producer
            _ready(T, iv, K_PRODUCER if w < 0 else K_WORKER, _SLOT if w < 0 else w)
    serving = _SERVING
    if si[b + GUARD]:  # a retry budget or a breaker: the engine's Guard
        serving = _guard_start(si, sf, iv, fv, T, L, Q, D, g, s, item, not gated)
        if serving == _GATED:
            W[1][g], W[2][g] = _GATED, item
            return
    now = fv[NOW]
    si[b + ATTEMPTS] += 1
    _log(L, iv, STARTED, now, item, s)
    failure, part = E_NONE, 0
    seconds = D[D_FIRST_S][si[b + IOFF] + item]
    if si[b + NPOOLS] or iv[SINGLE]:  # count attempts: a stage that can fail, a pipeline's
        a = si[b + AOFF] + item
        attempt = Q[4][a] + 1
        Q[4][a] = attempt
        if si[b + NPOOLS]:  # the stage can fail: draw what the attempt needs
            if attempt > 1 and si[b + RTRACE] == 0:
                seconds = _draw(D, si[b + POFF])
            first = si[b + PARTOFF]  # every part sees the attempt; the first to fail it wins
            for k in range(first, first + si[b + NPARTS]):
                row, at = D[D_PART_ROW][k], D[D_PART_OFF][k] + item
                if row:  # an independent part: its pool row holds 1.0 for a failure
                    verdict = E_SIMULATED if _draw(D, row) > 0.5 else E_NONE
                elif attempt > D[D_LAST_FAILED][at]:  # an item-wise part (driver._itemwise)
                    verdict = E_NONE
                else:
                    permanent = 0 < D[D_FIRST_PERMANENT][at] <= attempt
                    verdict = E_PERMANENT if permanent else E_SIMULATED
                if verdict != E_NONE and failure == E_NONE:
                    failure, part = verdict, k - first
    W[1][g], W[2][g], W[3][g], W[5][g], W[6][g] = serving, item, 0, failure, part
    if iv[CUTS]:
        _cut_begin(iv, fv, T, W, D, g, seconds)
    else:
        _push(T, iv, now + seconds, K_FIRED_WORKER, g)
        W[9][g] = iv[SEQ]  # its timer (a cold start's, cancelled, is dropped by its seq)


@jit
def _worker(si, sf, iv, fv, T, L, Q, W, D, g):
    """One step of worker ``g``: whatever woke it, then the next item if it is free."""
    s, status, item, now = W[0][g], W[1][g], W[2][g], fv[NOW]
    b = s * SI
    gated = False
    if status >= _CANCELLED:  # cancelled; an autoscaled pool's step; a breaker's; a cut's
        if status == _CANCELLED:
            return
        if _FRESH <= status <= _GONE:
            _scale_worker(si, sf, iv, fv, T, L, Q, W, D, g)
            return
        gated = status == _GATED
        if gated:  # woken by the breaker: no attempt ended, its item asks again (_take)
            status = _GETTING
        else:
            if status != _GUARDED:  # an attempt that can be cut: what woke it
                status = _cut_step(si, iv, fv, T, W, D, g, status)
                if status == _CALLING:
                    return
            if si[b + GUARD] & 2:  # a call the breaker let through ended: it records it
                _breaker_record(si, sf, iv, fv, T, L, D, g, s, W[5][g])
            status = _SERVING
    if status == _SERVING and W[5][g] != E_NONE:  # the attempt failed: retry or dead-letter
        attempt = Q[4][si[b + AOFF] + item]
        can_retry = si[b + RSIM] if W[5][g] == E_SIMULATED else si[b + RPERM]
        if W[5][g] >= E_TIMEOUT:  # cut by its timeout, or the downstream was full
            can_retry = si[b + (RTMO if W[5][g] == E_TIMEOUT else RFULL)]
        retry = can_retry != 0 and attempt < si[b + MAXATT]
        if retry and si[b + GUARD] & 1:
            retry = _budget_ok(si, sf, iv, L, D, s, now, item)
        if retry:
            delay = D[D_DELAYS][s * DELAYS + min(attempt, DELAYS) - 1]
            if si[b + JITTER] and delay > 0.0:
                delay = 0.0 + delay * _draw(D, si[b + POFF] + 1)  # Random.uniform(0, delay)
            si[b + RETRIED] += 1
            si[b + HELD] += 1
            _push(T, iv, now + delay, K_READMIT, item * (len(si) // SI) + s)
            _log(L, iv, RETRY_SCHEDULED, now, item, s)
        else:
            si[b + DEAD] += 1
            _log(L, iv, DEAD_LETTERED, now, item, s)
            _settle(si, sf, iv, fv, T, s)
        L[4][iv[LLEN] - 1] = W[6][g]  # which part of the failure model failed it
    elif status != _GETTING:  # completed, or woken in line downstream or a turn after an output
        if status == _SERVING:
            si[b + COMPLETES] += 1
            _log(L, iv, COMPLETED, now, item, s)
            si[b + OUTPUTS] += si[b + FAN]
        if not _hand_on(si, sf, iv, fv, T, L, Q, W, g, W[4][g] if status == _HANDING else -1.0):
            return
        _settle(si, sf, iv, fv, T, s)
    _take(si, sf, iv, fv, T, L, Q, W, D, g, gated)


@jit
def _run_task(si, iv, fv, T, L, W, kind, arg):
    """A pipeline's end: the run's task (drain, timeout), its close."""
    now = fv[NOW]
    if kind == K_TIMEOUT:
        if iv[CANCELLED] == 0:
            iv[TIMED_OUT] = 1
            if iv[RUN_WOKEN] == 0:
                iv[RUN_WOKEN] = 1
                _ready(T, iv, K_RUN, _WOKEN)
    elif kind == K_CLOSE:  # the workers are cancelled; the loop stops after this iteration
        iv[CLOSED] = 1
        for g in range(len(W[1])):
            W[1][g] = _CANCELLED
    elif arg == _DRAIN:  # intake stops; the run waits until settled, or the drain's deadline
        iv[ACCEPTING] = 0
        _log(L, iv, INTAKE_CLOSED, now, -1, 0)
        if si[UNSETTLED] == 0:
            _ready(T, iv, K_CLOSE, 0)
        elif not math.isnan(fv[DRAIN_S]):
            deadline = now + fv[DRAIN_S]
            if deadline <= now:
                _ready(T, iv, K_TIMEOUT, 0)
            else:
                _push(T, iv, deadline, K_TIMEOUT, 0)
    else:  # woken: settled, or timed out
        if iv[TIMED_OUT]:
            _log(L, iv, DRAIN_TIMEOUT, now, -1, 0)
        else:
            iv[CANCELLED] = 1
        _ready(T, iv, K_CLOSE, 0)


@jit
def _iteration(si, iv, fv, T, W):
    """Start an iteration: jump the clock if nothing is ready, fire due timers; -1 or a code."""
    rk, hw, hs, hk = T[0], T[2], T[3], T[4]
    cuts = iv[CUTS] > 0 or iv[MAX_W] > 0  # timers may be cancelled: attempts cut, cold starts
    if iv[CLOSED]:
        return DONE
    while cuts and iv[HSIZE] > 0 and not _live(W, hs[0], hk[0], T[5][0]):
        _pop(T, iv)  # a cancelled timer at the heap's head (asyncio drops it so)
    if iv[RLEN] + iv[HSIZE] >= len(rk):
        return GROW_READY
    woken = iv[RLEN] == 0  # only timers that wake a task are ready so far
    if woken:
        if iv[HSIZE] == 0 and iv[ARRIVAL_SEQ] == 0:
            return STUCK if iv[SINGLE] else DONE
        due = fv[ARRIVAL] if iv[HSIZE] == 0 else min(hw[0], fv[ARRIVAL])
        if due > fv[NOW]:
            if iv[SINGLE]:  # the instant is over: a pipeline's items held are a row of its series
                held = si[ADMITS] - si[COMPLETES]
                if fv[NOW] >= fv[WARMUP_S]:
                    iv[HELD_PEAK] = max(iv[HELD_PEAK], held)
                else:
                    iv[HELD_BEFORE] = held
            fv[NOW] = due
    now = fv[NOW]
    while True:  # the due timers in (when, seq) order, the arrival's among the heap's
        heap, at = iv[HSIZE] > 0 and hw[0] <= now, fv[ARRIVAL]
        first = not heap or at < hw[0] or (at == hw[0] and iv[ARRIVAL_SEQ] < hs[0])
        if iv[ARRIVAL_SEQ] > 0 and at <= now and first:
            iv[ARRIVAL_SEQ], fv[ARRIVAL] = 0, math.inf
            _ready(T, iv, K_FIRED_PRODUCER, _ARRIVED)
        elif heap:
            kind, arg = hk[0], T[5][0]
            if cuts and not _live(W, hs[0], kind, arg):
                _pop(T, iv)
                continue
            _pop(T, iv)
            _ready(T, iv, kind, arg)
            woken = woken and K_FIRED_PRODUCER <= kind <= K_FIRED_WORKER
        else:
            break
    if woken:  # this iteration would only ready their tasks' steps: skip to the next one
        for i in range(iv[RHEAD], iv[RHEAD] + iv[RLEN]):
            rk[i & (len(rk) - 1)] -= FIRED_AFTER
    iv[LEFT] = iv[RLEN]
    return -1


@entry
def play(iv, fv, si, sf, T, L, Q, W, D):
    """Run the replay until it ends or needs something (see the module docstring)."""
    rk, ra, cuts = T[0], T[1], iv[CUTS]
    while True:
        if iv[LEFT] == 0:
            code = _iteration(si, iv, fv, T, W)
            if code >= 0:
                return code
            if iv[LEFT] == 0:
                continue
        head = iv[RHEAD]
        kind, arg = rk[head], ra[head]
        room = 16 + iv[MARGIN]  # what one step may add, at most, to the ring and to the log
        if len(rk) - iv[RLEN] < room:
            return GROW_READY
        if len(L[0]) - iv[LLEN] < room:
            return GROW_LOG
        if len(T[2]) - iv[HSIZE] < 6:  # a step sets 5 timers at most (breaker, retry, attempt,
            return GROW_HEAP  # its timeout, a cold start)
        if kind == K_WORKER and iv[POOL_SAFE] == 0:  # a pool row may be dry: look
            b = W[0][arg] * SI
            for row in range(si[b + POFF], si[b + POFF] + si[b + NPOOLS]):
                if D[D_USED][row] == D[D_ROWS][row + 1]:
                    return REFILL + row
            # a worker's step draws one value a row at most: the steps that cannot find a row
            iv[POOL_SAFE] = D[D_ROWS][-1]  # dry are the fewest left
            for row in range(len(D[D_ROWS]) - 1):
                iv[POOL_SAFE] = min(iv[POOL_SAFE], D[D_ROWS][row + 1] - D[D_USED][row])
            for b in range(0, len(si), SI):  # and a budget's rings: a step puts a time in each
                room = min(si[b + BFCAP] - si[b + BFLEN], si[b + BRCAP] - si[b + BRLEN])
                if si[b + GUARD] & 1:
                    if room < 1:
                        iv[POOL_SAFE] = 0  # look again once grown
                        return GROW_BUDGET
                    iv[POOL_SAFE] = min(iv[POOL_SAFE], room)
        iv[POOL_SAFE] = max(iv[POOL_SAFE] - (kind == K_WORKER), 0)
        iv[RHEAD] = (head + 1) & (len(rk) - 1)
        iv[RLEN] -= 1
        iv[LEFT] -= 1
        if kind == K_WORKER:
            _worker(si, sf, iv, fv, T, L, Q, W, D, arg)
        elif kind == K_PRODUCER:
            _producer(si, sf, iv, fv, T, L, Q, D[D_ARRIVALS], arg)
        elif K_FIRED_PRODUCER <= kind <= K_GATHERED:  # its task's step runs next iteration
            if not cuts or kind != K_FIRED_WORKER or W[1][arg] != _CUT:  # (a cut sleep)
                _ready(T, iv, kind - FIRED_AFTER, arg)
        elif kind == K_READMIT:  # a retry's backoff is over: it joins the retry lane
            item, s = divmod(arg, len(si) // SI)
            si[s * SI + HELD] -= 1
            _enqueue(si, iv, T, Q, s * SI, QOFF, item)
            _log(L, iv, READMITTED, fv[NOW], item, s)
        elif kind >= K_CUT:  # a cut, a request's end, a breaker's timer, the autoscaler's task
            _feature_step(si, sf, iv, fv, T, L, Q, W, D, kind, arg)
        else:
            if kind == K_CLOSE and iv[DS_ON]:
                _cut_close(fv, W, D)
            _run_task(si, iv, fv, T, L, W, kind, arg)


@rare
def _scale_leave(iv, fv, L, W, g):
    """Worker ``g``, a busy one a shrink asked to leave, leaves as it comes for an item."""
    iv[RETIRING] -= 1
    _log(L, iv, WORKER_LEFT, fv[NOW], -1, 0)
    _scale_gone(iv, fv, W, g)


@jit
def _scale_gone(iv, fv, W, g):
    """Worker ``g`` is done: its seconds are counted, its slot is free for a new worker."""
    W[1][g] = _GONE
    fv[WORKER_S] += fv[NOW] - W[10][g]
    W[10][g] = math.nan
    W[11][iv[NFREE]] = g
    iv[NFREE] += 1


@jit
def _scale_pop_tail(si, r, ring):
    """Take the last value of a ring (see :func:`_put`): the latest idle or starting worker."""
    si[r + 3] -= 1
    at = si[r + 2] + si[r + 3]
    return ring[si[r] + (at - si[r + 1] if at >= si[r + 1] else at)]


@rare
def _scale_worker(si, sf, iv, fv, T, L, Q, W, D, g):
    """A step of a worker an autoscaler added (its start, its cold start's end) or retired."""
    status = W[1][g]
    if status == _FRESH and fv[COLD_S] > 0.0:  # _cold_start: asyncio.sleep(cold_start_s)
        W[1][g] = _COLD
        _push(T, iv, fv[NOW] + fv[COLD_S], K_FIRED_WORKER, g)
        W[9][g] = iv[SEQ]
    elif status == _LEAVING:  # retired while it waited: get() passes a queued item on
        if si[MLEN] + si[QLEN] > 0 and si[GLEN] > 0:
            _ready(T, iv, K_WORKER, _get(si, GOFF, Q[2]))
        _scale_gone(iv, fv, W, g)
    elif status != _GONE:  # its loop begins (a worker cancelled in its cold start is gone)
        if status == _COLD:
            _get(iv, COFF, W[12])  # no longer starting: the oldest that was
        _take(si, sf, iv, fv, T, L, Q, W, D, g, 0)


@rare
def _scale_desired(si, iv, fv, L, current):
    """Recommender.desired_count, in its float operations (a float: it may pass 2**63)."""
    target = fv[TARGET]
    if iv[METRIC] == 0:  # queue_per_worker
        depth = si[MLEN] + si[QLEN]
        ratio = depth / current / target
        desired = depth / target
    else:  # oldest_age_s: the oldest item inside is the first admitted one not settled
        p = iv[OLDEST]
        while p < iv[NEXT] and L[8][p] != 4:
            p += 1
        iv[OLDEST] = p
        ratio = (0.0 if p == iv[NEXT] else max(0.0, fv[NOW] - L[5][p])) / target
        desired = ratio * current
    if abs(ratio - 1.0) <= fv[TOLERANCE]:
        return float(current)
    return _scale_ceil(desired)


@jit
def _scale_ceil(x):
    """math.ceil of ``x`` >= 0, as a float (a float of 2**52 or more is an integer)."""
    return x if x >= 4503599627370496.0 else float(math.ceil(x))


@rare
def _scale_sync(si, iv, fv, T, L, Q, W, arg):
    """The autoscaler's task: its start (``arg`` 0) or a sync (1), then the next sync's timer.

    A sync is Recommender.decide (windows judged on ``syncs x sync_s``), then the resize.
    """
    now, current = fv[NOW], iv[SIZE]
    if arg:
        since = iv[SYNCS] * fv[SYNC_S]
        desired = _scale_desired(si, iv, fv, L, current)
        fv[DESIRED] = desired
        keep = max(fv[UP_S], fv[DOWN_S])
        times, counts = W[13], W[14]
        while iv[HLEN] and times[iv[HOFF] + iv[HHEAD]] <= since - keep:
            _get(iv, HOFF, times)  # no window sees it any more
        up = down = desired
        for i in range(iv[HHEAD], iv[HHEAD] + iv[HLEN]):
            at = i - iv[HCAP] if i >= iv[HCAP] else i
            if times[at] > since - fv[UP_S]:
                up = min(up, counts[at])
            if times[at] > since - fv[DOWN_S]:
                down = max(down, counts[at])
        _put(iv, HOFF, counts, desired)
        iv[HLEN] -= 1
        _put(iv, HOFF, times, since)
        most = current + max(float(iv[PODS]), _scale_ceil(current * fv[FRACTION]))
        recommended = min(max(float(current), up), down)
        size = int(max(float(iv[MIN_W]), min(recommended, most, float(iv[MAX_W]))))
        if size != current:
            iv[SCALES] += 1
            _scale_resize(si, iv, fv, T, Q, W, size)
            _log(L, iv, SCALED, now, iv[SIZE] + iv[RETIRING], 0)  # the pool's size, for run.py
        _log(L, iv, SYNCED, now, int(min(desired, 2.0**63 - 1024)), 0)  # its desired count, too
    iv[SYNCS] = max(iv[SYNCS] + 1, math.floor(now / fv[SYNC_S]))  # from the run's start, 0.0
    _push(T, iv, iv[SYNCS] * fv[SYNC_S], K_FIRED_SCALE, 1)


@rare
def _scale_resize(si, iv, fv, T, Q, W, count):
    """WorkerPool._resize to ``count`` workers at a sync (its cold start for the new ones)."""
    current = iv[SIZE]
    if count > current:
        kept = min(iv[RETIRING], count - current)  # workers due to leave stay instead
        iv[RETIRING] -= kept
        for _ in range(count - current - kept):
            iv[NFREE] -= 1
            g = W[11][iv[NFREE]]
            W[1][g], W[10][g] = _FRESH, fv[NOW]
            if fv[COLD_S] > 0.0:
                _put(iv, COFF, W[12], g)
            _ready(T, iv, K_WORKER, g)
    else:
        surplus = current - count
        while surplus and si[GLEN]:  # idle workers first, the latest idle first
            g = _scale_pop_tail(si, GOFF, Q[2])
            W[1][g] = _LEAVING
            _ready(T, iv, K_WORKER, g)
            surplus -= 1
        while surplus and iv[CLEN]:  # then those starting, the latest first: cancelled
            g = _scale_pop_tail(iv, COFF, W[12])
            W[9][g] = 0  # its timer, if still set, is cancelled: dropped unseen (_live)
            _scale_gone(iv, fv, W, g)
            surplus -= 1
        iv[RETIRING] += surplus  # then busy ones, each after its item
    iv[SIZE] = count
    iv[SIZE_PEAK] = max(iv[SIZE_PEAK], count + iv[RETIRING])


@rare
def _feature_step(si, sf, iv, fv, T, L, Q, W, D, kind, arg):
    """A step of a feature's own (kinds from K_CUT on): an attempt's timeout fires, a
    downstream request ends, a breaker's open spell is over, the autoscaler's task runs."""
    if kind == K_CUT:
        _cut(iv, fv, T, W, D, arg)
    elif kind == K_ANSWER:
        _downstream_answer(iv, fv, T, W, D, arg)
    elif kind == K_HALF_OPEN:
        _breaker_timer(si, sf, iv, T, L, D, arg)
    elif kind == K_FIRED_SCALE:  # the sync's timer set its future: the task runs next
        _ready(T, iv, K_SCALE, arg)
    elif kind == K_SCALE and (arg == 0 or iv[ACCEPTING]):  # no sync once draining
        _scale_sync(si, iv, fv, T, L, Q, W, arg)


@merge
def series_rows(arrival, kinds, times, deltas, arrival_code, time_s, columns):
    """The rows of :func:`~pipeline.sim.running.recorder.step_series`, by merging, not sorting.

    ``arrival`` (the source's arrivals) and ``times`` (the event log, with its
    ``kinds``) are both non-decreasing, and the state after all events at one
    instant does not depend on their order there, so one pass over the two
    gives each distinct instant's state: ``time_s[r]`` and ``columns[:, r]``
    (``deltas[kind]`` moves the columns; ``arrival_code`` is an arrival's row).
    Row 0 is the state at 0.0 s. Returns the number of rows filled.

    The seven columns of :data:`~pipeline.sim.running.recorder.SERIES` are seven
    locals, not an array: kept in registers, the pass takes half the time (and
    ``deltas`` read element by element, not a row at a time: a row is an array view).
    """
    q, f, r, d, c, b, u = 0, 0, 0, 0, 0, 0, 0
    columns[:, 0] = 0
    time_s[0] = 0.0
    rows = 1
    i = j = 0
    arrived, logged = len(arrival), len(times)
    while i < arrived or j < logged:
        at = arrival[i] if j == logged or (i < arrived and arrival[i] <= times[j]) else times[j]
        e = arrival_code
        while i < arrived and arrival[i] == at:
            q, f, r, d = q + deltas[e, 0], f + deltas[e, 1], r + deltas[e, 2], d + deltas[e, 3]
            c, b, u = c + deltas[e, 4], b + deltas[e, 5], u + deltas[e, 6]
            i += 1
        while j < logged and times[j] == at:
            e = kinds[j]
            q, f, r, d = q + deltas[e, 0], f + deltas[e, 1], r + deltas[e, 2], d + deltas[e, 3]
            c, b, u = c + deltas[e, 4], b + deltas[e, 5], u + deltas[e, 6]
            j += 1
        time_s[rows] = at
        columns[0, rows], columns[1, rows], columns[2, rows], columns[3, rows] = q, f, r, d
        columns[4, rows], columns[5, rows], columns[6, rows] = c, b, u
        rows += 1
    return rows
