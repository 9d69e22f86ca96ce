"""``animate(result)``: frame states that account for every item, drawn in place, played
by a ``Play`` control and saved as a GIF."""

from __future__ import annotations

import math
import os
import tracemalloc
import warnings
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import numpy as np
import pytest
from matplotlib.animation import FFMpegWriter
from PIL import Image, ImageSequence

from pipeline import Backoff, EventKind, PipelineConfig
from pipeline.sim import (
    Constant,
    Exponential,
    IndependentFailures,
    ItemClass,
    Poisson,
    Scenario,
    StageSpec,
    run_virtual,
    simulate,
)
from pipeline.sim.running.recorder import Recorder, item_columns, step_series
from pipeline.sim.running.result import DrainTimeoutWarning
from pipeline.sim.running.single import run_engine
from pipeline.viz import animate
from pipeline.viz.animation.artist import RunArtist
from pipeline.viz.animation.frames import ZONES, Timeline
from pipeline.viz.widgets.animate import ANIMATION_CLASS, FRAME_CLASS, SAVE_DPI, AnimationWidget
from tests.services_setup import SERVICES

K = EventKind
RETRYING = PipelineConfig(
    concurrency=3, queue_maxsize=5, max_attempts=3, backoff=Backoff(base_s=0.5, jitter=True)
)


def retrying(engine: str = "auto", n_items: int = 150, seed: int = 2):
    return simulate(
        Scenario(
            arrivals=Poisson(rate=3.0),
            service=Exponential(mean=1.0),
            config=RETRYING,
            n_items=n_items,
            seed=seed,
            failures=IndependentFailures(p=0.3),
        ),
        engine=engine,
    )


def stages_of(result):
    return (
        list(result.stages.values())
        if isinstance(getattr(result, "stages", None), dict)
        else [result]
    )


def assert_accounts(result, timeline: Timeline) -> None:
    """Every frame: each item in one zone, the counts add up, and they agree with the
    run's exact step series at that time."""
    for index in range(len(timeline)):
        frame = timeline.frame(index)
        for stage, shown in zip(stages_of(result), frame.stages, strict=True):
            n = len(stage.columns.arrival_s)
            assert sum(shown.counts.values()) == n
            drawn = [shown.upstream, shown.queue, shown.workers[shown.workers >= 0], shown.retry]
            drawn += list(shown.bins.values())
            ids = np.concatenate(drawn)
            assert len(ids) == len(np.unique(ids)), "an item is in two zones"
            for zone, held in (
                ("upstream", shown.upstream),
                ("queue", shown.queue),
                ("retry", shown.retry),
            ):
                assert shown.counts[zone] == len(held)
            s = stage.series
            row = int(np.searchsorted(s.time_s, frame.time_s, side="right")) - 1
            expected = (
                s.queue_depth[row],
                s.in_flight[row],
                s.retry_waiting[row],
                s.upstream_backlog[row],
            )
            got = tuple(shown.counts[zone] for zone in ("queue", "running", "retry", "upstream"))
            assert got == tuple(int(v) for v in expected), (index, shown.name)


def final_counts(result) -> dict[str, int]:
    frame = Timeline(result, max_frames=10**9).frame
    timeline_len = len(Timeline(result, max_frames=10**9))
    return frame(timeline_len - 1).stages[-1].counts


# -- frame states -------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["asyncio", "kernel"])
def test_every_item_is_in_one_zone_and_the_counts_agree_with_the_series(engine):
    result = retrying(engine)
    assert result.summary["retries_total"] > 0
    assert_accounts(result, Timeline(result, max_frames=10**9))


def test_the_last_frame_holds_the_run_s_outcome_counts():
    result = retrying()
    counts = final_counts(result)
    s = result.summary
    assert counts["completed"] == s["items_completed"]
    assert counts["dead_lettered"] == s["items_dead_lettered"]
    assert counts.get("unfinished", 0) == s["items_unfinished"]
    assert all(counts[zone] == 0 for zone in ZONES)


def test_shedding_and_an_unbounded_queue_account_for_every_item():
    shed = simulate(
        Scenario(
            arrivals=Poisson(rate=4.0),
            service=Exponential(mean=1.0),
            n_items=200,
            seed=1,
            config=PipelineConfig(concurrency=2, queue_maxsize=3, on_full="reject"),
        )
    )
    assert shed.summary["items_shed"] > 0
    assert_accounts(shed, Timeline(shed, max_frames=10**9))
    assert final_counts(shed)["shed"] == shed.summary["items_shed"]
    unbounded = simulate(
        Scenario(
            arrivals=Poisson(rate=1.5),
            service=Exponential(mean=1.0),
            n_items=200,
            seed=1,
            config=PipelineConfig(concurrency=2, queue_maxsize=None),
        )
    )
    assert_accounts(unbounded, Timeline(unbounded, max_frames=10**9))


