"""Arrival processes: rates, thinning, MMPP bursts, trace files and the CLI spelling."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pipeline.sim.stats.intervals import batch_means_ci
from pipeline.sim.workloads import arrivals
from pipeline.sim.workloads.arrivals import (
    DailyCurve,
    Deterministic,
    IntervalCounts,
    MarkovModulated,
    OnOff,
    PiecewiseLinear,
    Poisson,
    TimeVarying,
    Trace,
    daily_curve,
    parse_arrivals,
)


def rng(seed: int = 7) -> np.random.Generator:
    return np.random.default_rng(seed)


PROCESSES = [
    Poisson(3.2),
    Deterministic(2.0),
    OnOff(rate_on=10.0, rate_off=0.0, mean_on_s=1.0, mean_off_s=4.0),
    MarkovModulated((1.0, 5.0, 0.0), (2.0, 1.0, 3.0)),
    TimeVarying.from_profile([0.0, 100.0, 200.0], [1.0, 5.0, 1.0]),
    TimeVarying.from_counts([30, 120, 60, 0, 90], interval_s=60),
    daily_curve(1.0, 8.0, 9.5),
    Trace([0.0, 0.5, 0.5, 2.0]),
]


@pytest.mark.parametrize("process", PROCESSES, ids=lambda p: type(p).__name__)
def test_times_are_sorted_absolute_and_respect_n_or_duration(process):
    by_n = process.times(rng(), n=4)
    assert by_n.shape == (4,) and by_n.dtype == np.float64
    assert (np.diff(by_n) >= 0).all() and by_n[0] >= 0
    by_t = process.times(rng(), duration_s=1000.0)
    assert (np.diff(by_t) >= 0).all() and (by_t >= 0).all() and (by_t <= 1000.0).all()
    assert process.times(rng(), duration_s=0.0).size in (0, 1)  # a trace may arrive at 0
    assert process.times(rng(), n=0).shape == (0,)


@pytest.mark.parametrize("process", PROCESSES, ids=lambda p: type(p).__name__)
def test_repr_rebuilds_an_equal_object(process):
    again = eval(repr(process), vars(arrivals))
    assert again == process and repr(again) == repr(process)
    assert np.array_equal(again.times(rng(3), n=4), process.times(rng(3), n=4))


def test_times_needs_exactly_one_of_n_and_duration():
    with pytest.raises(ValueError, match="exactly one of n"):
        Poisson(1).times(rng())
    with pytest.raises(ValueError, match="exactly one of n"):
        Poisson(1).times(rng(), n=3, duration_s=1.0)
    with pytest.raises(ValueError, match="n must be >= 0"):
        Poisson(1).times(rng(), n=-1)
    with pytest.raises(ValueError, match="duration_s must be >= 0"):
        Poisson(1).times(rng(), duration_s=-1)
    with pytest.raises(TypeError, match=r"numpy\.random\.Generator"):
        Poisson(1).times(None, n=3)  # type: ignore[arg-type]


def test_poisson_count_and_gaps_match_the_rate():
    lam, duration = 3.2, 50_000.0
    count = Poisson(lam).times(rng(), duration_s=duration).size
    # N(T) ~ Poisson(lam T): 4 standard deviations is sqrt(lam T) * 4.
    assert abs(count - lam * duration) < 4 * math.sqrt(lam * duration)
    n = 100_000
    gaps = np.diff(Poisson(lam).times(rng(), n=n), prepend=0.0)
    # gaps are Exponential(1/lam): mean 1/lam, SE (1/lam)/sqrt(n); cv 1.
    assert abs(gaps.mean() - 1 / lam) < 4 / lam / math.sqrt(n)
    # The sample cv s / mean, by the delta method, has variance
    # cv^2 [(mu4 - s^4) / (4 s^4) + s^2 / mu^2 - mu3 / (s^2 mu)] / n; for an exponential
    # (mean 1: s^2 = 1, mu3 = 2, mu4 = 9) that is (8/4 + 1 - 2) / n = 1 / n: SE 1 / sqrt(n).
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=4 / math.sqrt(n))


def test_deterministic_is_evenly_spaced():
    d = Deterministic(4.0)
    assert d.times(rng(), n=3).tolist() == [0.25, 0.5, 0.75]
    assert d.times(rng(), duration_s=1.0).tolist() == [0.25, 0.5, 0.75, 1.0]
    assert Deterministic(3.0).times(rng(), duration_s=1.0).size == 3  # 1/3 * 3 rounds to 1.0


def test_onoff_long_run_rate_and_burstiness():
    p = OnOff(rate_on=10.0, rate_off=0.0, mean_on_s=1.0, mean_off_s=4.0)
    assert p.rate == pytest.approx(2.0)
    duration = 50_000.0
    t = p.times(rng(), duration_s=duration)
    # Var N(T) ~ IDC * rate * T for a 2-state MMPP, with the asymptotic index of
    # dispersion IDC = 1 + 2 (l1 - l2)^2 r1 r2 / ((r1 + r2)^2 (l1 r2 + l2 r1)),
    # r_i the rates of leaving each state (Fischer & Meier-Hellstern 1993): 13.8 here.
    l1, l2, r1, r2 = 10.0, 0.0, 1.0, 0.25
    idc = 1 + 2 * (l1 - l2) ** 2 * r1 * r2 / ((r1 + r2) ** 2 * (l1 * r2 + l2 * r1))
    assert abs(t.size - p.rate * duration) < 4 * math.sqrt(idc * p.rate * duration)
    # bursty: counts per second are over-dispersed (Poisson would give var/mean = 1)
    per_s = np.bincount(t.astype(int), minlength=int(duration))
    assert per_s.var() / per_s.mean() > 3
    # off periods have no arrivals: long silent gaps are common (mean off 4 s)
    assert (np.diff(t) > 8.0).mean() > 0.01


def test_markov_modulated_rate_by_batch_means():
    p = MarkovModulated((1.0, 5.0, 0.0), (2.0, 1.0, 3.0))
    assert p.rate == pytest.approx((2 + 5) / 6)
    t = p.times(rng(), duration_s=60_000.0)
    # counts per 300 s window (50 cycles) are nearly independent; batch means
    # give a 99.99% interval for the rate.
    counts = np.bincount((t // 300).astype(int), minlength=200)[:200] / 300.0
    ci = batch_means_ci(counts, n_batches=20, level=0.9999)
    assert ci.contains(p.rate)
    # n mode returns exactly n arrivals, its last one near n / rate
    x = p.times(rng(), n=50_000)
    assert x.size == 50_000 and x[-1] == pytest.approx(50_000 / p.rate, rel=0.05)


def test_single_state_mmpp_is_poisson():
    t = MarkovModulated((2.0,), (5.0,)).times(rng(), duration_s=20_000.0)
    assert abs(t.size - 40_000) < 4 * math.sqrt(40_000)


def test_thinning_reproduces_the_integrated_rate():
    p = TimeVarying.from_profile([0.0, 600.0, 1200.0, 1800.0], [0.5, 20.0, 2.0, 2.0])
    assert p.integrated_rate(0, 600) == pytest.approx(0.5 * (0.5 + 20.0) * 600)
    edges = np.linspace(0, 1800, 10)
    t = p.times(rng(), duration_s=1800.0)
    counts = np.histogram(t, bins=edges)[0]
    for (a, b), count in zip(itertools.pairwise(edges), counts, strict=True):
        expected = p.integrated_rate(a, b)
        # count in a window ~ Poisson(integral of the rate): 4.5 sd each (9 windows)
        assert abs(count - expected) < 4.5 * math.sqrt(expected), (a, b, count, expected)


def test_thinning_n_mode_matches_expected_count():
    p = TimeVarying(lambda t: 2.0 + np.sin(t / 10.0), max_rate=3.0, period_s=20 * math.pi)
    assert p.rate == pytest.approx(2.0, rel=1e-6)
    x = p.times(rng(), n=20_000)
    expected = p.integrated_rate(0.0, float(x[-1]))
    assert abs(x.size - expected) < 4 * math.sqrt(expected)


def test_daily_curve_shape_and_integral():
    curve = DailyCurve(1.0, 8.0, peak_hour=9.5, width_h=2.0)
    assert curve(np.array([9.5 * 3600.0]))[0] == pytest.approx(8.0)
    assert curve(np.array([21.5 * 3600.0]))[0] == pytest.approx(1.0, abs=1e-6)
    # periodic: same rate a day later
    assert curve(np.array([3600.0]))[0] == pytest.approx(curve(np.array([90_000.0]))[0])
    p = daily_curve(1.0, 8.0, 9.5)
    # integral of base + truncated Gaussian bump over one day (erf closed form)
    bump_h = 2.0 * math.sqrt(2 * math.pi) * math.erf(12.0 / (2.0 * math.sqrt(2)))
    per_day = 3600.0 * (24.0 * 1.0 + 7.0 * bump_h)
    assert p.integrated_rate(0.0, 86_400.0) == pytest.approx(per_day, rel=1e-9)
    assert p.rate == pytest.approx(per_day / 86_400.0, rel=1e-9)
    t = p.times(rng(), duration_s=86_400.0)
    assert abs(t.size - per_day) < 4 * math.sqrt(per_day)
    morning = ((t > 8 * 3600) & (t < 11 * 3600)).sum()
    night = ((t > 0) & (t < 3 * 3600)).sum()
    assert morning > 4 * night


def test_time_varying_validation():
    with pytest.raises(ValueError, match=r"rate_fn must stay in \[0, max_rate=2.0\].*at t="):
        TimeVarying(lambda t: 3.0 + 0 * t, max_rate=2.0).times(rng(), duration_s=10.0)
    with pytest.raises(ValueError, match="vectorised"):
        TimeVarying(lambda t: 1.0, max_rate=2.0).times(rng(), duration_s=10.0)
    with pytest.raises(ValueError, match="give period_s"):
        _ = TimeVarying(lambda t: 1.0 + 0 * t, max_rate=2.0).rate
    with pytest.raises(TypeError, match="rate_fn must be callable"):
        TimeVarying(3.0, max_rate=2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="strictly increasing"):
        PiecewiseLinear((0.0, 0.0), (1.0, 1.0))
    with pytest.raises(ValueError, match="peak_rate must be >= base_rate"):
        daily_curve(5.0, 1.0)
    with pytest.raises(ValueError, match="stayed 0"):
        TimeVarying.from_profile([0.0, 1.0], [1.0, 0.0]).times(rng(), n=10_000)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Poisson(0), r"rate must be > 0 \(arrivals per second\), got 0"),
        (lambda: Poisson(-1), r"rate must be > 0 \(arrivals per second\), got -1"),
        (lambda: Deterministic(math.nan), "rate must be finite"),
        (lambda: OnOff(rate_on=0, rate_off=0, mean_on_s=1, mean_off_s=1), "rate_on or rate_off"),
        (lambda: OnOff(rate_on=1, rate_off=0, mean_on_s=0, mean_off_s=1), "mean_on_s must be > 0"),
        (lambda: MarkovModulated((1.0, 2.0), (1.0,)), "equal length"),
        (lambda: MarkovModulated((1.0, -2.0), (1.0, 1.0)), r"rates\[1\] must be >= 0"),
        (lambda: Trace([]), "non-empty"),
        (lambda: Trace([1.0, 0.5]), r"non-decreasing.*times\[0\]=1.0 then times\[1\]=0.5"),
        (lambda: Trace([0.0, -1.0]), r"times\[1\]=-1.0"),
    ],
)
def test_bad_parameters_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_onoff_is_keyword_only():
    with pytest.raises(TypeError):
        OnOff(10.0, 0.0, 1.0, 4.0)  # type: ignore[misc]


def test_trace_replays_exactly(tmp_path):
    path = tmp_path / "arrivals.csv"
    path.write_text("arrival_s,service_s\n0.0,1\n0.25,1\n0.25,2\n3.5,1\n")
    trace = Trace.from_csv(path)
    assert len(trace) == 4 and trace.rate == pytest.approx(4 / 3.5)
    assert trace.times(rng(), n=3).tolist() == [0.0, 0.25, 0.25]
    assert trace.times(rng(), duration_s=0.25).tolist() == [0.0, 0.25, 0.25]
    assert repr(trace) == f"Trace.from_csv({str(path)!r})"
    with pytest.raises(ValueError, match=r"n must be <= 4 \(arrivals in the trace\), got 5"):
        trace.times(rng(), n=5)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("arrival_s\n0.1\nabc\n", r"row 2: arrival_s must be a number of seconds, got 'abc'"),
        # blank lines are skipped and not counted as rows
        ("arrival_s\n0.1\n\n0.2\n-1\n", r"row 3: arrival_s must be finite and >= 0 seconds"),
        ("arrival_s\n0.1\nnan\n", r"row 2: arrival_s must be finite"),
        ("arrival_s\n0.1\n0.5\n0.4\n", r"row 3: arrival_s must be >= the previous row's \(0.5\)"),
        ("arrival_s,x\n0.1,1\n,2\n", r"row 2: arrival_s is missing"),
        ("service_s\n0.1\n", r"needs the column\(s\) arrival_s, found \['service_s'\]"),
        ("arrival_s\n", "no data rows"),
        ("", r"needs the column\(s\) arrival_s, found no header"),
    ],
)
def test_trace_csv_errors_name_the_row(tmp_path, body, match):
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(ValueError, match=match) as info:
        Trace.from_csv(path)
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message


def test_trace_csv_errors_match_load_trace(tmp_path):
    # one reader: Trace.from_csv and load_trace word a bad arrival_s identically
    from pipeline.sim.workloads.traces.replay import load_trace

    path = tmp_path / "bad.csv"
    path.write_text("arrival_s,service_s\n0.1,1\n0.5,1\n0.4,1\n")
    with pytest.raises(ValueError) as from_csv:
        Trace.from_csv(path)
    with pytest.raises(ValueError) as loaded:
        load_trace(path)
    assert str(from_csv.value) == str(loaded.value)
    assert str(from_csv.value) == (
        f"{path} row 3: arrival_s must be >= the previous row's (0.5), got 0.4"
    )


def test_trace_csv_skips_a_byte_order_mark(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes("\ufeffarrival_s\n0.5\n1.5\n".encode())
    assert Trace.from_csv(path).arrival_times.tolist() == [0.5, 1.5]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("poisson:rate=3.2", Poisson(3.2)),
        ("constant:rate=2", Deterministic(2.0)),
        (
            "onoff:rate_on=10,rate_off=0,mean_on_s=1,mean_off_s=4",
            OnOff(rate_on=10, rate_off=0, mean_on_s=1, mean_off_s=4),
        ),
    ],
)
def test_parse_arrivals(spec, expected):
    assert parse_arrivals(spec) == expected


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("weibull:rate=1", r"unknown arrivals 'weibull'.*allowed: constant, counts, onoff"),
        ("poisson:lambda=1", r"unknown key 'lambda' for poisson.*allowed: rate"),
        ("poisson", r"missing rate for poisson"),
        ("poisson:rate=fast", r"bad number 'fast' for rate"),
        ("poisson:rate=-2", r"invalid arrivals spec 'poisson:rate=-2': rate must be > 0"),
        ("onoff:rate_on=1,rate_off=0", r"missing mean_on_s, mean_off_s for onoff"),
    ],
)
def test_parse_arrivals_errors(spec, match):
    with pytest.raises(ValueError, match=match):
        parse_arrivals(spec)


# -- arrivals from counts per interval --------------------------------------------------

COUNTS = [30, 120, 60, 0, 90]  # arrivals in five one-minute intervals


def test_counts_give_a_piecewise_constant_rate_that_repeats():
    p = TimeVarying.from_counts(COUNTS, interval_s=60)
    profile = p.rate_fn
    assert isinstance(profile, IntervalCounts) and profile.period_s == 300.0
    assert p.max_rate == 2.0 and p.rate == pytest.approx(sum(COUNTS) / 300, rel=1e-12)
    t = np.array([0.0, 59.999, 60.0, 179.0, 240.0, 299.999, 300.0, 361.0, 300.0 * 10**6 + 61])
    assert profile(t).tolist() == [0.5, 0.5, 2.0, 1.0, 1.5, 1.5, 0.5, 2.0, 2.0]
    # the expected arrivals in each interval are exactly its count, in any period
    for period in (0, 7, 10**6):
        for i, count in enumerate(COUNTS):
            start = period * 300.0 + i * 60.0
            assert p.integrated_rate(start, start + 60.0) == pytest.approx(count, abs=1e-6)
    assert p.integrated_rate(30.0, 90.0) == pytest.approx(15 + 60)
    assert p.integrated_rate(0.0, 3000.0) == pytest.approx(10 * sum(COUNTS))


def _poisson_band(mean: float, level: float) -> float:
    """Half-width of a two-sided normal-approximation interval for a Poisson(mean) count."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(1 - (1 - level) / 2) * math.sqrt(mean)


