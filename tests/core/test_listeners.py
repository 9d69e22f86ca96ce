"""The engine's public listener hook: ``Pipeline.add_listener`` and ``Chain.add_listener``.

What exporters (metrics, tracing) and a chain's observers attach through: one uniform
call per event, beside ``on_event``, isolated, removable; and ``statistics()`` carries
what they read (the oldest item's age, the waits of first attempts still running).
"""

from __future__ import annotations

import asyncio

import pytest

from pipeline import Chain, Pipeline, PipelineConfig, Stage
from pipeline.events import EventKind
from pipeline.sim.vloop import run_virtual


def test_added_listeners_hear_after_on_event_in_order_and_can_be_removed():
    heard: list[tuple[str, EventKind]] = []

    def named(name):
        return lambda kind, now_s, item: heard.append((name, kind))

    pipe = Pipeline(lambda x: x, on_event=named("user"))
    first = named("first")
    remove_first = pipe.add_listener(first)
    pipe.add_listener({EventKind.COMPLETED: named("second")})
    remove_first()
    remove_first()  # harmless twice
    pipe.remove_listener(first)  # and absent
    third = named("third")
    pipe.add_listener(third)
    report = asyncio.run(pipe.run(range(3)))
    assert report.completed == 3
    completed = [name for name, kind in heard if kind is EventKind.COMPLETED]
    assert completed == ["user", "second", "third"] * 3
    assert not any(name == "first" for name, _ in heard)


def test_a_listener_that_raises_is_counted_and_loses_nothing():
    pipe = Pipeline(lambda x: x, PipelineConfig(concurrency=2))
    pipe.add_listener({EventKind.STARTED: lambda kind, now_s, item: 1 / 0})
    report = asyncio.run(pipe.run(range(10)))
    assert report.completed == 10
    assert report.statistics.listener_errors == 10


@pytest.mark.parametrize(
    ("listener", "message"),
    [
        (42, "listener must be callable or a mapping of EventKind to callables, got 42"),
        ({"COMPLETED": print}, "listener must map EventKind members to callables, got"),
        ({EventKind.COMPLETED: 3}, "listener must map EventKind members to callables, got"),
    ],
)
def test_a_bad_listener_is_one_line(listener, message):
    pipe = Pipeline(lambda x: x)
    with pytest.raises(TypeError, match=message):
        pipe.add_listener(listener)
    assert pipe.statistics().listener_errors == 0


def test_a_chain_adds_each_stage_s_listener_when_it_builds_them():
    heard: list[tuple[str, EventKind]] = []

    def make(stage):
        return {EventKind.COMPLETED: lambda kind, now_s, item: heard.append((stage, kind))}

    chain = Chain([Stage("a", lambda x: x), Stage("b", lambda x: x)], name="c")
    remove = chain.add_listener(make)
    report = asyncio.run(chain.run(range(4)))
    assert report.stages["b"].completed == 4
    assert sorted(stage for stage, _ in heard) == ["a"] * 4 + ["b"] * 4
    remove()
    remove()


def test_statistics_carry_the_oldest_age_and_the_running_first_waits():
    # Virtual time: two items admitted at 0 and 1; one worker takes the first at 2.
    async def main():
        gate = asyncio.Event()

        async def handle(x):
            await gate.wait()

        pipe = Pipeline(handle, PipelineConfig(concurrency=1))
        async with pipe:
            empty = pipe.statistics()
            pipe.put_nowait("a")
            await asyncio.sleep(1.0)
            pipe.put_nowait("b")
            await asyncio.sleep(1.0)
            during = pipe.statistics()
            gate.set()
        return empty, during, pipe.statistics()

    empty, during, after = run_virtual(main())
    assert empty.oldest_age_s == 0.0 and empty.first_attempt_waits_s == ()
    assert during.oldest_age_s == 2.0  # "a", admitted at 0, read at 2
    assert during.first_attempt_waits_s == (0.0,)  # "a" started at once; "b" queued
    assert after.oldest_age_s == 0.0 and after.first_attempt_waits_s == ()