def test_items_the_drain_hands_back_leave_at_the_run_s_end():
    with pytest.warns(DrainTimeoutWarning):
        cut = simulate(
            Scenario(
                arrivals=Poisson(rate=3.0),
                service=Exponential(mean=1.0),
                n_items=120,
                seed=1,
                config=PipelineConfig(concurrency=2, queue_maxsize=None, drain_timeout_s=5.0),
            )
        )
    assert cut.summary["items_unfinished"] > 0
    timeline = Timeline(cut, max_frames=10**9)
    assert_accounts(cut, timeline)
    assert final_counts(cut)["unfinished"] == cut.summary["items_unfinished"]
    assert timeline.frame(len(timeline) - 2).stages[0].counts.get("unfinished", 0) == 0


def test_a_chain_with_fan_out_accounts_for_every_stage():
    result = simulate(
        Scenario(
            arrivals=Poisson(rate=2.0),
            stages=[
                StageSpec(
                    name="split",
                    service=Exponential(mean=0.3),
                    fan_out=2,
                    config=PipelineConfig(concurrency=2, queue_maxsize=4),
                ),
                StageSpec(
                    name="write",
                    service=Exponential(mean=0.5),
                    config=PipelineConfig(concurrency=2, queue_maxsize=3, max_attempts=2),
                    failures=IndependentFailures(p=0.2),
                ),
            ],
            n_items=80,
            seed=3,
        ),
        engine="asyncio",
    )
    timeline = Timeline(result, max_frames=10**9)
    assert_accounts(result, timeline)
    # A parent whose children wait in the hand-off holds its worker: blocked after service.
    blocked = []
    for index in range(len(timeline)):
        split, write = timeline.frame(index).stages
        assert split.blocked + split.counts["running"] <= split.concurrency
        assert split.blocked <= len(np.unique(write.upstream // 2)) and write.blocked == 0
        blocked.append(split.blocked)
    assert max(blocked) >= 1
    end = timeline.frame(len(timeline) - 1)
    split, write = end.stages
    assert "handed_on" in split.counts and "completed" not in split.counts
    assert write.counts["completed"] == result.summary["items_completed"]
    # Every child handed on arrives at the next stage, two per parent.
    assert (
        sum(v for k, v in write.counts.items() if k != "not_arrived")
        == 2 * split.counts["handed_on"]
    )


def assert_same_frames(engine, kernel) -> None:
    assert (engine.engine, kernel.engine) == ("asyncio", "kernel")
    a, b = Timeline(engine, max_frames=10**9), Timeline(kernel, max_frames=10**9)
    assert len(a) == len(b)
    np.testing.assert_allclose(a.times_s, b.times_s, rtol=0, atol=1e-9)
    for index in range(len(a)):
        for x, y in zip(a.frame(index).stages, b.frame(index).stages, strict=True):
            for zone in ("upstream", "queue", "workers", "retry"):
                np.testing.assert_array_equal(getattr(x, zone), getattr(y, zone), err_msg=zone)
            assert (x.counts, x.blocked) == (y.counts, y.blocked)
            assert x.bins.keys() == y.bins.keys()
            for name in x.bins:
                np.testing.assert_array_equal(x.bins[name], y.bins[name])


def test_the_kernel_and_the_engine_give_the_same_frames():
    assert_same_frames(retrying("asyncio"), retrying("kernel"))


def split_and_write(split: PipelineConfig, write: PipelineConfig, *, rate: float, seed: int):
    """Two stages: ``split`` fans each item out in two, ``write`` fails 20% of attempts."""
    return Scenario(
        arrivals=Poisson(rate=rate),
        stages=[
            StageSpec(name="split", service=Exponential(mean=0.3), fan_out=2, config=split),
            StageSpec(
                name="write",
                service=Exponential(mean=0.4),
                failures=IndependentFailures(p=0.2),
                config=write,
            ),
        ],
        n_items=60,
        seed=seed,
    )


def test_the_kernel_and_the_engine_give_the_same_frames_of_a_chain():
    split = PipelineConfig(concurrency=2, queue_maxsize=2)
    write = PipelineConfig(
        concurrency=3, queue_maxsize=3, max_attempts=2, backoff=Backoff(base_s=0.5)
    )
    scenario = split_and_write(split, write, rate=2.5, seed=5)
    assert_same_frames(simulate(scenario, engine="asyncio"), simulate(scenario, engine="kernel"))


def test_queue_slot_zero_is_the_next_to_start_and_a_running_item_keeps_its_worker():
    result = retrying()
    start, log = result.columns.start_s, result.columns.attempt_log
    owner = np.repeat(np.arange(len(start)), result.columns.attempts)
    timeline = Timeline(result, max_frames=10**9)
    previous = None
    for index in range(len(timeline)):
        frame = timeline.frame(index)
        stage = frame.stages[0]
        if len(stage.queue):
            upcoming = log.start_s > frame.time_s
            first_next = {}
            for item, began in zip(owner[upcoming], log.start_s[upcoming], strict=True):
                first_next.setdefault(int(item), began)
            nexts = [first_next.get(int(item), math.inf) for item in stage.queue]
            assert nexts == sorted(nexts)
        if previous is not None:
            for slot, item in enumerate(previous.workers):
                if item >= 0 and item in stage.workers:
                    assert stage.workers[slot] == item  # the same attempt stays put
        previous = stage


def test_an_empty_run_has_one_frame_and_nothing_in_it():
    result = simulate(
        Scenario(arrivals=Poisson(rate=1.0), service=Constant(value=1.0), n_items=0, seed=1)
    )
    timeline = Timeline(result)
    assert len(timeline) == 1
    stage = timeline.frame(0).stages[0]
    assert sum(stage.counts.values()) == 0
    assert len(stage.queue) == 0 and (stage.workers == -1).all()


def test_one_item_moves_through_each_zone_in_turn():
    result = simulate(
        Scenario(arrivals=Poisson(rate=1.0), service=Constant(value=2.0), n_items=1, seed=1)
    )
    timeline = Timeline(result)
    zones = [timeline.frame(i).stages[0].zone_of(0) for i in range(len(timeline))]
    assert zones[0] == "elsewhere"  # not arrived at 0 s
    assert zones[-1] == "completed"
    assert "running" in zones


def recorded(events, arrivals, end_s, config):
    """A run built from an event log (the recorder's own tables, no engine)."""
    recorder = Recorder()
    for kind, when, item in events:
        recorder.kinds.append(kind)
        recorder.times.append(when)
        recorder.ids.append(item)
    arrival = np.asarray(arrivals, dtype=float)
    columns = item_columns(arrival, recorder)
    return SimpleNamespace(
        columns=columns,
        series=step_series(arrival, recorder, end_s),
        scenario=SimpleNamespace(config=config),
    )


def test_all_items_shed():
    config = PipelineConfig(concurrency=1, queue_maxsize=1, on_full="reject")
    run = recorded(
        [(K.SHED, t, i) for i, t in enumerate([0.5, 1.0, 1.5])], [0.5, 1.0, 1.5], 2.0, config
    )
    timeline = Timeline(run)
    counts = [timeline.frame(i).stages[0].counts for i in range(len(timeline))]
    assert [c["shed"] for c in counts] == [0, 1, 2, 3]
    assert all(sum(c.values()) == 3 for c in counts)
    assert RunArtist(timeline).render().shape[2] == 4


def three_items(then: list, end_s: float):
    """Three items on one worker, with no deadline in the config: item 0 starts at
    once, items 1 and 2 queue at 0.5 and 0.6 s; ``then``: the events after that."""
    events = [(K.ADMITTED, 0.0, 0), (K.STARTED, 0.0, 0), (K.ADMITTED, 0.5, 1)]
    events.append((K.ADMITTED, 0.6, 2))
    config = SimpleNamespace(concurrency=1, queue_maxsize=4, on_full="block")
    return recorded(events + then, [0.0, 0.5, 0.6], end_s, config)


def test_an_expired_item_leaves_at_its_recorded_expiry_and_an_unknown_outcome_gets_a_bin():
    then = [(K.COMPLETED, 1.0, 0), (K.STARTED, 1.0, 2), (K.EXPIRED, 2.5, 1)]
    run = three_items([*then, (K.COMPLETED, 3.0, 2)], 4.0)
    assert run.columns.expired_s[1] == 2.5
    run.columns.outcome[2] = 9  # an outcome this version has no name for
    timeline = Timeline(run)
    times = list(timeline.times_s)
    at = {t: timeline.frame(i).stages[0] for i, t in enumerate(times)}
    assert at[1.0].zone_of(1) == "queue" and at[1.0].counts["queue"] == 1
    assert at[2.5].zone_of(1) == "expired" and at[2.5].counts["queue"] == 0
    last = at[times[-1]]
    assert last.zone_of(1) == "expired" and last.counts["expired"] == 1
    assert last.zone_of(2) == "outcome 9" and last.counts["outcome 9"] == 1
    assert sum(last.counts.values()) == 3
    AnimationWidget(run)  # draws every bin


def test_a_retry_is_in_the_queue_from_its_recorded_readmission_whatever_starts_first():
    """Item 0's retry is readmitted first, item 1's (of a higher priority) starts first:
    the retry lane and the queue follow the readmissions, not the start order."""
    failures = [(K.RETRY_SCHEDULED, 1.0, 0), (K.STARTED, 1.0, 1), (K.RETRY_SCHEDULED, 1.5, 1)]
    readmissions = [(K.STARTED, 1.5, 2), (K.READMITTED, 2.0, 0), (K.READMITTED, 3.0, 1)]
    starts = [(K.COMPLETED, 4.0, 2), (K.STARTED, 4.0, 1), (K.COMPLETED, 5.0, 1)]
    last = [(K.STARTED, 5.0, 0), (K.COMPLETED, 6.0, 0)]
    run = three_items([*failures, *readmissions, *starts, *last], 6.0)
    np.testing.assert_array_equal(run.columns.attempt_log.readmitted_s[[0, 2]], [2.0, 3.0])
    timeline = Timeline(run)
    at = {t: timeline.frame(i).stages[0] for i, t in enumerate(timeline.times_s)}
    assert (at[1.5].retry.tolist(), at[1.5].queue.tolist()) == ([0, 1], [])
    assert (at[2.0].retry.tolist(), at[2.0].queue.tolist()) == ([1], [0])
    assert (at[3.0].retry.tolist(), at[3.0].queue.tolist()) == ([], [1, 0])
    assert_accounts(run, timeline)


def test_a_huge_run_is_thinned_to_a_window_in_bounded_memory():
    n = 200_000
    result = simulate(
        Scenario(
            arrivals=Poisson(rate=3.5),
            service=Exponential(mean=1.0),
            n_items=n,
            seed=4,
            config=PipelineConfig(concurrency=4, queue_maxsize=50),
        )
    )
    tracemalloc.start()
    try:
        timeline = Timeline(result, max_frames=300)
        frames = [timeline.frame(i) for i in (0, 150, 299)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(timeline) == 300 and timeline.thinned
    assert timeline.note.startswith("showing 0-") and "events in the window" in timeline.note
    # Scratch of a few arrays of the run's length, not frames x items.
    assert peak < 40 * n * 8
    assert timeline.items_in_window < 400
    for frame in frames:
        assert sum(frame.stages[0].counts.values()) == n
    late = Timeline(result, start_s=10_000.0, max_frames=50)
    assert late.start_s == 10_000.0 and len(late) == 50
    first = late.frame(0).stages[0]
    assert first.counts["completed"] > 30_000  # the ones before the window, counted
    assert sum(first.counts.values()) == n


@pytest.mark.parametrize("chain", [False, True])
def test_a_whole_run_with_more_events_than_frames_ends_on_the_run_s_end(chain):
    """The first events, then the run's end: a movie of the run ends on its outcome
    (one frame short of it, a save showed "completed 199" of 200)."""
    result = retrying(n_items=60, seed=5)
    if chain:
        result = simulate(
            Scenario(
                arrivals=Poisson(rate=2.0),
                stages=[
                    StageSpec(name="a", service=Exponential(0.3), fan_out=2),
                    StageSpec(
                        name="b",
                        service=Exponential(0.2),
                        failures=IndependentFailures(0.3),
                        config=RETRYING,
                    ),
                ],
                n_items=40,
                seed=5,
            )
        )
    events = len(Timeline(result, max_frames=10**9))
    for frames in (2, events // 2, events - 1):
        timeline = Timeline(result, max_frames=frames)
        assert len(timeline) == frames and timeline.ends_at_run_end
        assert timeline.times_s[-1] == timeline.run_end_s == timeline.end_s
        assert timeline.note.endswith(", then the run's end")
        assert f"({frames - 1:,} of {events:,} events" in timeline.note
        assert_accounts(result, timeline)  # the end frame agrees with the series there
        last = timeline.frame(frames - 1).stages[-1].counts
        assert last == final_counts(result)
    whole = Timeline(result, max_frames=events)
    assert not whole.ends_at_run_end and not whole.thinned
    one = Timeline(result, max_frames=1)  # no room for the end: the first frame alone
    assert len(one) == 1 and not one.ends_at_run_end
    cut = Timeline(result, end_s=timeline.run_end_s / 2, max_frames=3)  # the window's own end
    assert not cut.ends_at_run_end and cut.end_s < cut.run_end_s / 2


@pytest.mark.parametrize(
    ("index", "error"),
    [
        (-1, IndexError),
        (10**6, IndexError),
        (math.nan, TypeError),
        (1.0, TypeError),
        (True, TypeError),
        ("0", TypeError),
    ],
)
def test_a_bad_frame_index_is_one_clear_error(index, error):
    timeline = Timeline(retrying(n_items=10))
    with pytest.raises(error, match="frame index must be"):
        timeline.frame(index)
    assert timeline.frame(np.int64(1)).index == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"start_s": math.nan}, "start_s must be a finite"),
        ({"start_s": -1}, "start_s must be"),
        ({"start_s": 1e9}, "at most the run's end"),
        ({"end_s": 0.0}, "end_s must be after"),
        ({"start_s": 5.0, "end_s": 2.0}, "end_s must be after"),
        ({"max_frames": 0}, "max_frames must be an int >= 1"),
        ({"max_frames": 2.5}, "max_frames must be an int >= 1"),
    ],
)
def test_a_bad_window_is_one_line_naming_the_argument(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        Timeline(retrying(n_items=10), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"interval_ms": 0}, "interval_ms must be an int >= 10"),
        ({"interval_ms": 1.5}, "interval_ms must be an int >= 10"),
        ({"width_in": math.inf}, "width_in must be a number of inches"),
        ({"dpi": 0}, "dpi must be an int from 10 to 600"),
    ],
)
def test_bad_widget_settings_are_one_line_naming_them(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        AnimationWidget(retrying(n_items=10), **kwargs)


def test_not_a_result_is_a_type_error():
    with pytest.raises(TypeError, match="result must be a simulated run"):
        animate({"items": []})


# -- deadlines, patience and retries: every frame against the run's own series -------------

DEADLINES = ("classes", "constant", "per_item", "none")
"""How a random run's items expire: a class's patience, one ``max_wait_s`` for all, a
``max_wait_s`` function of the payload, or never (then the kernel runs it too)."""


def per_item_deadline(payload: int) -> float | None:
    """Seconds by item id: no deadline, an infinite one, a numpy float or a plain one."""
    if payload % 5 == 0:
        return None
    if payload % 7 == 0:
        return math.inf
    if payload % 3 == 0:
        return np.float64(0.25 + payload % 4)
    return 0.5 + (payload * 0.37) % 3.0


def random_scenario(seed: int, deadline: str) -> Scenario:
    """A small random run with retries and backoff, and the deadlines ``deadline`` names."""
    rng = np.random.default_rng([seed, DEADLINES.index(deadline)])
    concurrency = int(rng.integers(1, 4))
    maxsize = [None, 2, 6][int(rng.integers(3))]
    config = dict(
        concurrency=concurrency,
        queue_maxsize=maxsize,
        on_full="reject" if maxsize is not None and rng.random() < 0.3 else "block",
        max_attempts=int(rng.integers(1, 5)),
        backoff=Backoff(base_s=float(rng.choice([0.2, 1.0, 3.0])), jitter=bool(rng.random() < 0.5)),
        drain_timeout_s=[None, 30.0, 2.0][int(rng.integers(3))],
    )
    classes = None
    if deadline == "constant":
        config["max_wait_s"] = float(rng.uniform(0.5, 4.0))
    elif deadline == "per_item":
        config["max_wait_s"] = per_item_deadline
    elif deadline == "classes":
        patience = Exponential(mean=float(rng.uniform(0.5, 3.0)))
        classes = [
            ItemClass(name="gold", share=1, priority=0),
            ItemClass(name="bronze", share=2, priority=1, patience=patience),
        ]
    return Scenario(
        arrivals=Poisson(rate=concurrency * float(rng.uniform(0.8, 1.6))),
        service=Exponential(mean=1.0),
        config=PipelineConfig(**config),
        failures=IndependentFailures(p=float(rng.uniform(0.1, 0.4))),
        classes=classes,
        n_items=80,
        seed=seed,
    )


def random_run(seed: int, deadline: str, engine: str = "asyncio"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DrainTimeoutWarning)  # a cut drain is on purpose
        return simulate(random_scenario(seed, deadline), engine=engine)


def assert_frames_match_the_timeseries(result, timeline: Timeline) -> None:
    """Every frame's counts against each stage's ``timeseries`` at its time, and the bins
    against its items table: completed (handed on), dead letters, expired (at
    ``expired_s``), shed, unfinished."""
    stages = stages_of(result)
    for number, stage in enumerate(stages):
        series, items = stage.timeseries, stage.items
        times = series["time_s"].to_numpy()
        arrival = items["arrival_s"].to_numpy()
        outcome = items["outcome"].astype(str).to_numpy()
        expired_s = items["expired_s"].to_numpy()
        done = "completed" if number == len(stages) - 1 else "handed_on"
        for index in range(len(timeline)):
            frame = timeline.frame(index)
            shown = frame.stages[number]
            t = frame.time_s
            row = series.iloc[int(np.searchsorted(times, t, side="right")) - 1]
            counts = shown.counts
            where = (index, t, shown.name)
            assert counts["queue"] == len(shown.queue) == row["queue_depth"], where
            assert counts["running"] == (shown.workers >= 0).sum() == row["in_flight"], where
            assert counts["retry"] == len(shown.retry) == row["retry_waiting"], where
            assert counts["upstream"] == len(shown.upstream) == row["upstream_backlog"], where
            inside = counts["queue"] + counts["running"] + counts["retry"]
            assert inside == row["in_system"], where
            assert counts.get(done, 0) == row["completed"], where
            assert counts.get("dead_lettered", 0) == row["dead_letters"], where
            assert counts.get("expired", 0) == np.count_nonzero(expired_s <= t), where
            shed = (outcome == "shed") & (arrival <= t)
            assert counts.get("shed", 0) == np.count_nonzero(shed), where
            unfinished = (outcome == "unfinished").sum() if t >= stage.series.end_s else 0
            assert counts.get("unfinished", 0) == unfinished, where
            assert counts["not_arrived"] == np.count_nonzero(~(arrival <= t)), where
            assert sum(counts.values()) == len(items), where
            # The expired items drawn are the ones that expired inside the window by now;
            # at the run's end after a cut window, those of them that arrived inside it.
            drawn = set(shown.bins.get("expired", np.empty(0, int)).tolist())
            kept_to = timeline.times_s[-2] if timeline.ends_at_run_end else timeline.end_s
            window = (expired_s >= timeline.start_s) & (expired_s <= t) & (arrival <= kept_to)
            assert drawn == set(np.flatnonzero(window)), where


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("deadline", DEADLINES)
def test_every_frame_agrees_with_the_timeseries_on_random_runs(deadline, seed):
    engines = ["asyncio", "kernel"] if deadline == "none" else ["asyncio"]
    runs = [random_run(seed, deadline, engine) for engine in engines]
    for result in runs:
        assert result.engine in engines
        assert_frames_match_the_timeseries(result, Timeline(result, max_frames=10**9))
        # A window that starts mid-run counts what left before it and draws the rest.
        middle = result.summary["sim_time_s"] / 3
        assert_frames_match_the_timeseries(result, Timeline(result, start_s=middle, max_frames=40))
    if len(runs) == 2:
        assert_same_frames(*runs)


@pytest.mark.parametrize("seed", range(3))
def test_every_frame_of_a_chain_with_deadlines_agrees_with_its_stages_timeseries(seed):
    split = PipelineConfig(concurrency=1, queue_maxsize=3, max_wait_s=per_item_deadline)
    write = PipelineConfig(
        concurrency=2, queue_maxsize=3, max_attempts=3, backoff=Backoff(base_s=0.7), max_wait_s=1.0
    )
    scenario = split_and_write(split, write, rate=3.0, seed=seed)
    result = simulate(scenario)
    assert all(stage.summary["items_expired"] for stage in result.stages.values())
    items, write = result.items, result.stages["write"].items
    expired = (items["outcome"] == "expired").to_numpy()
    np.testing.assert_array_equal(items["expired_s"], write["expired_s"])
    assert items["expired_s"][expired].notna().all() and items["expired_s"][~expired].isna().all()
    assert_frames_match_the_timeseries(result, Timeline(result, max_frames=10**9))
    assert_frames_match_the_timeseries(result, Timeline(result, start_s=5.0, max_frames=40))


ZONE_AFTER = {
    K.ADMITTED: "queue",
    K.STARTED: "running",
    K.RETRY_SCHEDULED: "retry",
    K.READMITTED: "queue",
    K.COMPLETED: "completed",
    K.DEAD_LETTERED: "dead_lettered",
    K.EXPIRED: "expired",
    K.SHED: "shed",
    K.UNFINISHED: "unfinished",
}
"""The zone an item is in after each event of its own."""


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("deadline", DEADLINES)
def test_every_item_is_where_the_run_s_event_log_puts_it(deadline, seed):
    """Item by item, frame by frame: the zone of each item is the one its last event
    (at or before the frame's time) left it in, priorities and readmitted retries too."""
    scenario = random_scenario(seed, deadline)
    result = random_run(seed, deadline)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DrainTimeoutWarning)
        _, arrival, recorder = run_virtual(run_engine(scenario, 0))
    kinds, times, ids = recorder.arrays()
    mine = (ids >= 0) & np.isin(kinds, list(ZONE_AFTER))
    # In the log's (time) order: several events of one item may share an instant.
    events = list(zip(times[mine].tolist(), ids[mine].tolist(), kinds[mine].tolist(), strict=True))
    arrivals = sorted(zip(arrival.tolist(), range(len(arrival)), strict=True))
    expected = ["elsewhere"] * len(arrival)
    timeline = Timeline(result, max_frames=10**9)
    for index in range(len(timeline)):
        frame = timeline.frame(index)
        while arrivals and arrivals[0][0] <= frame.time_s:
            expected[arrivals.pop(0)[1]] = "upstream"
        while events and events[0][0] <= frame.time_s:
            _, item, kind = events.pop(0)
            expected[item] = ZONE_AFTER[K(kind)]
        (shown,) = frame.stages
        got = [shown.zone_of(item) for item in range(len(arrival))]
        assert got == expected, (index, frame.time_s)


