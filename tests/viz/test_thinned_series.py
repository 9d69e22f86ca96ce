"""Long step series are drawn as a min-max band and the exact mean per bucket, and say so.

A series thinned to its per-bucket maxima drew a chain's busy and blocked
workers flat at their peak for a whole run busy 58% of the time. Now every
drawn band holds every value the exact step function takes in its bucket,
and every drawn mean is the exact time-weighted mean of the bucket.
"""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.collections import PolyCollection

from pipeline import PipelineConfig
from pipeline.sim import Exponential, ItemClass, Poisson, Scenario, StageSpec, simulate
from pipeline.viz.figures.classes import class_waiting, plot_class_depth
from pipeline.viz.figures.run import plot_depth
from pipeline.viz.figures.series import bucket_steps
from pipeline.viz.figures.stages import OCCUPANCY_BUCKETS, plot_stages


def _exact(t: np.ndarray, y: np.ndarray, end: float, a: float, b: float) -> tuple:
    """Least, greatest and time-weighted mean of the step function over [a, b), directly."""
    nxt = np.append(t[1:], end)
    held = y[np.searchsorted(t, a, side="right") - 1]  # the value carried in at a
    inside = (t >= a) & (t < b)
    values = np.append(y[inside], held)
    overlap = np.clip(np.minimum(nxt, b) - np.maximum(t, a), 0.0, None)
    return values.min(), values.max(), float((y * overlap).sum() / (b - a))


def _check(t, y, end, buckets) -> None:
    edges = buckets.edges
    for k in range(len(edges) - 1):
        a, b = edges[k], edges[k + 1]
        low, high, mean = _exact(t, y, end, a, b)
        last = k == len(edges) - 2  # a step at the very end holds for no time: the last bucket's
        if not last:
            assert buckets.low[k] == low and buckets.high[k] == high, k
        else:
            assert buckets.low[k] <= low and buckets.high[k] >= high, k
        assert buckets.mean[k] == pytest.approx(mean, rel=1e-9, abs=1e-12), k
        assert buckets.low[k] <= buckets.mean[k] <= buckets.high[k]


@pytest.mark.parametrize("seed", range(20))
def test_buckets_match_the_exact_step_function(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 3000))
    # Ties (several steps at one instant), long flat stretches and short bursts.
    gaps = rng.choice([0.0, 1e-3, 0.5, 20.0], size=n - 1, p=[0.2, 0.4, 0.35, 0.05])
    t = np.concatenate(([0.0], np.cumsum(gaps)))
    y = rng.integers(0, 30, n).astype(np.float64)
    end = t[-1] + float(rng.choice([0.0, 3.0]))
    max_points = int(rng.integers(5, 60))
    buckets = bucket_steps(t, y, end, max_points)
    if end <= t[0]:
        assert buckets is None
        return
    assert len(buckets.edges) == max_points + 1 and buckets.edges[-1] == end
    _check(t, y, end, buckets)


def test_short_series_are_drawn_exactly():
    t, y = np.arange(10.0), np.arange(10.0)
    assert bucket_steps(t, y, 12.0, 10) is None
    assert bucket_steps(np.zeros(50), np.ones(50), 0.0, 10) is None  # spans no time


