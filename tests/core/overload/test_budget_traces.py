"""The retry budget's conformance traces: hand-computed from Finagle's rule, driven directly.

The rule (DESIGN.md, fourth wave): at each retry at time t, counting it, the retries in
``(t - window_s, t]`` are at most ``ratio`` x the first attempts in that window plus
``min_retries_per_s`` x ``window_s``. Each test drives a :class:`BudgetState` with
hand-picked times and derives the expected answers in its comment.
"""

from __future__ import annotations

import pytest

from pipeline import RetryBudget


def answers(budget, steps):
    """Drive ``budget``: ("first", t) counts a first attempt, ("retry", t) asks; the answers."""
    state = budget.state()
    out = []
    for kind, t in steps:
        if kind == "first":
            state.first_attempt(t)
        else:
            out.append(state.try_retry(t))
    return out, state


def test_floor_only_at_the_window_edges():
    # ratio 0, floor 1/s x 3 s = 3 retries per window, no first attempts.
    # t=0, 1, 2: 1, 2, 3 retries in the window -> allowed. t=2.5: (−0.5, 2.5] holds 0, 1, 2,
    # a 4th -> denied. t=3: (0, 3] drops t=0 (0 <= 3 - 3), holds 1, 2 -> a 3rd allowed.
    # t=3 again: 1, 2, 3 + 1 = 4 -> denied. t=4: (1, 4] holds 2, 3 -> allowed.
    got, state = answers(
        RetryBudget(ratio=0, min_retries_per_s=1, window_s=3),
        [("retry", t) for t in (0, 1, 2, 2.5, 3, 3, 4)],
    )
    assert got == [True, True, True, False, True, False, True]
    assert (state.allowed, state.denied) == (5, 2)


def test_exact_ratio_boundary_is_allowed_and_one_more_is_not():
    # ratio 0.1, no floor, 30 first attempts at t=0: allowance 0.1 x 30 = 3 exactly.
    # Retries 1..3 at t=1 fit (3 <= 3), the 4th does not.
    got, _ = answers(
        RetryBudget(ratio=0.1, min_retries_per_s=0, window_s=10),
        [("first", 0.0)] * 30 + [("retry", 1.0)] * 4,
    )
    assert got == [True, True, True, False]


def test_the_boundary_does_not_depend_on_float_rounding():
    # ratio 0.57, 100 first attempts: the allowance is 57 exactly (in floats 0.57 * 100 is
    # 56.99999999999999, which would deny the 57th). Retries 1..57 fit, the 58th does not.
    got, _ = answers(
        RetryBudget(ratio=0.57, min_retries_per_s=0, window_s=10),
        [("first", 0.0)] * 100 + [("retry", 0.5)] * 58,
    )
    assert got == [True] * 57 + [False]


def test_first_attempts_leave_the_window_and_retries_stay_counted():
    # ratio 0.5, no floor, window 10. 4 first attempts at t=0: allowance 2.
    # t=1 -> 1 <= 2 yes; t=2 -> 2 <= 2 yes; t=3 -> 3 > 2 no.
    # t=10: (0, 10] drops the first attempts at 0; retries 1, 2 remain: 3 > 0 no.
    # 6 first attempts at t=11: allowance 3; (1, 11] holds the retry at 2 (1 <= 1 drops):
    # t=11 -> 2 <= 3 yes; again -> 3 <= 3 yes; again -> 4 > 3 no.
    got, state = answers(
        RetryBudget(ratio=0.5, min_retries_per_s=0, window_s=10),
        [("first", 0.0)] * 4
        + [("retry", 1.0), ("retry", 2.0), ("retry", 3.0), ("retry", 10.0)]
        + [("first", 11.0)] * 6
        + [("retry", 11.0)] * 3,
    )
    assert got == [True, True, False, False, True, True, False]
    assert state.window(11.0) == (6, 3)


def test_ratio_and_floor_add():
    # ratio 0.2 and a floor of 0.1/s x 10 s = 1: 5 first attempts give 0.2 x 5 + 1 = 2.
    got, _ = answers(
        RetryBudget(ratio=0.2, min_retries_per_s=0.1, window_s=10),
        [("first", 0.0)] * 5 + [("retry", 0.0)] * 3,
    )
    assert got == [True, True, False]


def test_a_denied_retry_is_not_counted():
    # floor 0.5/s x 2 s = 1 retry per window. t=0 yes; t=0.5 and t=1: (.., t] holds the
    # one at 0 -> no. t=2: (0, 2] drops it -> yes. Were the denials at 0.5 and 1 counted,
    # t=2 would see them and say no.
    got, state = answers(
        RetryBudget(ratio=0, min_retries_per_s=0.5, window_s=2),
        [("retry", t) for t in (0.0, 0.5, 1.0, 2.0)],
    )
    assert got == [True, False, False, True]
    assert state.window(2.0) == (0, 1)


def test_finagles_defaults():
    # 20% plus 10/s over 10 s: 1000 first attempts give 200 + 100 = 300 retries.
    got, _ = answers(RetryBudget(), [("first", 0.0)] * 1000 + [("retry", 0.0)] * 301)
    assert got == [True] * 300 + [False]


def test_memory_stays_within_the_window():
    # A first attempt every 0.1 s for 1000 s, window 10 s: at most 101 held (rate x window),
    # not 10,000; retries held stay within what the window allows.
    state = RetryBudget(ratio=0.2, min_retries_per_s=0, window_s=10).state()
    for i in range(10_000):
        t = i / 10
        state.first_attempt(t)
        state.try_retry(t)
        firsts, retries = state.window(t)
        assert firsts <= 101 and retries <= 0.2 * firsts
    assert state.allowed > 1000  # it did keep retrying, at its share


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("ratio", -0.1, "ratio must be >= 0"),
        ("ratio", float("nan"), "ratio must be finite"),
        ("ratio", float("inf"), "ratio must be finite"),
        ("min_retries_per_s", -1, "min_retries_per_s must be >= 0"),
        ("window_s", 0, "window_s must be > 0"),
        ("window_s", -5.0, "window_s must be > 0"),
        ("window_s", 1e12, "window_s must be <= "),
        ("window_s", 10**400, "window_s must be <= "),
    ],
)
def test_bad_settings_are_one_value_error_naming_them(field, value, message):
    with pytest.raises(ValueError, match=f"^{message}") as raised:
        RetryBudget(**{field: value})
    assert "\n" not in str(raised.value) and "got" in str(raised.value)


@pytest.mark.parametrize("value", [True, "0.2", None, [0.2]])
def test_wrong_types_are_a_type_error_naming_the_field(value):
    with pytest.raises(TypeError, match=r"^ratio must be a real number"):
        RetryBudget(ratio=value)


def test_numpy_decimal_and_fraction_numbers_are_taken_as_floats():
    from decimal import Decimal
    from fractions import Fraction

    import numpy as np

    budget = RetryBudget(
        ratio=np.float32(0.25), min_retries_per_s=Decimal("2"), window_s=Fraction(5)
    )
    assert (budget.ratio, budget.min_retries_per_s, budget.window_s) == (0.25, 2.0, 5.0)
    assert all(type(v) is float for v in (budget.ratio, budget.min_retries_per_s, budget.window_s))
    with pytest.raises(ValueError, match="ratio must be finite"):
        RetryBudget(ratio=Decimal("NaN"))
    with pytest.raises(ValueError, match="window_s must be finite"):
        RetryBudget(window_s=np.float64("inf"))
