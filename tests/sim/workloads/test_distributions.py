"""Service-time distributions: moments, validation, repr and the CLI spelling."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from pipeline.sim.workloads import distributions
from pipeline.sim.workloads.distributions import (
    Constant,
    Empirical,
    Exponential,
    Gamma,
    LogNormal,
    Uniform,
    parse_distribution,
)

N = 200_000

ALL = [
    Constant(0.5),
    Exponential(0.25),
    LogNormal(0.2, 1.5),
    LogNormal(mean=2.0, cv=0.3),
    Gamma(1.0, 0.5),
    Gamma(mean=0.1, cv=2.0),
    Uniform(1.0, 3.0),
    Empirical((0.1, 0.2, 0.2, 1.5)),
]


@pytest.mark.parametrize("dist", ALL, ids=repr)
def test_sample_mean_and_variance_match_the_parameters(dist):
    x = dist.sample(np.random.default_rng(11), N)
    assert x.shape == (N,) and x.dtype == np.float64 and (x >= 0).all()
    sd = dist.cv * dist.mean
    if sd == 0:
        assert (x == dist.mean).all()
        return
    # Tolerance: 4 standard errors. SE of the mean is sd / sqrt(N); SE of the
    # sample variance is sqrt((m4 - s**4) / N) with m4 the fourth central
    # moment, estimated from the sample itself (this matters for the heavy
    # log-normal tail, whose variance estimate is far noisier than a normal's).
    assert abs(x.mean() - dist.mean) < 4 * sd / math.sqrt(N)
    centred = x - x.mean()
    var = centred.var()
    se_var = math.sqrt(max((centred**4).mean() - var**2, 0.0) / N)
    assert abs(var - sd**2) < 4 * se_var


@pytest.mark.parametrize("dist", ALL, ids=repr)
def test_repr_rebuilds_an_equal_object(dist):
    again = eval(repr(dist), vars(distributions))
    assert again == dist and hash(again) == hash(dist)
    assert repr(again) == repr(dist)


def test_repr_spelling():
    assert repr(Exponential(mean=0.25)) == "Exponential(mean=0.25)"
    assert repr(LogNormal(1, 2)) == "LogNormal(mean=1.0, cv=2.0)"
    assert repr(Empirical([1, 2])) == "Empirical(samples=(1.0, 2.0))"


def test_equality_and_frozen():
    assert Exponential(1) == Exponential(mean=1.0)
    assert Exponential(1) != Exponential(2)
    assert Gamma(1, 1) != Exponential(1)  # same law, different object kind
    with pytest.raises(dataclasses.FrozenInstanceError):
        Exponential(1).mean = 2  # type: ignore[misc]


def test_known_moments():
    assert Exponential(0.25).cv == 1.0 and Exponential(0.25).rate == 4.0
    assert Uniform(0, 2).cv == pytest.approx(1 / math.sqrt(3))
    assert Empirical([1, 3]).mean == 2.0 and Empirical([1, 3]).cv == 0.5
    assert Constant(2).std == 0.0 and Gamma(2, 0.5).std == 1.0


def test_same_seed_same_samples_and_vectorised_shape():
    d = LogNormal(0.2, 1.5)
    a = d.sample(np.random.default_rng(5), 1000)
    b = d.sample(np.random.default_rng(5), 1000)
    assert np.array_equal(a, b)
    assert d.sample(np.random.default_rng(5), 0).shape == (0,)
    assert d.sample(np.random.default_rng(5), np.int64(3)).shape == (3,)


def test_empirical_only_resamples_the_data():
    d = Empirical([0.5, 2.0])
    x = d.sample(np.random.default_rng(1), 10_000)
    assert set(np.unique(x)) == {0.5, 2.0}


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: Exponential(-1), ValueError, r"mean must be > 0 \(seconds\), got -1"),
        (lambda: Exponential(0), ValueError, "mean must be > 0"),
        (lambda: Exponential(math.inf), ValueError, "mean must be finite"),
        (lambda: Exponential("1"), TypeError, "mean must be a real number"),
        (lambda: Exponential(True), TypeError, "mean must be a real number"),
        (lambda: Constant(-0.1), ValueError, r"value must be >= 0 \(seconds\), got -0.1"),
        (lambda: LogNormal(1, 0), ValueError, "cv must be > 0"),
        (lambda: Gamma(-1, 1), ValueError, "mean must be > 0"),
        (lambda: Uniform(2, 1), ValueError, "high must be > low"),
        (lambda: Uniform(-1, 1), ValueError, "low must be >= 0"),
        (lambda: Empirical([]), ValueError, "non-empty"),
        (lambda: Empirical([1, -2]), ValueError, r"samples\[1\]=-2.0"),
        (lambda: Empirical([1, math.nan]), ValueError, "finite"),
        (lambda: Empirical(["a"]), TypeError, "sequence of numbers"),
    ],
)
def test_bad_parameters_are_named(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_bad_sample_arguments():
    with pytest.raises(TypeError, match=r"numpy\.random\.Generator"):
        Exponential(1).sample(np.random.RandomState(1), 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="size must be >= 0"):
        Exponential(1).sample(np.random.default_rng(1), -1)
    with pytest.raises(TypeError, match="size must be an integer"):
        Exponential(1).sample(np.random.default_rng(1), 2.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("constant:value=0.5", Constant(0.5)),
        ("exponential:mean=0.25", Exponential(0.25)),
        ("exponential:rate=4", Exponential(0.25)),
        ("lognormal:mean=0.2,cv=1.5", LogNormal(0.2, 1.5)),
        (" Gamma : mean = 1 , cv = 0.5 ", Gamma(1, 0.5)),
        ("uniform:low=1,high=3", Uniform(1, 3)),
        ("uniform:high=3,low=1e-3", Uniform(0.001, 3)),
    ],
)
def test_parse_distribution(spec, expected):
    assert parse_distribution(spec) == expected


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("weibull:mean=1", r"unknown distribution 'weibull'.*allowed: constant, empirical, expo"),
        ("exponential:avg=1", r"unknown key 'avg' for exponential.*allowed: mean, rate"),
        ("exponential:mean=1,rate=2", "exactly one of mean"),
        ("exponential", "exactly one of mean"),
        ("lognormal:mean=1", r"needs two of mean, cv, p50, p90, p95, p99.*got mean"),
        ("lognormal:p50=1,p99=0.5", r"p99 must be > p50.*got p50=1, p99=0.5"),
        ("lognormal:p50=1,p99=1", r"p99 must be > p50"),
        ("lognormal:mean=1,p50=1", r"p50 must be < mean"),
        ("lognormal:mean=1,p99=0.9", r"p99 must be > mean"),
        ("lognormal:p50=0,p99=1", r"p50 must be > 0"),
        ("lognormal:p50=nan,p99=1", r"bad number 'nan' for p50"),
        ("lognormal:p50=1e-150,p99=1e150", r"too wide for floating point"),
        ("lognormal:p75=1,p99=2", r"unknown key 'p75' for lognormal"),
        ("empirical:column=x", r"missing file for empirical"),
        ("empirical:file=,column=x", r"empty value for file"),
        ("empirical:file=no-such-file.csv", r"cannot read no-such-file.csv: No such file"),
        ("gamma:mean=abc,cv=1", r"bad number 'abc' for mean"),
        ("gamma:mean=inf,cv=1", r"bad number 'inf' for mean"),
        ("constant:value", r"bad parameter 'value'.*key=value"),
        ("constant:value=1,value=2", "given twice"),
        (
            "exponential:mean=-1",
            r"invalid distribution spec 'exponential:mean=-1': mean must be > 0",
        ),
        ("exponential:rate=0", r"rate must be > 0"),
        ("uniform:low=3,high=1", "high must be > low"),
    ],
)
def test_parse_errors_name_the_spec_and_what_is_allowed(spec, match):
    with pytest.raises(ValueError, match=match) as info:
        parse_distribution(spec)
    assert "\n" not in str(info.value)
    assert repr(spec) in str(info.value)


def test_parse_rejects_non_strings():
    with pytest.raises(TypeError, match="spec must be a str"):
        parse_distribution(1.0)  # type: ignore[arg-type]


# -- log-normal from the numbers users quote --------------------------------------------


def _exact(dist: LogNormal, name: str) -> float:
    """mean, cv or a percentile (p99) of ``dist``, computed by the class itself."""
    if name in ("mean", "cv"):
        return getattr(dist, name)
    return dist.quantile(int(name[1:]) / 100)


REFERENCE = LogNormal(mean=0.2, cv=1.5)
PAIRS = [
    ("p50", "p99"),
    ("p50", "p90"),
    ("p90", "p95"),
    ("p95", "p99"),
    ("mean", "p99"),
    ("mean", "p95"),
    ("mean", "p90"),
    ("mean", "p50"),
    ("cv", "p99"),
    ("cv", "p50"),
    ("mean", "cv"),
]


@pytest.mark.parametrize("pair", PAIRS, ids="+".join)
def test_a_fit_from_two_numbers_meets_both_to_1e_9(pair):
    # Numbers taken from one log-normal: the fit must give it back, and the numbers too.
    # (mean with p90 has two solutions; the reference, cv 1.5, is on the documented side.)
    known = {name: _exact(REFERENCE, name) for name in pair}
    fitted = LogNormal.from_quantiles(**known)
    assert type(fitted) is LogNormal
    for name, value in known.items():
        assert _exact(fitted, name) == pytest.approx(value, rel=1e-9), name
    assert fitted.mean == pytest.approx(REFERENCE.mean, rel=1e-9)
    assert fitted.cv == pytest.approx(REFERENCE.cv, rel=1e-9)


def test_the_issue_example_p50_and_p99():
    fitted = parse_distribution("lognormal:p50=0.05,p99=1.2")
    assert fitted.quantile(0.5) == pytest.approx(0.05, rel=1e-9)
    assert fitted.quantile(0.99) == pytest.approx(1.2, rel=1e-9)
    # sigma = log(1.2 / 0.05) / z99, mean = p50 * exp(sigma**2 / 2)
    sigma = math.log(24) / 2.3263478740408408
    assert fitted.mean == pytest.approx(0.05 * math.exp(sigma**2 / 2), rel=1e-12)


def test_fitted_percentiles_hold_by_sampling():
    # Distribution-free: the number of draws at or below the true q-quantile is
    # Binomial(N, q). Accept within the two-sided 99.9% interval, Bonferroni over
    # the two percentiles checked; a fit off by 2% in p99 moves the count ~9 sigma.
    from statistics import NormalDist

    fitted = LogNormal.from_quantiles(mean=0.08, p99=1.0)
    x = fitted.sample(np.random.default_rng(2024), N)
    z = NormalDist().inv_cdf(1 - 0.001 / 2 / 2)
    for q, target in ((0.99, 1.0), (0.5, fitted.quantile(0.5))):
        below = int((x <= target).sum())
        assert abs(below - N * q) <= z * math.sqrt(N * q * (1 - q)), (q, below)


def test_a_fit_draws_exactly_as_the_plain_lognormal_it_is():
    fitted = LogNormal.from_quantiles(p50=0.05, p99=1.2)
    plain = LogNormal(mean=fitted.mean, cv=fitted.cv)
    assert fitted == plain and repr(fitted) == repr(plain)
    assert np.array_equal(
        fitted.sample(np.random.default_rng(3), 100), plain.sample(np.random.default_rng(3), 100)
    )
    assert LogNormal.from_quantiles(mean=0.2, cv=1.5) == LogNormal(0.2, 1.5)


def test_mean_and_p99_beyond_the_family_warn_and_keep_the_mean():
    from pipeline.sim.workloads.percentiles import InconsistentWorkloadWarning

    # The issue: mean 80 ms, p99 1.2 s. A log-normal's p99 is at most
    # mean * exp(z99**2 / 2) = 14.97 * mean = 1.197 s.
    bound = 0.08 * math.exp(2.3263478740408408**2 / 2)
    with pytest.warns(InconsistentWorkloadWarning) as record:
        fitted = LogNormal.from_quantiles(mean=0.08, p99=1.2)
    assert len(record) == 1
    message = str(record[0].message)
    assert "mean=0.08 s and p99=1.2 s are inconsistent" in message
    assert "p99 at most 1.197 s" in message and "keeping the mean" in message
    assert "p99 will be 1.197 s" in message and "\n" not in message
    assert fitted.mean == 0.08
    assert fitted.quantile(0.99) == pytest.approx(bound, rel=1e-9)
    assert record[0].filename == __file__  # points at the caller, not the library


def test_numbers_just_inside_the_bound_do_not_warn():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = LogNormal.from_quantiles(mean=0.08, p99=1.19)
        assert fitted.quantile(0.99) == pytest.approx(1.19, rel=1e-9)
        LogNormal.from_quantiles(p50=0.05, p99=1.2)


def test_a_third_number_is_checked_against_the_fit():
    import warnings

    from pipeline.sim.workloads.percentiles import InconsistentWorkloadWarning

    known = {name: _exact(REFERENCE, name) for name in ("mean", "p50", "p95", "p99")}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert LogNormal.from_quantiles(**known).cv == pytest.approx(REFERENCE.cv, rel=1e-9)
        # rounded to two significant figures, as people quote them: still consistent
        rounded = {name: float(f"{value:.2g}") for name, value in known.items()}
        LogNormal.from_quantiles(**rounded)
    with pytest.warns(InconsistentWorkloadWarning, match=r"p50=0.05 s does not fit mean=0.08 s"):
        fitted = LogNormal.from_quantiles(mean=0.08, p50=0.05, p99=1.0)
    assert fitted == LogNormal.from_quantiles(mean=0.08, p99=1.0)  # the first two make the fit
    # Their p50 is 0.01804 s: 0.0185 s is 2.5% off, inside the default 5%, outside 1%.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LogNormal.from_quantiles(mean=0.08, p50=0.0185, p99=1.0)
    with pytest.warns(InconsistentWorkloadWarning, match=r"\(2.5% off, more than rtol=0.01\)"):
        LogNormal.from_quantiles(mean=0.08, p50=0.0185, p99=1.0, rtol=0.01)


@pytest.mark.parametrize(
    ("known", "exc", "match"),
    [
        ({"p99": 1.0}, ValueError, r"needs two of mean, cv, p50, p90, p95, p99 .*, got p99$"),
        ({}, ValueError, "got none"),
        ({"p50": 1.0, "p99": 1.0}, ValueError, "p99 must be > p50"),
        ({"p50": 1.0, "p90": 2.0, "p95": 1.5}, ValueError, "p95 must be > p90"),
        ({"mean": 1.0, "p50": 1.5}, ValueError, "p50 must be < mean"),
        ({"mean": 1.0, "p95": 0.5}, ValueError, "p95 must be > mean"),
        ({"mean": -1.0, "p99": 2.0}, ValueError, r"mean must be > 0 \(seconds\), got -1.0"),
        ({"mean": math.nan, "p99": 2.0}, ValueError, "mean must be finite"),
        ({"mean": 1.0, "p99": math.inf}, ValueError, "p99 must be finite"),
        ({"cv": 0.0, "p99": 2.0}, ValueError, "cv must be > 0"),
        ({"p50": 10**400, "p99": 2.0}, ValueError, "p50 must be"),
        ({"p50": "1", "p99": 2.0}, TypeError, "p50 must be a real number"),
        ({"p50": 1e-150, "p99": 1e150}, ValueError, "too wide for floating point"),
        ({"cv": 1e300, "p99": 1e100}, ValueError, "too wide for floating point"),
        ({"p50": 1.0, "p99": 2.0, "rtol": 0}, ValueError, "rtol must be > 0"),
    ],
)
def test_impossible_numbers_are_errors_naming_them(known, exc, match):
    with pytest.raises(exc, match=match) as info:
        LogNormal.from_quantiles(**known)
    assert "\n" not in str(info.value)


def test_unknown_percentiles_are_refused_by_the_signature():
    with pytest.raises(TypeError, match="p75"):
        LogNormal.from_quantiles(p75=1.0, p99=2.0)  # type: ignore[call-arg]


def test_quantile_and_huge_cv():
    d = LogNormal(1.0, 1e200)  # cv**2 overflows a float; sigma**2 must not
    assert math.isfinite(d.sigma2) and d.sample(np.random.default_rng(1), 3).shape == (3,)
    assert LogNormal(2.0, 0.5).quantile(0.5) == pytest.approx(2.0 / math.sqrt(1.25))
    for q in (0, 1, -0.1, math.nan):
        with pytest.raises(ValueError, match="q must be"):
            LogNormal(1.0, 1.0).quantile(q)


@pytest.mark.parametrize(
    ("spec", "known"),
    [
        ("lognormal:p50=0.05,p99=1.2", {"p50": 0.05, "p99": 1.2}),
        ("lognormal:mean=0.08,p99=1", {"mean": 0.08, "p99": 1.0}),
        ("lognormal: P95 = 0.3 , mean=0.1", {"mean": 0.1, "p95": 0.3}),
        ("lognormal:cv=2,p90=0.3", {"cv": 2.0, "p90": 0.3}),
    ],
)
def test_parse_lognormal_from_percentiles(spec, known):
    assert parse_distribution(spec) == LogNormal.from_quantiles(**known)


# -- measured durations from a CSV column -----------------------------------------------


def test_empirical_from_a_csv_column(tmp_path):
    path = tmp_path / "durations.csv"
    path.write_text("request,duration_s\na,0.25\n\nb,0.5\nc,1.5\n")
    measured = Empirical.from_csv(path, column="duration_s")
    assert measured == Empirical((0.25, 0.5, 1.5))
    assert repr(measured) == f"Empirical.from_csv({str(path)!r}, column='duration_s')"
    again = eval(repr(measured), vars(distributions))
    assert again == measured and repr(again) == repr(measured)
    assert parse_distribution(f"empirical:file={path},column=duration_s") == measured
    # one column: no need to name it; a spreadsheet's byte-order mark is not part of it
    (tmp_path / "one.csv").write_bytes("\ufeffseconds\n2\n3\n".encode())
    assert Empirical.from_csv(tmp_path / "one.csv") == Empirical((2.0, 3.0))


@pytest.mark.parametrize(
    ("text", "column", "match"),
    [
        ("a,b\n1,2\n", "duration_s", r"no column 'duration_s'; the header has a, b"),
        ("a,b\n1,2\n", None, r"name the column to read \(column=...\); the header has a, b"),
        ("duration_s\n", "duration_s", "no data rows after the header"),
        ("", "duration_s", "no header row"),
        ("duration_s\n0.5\nslow\n", "duration_s", r"row 2: duration_s must be a number.*'slow'"),
        ("duration_s\n0.5\n-1\n", "duration_s", r"row 2: duration_s must be finite and >= 0"),
        ("duration_s\nnan\n", "duration_s", r"row 1: duration_s must be finite and >= 0"),
        ("duration_s\ninf\n", "duration_s", r"row 1: duration_s must be finite"),
        ("duration_s\n1e400\n", "duration_s", r"row 1: duration_s must be finite"),
        ("x,duration_s\n1,\n", "duration_s", r"row 1: duration_s is missing"),
        ("x,duration_s\n1\n", "duration_s", r"row 1: duration_s is missing"),
    ],
)
def test_empirical_csv_errors_name_the_file_and_row(tmp_path, text, column, match):
    path = tmp_path / "durations.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as info:
        Empirical.from_csv(path, column=column)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_empirical_csv_that_is_not_text_or_not_there(tmp_path):
    (tmp_path / "binary.csv").write_bytes(b"duration_s\n\xff\xfe\x00\x01\n")
    with pytest.raises(ValueError, match=r"binary\.csv: not a UTF-8 text file"):
        Empirical.from_csv(tmp_path / "binary.csv", column="duration_s")
    with pytest.raises(FileNotFoundError):
        Empirical.from_csv(tmp_path / "missing.csv", column="duration_s")
    with pytest.raises(ValueError, match=r"cannot read .*: Is a directory"):
        parse_distribution(f"empirical:file={tmp_path}")