def test_the_random_runs_expire_retry_and_cut_their_drains():
    """The random runs above do reach what they are there to test."""
    summaries = [random_run(seed, d).summary for seed in range(6) for d in DEADLINES[:3]]
    for key in ("items_expired", "retries_total", "items_dead_lettered", "items_shed"):
        assert sum(s[key] for s in summaries) > 0, key
    assert any(s["items_unfinished"] for s in summaries)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("deadline", DEADLINES[:3])
def test_the_items_table_gives_the_instant_each_expired_item_expired(deadline, seed):
    result = random_run(seed, deadline)
    items = result.items
    expired = (items["outcome"] == "expired").to_numpy()
    expired_s = items["expired_s"].to_numpy()
    assert expired.sum() == result.summary["items_expired"]
    assert np.isfinite(expired_s[expired]).all() and np.isnan(expired_s[~expired]).all()
    # An expired item never finished: no finish, no latency, in no latency statistic.
    assert items["finish_s"][expired].isna().all() and items["latency_s"][expired].isna().all()
    admitted = items["admitted_s"].to_numpy()
    assert (expired_s[expired] >= admitted[expired]).all()
    config = result.scenario.config
    if config.max_wait_s is not None:
        # At its deadline (queued then, a first attempt or a readmitted retry), or at the
        # end of a failed attempt whose retry would have come too late.
        fn = config.max_wait_s if callable(config.max_wait_s) else lambda _: config.max_wait_s
        ids = np.flatnonzero(expired)
        deadline_s = admitted[ids] + np.array([float(fn(int(i))) for i in ids])
        attempts, log = result.columns.attempts, result.columns.attempt_log
        last = (np.cumsum(attempts) - 1)[ids]
        at_failure = (attempts[ids] > 0) & np.isclose(
            expired_s[ids], log.end_s[last], rtol=0, atol=1e-9
        )
        assert (log.ending[last[at_failure]] == log.ENDINGS.index("retried")).all()
        np.testing.assert_allclose(
            expired_s[ids][~at_failure], deadline_s[~at_failure], rtol=0, atol=1e-9
        )
    # The timeseries balances at every row with these instants: every arrived item is
    # upstream, inside, completed, dead-lettered, shed, expired or handed back.
    series = result.timeseries
    t = series["time_s"].to_numpy()
    outcome = items["outcome"].astype(str).to_numpy()
    arrival = items["arrival_s"].to_numpy()

    def by(times):
        return np.searchsorted(np.sort(times), t, side="right")

    unfinished = np.where(
        t >= result.summary["sim_time_s"], np.count_nonzero(outcome == "unfinished"), 0
    )
    left = (
        series["completed"]
        + series["dead_letters"]
        + by(arrival[outcome == "shed"])
        + by(expired_s[expired])
        + unfinished
    )
    np.testing.assert_array_equal(by(arrival), series["lag_items"] + left)


