"""The circuit breaker's conformance traces: hand-computed from Resilience4j's count-based rules.

The rules (DESIGN.md, fourth wave, and the issue's "rules where the references leave a
choice"): the failure-rate threshold is ``>=``; a slow call (lasting at least
``slow_call_s``) is judged against ``slow_call_rate`` separately; the window holds the
last ``window`` calls and decides only once ``min_calls`` are in it; open turns
half-open by itself after ``open_s``; half-open lets exactly ``half_open_calls`` probes
through and decides after all of them. Each test drives a :class:`BreakerState` with
hand-picked times and derives the expected state sequence in its comment.
"""

from __future__ import annotations

import pytest

from pipeline import CircuitBreaker


class Trace:
    """A breaker and the (state, time) changes it announced."""

    def __init__(self, **settings):
        self.changes = []
        self.state = CircuitBreaker(**settings).state(
            lambda state, at: self.changes.append((state, at))
        )

    def call(self, start, end, *, failed=False):
        """One call from ``start`` to ``end``; returns whether it was let through."""
        permit = self.state.acquire(start)
        if permit is None:
            return False
        self.state.record(permit, end, failed=failed, duration_s=end - start)
        return True

    def calls(self, outcomes, start=0.0):
        """Calls one after another, a second each, from ``start``: 'f' failed, 'o' ok."""
        for i, outcome in enumerate(outcomes):
            assert self.call(start + i, start + i + 1, failed=outcome == "f")


def test_opens_at_exactly_the_failure_rate():
    # window 4, min_calls 4, rate 0.5: o f o f -> 2/4 = 0.5 >= 0.5 at the 4th call's end, t=4.
    trace = Trace(window=4, min_calls=4, failure_rate=0.5)
    trace.calls("ofo")
    assert trace.changes == []  # 3 calls < min_calls: not judged
    trace.calls("f", start=3)
    assert trace.changes == [("open", 4.0)]


def test_the_window_holds_the_last_calls_only():
    # window 5, min_calls 5, rate 0.5. f f o o o -> 2/5; f -> last five f o o o f 2/5;
    # f -> o o o f f 2/5; f -> o o f f f 3/5 = 0.6 -> open at the 8th call's end, t=8.
    # Counting every call would open at the 6th (3 of 6 = 0.5).
    trace = Trace(window=5, min_calls=5, failure_rate=0.5)
    trace.calls("ffooof")
    assert trace.changes == []
    trace.calls("f", start=6)
    assert trace.changes == []
    trace.calls("f", start=7)
    assert trace.changes == [("open", 8.0)]


def test_min_calls_before_any_judgement():
    # window 10, min_calls 5: four failures (100%) are not judged; the fifth opens at t=5.
    trace = Trace(window=10, min_calls=5, failure_rate=0.5)
    trace.calls("ffff")
    assert trace.changes == [] and trace.state.state == "closed"
    trace.calls("f", start=4)
    assert trace.changes == [("open", 5.0)]


def test_rates_are_compared_exactly():
    # rate 0.28, window = min_calls = 25: 7 failures are 0.28 exactly -> open
    # (in floats 0.28 x 25 is 7.000000000000001); 6 failures are not.
    six = Trace(window=25, min_calls=25, failure_rate=0.28)
    six.calls("f" * 6 + "o" * 19)
    assert six.changes == []
    seven = Trace(window=25, min_calls=25, failure_rate=0.28)
    seven.calls("f" * 7 + "o" * 18)
    assert seven.changes == [("open", 25.0)]


def test_slow_calls_are_judged_separately_at_the_boundary():
    # slow_call_s 2, slow rate 0.5, failure rate 1 (failures alone never open here).
    # Calls, all ok, lasting 3, 1, 2, 1 s: slow are 3 and 2 (>= 2) -> 2/4 = 0.5 -> open when
    # the 4th ends. Their starts: 0, 3, 4, 6; ends 3, 4, 6, 7.
    trace = Trace(window=4, min_calls=4, failure_rate=1.0, slow_call_s=2, slow_call_rate=0.5)
    for start, end in [(0, 3), (3, 4), (4, 6), (6, 7)]:
        assert trace.call(start, end)
    assert trace.changes == [("open", 7)]


