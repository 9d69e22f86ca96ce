"""What a run report promises under load shedding and uncancellable threads."""

from __future__ import annotations

import asyncio
import threading
import tracemalloc

import pytest

from pipeline import EventKind, Pipeline, PipelineConfig
from pipeline.records import ShedLog
from pipeline.sim.vloop import run_virtual


async def one_second(x):
    await asyncio.sleep(1.0)


def test_sustained_shedding_keeps_memory_bounded_and_the_count_exact():
    n, kilobyte = 20_000, 1024
    seen = 0

    def count_sheds(kind, now, payload):
        nonlocal seen
        seen += kind is EventKind.SHED

    def source():
        for index in range(n):
            yield bytes(kilobyte) + index.to_bytes(4, "big")  # a fresh 1 KiB payload each

    cfg = PipelineConfig(concurrency=1, queue_maxsize=1, on_full="reject", drain_timeout_s=None)
    tracemalloc.start()
    try:
        report = run_virtual(Pipeline(one_second, cfg, on_event=count_sheds).run(source()))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.balanced and len(report.shed) == seen == n - report.admitted
    assert len(report.shed.kept) == 1000 and report.shed.dropped == len(report.shed) - 1000
    # Keeping every payload would take n KiB (about 20 MiB); the log keeps 1000 (about
    # 1 MiB), so a run that kept more than about 150 bytes an item would fail.
    assert peak < 4 * 1024 * 1024
    assert report.shed.kept[-1] == bytes(kilobyte) + (n - 1).to_bytes(4, "big")


def test_keep_shed_none_keeps_every_payload_and_zero_keeps_none():
    def run(keep):
        cfg = PipelineConfig(
            concurrency=1, queue_maxsize=1, on_full="reject", keep_shed=keep, drain_timeout_s=None
        )
        return run_virtual(Pipeline(one_second, cfg).run(range(50)))

    everything, nothing = run(None), run(0)
    assert everything.shed == list(range(2, 50)) and everything.shed.dropped == 0
    assert len(nothing.shed) == 48 and nothing.shed.kept == [] and nothing.shed.dropped == 48
    assert everything.balanced and nothing.balanced


@pytest.mark.parametrize("keep", [-1, 1.5, True, "10"])
def test_keep_shed_must_be_a_count_or_none(keep):
    with pytest.raises((ValueError, TypeError), match="keep_shed"):
        PipelineConfig(keep_shed=keep)


def test_shed_log_reads_like_the_list_it_replaces_until_it_forgets():
    log = ShedLog(keep=3, payloads=range(3))
    assert log == [0, 1, 2] and len(log) == 3 and [*log] == [0, 1, 2]
    assert log + [9] == [0, 1, 2, 9] and [9] + log == [9, 0, 1, 2]  # noqa: RUF005
    log.append(3)
    assert len(log) == 4 and log.kept == [1, 2, 3] and log.dropped == 1
    assert log != [1, 2, 3]  # something was forgotten: not equal to any full list
    assert "shed=4" in repr(log) and "dropped=1" in repr(log)


def _held_writer():
    """A plain-function handler whose first call blocks until released."""
    written, started, release = [], threading.Event(), threading.Event()

    def write(x):
        started.set()
        release.wait()
        written.append(x)

    return write, written, started, release


async def _stop_while_item_zero_runs_on_its_thread(write, started):
    pipe = Pipeline(write, PipelineConfig(concurrency=1, drain_timeout_s=0))
    run = asyncio.ensure_future(pipe.run(range(3)))
    await asyncio.to_thread(started.wait)
    pipe.stop()
    return await run


def test_an_unfinished_item_whose_thread_still_runs_is_reported_abandoned():
    write, written, started, release = _held_writer()

    async def main():
        try:
            report = await _stop_while_item_zero_runs_on_its_thread(write, started)
            return report, list(written)
        finally:
            release.set()

    report, written_at_return = asyncio.run(main())
    assert report.balanced and report.unfinished == [0, 1, 2]
    assert report.abandoned == [0]  # items 1 and 2 never started: safe to send again
    assert written_at_return == [] and written == [0]  # the write landed after run() returned


def test_abandoned_is_reported_on_the_virtual_loop_too():
    write, _, started, release = _held_writer()

    async def main():
        try:
            return await _stop_while_item_zero_runs_on_its_thread(write, started)
        finally:
            release.set()

    report = run_virtual(main())
    assert report.unfinished == [0, 1, 2] and report.abandoned == [0]


def test_threads_that_finished_before_the_close_are_not_abandoned():
    def quick(x):
        return x

    report = run_virtual(Pipeline(quick, PipelineConfig(drain_timeout_s=None)).run(range(20)))
    assert report.completed == 20 and report.abandoned == [] and report.unfinished == []