def test_a_per_item_deadline_animates():
    result = random_run(0, "per_item")
    assert result.summary["items_expired"] > 0
    player = animate(result)
    player.play.value = len(player) - 1
    expired = result.summary["items_expired"]
    assert f"expired {expired:,}" in player.counters.value


# -- the widget ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def player():
    return animate(retrying(n_items=40), max_frames=24)


def test_the_widget_is_a_play_control_linked_to_a_slider(player):
    assert isinstance(player, AnimationWidget)
    assert isinstance(player.play, widgets.Play) and player.play.max == len(player) - 1
    assert ANIMATION_CLASS in player.widget._dom_classes
    assert "pipeline-widget" not in player.widget._dom_classes  # not a focused widget
    assert isinstance(player.link, widgets.widget_link.Link)
    assert player.link.source == (player.play, "value")
    assert FRAME_CLASS in player.image._dom_classes
    bundle = player._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    first_png, first_counters = player.image.value, player.counters.value
    player.play.value = 20  # what a played step sends; the slider follows
    assert player.slider.value == 20 and player.state.index == 20
    assert player.image.value != first_png and player.counters.value != first_counters
    player.slider.value = 0
    assert player.image.value == first_png and player.play.value == 0
    assert "t = " in player.counters.value and "queue depth" in player.counters.value
    assert (
        "showing 0-" in player.note.value
        and "(23 of " in player.note.value
        and player.note.value.endswith("the run&#x27;s end</span>")
    )