def test_a_call_just_under_slow_is_not_slow():
    # The same with 1.999 s for the third call: 1 slow of 4 < 0.5 -> stays closed.
    trace = Trace(window=4, min_calls=4, failure_rate=1.0, slow_call_s=2, slow_call_rate=0.5)
    for start, end in [(0, 3), (3, 4), (4, 5.999), (6, 7)]:
        assert trace.call(start, end)
    assert trace.changes == []


def test_a_slow_failure_counts_in_both_rates():
    # window 2: one slow failure and one fast success: failures 1/2 >= 0.5 opens (slow 1/2
    # would not reach 0.75). Failure rate 0.75 instead: slow 1/2 >= 0.5 opens it.
    a = Trace(window=2, min_calls=2, failure_rate=0.5, slow_call_s=1, slow_call_rate=0.75)
    assert a.call(0, 5, failed=True) and a.call(5, 5.5)
    assert a.changes == [("open", 5.5)]
    b = Trace(window=2, min_calls=2, failure_rate=0.75, slow_call_s=1, slow_call_rate=0.5)
    assert b.call(0, 5, failed=True) and b.call(5, 5.5)
    assert b.changes == [("open", 5.5)]


def test_open_refuses_until_open_s_then_half_opens_by_itself():
    # Opens at t=1 (window 1); open_s 10: refused at 1 and 10.999; at 11 half-open.
    # The change is dated 11.0 even when first noticed later (t=20).
    trace = Trace(window=1, min_calls=1, failure_rate=1.0, open_s=10, half_open_calls=1)
    trace.calls("f")
    assert trace.state.acquire(1.0) is None and trace.state.acquire(10.999) is None
    assert trace.state.refused == 2
    assert trace.state.state_at(10.999) == "open" and trace.state.state_at(11.0) == "half_open"
    assert trace.state.acquire(20.0) is not None
    assert trace.changes == [("open", 1.0), ("half_open", 11.0)]


def test_half_open_lets_exactly_its_probes_through_and_closes_when_all_succeed():
    # Open at 1, half-open at 11 with 3 probes: three permits, the fourth refused. The
    # verdict waits for all three: ok, ok -> still half-open; ok -> 0/3 -> closed at 14.
    # A closed breaker starts with an empty window: one failure after it is 1 call, fewer
    # than min_calls 2, so it is not judged.
    trace = Trace(window=4, min_calls=2, failure_rate=0.5, open_s=10, half_open_calls=3)
    trace.calls("ff")  # 2/2 -> open at t=2
    state = trace.state
    permits = [state.acquire(12.0) for _ in range(4)]
    assert permits[3] is None and None not in permits[:3]
    state.record(permits[0], 12.5, failed=False, duration_s=0.5)
    state.record(permits[1], 13.0, failed=False, duration_s=1.0)
    assert state.state == "half_open"
    state.record(permits[2], 14.0, failed=False, duration_s=2.0)
    assert trace.changes == [("open", 2.0), ("half_open", 12.0), ("closed", 14.0)]
    assert trace.call(14, 15, failed=True)  # 1 call < min_calls 2: the fresh window waits
    assert state.state == "closed"


def test_half_open_decides_after_all_probes_even_when_the_first_fails():
    # Probes f, o, o with failure rate 0.3: after the first failure it stays half-open
    # (1 of 3 decided); after the third, 1/3 >= 0.3 -> open again at 15 until 25.
    trace = Trace(window=1, min_calls=1, failure_rate=0.3, open_s=10, half_open_calls=3)
    trace.calls("f")  # open at 1, half-open at 11
    state = trace.state
    p = [state.acquire(11.0) for _ in range(3)]
    state.record(p[0], 12.0, failed=True, duration_s=1.0)
    assert state.state == "half_open"
    state.record(p[1], 13.0, failed=False, duration_s=2.0)
    state.record(p[2], 15.0, failed=False, duration_s=4.0)
    assert trace.changes == [("open", 1.0), ("half_open", 11.0), ("open", 15.0)]
    assert state.open_until_s == 25.0


