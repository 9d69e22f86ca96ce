"""A chain under faults: every item accounted for per stage and end to end, and never a hang.

On the virtual loop a run that can never progress raises DeadlockError, so a
hang fails the test instead of stalling it; the real-time tests carry a
timeout of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
from collections import Counter
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline import (
    Backoff,
    Chain,
    PermanentError,
    Pipeline,
    PipelineClosed,
    PipelineConfig,
    RetryLater,
    SourceError,
    Stage,
)
from pipeline.sim.vloop import run_virtual
from tests.accounting import assert_each_payload_once


def sleeping(seconds):
    async def handler(x):
        await asyncio.sleep(seconds)
        return x

    return handler


class Boom(BaseException):
    """A BaseException that is neither KeyboardInterrupt, SystemExit nor CancelledError."""


def stranded_and_unfinished(report):
    return sorted(
        x for stage in report.stages.values() for x in [*stage.unfinished, *stage.stranded]
    )


# -- handlers that misbehave ---------------------------------------------------------------


def test_a_handler_that_raises_dead_letters_in_its_own_stage_only(config):
    async def picky(x):
        await asyncio.sleep(0.1)
        if x == 3:
            raise PermanentError("no")
        return x

    chain = Chain(
        [
            Stage("a", sleeping(0.1), config(queue_maxsize=2, max_attempts=2)),
            Stage("b", picky, config(queue_maxsize=2, max_attempts=2)),
        ]
    )
    report = run_virtual(chain.run(range(6)))
    assert report.stages["a"].dead_letters == []
    assert [letter.payload for letter in report.stages["b"].dead_letters] == [3]
    assert report.completed == 5 and report.balanced


def test_a_hanging_handler_is_cut_off_by_the_chains_drain_timeout(config):
    async def hang(x):
        await asyncio.sleep(math.inf if x == 2 else 0.1)
        return x

    chain = Chain(
        [
            Stage("a", sleeping(0.1), config(queue_maxsize=2, max_attempts=2)),
            Stage("b", hang, config(queue_maxsize=2, max_attempts=2)),
        ],
        drain_timeout_s=5,
    )
    report = run_virtual(chain.run(range(5)))
    assert report.stages["b"].unfinished == [2]
    assert report.drain_timed_out and report.balanced
    assert report.finished_s <= report.started_s + 5.0 + 1.0


@pytest.mark.parametrize("where", ["head", "tail"])
def test_a_handler_that_swallows_cancellation_does_not_hang_the_close(config, where):
    async def swallow(x):
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            return x  # swallowed: the close must still end
        return x

    stages = [
        Stage("a", sleeping(0.1), config(queue_maxsize=2, max_attempts=2)),
        Stage("b", sleeping(0.1), config(queue_maxsize=2, max_attempts=2)),
    ]
    index = 0 if where == "head" else 1
    stages[index] = Stage(stages[index].name, swallow, config(queue_maxsize=2, max_attempts=2))
    report = run_virtual(Chain(stages, drain_timeout_s=1.0).run(range(6)))
    assert report.balanced and report.drain_timed_out


def test_a_pipeline_whose_handler_swallows_cancellation_still_closes(config):
    async def swallow(x):
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            return x

    pipe = Pipeline(swallow, config(max_attempts=2, drain_timeout_s=1.0, queue_maxsize=4))
    report = run_virtual(pipe.run(range(5)))
    assert report.finished_s == 1.0
    assert_each_payload_once(report, range(5))


@pytest.mark.parametrize(
    "value", [42, None, "text", b"bytes", {"a": 1}], ids=["int", "None", "str", "bytes", "dict"]
)
def test_a_fan_out_handler_returning_a_non_iterable_fails_its_attempt(config, value):
    async def bad(x):
        return value

    chain = Chain(
        [
            Stage("split", bad, config(queue_maxsize=2, max_attempts=2), fan_out=True),
            Stage("b", sleeping(0), config(queue_maxsize=2, max_attempts=2)),
        ]
    )
    report = run_virtual(chain.run(range(3)))
    letters = report.stages["split"].dead_letters
    assert [letter.payload for letter in letters] == [0, 1, 2]
    assert all(letter.attempts == 2 for letter in letters)  # retried like any failure
    assert "must return an iterable" in letters[0].errors[0].message
    assert report.completed == 0 and report.balanced


def test_a_fan_out_generator_that_raises_half_way_delivers_no_child(config):
    async def half(x):
        def rows():
            yield (x, 0)
            raise ValueError("page truncated")

        return rows()

    seen = []

    async def sink(row):
        seen.append(row)

    chain = Chain(
        [
            Stage("split", half, config(queue_maxsize=2, max_attempts=2), fan_out=True),
            Stage("sink", sink, config(queue_maxsize=2, max_attempts=2)),
        ]
    )
    report = run_virtual(chain.run(range(3)))
    assert seen == [] and report.stages["split"].outputs == 0
    assert len(report.stages["split"].dead_letters) == 3 and report.balanced


def test_a_batch_handler_raising_a_base_exception_closes_the_chain_and_propagates(config):
    async def boom(rows):
        await asyncio.sleep(1)
        raise Boom

    async def main():
        chain = Chain(
            [
                Stage("a", sleeping(0.1), config(queue_maxsize=2, max_attempts=2)),
                Stage("b", boom, config(queue_maxsize=2, max_attempts=2), batch_size=2),
            ]
        )
        with pytest.raises(Boom):
            await chain.run(range(20))
        return chain

    chain = run_virtual(main())
    assert chain.state.value == "closed"
    assert chain.report.balanced
    assert chain.report.offered < 20  # the failure stopped intake


def test_a_head_handler_raising_a_base_exception_propagates_after_the_whole_close(config):
    async def boom(x):
        await asyncio.sleep(0.5)
        if x == 3:
            raise Boom
        return x

    async def main():
        chain = Chain(
            [
                Stage("a", boom, config(queue_maxsize=2, max_attempts=2)),
                Stage("b", sleeping(5), config(queue_maxsize=2, max_attempts=2)),
            ]
        )
        with pytest.raises(Boom):
            await chain.run(range(10))
        return chain

    chain = run_virtual(main())
    assert chain.report.balanced and chain.state.value == "closed"


def test_outputs_waiting_for_room_when_the_drain_times_out_are_stranded_not_lost(config):
    async def hang(x):
        await asyncio.sleep(1000)
        return x

    chain = Chain(
        [
            Stage(
                "split",
                sleeping(0.1),
                config(max_attempts=2, concurrency=1, queue_maxsize=5),
                fan_out=False,
            ),
            Stage("stuck", hang, config(max_attempts=2, concurrency=1, queue_maxsize=1)),
        ],
        drain_timeout_s=3.0,
    )
    report = run_virtual(chain.run(range(5)))
    split, stuck = report.stages["split"], report.stages["stuck"]
    # stuck holds one item in its worker and one in its queue; split's worker waits
    # with the third; the fourth and fifth are still in split's queue.
    assert stuck.unfinished == [0, 1]
    assert split.stranded == [2]
    assert split.unfinished == [3, 4]
    assert stranded_and_unfinished(report) == [0, 1, 2, 3, 4]
    assert report.balanced


def test_children_of_a_parent_cut_short_in_its_hand_off_are_stranded_from_the_first_undelivered(
    config,
):
    async def split(x):
        return [(x, i) for i in range(4)]

    async def main():
        chain = Chain(
            [
                Stage(
                    "split",
                    split,
                    config(queue_maxsize=2, max_attempts=2, concurrency=1),
                    fan_out=True,
                ),
                Stage("slow", sleeping(10), config(max_attempts=2, concurrency=1, queue_maxsize=1)),
            ]
        )
        task = asyncio.ensure_future(chain.run([0]))
        await asyncio.sleep(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return chain.report

    report = run_virtual(main())
    # (0, 0) is in slow's worker, (0, 1) in its queue; the hand-off waited with (0, 2).
    assert report.stages["split"].stranded == [(0, 2), (0, 3)]
    assert report.stages["slow"].unfinished == [(0, 0), (0, 1)]
    assert report.balanced


# -- sources that misbehave ----------------------------------------------------------------


def test_a_source_that_raises_drains_the_chain_then_raises_with_the_chains_report(config):
    def source():
        yield from range(4)
        raise RuntimeError("feed broke")

    async def main():
        chain = Chain(
            [
                Stage("a", sleeping(0.1), config(queue_maxsize=2, max_attempts=2)),
                Stage("b", sleeping(0.2), config(queue_maxsize=2, max_attempts=2)),
            ]
        )
        with pytest.raises(SourceError, match="feed broke") as caught:
            await chain.run(source())
        return caught.value

    error = run_virtual(main())
    assert error.report.completed == 4 and error.report.balanced
    assert isinstance(error.__cause__, RuntimeError)


def test_a_source_that_is_not_iterable_is_a_type_error_before_anything_starts():
    chain = Chain([Stage("a", sleeping(0))])
    with pytest.raises(TypeError, match="source 0 must be an iterable"):
        run_virtual(chain.run(42))
    assert chain.state.value == "idle"


def test_a_chain_runs_once():
    async def main():
        chain = Chain([Stage("a", sleeping(0))])
        await chain.run([1])
        with pytest.raises(PipelineClosed, match="already run"):
            await chain.run([1])

    run_virtual(main())


# -- cancellation --------------------------------------------------------------------------


@pytest.mark.parametrize("cancels", [1, 2, 3])
@pytest.mark.parametrize("at_s", [0.0, 0.5, 3.0, 12.0])
def test_cancelling_the_run_closes_every_stage_before_the_cancel_reaches_the_caller(
    config, cancels, at_s
):
    async def slow_close(x):
        try:
            await asyncio.sleep(2)
        finally:
            await asyncio.sleep(0)  # a cleanup that takes a turn
        return x

    async def main():
        chain = Chain(
            [
                Stage("a", sleeping(1), config(queue_maxsize=2, max_attempts=2)),
                Stage("b", slow_close, config(queue_maxsize=2, max_attempts=2)),
                Stage(
                    "c",
                    sleeping(1),
                    config(queue_maxsize=2, max_attempts=2),
                    batch_size=2,
                    batch_window_s=1,
                ),
            ],
            drain_timeout_s=None,
        )
        task = asyncio.ensure_future(chain.run(range(30)))
        await asyncio.sleep(at_s)
        for _ in range(cancels):
            task.cancel()
            await asyncio.sleep(0)
        with pytest.raises(asyncio.CancelledError):
            await task
        return chain

    chain = run_virtual(main())
    assert chain.state.value == "closed"
    report = chain.report
    assert report.balanced
    assert report.completed + report.dead_lettered + report.unfinished == report.offered


# -- randomized faults ---------------------------------------------------------------------


FAULTS = ("ok", "ok", "error", "permanent", "hang", "self_cancel", "retry_later")

# Retry-After values of every numeric type a handler may hold (each is 0.25 s to 1 s).
RETRY_AFTERS = (
    1,
    0.5,
    np.int64(1),
    np.uint8(1),
    np.float32(0.25),
    np.float64(0.75),
    Decimal("0.5"),
    Fraction(3, 4),
)


@st.composite
def chain_plans(draw):
    n_stages = draw(st.sampled_from([1, 2, 3, 3]))
    stages = []
    for index in range(n_stages):
        batch_size = draw(st.sampled_from([1, 1, 2, 3])) if index > 0 else 1
        fan_out = draw(st.integers(0, 3)) if index < n_stages - 1 and batch_size == 1 else 0
        stages.append(
            dict(
                concurrency=draw(st.integers(1, 3)),
                maxsize=draw(st.sampled_from([1, 1, 2, 5, None])),
                # reject after a fan-out often: a burst of children into a reject stage
                on_full=draw(st.sampled_from(["block", "reject", "reject"])) if index else "block",
                max_attempts=draw(st.integers(1, 3)),
                fan_out=fan_out,
                batch_size=batch_size,
                faults=draw(st.lists(st.sampled_from(FAULTS), min_size=1, max_size=6)),
            )
        )
    return dict(
        stages=stages,
        n_items=draw(st.integers(0, 25)),
        drain_timeout_s=draw(st.sampled_from([0.0, 1.5, 6.0, None])),
        stop_at_s=draw(st.sampled_from([None, 0.0, 1.0, 4.0])),
        cancel_at_s=draw(st.sampled_from([None, None, 0.5, 3.0])),
        seed=draw(st.integers(0, 2**16)),
    )


def children(payload, fan_out):
    """A fan-out stage's outputs: distinct, so each child's outcome can be followed."""
    return [(payload, j) for j in range(fan_out)]


def build_stage(index, plan, rng, earliest, too_soon):
    """``earliest[(stage, payload)]``: the loop time a Retry-After forbids retrying before;
    an attempt that starts sooner is noted in ``too_soon`` (an assert in the handler would
    only be a failed attempt)."""
    faults = plan["faults"]
    name = f"s{index}"

    async def handler(payload):
        key = (name, tuple(payload) if isinstance(payload, list) else payload)
        loop = asyncio.get_running_loop()
        # The attempt after a RetryLater starts no sooner than it asked (virtual time: exact).
        if loop.time() < earliest.pop(key, -math.inf):
            too_soon.append((key, loop.time()))
        fault = faults[rng.randrange(len(faults))]
        # Later stages are slower, so queues fill and hand-offs wait.
        await asyncio.sleep(rng.choice([0.0, 0.5, 1.0]) * (index + 1))
        if fault == "retry_later":
            after = rng.choice(RETRY_AFTERS)
            earliest[key] = loop.time() + float(after)
            raise RetryLater("come back later", retry_after_s=after)
        if fault == "error":
            raise ValueError("flaky")
        if fault == "permanent":
            raise PermanentError("bad")
        if fault == "hang":
            await asyncio.sleep(1000.0)  # ends by itself: no run waits forever by design
        if fault == "self_cancel":
            raise asyncio.CancelledError
        if plan["fan_out"]:
            return children(payload, plan["fan_out"])
        return None if plan["batch_size"] > 1 else payload

    cfg = PipelineConfig(
        concurrency=plan["concurrency"],
        queue_maxsize=plan["maxsize"],
        on_full=plan["on_full"],
        max_attempts=plan["max_attempts"],
        backoff=Backoff(base_s=0.1),  # shorter than every Retry-After: the request decides
        keep_shed=None,  # every shed payload kept, so each one's outcome can be checked
    )
    return Stage(
        name,
        handler,
        cfg,
        fan_out=bool(plan["fan_out"]),
        batch_size=plan["batch_size"],
        batch_window_s=0.5 if plan["batch_size"] > 1 else None,
        rng=random.Random(index),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chain_plans())
def test_randomized_faults_keep_every_balance_and_never_hang(plan):
    rng = random.Random(plan["seed"])
    earliest, too_soon = {}, []
    stages = [
        build_stage(index, each, rng, earliest, too_soon)
        for index, each in enumerate(plan["stages"])
    ]

    async def main():
        chain = Chain(stages, drain_timeout_s=plan["drain_timeout_s"])
        loop = asyncio.get_running_loop()
        if plan["stop_at_s"] is not None:
            loop.call_later(plan["stop_at_s"], chain.stop)
        task = asyncio.ensure_future(chain.run(range(plan["n_items"])))
        if plan["cancel_at_s"] is not None:
            loop.call_later(plan["cancel_at_s"], task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return chain

    chain = run_virtual(main())
    report = chain.report
    assert chain.state.value == "closed"
    assert report.balanced, report
    for stage in report.stages.values():
        assert stage.balanced
    if plan["drain_timeout_s"] is None and plan["cancel_at_s"] is None:
        assert report.unfinished == 0
    assert_every_payload_followed(report, plan)
    assert not too_soon, f"attempts sooner than their Retry-After: {too_soon}"


def assert_every_payload_followed(report, plan):
    """Payload by payload, stage by stage: each offered payload has exactly one outcome,
    and the next stage is offered exactly the outputs of the completed ones that were
    not stranded (a count that balances could still lose one and count another twice)."""
    offered = list(range(report.offered))  # the source is read in order
    completed_at_tail = 0
    for number, (name, stage) in enumerate(report.stages.items()):
        completed = assert_each_payload_once(stage, offered)
        fan_out = plan["stages"][number]["fan_out"]
        outputs = Counter()
        for payload, count in completed.items():
            for output in children(payload, fan_out) if fan_out else [payload]:
                outputs[output] += count
        assert sum(outputs.values()) == stage.outputs, name
        stranded = Counter(stage.stranded)
        assert not stranded - outputs, f"{name} stranded what it never produced"
        offered = list((outputs - stranded).elements())
        completed_at_tail = stage.completed
    # The chain counts items: what its last stage completed (its outputs leave the chain).
    assert report.completed == completed_at_tail
