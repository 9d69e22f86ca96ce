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
        ("weibull:mean=1", r"unknown distribution 'weibull'.*allowed: constant, exponential"),
        ("exponential:avg=1", r"unknown key 'avg' for exponential.*allowed: mean, rate"),
        ("exponential:mean=1,rate=2", "exactly one of mean"),
        ("exponential", "exactly one of mean"),
        ("lognormal:mean=1", r"missing cv for lognormal"),
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