def test_save_writes_a_gif_with_every_frame_twice_over(player, tmp_path):
    path = tmp_path / "run.gif"
    assert player.save(path) == path
    first = path.read_bytes()
    with Image.open(path) as gif:
        assert gif.format == "GIF"
        assert sum(1 for _ in ImageSequence.Iterator(gif)) == len(player)
    player.save(str(path), fps=4)  # again, over the first
    assert path.stat().st_size > 0 and path.read_bytes() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.gif"]  # nothing partial left
    assert player.state.index == player.slider.value


def test_a_saved_movie_is_readable_and_ends_on_the_run_s_outcome(tmp_path):
    result = retrying(n_items=40)
    player = animate(result, max_frames=24)  # fewer frames than events: cut, then the end
    path = player.save(tmp_path / "run.gif")
    artist = RunArtist(player.timeline, dpi=SAVE_DPI)
    texts = [*artist.figure.texts, *(t for ax in artist.figure.axes for t in ax.texts)]
    assert min(t.get_fontsize() for t in texts) * SAVE_DPI / 72 >= 10  # pixels, every text
    with Image.open(path) as gif:
        assert gif.size[0] >= 900 and gif.n_frames == len(player) == 24
    last = player.timeline.frame(len(player) - 1)
    assert last.time_s == result.summary["sim_time_s"]
    assert last.stages[-1].counts["completed"] == result.summary["items_completed"]