def test_half_open_with_one_failure_in_three_closes_below_the_rate():
    # The same probes with failure rate 0.5: 1/3 < 0.5 -> closed at 15.
    trace = Trace(window=1, min_calls=1, failure_rate=0.5, open_s=10, half_open_calls=3)
    trace.calls("f")
    state = trace.state
    p = [state.acquire(11.0) for _ in range(3)]
    for permit, end, failed in zip(p, (12.0, 13.0, 15.0), (True, False, False), strict=True):
        state.record(permit, end, failed=failed, duration_s=end - 11.0)
    assert trace.changes[-1] == ("closed", 15.0)


def test_open_time_counts_open_spells_only():
    # Open 4..14 (10 s), half-open 14..15 (a failing probe), open 15..25, half-open 25,
    # a good probe closes it at 26. Open time at 20: 10 + 5 = 15; at 30: 10 + 10 = 20.
    trace = Trace(window=4, min_calls=4, failure_rate=0.5, open_s=10, half_open_calls=1)
    trace.calls("ffff")  # open at 4
    assert trace.call(14, 15, failed=True)  # the probe: open again at 15
    assert trace.state.open_time_s(20.0) == 15.0
    assert trace.call(25, 26)  # half-open at 25, the probe closes it at 26
    assert trace.state.open_time_s(30.0) == 20.0
    assert [s for s, _ in trace.changes] == ["open", "half_open", "open", "half_open", "closed"]
    assert [t for _, t in trace.changes] == [4.0, 14.0, 15.0, 25.0, 26.0]


def test_open_time_is_open_s_per_spell_at_any_clock_reading():
    # A loop clock far from zero: opened + open_s - opened can round below open_s (here
    # 1000.1 + 0.02 - 1000.1 = 0.01999999999998181); a spell lasts open_s exactly.
    trace = Trace(window=1, min_calls=1, failure_rate=0.5, open_s=0.02, half_open_calls=1)
    trace.calls("f", start=999.1)  # open at 1000.1
    assert trace.state.open_time_s(1000.1 + 0.01) == pytest.approx(0.01, abs=1e-9)
    assert trace.state.open_time_s(1001.0) == 0.02
    assert trace.call(1001.0, 1001.5, failed=True)  # half-open at 1000.12, open again
    assert trace.state.open_time_s(1100.0) == 0.02 + 0.02
    assert trace.call(1100.0, 1100.5)  # the probe closes it
    assert trace.state.open_time_s(1200.0) == 0.02 + 0.02


def test_an_outcome_from_an_earlier_state_is_not_recorded():
    # A call let through while closed (t=0) ends after the breaker opened (at 2, by two
    # others): it is not counted anywhere, and in half-open it is no probe.
    trace = Trace(window=2, min_calls=2, failure_rate=0.5, open_s=10, half_open_calls=1)
    state = trace.state
    early = state.acquire(0.0)
    trace.calls("ff")  # open at 2
    state.record(early, 3.0, failed=False, duration_s=3.0)
    assert state.state == "open"
    probe = state.acquire(12.0)  # half-open at 12
    state.record(early, 12.5, failed=True, duration_s=12.5)  # still the old spell: ignored
    assert state.state == "half_open"
    state.record(probe, 13.0, failed=False, duration_s=1.0)
    assert trace.changes == [("open", 2.0), ("half_open", 12.0), ("closed", 13.0)]


