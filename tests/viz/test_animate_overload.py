"""``animate(result)`` of what a run has besides its items: an autoscaled pool and a
downstream in a retry storm, each frame against the run's own records; frames every
``every_s`` seconds; bad arguments in one line."""

from __future__ import annotations

import functools
import math

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from pipeline import Autoscaler, Backoff, PipelineConfig
from pipeline.sim import (
    CapacityDrop,
    Downstream,
    Exponential,
    Poisson,
    Scenario,
    Trace,
    simulate,
)
from pipeline.viz import animate
from pipeline.viz.animation.artist import RunArtist
from pipeline.viz.animation.downstream import GOODPUT_WINDOW_S
from pipeline.viz.animation.frames import Timeline
from tests.sim.running.test_downstream import hand_computed_trace


@functools.cache
def autoscaled(engine: str = "auto"):
    """A pool of 2 to 60 workers under a burst: 1.5 arrivals a second, 18 from 15 s to 30 s
    (a trace, so that the kernel runs it too). Run once per engine for the module: the
    tests only read the result."""
    scaler = Autoscaler(min_workers=2, max_workers=60, sync_s=5.0, cold_start_s=4.0,
                        scale_down_stabilization_s=20.0)  # fmt: skip
    config = PipelineConfig(concurrency=2, queue_maxsize=None, drain_timeout_s=None,
                            autoscale=scaler)  # fmt: skip
    rng = np.random.default_rng(3)
    calm, burst = rng.uniform(0.0, 90.0, 135), rng.uniform(15.0, 30.0, 250)
    arrivals = Trace(np.sort(np.concatenate([calm, burst])).tolist())
    return simulate(
        Scenario(arrivals=arrivals, service=Exponential(mean=1.0), config=config, seed=3,
                 n_items=385),
        engine=engine,
    )  # fmt: skip


@functools.cache
def stormy():
    """A retry storm: a capacity drop leaves the downstream's queue longer than the
    clients' timeout, and it stays so. Run once for the module: the tests only read it."""
    config = PipelineConfig(concurrency=40, queue_maxsize=None, max_attempts=4,
                            attempt_timeout_s=1.0, drain_timeout_s=None,
                            backoff=Backoff(kind="constant", base_s=0.1))  # fmt: skip
    return simulate(
        Scenario(arrivals=Poisson(rate=25.0), config=config, duration_s=30.0, seed=1,
                 downstream=Downstream(concurrency=3, service=Exponential(mean=0.1)),
                 faults=[CapacityDrop(at_s=10.0, for_s=4.0, factor=0.2)])
    )  # fmt: skip


def row_at(result, time_s: float):
    series = result.timeseries
    return series.iloc[int(np.searchsorted(series["time_s"], time_s, side="right")) - 1]


# -- the pool ---------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["asyncio", "kernel"])
def test_every_frame_shows_the_pool_the_timeseries_holds_then(engine):
    try:
        result = autoscaled(engine)
    except ValueError as refused:  # a kernel without autoscaling: its pool is tested once it has
        assert engine == "kernel" and "autoscal" in str(refused)
        pytest.skip(str(refused))
    assert result.engine == engine and result.summary["workers_max"] > 20
    timeline = Timeline(result, max_frames=10**9)
    pool = result.pool
    # Every change of the pool is a frame of its own.
    assert set(pool.time_s[pool.time_s <= timeline.run_end_s]) <= set(timeline.times_s)
    grew = False
    for index in range(len(timeline)):
        frame = timeline.frame(index)
        (stage,) = frame.stages
        row = row_at(result, frame.time_s)
        workers, desired = pool.at(np.array([frame.time_s]))
        assert stage.pool == workers[0], (index, frame.time_s)
        if row["time_s"] == frame.time_s:  # the timeseries reads the pool at its own rows
            assert stage.pool == row["workers"]
        assert stage.desired == (None if desired[0] < 0 else desired[0])
        assert stage.counts["running"] == row["in_flight"] <= stage.pool
        assert stage.counts["queue"] == row["queue_depth"]
        assert len(stage.workers) >= stage.pool  # a box for every worker of the pool
        grew |= stage.pool > result.scenario.config.concurrency
    assert grew


