"""The live monitor and its helpers, on the virtual clock: seconds of sampling take milliseconds."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import matplotlib
import numpy as np
import pytest
from matplotlib.figure import Figure

from pipeline import Pipeline, PipelineConfig
from pipeline.sim.vloop import run_virtual
from pipeline.viz.live import (
    LiveMonitor,
    busy_time,
    live_figure,
    live_summary,
    monitor_run,
    paced,
    thread_usage,
    timed,
)

matplotlib.use("Agg")


async def tenth_of_a_second(x):
    await asyncio.sleep(0.1)
    return x


def small_pipeline(**overrides):
    settings = dict(concurrency=2, queue_maxsize=10)
    settings.update(overrides)
    return Pipeline(tenth_of_a_second, PipelineConfig(**settings))


def test_monitor_samples_on_the_loop_clock_until_the_pipeline_closes():
    async def main():
        return await monitor_run(small_pipeline(), range(40), every_s=0.25)

    report, samples = run_virtual(main())
    # 40 items, 0.1 s each, 2 workers: exactly 2 s of virtual time.
    assert report.duration_s == pytest.approx(2.0)
    assert samples.time_s.iloc[0] == 0.0
    assert np.allclose(np.diff(samples.time_s.iloc[:-1]), 0.25)
    assert samples.state.iloc[-1] == "closed"
    assert samples.completed.iloc[-1] == report.completed == 40
    assert samples.queue_size.max() == 10  # the burst fills the queue
    assert (np.diff(samples.completed) >= 0).all()


def test_paced_yields_each_item_at_its_time():
    async def main():
        loop = asyncio.get_running_loop()
        start = loop.time()
        return [(item, loop.time() - start) async for item in paced("abc", [0.5, 0.5, 2.0])]

    assert run_virtual(main()) == [("a", 0.5), ("b", 0.5), ("c", 2.0)]


def test_paced_items_whose_time_has_passed_come_at_once():
    async def main():
        loop = asyncio.get_running_loop()
        source = paced(range(3), [0.0, 1.0, 2.0])
        first = await anext(source)
        await asyncio.sleep(5.0)  # a blocked consumer
        rest = [item async for item in source]
        return first, rest, loop.time()

    assert run_virtual(main()) == (0, [1, 2], 5.0)


def test_monitor_redraws_into_an_output_and_always_draws_the_end(monkeypatch):
    class RecordingOutput:
        def __init__(self):
            self.clears = 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def clear_output(self, wait=False):
            self.clears += 1

    output = RecordingOutput()
    shown = []

    async def main():
        return await monitor_run(small_pipeline(), range(20), every_s=0.25, output=output)

    monkeypatch.setattr("IPython.display.display", shown.append)
    report, _ = run_virtual(main())
    assert report.completed == 20
    assert output.clears == len(shown) >= 2  # the empty figure first, the final one last
    assert all(isinstance(fig, Figure) for fig in shown)


def test_monitor_stop_is_harmless_twice_and_start_only_once():
    async def main():
        pipe = small_pipeline()
        monitor = LiveMonitor(pipe, every_s=0.5)
        monitor.start()
        with pytest.raises(RuntimeError, match="already started"):
            monitor.start()
        report = await pipe.run(range(4))
        await monitor.stop()
        await monitor.stop()
        return report, monitor.frame()

    report, samples = run_virtual(main())
    assert samples.completed.iloc[-1] == report.completed == 4


@pytest.mark.parametrize("every_s", [0, -1.0, float("nan")])
def test_bad_period_is_a_value_error(every_s):
    with pytest.raises(ValueError, match="every_s must be > 0"):
        LiveMonitor(small_pipeline(), every_s=every_s)


def test_monitor_needs_a_pipeline():
    with pytest.raises(TypeError, match="pipe must be a Pipeline"):
        LiveMonitor(object())


def test_timed_records_every_call_failures_included():
    def flaky(x):
        if x < 0:
            raise ValueError("negative")
        return x

    wrapped = timed(flaky)
    assert wrapped(3) == 3
    with contextlib.suppress(ValueError):
        wrapped(-1)
    assert len(wrapped.durations_s) == len(wrapped.cpu_s) == len(wrapped.started_s) == 2
    assert all(d >= 0 for d in wrapped.durations_s)
    assert all(0 <= cpu <= d for cpu, d in zip(wrapped.cpu_s, wrapped.durations_s, strict=True))
    assert wrapped.__name__ == "flaky"


def test_timed_refuses_coroutine_functions():
    with pytest.raises(TypeError, match="plain functions"):
        timed(tenth_of_a_second)


def test_live_summary_is_keyed_like_a_simulation_summary():
    async def main():
        return await monitor_run(small_pipeline(), range(40), every_s=0.25)

    report, samples = run_virtual(main())
    summary = live_summary(report, samples)
    assert summary["items_completed"] == 40
    assert summary["throughput_per_s"] == pytest.approx(20.0)
    assert summary["queue_depth_max"] == 10
    assert 0 < summary["queue_depth_mean"] <= 10
    assert summary["sim_time_s"] == pytest.approx(2.0)


def test_live_figure_draws_samples_and_an_empty_start():
    samples = [
        dict(
            time_s=t,
            queue_size=q,
            workers_busy=2,
            queue_maxsize=10,
            offered=o,
            completed=c,
            dead_lettered=0,
        )
        for t, q, o, c in [(0.0, 0, 0, 0), (0.25, 5, 8, 3), (0.5, 10, 14, 5)]
    ]
    assert isinstance(live_figure(samples, title="live"), Figure)
    assert isinstance(live_figure([]), Figure)


def test_monitor_measures_real_memory_with_tracemalloc():
    import tracemalloc

    held = []

    async def handler(x):
        held.append(bytearray(100_000))  # keep 100 kB per item alive
        await asyncio.sleep(0.01)

    async def main():
        pipe = Pipeline(handler, PipelineConfig(concurrency=2, queue_maxsize=4))
        monitor = LiveMonitor(pipe, every_s=0.05, measure_memory=True)
        monitor.start()
        await pipe.run(range(40))
        await monitor.stop()
        return monitor.frame()

    assert not tracemalloc.is_tracing()
    frame = asyncio.run(main())
    assert not tracemalloc.is_tracing()  # the monitor stops what it started
    grew = frame.traced_memory_bytes.iloc[-1] - frame.traced_memory_bytes.iloc[0]
    assert grew >= 30 * 100_000


def test_busy_time_counts_overlapping_spans_once():
    assert busy_time([]) == 0.0
    assert busy_time([(3.0, 4.0), (0.0, 1.0), (0.5, 2.0), (1.0, 1.5)]) == pytest.approx(3.0)
    assert busy_time([(0.0, 1.0), (1.0, 2.0)]) == pytest.approx(2.0)


def test_thread_usage_needs_a_timed_handler():
    with pytest.raises(TypeError, match="made by timed"):
        thread_usage(lambda x: x)


def test_thread_usage_counts_overlapping_calls_once():
    import threading
    import time

    # Four calls that each wait for the other three: they are in flight together for sure.
    together = threading.Barrier(4, timeout=60)  # liveness guard only

    def wait_for_the_others(x):
        together.wait()
        time.sleep(0.02)

    handler = timed(wait_for_the_others)
    report = asyncio.run(Pipeline(handler, PipelineConfig(concurrency=4)).run(range(8)))
    assert report.completed == 8
    usage = thread_usage(handler)
    assert usage["calls"] == 8
    # Accounting identities, whatever the machine's speed: overlaps count once in busy_s,
    # and no call uses more CPU than the time it took.
    assert max(handler.durations_s) <= usage["busy_s"] <= usage["thread_s"]
    assert usage["cpu_s"] <= usage["thread_s"]
    # Two rounds of four calls, each sleeping 20 ms with the others.
    assert usage["thread_s"] >= 8 * 0.02 and usage["busy_s"] >= 2 * 0.02


def gil_enabled() -> bool:
    check = getattr(sys, "_is_gil_enabled", None)  # Python 3.13+
    return True if check is None else check()


@pytest.mark.skipif(not gil_enabled(), reason="a free-threaded build runs Python in parallel")
def test_pure_python_threads_share_one_core():
    import hashlib

    def spin(x):
        digest = b"%d" % x
        for _ in range(3_000):
            digest = hashlib.sha256(digest).digest()
        return digest

    handler = timed(spin)
    report = asyncio.run(Pipeline(handler, PipelineConfig(concurrency=8)).run(range(200)))
    assert report.completed == 200
    usage = thread_usage(handler)
    # The GIL lets one thread run Python at a time: eight threads get one core between them,
    # however fast or busy the machine (a slower or busier one only lowers the figure).
    # The 5% is for the lock's hand-overs, which cost each thread a few microseconds.
    assert usage["cores"] <= 1.05


# -- a long run's samples stay bounded ------------------------------------------------------


def _long_run(items: int, **monitor_options):
    async def main():
        pipe = small_pipeline(concurrency=1)
        monitor = LiveMonitor(pipe, every_s=0.05, **monitor_options)
        monitor.start()
        report = await pipe.run(range(items))
        await monitor.stop()
        return report, monitor

    return run_virtual(main())


def test_a_long_runs_samples_are_bounded_evenly_spaced_and_span_the_run():
    report, monitor = _long_run(4000, max_samples=100)  # 400 s, 8,000 sample times
    samples = monitor.samples
    assert len(samples) <= 101
    times = np.array([s["time_s"] for s in samples])
    assert times[0] == 0.0
    assert times[-1] == pytest.approx(report.duration_s), "the newest sample is always last"
    assert samples[-1]["completed"] == report.completed == 4000
    steps = np.diff(times[:-1])
    assert np.allclose(steps, steps[0]) and steps[0] >= 0.05 * 64, "evenly spaced, coarser"
    assert times[-2] >= report.duration_s - steps[0] - 1e-9, "the kept ones reach the end"


def test_samples_are_bounded_by_default_and_none_keeps_every_one():
    assert LiveMonitor(small_pipeline()).max_samples == 10_000
    _, every = _long_run(400, max_samples=None)
    assert len(every.samples) >= 801  # every 0.05 s of 40 s, and the last
    for bad in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match="max_samples must be an integer >= 2 or None"):
            LiveMonitor(small_pipeline(), max_samples=bad)


@pytest.mark.slow  # two runs under tracemalloc: 3 s of a core
def test_the_monitors_memory_does_not_grow_with_the_run():
    import tracemalloc

    def peak(items):
        tracemalloc.start()
        try:
            _long_run(items, max_samples=50)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = peak(500), peak(5000)
    assert large - small < 64 * 1024, (small, large)