@pytest.mark.parametrize("mode", ["duration", "n"])
def test_simulated_counts_per_interval_match_the_counts(mode):
    # Over `periods` repetitions the arrivals in interval i (pooled) are Poisson with
    # mean periods * COUNTS[i], independent across intervals. Each is checked at the
    # 99.9% level, Bonferroni over the 4 non-zero intervals (so 99.975% each); an
    # interval with count 0 must see no arrival at all.
    p = TimeVarying.from_counts(COUNTS, interval_s=60)
    periods = 400
    if mode == "duration":
        t = p.times(rng(11), duration_s=periods * 300.0)
    else:
        # the first n arrivals: on [0, T] with T before the n-th arrival, still Poisson
        t = p.times(rng(11), n=int(1.25 * periods * sum(COUNTS)))
        assert t[-1] > periods * 300.0
        t = t[t < periods * 300.0]
    observed = np.bincount(((t % 300.0) // 60.0).astype(int), minlength=5)
    for i, count in enumerate(COUNTS):
        expected = periods * count
        if count == 0:
            assert observed[i] == 0
            continue
        assert abs(observed[i] - expected) <= _poisson_band(expected, 1 - 0.001 / 4), i


def test_counts_accept_fractions_and_numpy():
    p = TimeVarying.from_counts(np.array([0.5, 2.5]), interval_s=10.0)
    assert p.rate_fn.counts == (0.5, 2.5) and p.rate == pytest.approx(3.0 / 20)
    assert TimeVarying.from_counts((c for c in (1, 2)), interval_s=1).rate_fn.counts == (1.0, 2.0)


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: TimeVarying.from_counts([], interval_s=60), ValueError, "must not be empty"),
        (lambda: TimeVarying.from_counts([0, 0], interval_s=60), ValueError, "must not all be 0"),
        (lambda: TimeVarying.from_counts([1, -1], interval_s=60), ValueError, r"counts\[1\] must"),
        (lambda: TimeVarying.from_counts([1, math.nan], interval_s=60), ValueError, "finite"),
        (lambda: TimeVarying.from_counts([math.inf], interval_s=60), ValueError, "finite"),
        (lambda: TimeVarying.from_counts(["1"], interval_s=60), TypeError, r"counts\[0\]"),
        (lambda: TimeVarying.from_counts("12", interval_s=60), TypeError, "sequence of numbers"),
        (lambda: TimeVarying.from_counts(5, interval_s=60), TypeError, "sequence of numbers"),
        (lambda: TimeVarying.from_counts([1], interval_s=0), ValueError, "interval_s must be > 0"),
        (lambda: TimeVarying.from_counts([1], interval_s=math.inf), ValueError, "interval_s"),
        (lambda: TimeVarying.from_counts([1], interval_s=-60), ValueError, "interval_s"),
        (
            lambda: TimeVarying.from_counts([1, 1], interval_s=1e308),
            ValueError,
            "interval_s \\* len\\(counts\\) must be a finite number",
        ),
        (lambda: IntervalCounts(5, 60.0), TypeError, "sequence of numbers"),
    ],
)
def test_bad_counts_are_named(make, exc, match):
    with pytest.raises(exc, match=match) as info:
        make()
    assert "\n" not in str(info.value)