def test_the_pool_is_drawn_box_by_box_with_every_busy_worker_in_it():
    result = autoscaled()
    timeline = Timeline(result, every_s=3.0)
    artist = RunArtist(timeline)
    (band,) = artist._bands
    for index in range(len(timeline)):
        state = timeline.frame(index)
        artist.update(state)
        (stage,) = state.stages
        boxes = {tuple(p) for p in band.pool.get_offsets().tolist()}
        busy = {tuple(p) for p in band.items["running"].get_offsets().tolist()}
        assert len(boxes) == stage.pool
        assert busy <= boxes


def test_a_run_without_an_autoscaler_or_a_downstream_draws_no_pool_and_no_downstream():
    plain = Scenario(arrivals=Poisson(rate=2.0), service=Exponential(mean=1.0),
                     config=PipelineConfig(concurrency=3), n_items=60, seed=1)  # fmt: skip
    result = simulate(plain)
    timeline = Timeline(result)
    frame = timeline.frame(len(timeline) // 2)
    assert frame.downstream is None and frame.stages[0].pool is None
    assert frame.stages[0].desired is None
    artist = RunArtist(timeline)
    assert artist._downstream is None and not artist._bands[0].pooled
    assert len(artist._bands[0].pool.get_offsets()) == 0
    # The band alone, as before: one stage's height.
    assert artist.figure.get_size_inches()[1] == pytest.approx(0.45 + 1.75)


# -- the downstream ---------------------------------------------------------------------


@pytest.mark.slow  # every frame of a storm: 3 s
def test_every_frame_of_a_storm_shows_the_downstream_its_log_holds():
    result = stormy()
    assert not result.summary["recovered"]
    log, stats = result.downstream.log, result.downstream
    timeline = Timeline(result, max_frames=10**9)
    items = result.items
    done = np.sort(items.loc[items["outcome"] == "completed", "finish_s"].to_numpy())
    attempts = result.columns.attempt_log
    retried = np.sort(attempts.end_s[attempts.ending == 1])  # AttemptLog.ENDINGS "retried"
    waiting_area, previous = 0.0, None
    for index in range(len(timeline)):
        frame = timeline.frame(index)
        t, down = frame.time_s, frame.downstream
        c = down.counts
        sent, started, ended = log.sent_s <= t, log.start_s <= t, log.end_s <= t
        gave_up = log.abandoned_s <= t
        assert c["waiting"] == len(down.queue) == np.sum(sent & ~started)
        assert c["in_service"] == np.sum(down.servers >= 0) == np.sum(started & ~ended)
        # FIFO with identical servers: a request waits only while every server is busy.
        assert c["in_service"] <= 3 and (c["waiting"] == 0 or c["in_service"] == 3)
        assert c["orphans"] == np.sum(gave_up & ~ended)
        assert np.sum(down.queue) + np.sum(down.servers == 1) == c["orphans"]
        # The queue's head first: its orphans are the oldest requests waiting.
        waiting = np.flatnonzero(sent & ~started)
        np.testing.assert_array_equal(down.queue, gave_up[waiting])
        assert (c["sent"], c["served"]) == (np.sum(sent), np.sum(ended))
        assert c["orphaned"] == np.sum(ended & gave_up)
        assert c["retries"] == np.searchsorted(retried, t, side="right")
        window = min(GOODPUT_WINDOW_S, t)
        completed = row_at(result, t)["completed"]
        if window > 0:
            earlier = row_at(result, t - window)["completed"] if t > window else 0
            assert down.goodput_per_s == pytest.approx((completed - earlier) / window)
            assert completed == np.searchsorted(done, t, side="right")
        if previous is not None and t <= stats.end_s:
            waiting_area += previous[1] * (t - previous[0])
        previous = (t, c["waiting"])
    # The frames' queue, weighted by time, is the run's own mean.
    assert waiting_area / stats.end_s == pytest.approx(stats.queue_mean, rel=1e-9)
    last = timeline.frame(len(timeline) - 1).downstream.counts
    assert (last["sent"], last["served"], last["orphaned"]) == (
        stats.requests,
        stats.served,
        stats.orphaned,
    )
    assert last["retries"] == result.summary["retries_total"] > 0


def test_the_storm_s_frames_at_known_instants_of_the_hand_computed_trace():
    # One server, 2 s a request, timeout 3 s, 2 attempts, retries 0.25 s later
    # (tests/sim/running/test_downstream.py's trace). At 5 s: item 2's first request on
    # the server for nobody (its client gave up at 4.25), item 1's and item 2's retries
    # waiting, both still awaited; served so far 2, one of them for nobody; 2 retries.
    result = simulate(hand_computed_trace())
    timeline = Timeline(result, every_s=0.5)
    assert timeline.times_s.tolist() == [0.5 * k for k in range(16)]
    at = {timeline.frame(k).time_s: timeline.frame(k).downstream for k in range(len(timeline))}
    five = at[5.0]
    assert five.queue.tolist() == [False, False]
    assert five.servers.tolist() == [1]
    assert {k: five.counts[k] for k in ("served", "orphaned", "orphans", "retries")} == {
        "served": 2,
        "orphaned": 1,
        "orphans": 1,
        "retries": 2,
    }
    assert five.goodput_per_s == pytest.approx(1 / 5.0)  # item 0 at 2 s, over [0, 5]
    # At 7 s item 1's retry is on the server, its client gone since 6.75; the last
    # request waits for a client who gives up at the run's end.
    seven = at[7.0]
    assert (seven.servers.tolist(), seven.queue.tolist()) == ([1], [False])
    assert at[7.5].queue.tolist() == [True]


def test_the_downstream_band_draws_each_request_where_the_frame_puts_it():
    result = stormy()
    timeline = Timeline(result, every_s=2.0)
    artist = RunArtist(timeline)
    band = artist._downstream
    assert artist.figure.get_size_inches()[1] == pytest.approx(0.45 + 2 * 1.75)
    for index in range(len(timeline)):
        state = timeline.frame(index)
        artist.update(state)
        down = state.downstream
        live = len(band.items["live"].get_offsets())
        orphans = len(band.items["orphan"].get_offsets())
        shown = min(len(down.queue), 8 * 17)
        assert live + orphans == shown + down.counts["in_service"]
        assert orphans == np.sum(down.queue[:shown]) + np.sum(down.servers == 1)
        hidden = down.counts["waiting"] - shown
        assert band.more.get_text() == (f"+{hidden:,} more queued" if hidden > 0 else "")
    artist.render()
    assert "served for nobody" in band.texts["orphaned"].get_text()


def test_the_widget_shows_the_pool_and_the_downstream_beside_the_frame(tmp_path):
    player = animate(stormy(), every_s=5.0)
    player.show(3)
    text = player.counters.value
    assert "served for nobody" in text and "goodput" in text and "retries" in text
    assert "every 5 s" in player.note.value
    pooled = animate(autoscaled(), every_s=5.0)
    pooled.show(len(pooled) // 2)
    assert "last sync asked" in pooled.counters.value
    assert pooled.save(tmp_path / "pool.gif", dpi=40).stat().st_size > 0


# -- frames every every_s seconds -------------------------------------------------------


def test_every_s_samples_the_window_at_a_fixed_step_and_ends_on_the_run_s_end():
    result = autoscaled()
    end = result.summary["sim_time_s"]
    timeline = Timeline(result, every_s=7.0)
    steps = math.floor(end / 7.0) + 1
    np.testing.assert_allclose(timeline.times_s[:-1], 7.0 * np.arange(steps))
    assert timeline.times_s[-1] == end and not timeline.ends_at_run_end
    capped = Timeline(result, every_s=0.001, max_frames=50)
    assert len(capped) == 50 and capped.ends_at_run_end and capped.times_s[-1] == end
    np.testing.assert_allclose(capped.times_s[:-1], 0.001 * np.arange(49))
    window = Timeline(result, start_s=10.0, end_s=40.0, every_s=10.0)
    assert window.times_s.tolist() == [10.0, 20.0, 30.0, 40.0]
    # Each sampled frame is the exact state at its instant, as a frame per event is.
    for index in range(len(window)):
        t = window.times_s[index]
        stage = window.frame(index).stages[0]
        row = row_at(result, t)
        assert (stage.counts["queue"], stage.counts["running"]) == (
            row["queue_depth"],
            row["in_flight"],
        )


@pytest.mark.parametrize("every_s", [0, -1.0, math.nan, math.inf, True, "1", np.float64(-2.0)])
def test_a_bad_every_s_is_one_line_naming_it(every_s):
    result = autoscaled()
    for make in (Timeline, animate):
        with pytest.raises(ValueError, match=r"^every_s must be .*, got ") as caught:
            make(result, every_s=every_s)
        assert "\n" not in str(caught.value)