def _check_drawn(ax, t, y, end, max_points, *, band: bool = True) -> None:
    """The mean line and band drawn for the series (t, y) against the exact step function.

    Some line on ``ax`` runs through the bucket edges at the exact time-weighted
    means, a band under it (when ``band``) holds every value the function takes in
    each bucket, and the legend says the series is thinned, and how.
    """
    exact = bucket_steps(t, y, end, max_points)
    assert exact is not None  # long enough to be thinned
    lines = [
        line
        for line in ax.lines
        if len(line.get_xdata()) == len(exact.edges)
        and np.allclose(line.get_xdata(), exact.edges, rtol=0, atol=1e-9)
        and np.allclose(line.get_ydata()[:-1], exact.mean, rtol=1e-9, atol=1e-12)
    ]
    assert lines, "no line drawn at the exact bucket means"
    for k in range(len(exact.edges) - 1):
        low, high, mean = _exact(t, y, end, exact.edges[k], exact.edges[k + 1])
        assert exact.low[k] <= low and high <= exact.high[k]
        assert lines[0].get_ydata()[k] == pytest.approx(mean, rel=1e-9, abs=1e-12)
    legend = ax.get_legend()
    texts = [t.get_text() for t in legend.get_texts()] if legend else []
    texts += [str(line.get_label()) for line in lines]
    if not band:
        assert not [c for c in ax.collections if isinstance(c, PolyCollection)]
        width = f"(mean per {exact.width_s:.3g} s)"
        assert any(text.endswith(width) for text in texts), texts
        return
    # The band: a polygon whose upper edge is the bucket maxima, lower edge the minima.
    bands = [c for c in ax.collections if isinstance(c, PolyCollection) and c.get_visible()]
    for band in bands:
        v = band.get_paths()[0].vertices
        inside = (v[:, 0] >= exact.edges[0]) & (v[:, 0] <= exact.edges[-1])
        tops, bottoms = set(np.round(v[inside, 1], 9)), set(np.round(exact.high, 9))
        if bottoms <= tops and set(np.round(exact.low, 9)) <= tops:
            assert v[:, 1].max() == pytest.approx(exact.high.max())
            assert v[:, 1].min() == pytest.approx(exact.low.min())
            break
    else:
        raise AssertionError("no min-max band drawn under the mean")
    assert any("band min–max per" in text for text in texts), texts


def test_the_chains_busy_and_blocked_rows_are_window_means():
    """A worker or two toggles with every item: the rows show the mean of OCCUPANCY_BUCKETS
    windows, exactly, without a band that would only span 0 to the concurrency."""
    chain = Scenario(
        arrivals=Poisson(9.0),
        stages=[
            StageSpec(
                name="fetch",
                service=Exponential(0.2),
                config=PipelineConfig(concurrency=2, queue_maxsize=20),
            ),
            StageSpec(
                name="write",
                service=Exponential(0.5),
                config=PipelineConfig(concurrency=5, queue_maxsize=20),
            ),
        ],
        n_items=6000,
        seed=3,
    )
    run = simulate(chain)
    figure = plot_stages(run, max_points=200)
    grid = np.array(figure.axes).reshape(3, 2)
    fetch, write = run.stages["fetch"], run.stages["write"]
    s = fetch.series
    assert len(s.time_s) > 200  # long enough to be thinned
    busy = grid[1, 0]
    _check_drawn(busy, s.time_s, s.in_flight.astype(float), s.end_s, OCCUPANCY_BUCKETS, band=False)
    title = grid[0, 0].get_title()
    assert "busy" in title
    # Not flat at the peak: the drawn busy workers' mean is the run's mean (the title's).
    (line,) = [line for line in busy.lines if "(mean per" in str(line.get_label())]
    x, mean = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
    drawn = float((mean[:-1] * np.diff(x)).sum() / (x[-1] - x[0]))
    whole = bucket_steps(s.time_s, s.in_flight.astype(float), s.end_s, 1)
    assert drawn == pytest.approx(float(whole.mean[0]), rel=1e-9)
    assert drawn < 0.99 * float(s.in_flight.max())
    w = write.series
    blocked = grid[2, 0]
    _check_drawn(
        blocked, w.time_s, w.producers_blocked.astype(float), w.end_s, OCCUPANCY_BUCKETS, band=False
    )
    queue = grid[0, 1]  # a queue keeps its exact thinning and its band
    _check_drawn(queue, w.time_s, w.queue_depth.astype(float), w.end_s, 200)


def test_the_depth_figure_and_the_class_figure_use_the_same_rule():
    gold, bulk = ItemClass(name="gold", share=0.3, priority=0), ItemClass(name="bulk", share=0.7)
    scenario = Scenario(
        classes=[gold, bulk], arrivals=Poisson(3.6), service=Exponential(1.0), n_items=3000,
        config=PipelineConfig(concurrency=4, queue_maxsize=None), seed=2,
    )  # fmt: skip
    run = simulate(scenario)
    figure = plot_depth(run, max_points=150)
    s = run.series
    _check_drawn(figure.axes[0], s.time_s, s.queue_depth.astype(float), s.end_s, 150)
    classes = plot_class_depth(run, max_points=150)
    t, count = class_waiting(run, "bulk")
    end = max(s.end_s, float(t[-1]))
    _check_drawn(classes.axes[0], t, count.astype(float), end, 150)
