"""Golden traces for AIMD and Gradient2, computed by hand from Netflix concurrency-limits v0.5.4.

Each test drives the limit's state directly with samples ``(rtt_s, inflight, dropped)``;
the comment derives the expected trajectory from the published rule
(AIMDLimit._update, Gradient2Limit._update, ExpAvgMeasurement.add).
"""

from __future__ import annotations

import pytest

from pipeline import AIMD, Gradient2


def trace(state, samples):
    return [state.on_sample(*sample) for sample in samples]


# -- AIMD: limit = floor(limit * ratio) on a drop or rtt > timeout; +1 when 2*inflight >= limit


def test_aimd_adds_one_per_sample_while_the_limit_is_used():
    # 10 -> 2*10 >= 10: 11 -> 2*10 >= 11: 12 -> 13 -> 14 (inflight 10 keeps 20 >= limit)
    state = AIMD(initial_limit=10).start(max_limit=50)
    assert trace(state, [(0.1, 10, False)] * 4) == [11, 12, 13, 14]


def test_aimd_holds_when_app_limited():
    # 2*4 = 8 < 10: the limit is not in use, so no increase (and no decrease)
    state = AIMD(initial_limit=10).start(max_limit=50)
    assert trace(state, [(0.1, 4, False)] * 3) == [10, 10, 10]
    # 2*5 = 10 >= 10: the boundary counts as in use
    assert state.on_sample(0.1, 5, False) == 11


def test_aimd_backs_off_by_the_ratio_floored_down_to_the_minimum():
    # floor(10*.9)=9, floor(8.1)=8, 7.2->7, 6.3->6, 5.4->5, 4.5->4, 3.6->3, 2.7->2, 1.8->1, 0.9->0
    # which the clamp lifts to min_limit=1
    state = AIMD(initial_limit=10).start(max_limit=10)
    assert trace(state, [(0.1, 10, True)] * 10) == [9, 8, 7, 6, 5, 4, 3, 2, 1, 1]
    assert state.drops == 10 and state.samples == 10


def test_aimd_ratio_one_half_stops_at_min_limit():
    # 20 -> 10 -> 5 -> floor(2.5)=2, clamped up to min_limit 3 -> floor(1.5)=1 -> 3
    state = AIMD(min_limit=3, initial_limit=20, backoff_ratio=0.5).start(max_limit=20)
    assert trace(state, [(0.1, 20, True)] * 4) == [10, 5, 3, 3]


def test_aimd_counts_an_rtt_strictly_above_the_timeout_as_a_drop():
    # rtt == timeout is not a drop (rtt > timeout is): 10 -> 11; then 5.000001 s: floor(9.9)=9
    state = AIMD(initial_limit=10, timeout_s=5.0).start(max_limit=20)
    assert state.on_sample(5.0, 10, False) == 11
    assert state.on_sample(5.000001, 10, False) == 9


def test_aimd_never_exceeds_the_maximum():
    # 3 -> 4 (max) -> 4 -> 4, then a drop: floor(3.6)=3, then back to 4
    state = AIMD(initial_limit=3).start(max_limit=4)
    assert trace(state, [(0.1, 4, False)] * 3 + [(0.1, 4, True), (0.1, 4, False)]) == [
        4, 4, 4, 3, 4,
    ]  # fmt: skip


def test_aimd_starts_at_concurrency_by_default():
    assert AIMD().start(max_limit=7).limit == 7


# -- Gradient2: long = mean of the first 10 rtts, then EMA with factor 2/(window+1);
#    gradient = max(.5, min(1, tolerance*long/rtt)); new = est*gradient + queue;
#    est = est*(1-smoothing) + new*smoothing, clamped; limit = int(est)


def test_gradient2_grows_by_smoothing_times_queue_size_at_gradient_one():
    # constant rtt: long == rtt, 1.5*long/rtt = 1.5 -> gradient 1:
    # est = est*.8 + (est + 4)*.2 = est + 0.8: 10.8, 11.6, 12.4, 13.2, 14.0
    state = Gradient2(initial_limit=10).start(max_limit=100)
    assert trace(state, [(0.05, 100, False)] * 5) == [10, 11, 12, 13, 14]
    assert state.estimate == pytest.approx(14.0, abs=1e-12)


def test_gradient2_long_rtt_is_a_plain_mean_during_warmup():
    # long = (1)/1, (1+2)/2, (1+2+3)/3: 1.0, 1.5, 2.0
    state = Gradient2(initial_limit=10).start(max_limit=100)
    longs = []
    for rtt in (1.0, 2.0, 3.0):
        state.on_sample(rtt, 100, False)
        longs.append(state.long_rtt_s)
    assert longs == [1.0, 1.5, 2.0]


