"""MSER-5 warm-up detection: known answers on plain series, and sane cuts on simulated runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, Trace, detect_warmup, simulate
from pipeline.sim.analysis import theory
from pipeline.sim.analysis.warmup import mser5
from pipeline.sim.stats.intervals import batch_means_ci

UNBOUNDED = PipelineConfig(concurrency=4, queue_maxsize=None, drain_timeout_s=None)


def test_a_ramp_is_cut_exactly_where_it_ends():
    # 100 values falling from 100 to 1, then a stationary 0, 1, 0, 1, ... (batch means 0.4/0.6)
    ramp = np.r_[np.linspace(100.0, 1.0, 100), np.tile([0.0, 1.0], 450)]
    cut = mser5(ramp)
    assert cut.index == 100
    assert not cut.at_limit
    assert len(cut.batch_means) == 200 and len(cut.statistic) == 101
    assert np.argmin(cut.statistic) == 20


def test_a_stationary_series_keeps_everything():
    assert mser5(np.tile([0.0, 1.0], 500)).index == 0
    assert mser5(np.full(40, 3.0)).index == 0  # no spread at all: nothing to gain by cutting


def test_the_cut_is_in_batches_and_leftovers_are_ignored():
    values = np.r_[np.full(12, 50.0), np.zeros(31)]  # 43 values: 8 batches of 5, 3 left over
    cut = mser5(values)
    assert cut.index % 5 == 0 and cut.index == 15  # the batch holding values 10..14 is mixed
    assert len(cut.batch_means) == 8


@pytest.mark.parametrize("scale", [1e-300, 1e-9, 1e9, 1e200])
def test_the_cut_does_not_depend_on_units(scale):
    ramp = np.r_[np.linspace(100.0, 1.0, 100), np.tile([0.0, 1.0], 450)]
    assert mser5(ramp * scale).index == 100
    assert mser5(ramp + 1e12).index == 100  # large and close together


def test_a_transient_longer_than_half_the_run_is_at_the_limit():
    values = np.r_[np.linspace(100.0, 1.0, 800), np.zeros(200)]
    assert mser5(values).at_limit


@pytest.mark.parametrize(
    ("values", "kwargs", "match"),
    [
        (np.zeros(19), {}, "at least 20 observations"),
        (np.zeros((5, 5)), {}, "1-D"),
        (np.r_[np.zeros(30), np.nan], {}, r"values\[30\]=nan"),
        (np.r_[np.zeros(30), np.inf], {}, "finite"),
        ([], {}, "at least 20"),
        (np.zeros(40), {"batch_size": 0}, "batch_size must be >= 1"),
    ],
)
def test_bad_series_are_named(values, kwargs, match):
    with pytest.raises(ValueError, match=match):
        mser5(values, **kwargs)


def test_a_stationary_mmc_run_has_a_short_warmup_and_keeps_erlang_c():
    # M/M/4 at 80% from empty: the empty start is a short, mild transient.
    result = simulate(
        Scenario(
            arrivals=Poisson(rate=3.2),
            service=Exponential(mean=1.0),
            config=UNBOUNDED,
            n_items=20_000,
            seed=0,
        )
    )
    warmup = detect_warmup(result)
    assert 0.0 <= warmup < result.summary["sim_time_s"] / 10
    kept = result.items[result.items.arrival_s >= warmup]
    interval = batch_means_ci(kept.wait_s.to_numpy(), n_batches=20, level=0.99)
    assert interval.contains(theory.mmc(3.2, 1.0, 4).wait_mean_s)


def test_a_burst_at_the_start_is_cut_once_its_backlog_has_cleared():
    # 400 items at t=0 on top of M/M/4 traffic at 80%: about 400 / 0.8 = 500 s of backlog.
    gaps = np.random.default_rng(0).exponential(1 / 3.2, 10_000)
    arrivals = np.r_[np.zeros(400), np.cumsum(gaps)]
    result = simulate(
        Scenario(
            arrivals=Trace(arrivals),
            service=Exponential(mean=1.0),
            config=UNBOUNDED,
            n_items=len(arrivals),
            seed=0,
        )
    )
    series = result.series
    cleared_s = float(
        series.time_s[np.flatnonzero((series.time_s > 0) & (series.queue_depth == 0))[0]]
    )
    warmup = detect_warmup(result)
    assert 0.8 * cleared_s <= warmup <= result.summary["sim_time_s"] / 2
    # Without the cut the mean wait is far off; with it, Erlang C is inside a 99% interval.
    truth = theory.mmc(3.2, 1.0, 4).wait_mean_s
    assert result.summary["wait_mean_s"] > 3 * truth
    cut = simulate(result.scenario.replace(warmup_s=warmup))
    assert math.isclose(cut.summary["sim_time_s"], result.summary["sim_time_s"])
    kept = cut.items[cut.items.arrival_s >= warmup].wait_s.to_numpy()
    assert batch_means_ci(kept, 20, level=0.99).contains(truth)
    assert cut.summary["wait_mean_s"] == pytest.approx(kept.mean())


def test_detect_warmup_refuses_what_it_cannot_judge():
    short = simulate(
        Scenario(
            arrivals=Poisson(rate=3.2),
            service=Exponential(mean=1.0),
            config=UNBOUNDED,
            n_items=10,
            seed=0,
        )
    )
    with pytest.raises(ValueError, match="from 10 item"):
        detect_warmup(short)
    with pytest.raises(ValueError, match="column must be one of"):
        detect_warmup(short, column="queue_depth")
    # A queue that only grows (overload) never settles: the cut is at the search limit.
    growing = simulate(
        Scenario(
            arrivals=Poisson(rate=8.0),
            service=Exponential(mean=1.0),
            config=UNBOUNDED,
            n_items=4000,
            seed=0,
        )
    )
    with pytest.raises(ValueError, match="longer than half the run"):
        detect_warmup(growing)


def test_plot_warmup_draws_the_series_the_statistic_and_the_cut():
    from pipeline.viz import plot_warmup

    ramp_run = simulate(
        Scenario(
            arrivals=Trace(np.r_[np.zeros(200), 200 / 3.2 + np.arange(2000) / 3.2]),
            service=Exponential(mean=1.0),
            config=UNBOUNDED,
            n_items=2200,
            seed=0,
        )
    )
    fig = plot_warmup(ramp_run)
    series_ax, stat_ax = fig.axes
    assert "cut at" in series_ax.get_legend_handles_labels()[1][-1]
    assert "MSER(d)" in [line.get_label() for line in stat_ax.get_lines()]
    with pytest.raises(ValueError, match="two axes"):
        plot_warmup(ramp_run, ax=[series_ax])