def test_counts_from_a_csv_column(tmp_path):
    path = tmp_path / "counts.csv"
    path.write_text("minute,count\n09:00,30\n09:01,120\n09:02,60\n09:03,0\n09:04,90\n")
    p = TimeVarying.from_counts_csv(path, interval_s=60, column="count")
    assert p == TimeVarying.from_counts(COUNTS, interval_s=60)
    assert parse_arrivals(f"counts:file={path},column=count,interval_s=60") == p
    (tmp_path / "one.csv").write_text("n\n3\n4\n")
    assert parse_arrivals(f"counts:file={tmp_path / 'one.csv'},interval_s=1") == (
        TimeVarying.from_counts([3, 4], interval_s=1)
    )


@pytest.mark.parametrize(
    ("text", "spec", "match"),
    [
        ("count\n1\n", "counts:file={path}", r"missing interval_s for counts"),
        ("count\n1\n", "counts:interval_s=60", r"missing file for counts"),
        ("count\n1\n", "counts:file={path},interval=60", r"unknown key 'interval'"),
        ("count\n1\n", "counts:file={path},interval_s=0", r"interval_s must be > 0"),
        ("a,b\n1,2\n", "counts:file={path},interval_s=60", r"the header has a, b"),
        ("a,b\n1,2\n", "counts:file={path},column=count,interval_s=60", r"no column 'count'"),
        ("count\n", "counts:file={path},interval_s=60", "no data rows"),
        ("count\n5\nmany\n", "counts:file={path},interval_s=60", r"row 2: count must be a number"),
        ("count\n-5\n", "counts:file={path},interval_s=60", r"row 1: count must be finite and"),
        ("count\nNaN\n", "counts:file={path},interval_s=60", r"row 1: count must be finite"),
        ("count\n0\n0\n", "counts:file={path},interval_s=60", "must not all be 0"),
        (None, "counts:file={path},interval_s=60", r"cannot read .*: No such file"),
    ],
)
def test_counts_spec_errors_are_one_line_naming_the_spec(tmp_path, text, spec, match):
    path = tmp_path / "counts.csv"
    if text is not None:
        path.write_text(text)
    spec = spec.format(path=path)
    with pytest.raises(ValueError, match=match) as info:
        parse_arrivals(spec)
    assert "\n" not in str(info.value) and repr(spec) in str(info.value)