def test_save_to_a_bad_place_is_one_line_naming_the_path(player, tmp_path):
    missing = tmp_path / "no" / "such" / "run.gif"
    with pytest.raises(FileNotFoundError, match=f"cannot save the animation to {missing}"):
        player.save(missing)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(NotADirectoryError, match="is not a folder") as caught:
        player.save(a_file / "run.gif")
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match=r"path must end in \.gif or \.mp4"):
        player.save(tmp_path / "run.png")
    with pytest.raises(ValueError, match="fps must be"):
        player.save(tmp_path / "run.gif", fps=math.nan)
    assert list(tmp_path.iterdir()) == [a_file]


def test_an_unwritable_folder_is_one_line_and_leaves_nothing(player, tmp_path):
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o500)
    try:
        place = read_only
        if _writable(read_only):  # root writes anywhere but on a read-only file system
            place = Path("/sys")
            if not place.is_dir() or _writable(place):
                pytest.skip("running as root with no read-only folder to write to")
        target = place / "pipeline-animation-test.gif"
        with pytest.raises(
            PermissionError, match=f"cannot save the animation to {target}: "
        ) as caught:
            player.save(target)
        assert "\n" not in str(caught.value)
        assert not any(p.name.startswith(".pipeline-animation-test") for p in place.iterdir())
    finally:
        read_only.chmod(0o700)