def test_a_released_probe_frees_its_slot():
    # Two probes; one never reaches the handler and is given back: a third may go.
    trace = Trace(window=1, min_calls=1, failure_rate=1.0, open_s=1, half_open_calls=2)
    trace.calls("f")  # open at 1, half-open at 2
    state = trace.state
    a, b = state.acquire(2.0), state.acquire(2.0)
    assert state.acquire(2.0) is None
    state.release(b)
    c = state.acquire(2.5)
    assert c is not None and state.refused == 1
    state.record(a, 3.0, failed=False, duration_s=1.0)
    state.record(c, 3.5, failed=False, duration_s=1.0)
    assert trace.changes[-1] == ("closed", 3.5)


def test_refusals_count_once_when_asked_again():
    trace = Trace(window=1, min_calls=1, failure_rate=1.0, open_s=10)
    trace.calls("f")
    state = trace.state
    assert state.acquire(2.0) is None and state.acquire(3.0, count=False) is None
    assert state.refused == 1


def test_window_of_one():
    # window 1, min_calls 1, rate 1: an ok call stays closed; a failure opens at once.
    trace = Trace(window=1, min_calls=1, failure_rate=1.0)
    trace.calls("ooo")
    assert trace.changes == []
    trace.calls("f", start=3)
    assert trace.changes == [("open", 4.0)]


def test_resilience4j_defaults_are_the_documented_ones():
    breaker = CircuitBreaker()
    assert (breaker.failure_rate, breaker.window, breaker.min_calls) == (0.5, 100, 20)
    assert (breaker.open_s, breaker.half_open_calls, breaker.slow_call_s) == (30.0, 5, None)
    # 20 calls with 10 failures: judged (min_calls) and at the rate -> open.
    trace = Trace()
    trace.calls("fo" * 9 + "f")
    assert trace.changes == []
    trace.calls("o", start=19)
    assert trace.changes == [("open", 20.0)]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"failure_rate": 0}, "failure_rate must be > 0"),
        ({"failure_rate": 1.5}, "failure_rate must be <= 1"),
        ({"failure_rate": -0.5}, "failure_rate must be > 0"),
        ({"failure_rate": float("nan")}, "failure_rate must be finite"),
        ({"slow_call_rate": 2}, "slow_call_rate must be <= 1"),
        ({"window": 0}, "window must be >= 1"),
        ({"window": 10**9}, "window must be <= 10,000,000"),
        ({"min_calls": 0}, "min_calls must be >= 1"),
        ({"window": 10, "min_calls": 11}, "min_calls must be <= window"),
        ({"open_s": 0}, "open_s must be > 0"),
        ({"open_s": float("inf")}, "open_s must be finite"),
        ({"half_open_calls": 0}, "half_open_calls must be >= 1"),
        ({"slow_call_s": 0}, "slow_call_s must be > 0"),
        ({"slow_call_s": float("-inf")}, "slow_call_s must be finite"),
    ],
)
def test_bad_settings_are_one_value_error_naming_them(settings, message):
    with pytest.raises(ValueError, match=f"^{message}") as raised:
        CircuitBreaker(**settings)
    assert "\n" not in str(raised.value) and "got" in str(raised.value)


@pytest.mark.parametrize(
    ("settings", "name"),
    [({"window": True}, "window"), ({"window": 10.0}, "window"), ({"open_s": "30"}, "open_s")],
)
def test_wrong_types_are_a_type_error(settings, name):
    with pytest.raises(TypeError, match=f"^{name} must be"):
        CircuitBreaker(**settings)


def test_numpy_and_decimal_settings_are_stored_as_plain_numbers():
    from decimal import Decimal

    import numpy as np

    breaker = CircuitBreaker(
        failure_rate=Decimal("0.25"),
        window=np.int64(8),
        min_calls=np.int32(4),
        open_s=np.float64(2),
    )
    assert (breaker.failure_rate, breaker.window, breaker.min_calls, breaker.open_s) == (
        0.25,
        8,
        4,
        2.0,
    )
    assert type(breaker.window) is int and type(breaker.open_s) is float