def test_gradient2_app_limited_keeps_the_limit_but_learns_the_rtt():
    # inflight 4 < est/2 = 5: the limit stays 10, the long rtt still averages the samples
    state = Gradient2(initial_limit=10).start(max_limit=100)
    assert trace(state, [(1.0, 4, False), (3.0, 4, False)]) == [10, 10]
    assert state.long_rtt_s == 2.0 and state.estimate == 10.0


def warmed(**kwargs):
    """A Gradient2 state whose long rtt is 1.0 after 10 app-limited samples (est unchanged)."""
    state = Gradient2(**kwargs).start(max_limit=100)
    trace(state, [(1.0, 0, False)] * 10)
    assert state.long_rtt_s == 1.0
    return state


def test_gradient2_grows_at_a_gradient_of_0_8_with_queue_size_4():
    # The known pathology: with queue_size 4 the estimate's fixed point at gradient g is
    # 4 / (1 - g) = 20 at g = 0.8, so under a standing 25% latency excess it still grows.
    # long_window=3: EMA factor 2/4 = 0.5. rtts chosen so 1.5*long/rtt = 0.8 each time:
    #   rtt 15:  long = .5*1 + .5*15 = 8,     1.5*8/15 = 0.8
    #   rtt 120: long = .5*8 + .5*120 = 64,   1.5*64/120 = 0.8
    #   rtt 960: long = .5*64 + .5*960 = 512, 1.5*512/960 = 0.8
    # est' = est*.8 + (0.8*est + 4)*.2 = 0.96*est + 0.8: 10.4, 10.784, 11.15264
    state = warmed(initial_limit=10, long_window=3)
    assert trace(state, [(15.0, 100, False), (120.0, 100, False), (960.0, 100, False)]) == [
        10, 10, 11,
    ]  # fmt: skip
    assert state.gradient == pytest.approx(0.8, abs=1e-15)
    assert state.estimate == pytest.approx(11.15264, abs=1e-12)
    # ... and on toward 20, never past it: est_n = 20 - (20 - est_0) * 0.96**n
    # (1.5 * (long + rtt) / 2 = 0.8 * rtt  <=>  rtt = 15 * long keeps g = 0.8; 8**303 < 2**1024)
    for _ in range(300):
        state.on_sample(15 * state.long_rtt_s, 100, False)
    assert state.limit == 19 and 19.99 < state.estimate < 20.0


def test_gradient2_gradient_floors_at_one_half():
    # With factor .5 the gradient cannot fall below .75 (long > rtt/2), so: rtt_tolerance 1,
    # window 9 (factor 2/10 = 0.2): rtt 10 -> long = .8*1 + .2*10 = 2.8, 2.8/10 = 0.28 -> 0.5.
    # new = 10*.5 + 4 = 9, est = 10*.8 + 9*.2 = 9.8 -> limit 9
    state = warmed(initial_limit=10, long_window=9, rtt_tolerance=1.0)
    assert state.on_sample(10.0, 100, False) == 9
    assert state.gradient == 0.5
    assert state.estimate == pytest.approx(9.8, abs=1e-12)


def test_gradient2_cuts_a_long_rtt_above_twice_the_sample():
    # window 3: rtt 0.2 -> long = .5*1 + .5*.2 = 0.6; 0.6/0.2 = 3 > 2 -> long *= 0.95 = 0.57
    # (the gradient used the uncut 0.6: 1.5*.6/.2 = 4.5 -> 1, est 10 -> 10.8)
    state = warmed(initial_limit=10, long_window=3)
    assert state.on_sample(0.2, 100, False) == 10
    assert state.long_rtt_s == pytest.approx(0.57, abs=1e-15)
    assert state.estimate == pytest.approx(10.8, abs=1e-12)


def test_gradient2_clamps_to_min_and_max():
    # max 12: est 10.8, 11.6, 12.4 -> 12.0 (clamped), 12.0
    state = Gradient2(initial_limit=10).start(max_limit=12)
    assert trace(state, [(0.05, 100, False)] * 4) == [10, 11, 12, 12]
    assert state.estimate == 12.0
    # min 10: the 0.5-gradient step of the test above would give 9.8: clamped to 10
    state = warmed(min_limit=10, initial_limit=10, long_window=9, rtt_tolerance=1.0)
    assert state.on_sample(10.0, 100, False) == 10


def test_gradient2_ignores_drops_as_the_reference_does():
    # Gradient2Limit._update never reads didDrop: a drop with the same rtt gives the same limit
    a, b = (Gradient2(initial_limit=10).start(max_limit=100) for _ in range(2))
    assert trace(a, [(0.05, 100, True)] * 3) == trace(b, [(0.05, 100, False)] * 3)


def test_gradient2_zero_rtt_is_no_queueing_not_nan():
    # Java: 0.0/0.0 = NaN makes the limit 0. Here 0/0 counts as equal (gradient 1): +0.8
    state = Gradient2(initial_limit=10).start(max_limit=100)
    assert trace(state, [(0.0, 100, False)] * 3) == [10, 11, 12]
    assert state.gradient == 1.0