def _writable(folder: Path) -> bool:
    try:
        (folder / "pipeline-animation-probe").open("wb").close()
    except OSError:
        return False
    (folder / "pipeline-animation-probe").unlink()
    return True


def test_save_an_mp4_where_ffmpeg_is_installed(player, tmp_path):
    path = tmp_path / "run.mp4"
    if not FFMpegWriter.isAvailable():
        with pytest.raises(RuntimeError, match="needs ffmpeg on PATH"):
            player.save(path)
        if os.environ.get("CI") == "true":
            pytest.fail("the MP4 test needs ffmpeg under CI=true (tests.services_setup installs)")
        pytest.skip(f"no ffmpeg on PATH: MP4 not written; to run it: {SERVICES['ffmpeg'].hint}")
    player.save(path)
    assert path.stat().st_size > 0


def test_a_chain_animates_and_saves(tmp_path):
    result = simulate(
        Scenario(
            arrivals=Poisson(rate=2.0),
            stages=[
                StageSpec(
                    name="a",
                    service=Exponential(mean=0.4),
                    config=PipelineConfig(concurrency=2, queue_maxsize=4),
                ),
                StageSpec(
                    name="b",
                    service=Exponential(mean=0.8),
                    config=PipelineConfig(concurrency=2, queue_maxsize=3),
                ),
            ],
            n_items=30,
            seed=3,
        )
    )
    chained = animate(result, max_frames=16)
    chained.play.value = 15
    assert "<b>b</b>" in chained.counters.value
    chained.save(tmp_path / "chain.gif")
    assert Path(tmp_path / "chain.gif").stat().st_size > 0


def test_an_empty_run_animates_and_saves(tmp_path):
    result = simulate(
        Scenario(arrivals=Poisson(rate=1.0), service=Constant(value=1.0), n_items=0, seed=1)
    )
    empty = animate(result)
    assert empty.play.max == 0
    empty.save(tmp_path / "empty.gif")
    with Image.open(tmp_path / "empty.gif") as gif:
        assert gif.format == "GIF"
