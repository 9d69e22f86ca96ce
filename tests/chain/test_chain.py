"""A chain of stages in real time: hand-off, backpressure, fan-out, batching, drain, reports.

Every run is on the virtual loop (a test of minutes of backoff takes
milliseconds, and a hang is a DeadlockError, not a stuck test), except the few
that check plain-function handlers on threads in real time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random

import pytest

from pipeline import Backoff, Chain, EventKind, Pipeline, Stage
from pipeline.sim.vloop import run_virtual
from tests.accounting import assert_each_payload_once


def sleeping(seconds, result=lambda x: x):
    async def handler(x):
        await asyncio.sleep(seconds)
        return result(x)

    return handler


def comparable(report):
    """Everything a RunReport says, in a form two runs can be compared by."""
    fields = {f.name: getattr(report, f.name) for f in dataclasses.fields(type(report))}
    fields["shed"] = (len(report.shed), report.shed.kept)
    fields["statistics"] = dataclasses.asdict(report.statistics)
    return {name: fields[name] for name in fields if name in _RUN_REPORT_FIELDS}


_RUN_REPORT_FIELDS = {
    "offered",
    "admitted",
    "completed",
    "dead_letters",
    "unfinished",
    "shed",
    "attempts",
    "drain_timed_out",
    "started_s",
    "finished_s",
    "statistics",
    "abandoned",
}


# -- a chain of one stage is a Pipeline ----------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"on_full": "reject", "queue_maxsize": 1},
        {"queue_maxsize": None},
        {"drain_timeout_s": 2.0},
        {"drain_timeout_s": 0.0},
        {"max_attempts": 3, "backoff": Backoff(base_s=0.5, jitter=True)},
        {"attempt_timeout_s": 0.7},
    ],
)
def test_a_chain_of_one_stage_gives_the_same_report_as_the_pipeline(config, overrides):
    cfg = config(**{"queue_maxsize": 2, "max_attempts": 2, **overrides})

    async def handler(x):
        # Item-dependent service and failures: every other item fails its first attempt.
        await asyncio.sleep(0.25 * (x % 4))
        if x % 5 == 1 or (x % 2 and handler.calls.setdefault(x, 0) == 0):
            handler.calls[x] = 1
            raise ValueError(f"item {x}")
        return x * 10

    def run_pipeline():
        handler.calls = {}
        return run_virtual(Pipeline(handler, cfg, rng=random.Random(7)).run(range(12)))

    def run_chain():
        handler.calls = {}
        stage = Stage("only", handler, cfg, rng=random.Random(7))
        return run_virtual(Chain([stage]).run(range(12)))

    alone, chained = run_pipeline(), run_chain()
    stage = chained.stages["only"]
    assert comparable(stage) == comparable(alone)
    assert chained.offered == alone.offered
    assert chained.completed == alone.completed
    assert chained.balanced and stage.balanced


# -- hand-off and backpressure -------------------------------------------------------------


def test_a_slow_second_stage_blocks_the_first_stage_and_then_the_source(config):
    read = []

    def source():
        for x in range(20):
            read.append(x)
            yield x

    async def main():
        chain = Chain(
            [
                Stage(
                    "fast", sleeping(0.1), config(max_attempts=2, concurrency=1, queue_maxsize=1)
                ),
                Stage(
                    "slow", sleeping(1.0), config(max_attempts=2, concurrency=1, queue_maxsize=1)
                ),
            ]
        )
        task = asyncio.ensure_future(chain.run(source()))
        await asyncio.sleep(5.05)
        # The slow stage finishes one item a second: after 5 s the source is read no
        # further than what the chain can hold (2 per stage) plus the 5 items done.
        reading_at_5s = len(read)
        report = await task
        return reading_at_5s, report

    reading_at_5s, report = run_virtual(main())
    assert reading_at_5s <= 5 + 2 + 2 + 1  # + the producer's item in hand
    fast = report.stages["fast"]
    assert report.completed == 20 and report.balanced
    assert fast.hand_off_blocked_s > 10  # the fast worker spent most of the run waiting
    assert fast.attempts == 20  # waiting for room is not an attempt, and nothing was retried
    assert fast.statistics.producer_blocked_s > 10  # and the source waited behind it
    assert report.duration_s == pytest.approx(20.1)  # the slow stage sets the pace


def test_waiting_for_room_downstream_never_counts_against_the_attempt_timeout(config):
    first = Stage(
        "first", sleeping(0.5), config(queue_maxsize=2, attempt_timeout_s=1.0, max_attempts=1)
    )
    second = Stage("second", sleeping(10.0), config(max_attempts=2, concurrency=1, queue_maxsize=1))
    report = run_virtual(Chain([first, second], drain_timeout_s=None).run(range(6)))
    assert report.stages["first"].dead_letters == []
    assert report.stages["first"].attempts == 6
    assert report.stages["first"].hand_off_blocked_s > 10
    assert report.completed == 6 and report.balanced


def test_outputs_of_one_stage_are_the_next_stages_payloads_in_order(config):
    seen = []

    async def record(x):
        seen.append(x)
        return x

    chain = Chain(
        [
            Stage(
                "double",
                sleeping(0.1, lambda x: 2 * x),
                config(queue_maxsize=2, max_attempts=2, concurrency=1),
            ),
            Stage("record", record, config(queue_maxsize=2, max_attempts=2, concurrency=1)),
        ]
    )
    report = run_virtual(chain.run(range(5)))
    assert seen == [0, 2, 4, 6, 8]
    assert report.stages["double"].outputs == 5 == report.stages["double"].handed_on


def test_a_reject_stage_sheds_what_the_stage_before_hands_it_and_counts_it_there(config):
    chain = Chain(
        [
            Stage("fast", sleeping(0.1), config(max_attempts=2, concurrency=4, queue_maxsize=10)),
            Stage(
                "slow",
                sleeping(5.0),
                config(max_attempts=2, concurrency=1, queue_maxsize=1, on_full="reject"),
            ),
        ]
    )
    report = run_virtual(chain.run(range(10)))
    slow = report.stages["slow"]
    assert len(slow.shed) > 0
    assert slow.offered == report.stages["fast"].handed_on == 10
    assert report.shed == len(slow.shed)
    assert report.balanced


# -- the hand-off admits as a source does ----------------------------------------------------

# (concurrency, queue_maxsize) of a reject stage, and bursts of children handed to it at once.
REJECT_JOINTS = [(3, 1), (1, 1), (2, 3), (4, 2)]
BURSTS = [1, 3, 4, 7, 12]


def burst_into(config, children, concurrency, maxsize, *, sources=False):
    """Hand ``children`` outputs of one item at once to an idle reject stage; its report."""

    async def split(page):
        return list(range(children))

    async def write(record):
        await asyncio.sleep(1.0)  # nobody finishes during the burst
        return record

    cfg = config(max_attempts=2, concurrency=concurrency, queue_maxsize=maxsize, on_full="reject")
    if sources:
        return run_virtual(Pipeline(write, cfg).run(range(children)))
    chain = Chain([Stage("fetch", split, fan_out=True), Stage("write", write, cfg)])
    return run_virtual(chain.run([0])).stages["write"]


@pytest.mark.parametrize(("concurrency", "maxsize"), REJECT_JOINTS)
@pytest.mark.parametrize("children", BURSTS)
def test_a_burst_handed_to_a_reject_stage_is_admitted_as_a_burst_from_a_source(
    config, children, concurrency, maxsize
):
    # K = queue_maxsize + concurrency: idle workers take the first children before the rest
    # are judged, exactly as for the same items offered by a source.
    joint = burst_into(config, children, concurrency, maxsize)
    source = burst_into(config, children, concurrency, maxsize, sources=True)
    assert joint.admitted == min(children, maxsize + concurrency) == source.admitted
    assert joint.shed == source.shed == list(range(maxsize + concurrency, children))
    assert joint.completed == source.completed == joint.admitted


def test_a_page_of_three_records_into_three_idle_reject_workers_is_written_in_real_time(config):
    # The asyncio loop itself, not the virtual one: the turn is the loop's, whatever the clock.
    async def split(page):
        return [(page, row) for row in range(3)]

    async def write(record):
        await asyncio.sleep(0.01)

    cfg = config(max_attempts=2, concurrency=3, queue_maxsize=1, on_full="reject")
    chain = Chain([Stage("fetch", split, fan_out=True), Stage("write", write, cfg)])
    report = asyncio.run(chain.run([1]))
    assert report.stages["write"].completed == 3 and report.shed == 0


def test_a_burst_handed_to_an_unbounded_stage_is_taken_by_every_idle_worker_at_once(config):
    starts = []

    async def split(page):
        return list(range(6))

    async def write(record):
        starts.append(asyncio.get_running_loop().time())
        await asyncio.sleep(1.0)

    chain = Chain(
        [
            Stage("fetch", split, fan_out=True),
            Stage("write", write, config(max_attempts=2, concurrency=3, queue_maxsize=None)),
        ]
    )
    report = run_virtual(chain.run([0]))
    assert starts == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0] and report.completed == 6


def test_a_burst_handed_to_a_batching_reject_stage_sheds_only_past_its_bound(config):
    # 12 records in batches of 2 into 3 workers and a queue of one batch: 4 batches fit.
    async def split(page):
        return list(range(12))

    async def write(batch):
        await asyncio.sleep(1.0)

    chain = Chain(
        [
            Stage("fetch", split, fan_out=True),
            Stage(
                "write",
                write,
                config(max_attempts=2, concurrency=3, queue_maxsize=1, on_full="reject"),
                batch_size=2,
            ),
        ]
    )
    report = run_virtual(chain.run([0]))
    write_report = report.stages["write"]
    assert write_report.completed == 8 and list(write_report.shed) == [8, 9, 10, 11]
    assert report.balanced


# -- what the chain counts: items ------------------------------------------------------------


def test_the_chain_counts_the_last_stages_items_not_the_outputs_of_its_fan_out(config):
    async def split(page):
        await asyncio.sleep(1.0)
        return [(page, row) for row in range(3)]

    chain = Chain(
        [
            Stage("fetch", sleeping(0.5), config(queue_maxsize=2, max_attempts=2)),
            Stage("split", split, config(queue_maxsize=2, max_attempts=2), fan_out=True),
        ]
    )
    report = run_virtual(chain.run(range(4)))
    tail = report.stages["split"]
    assert tail.completed == 4 and tail.outputs == 12
    assert report.completed == 4 and report.children_added == 0
    assert report.balanced


# -- fan-out -------------------------------------------------------------------------------


def test_fan_out_hands_on_every_child_in_order_and_balances_end_to_end(config):
    records = []

    async def pages(page):
        await asyncio.sleep(1.0)
        return [(page, row) for row in range(page)]  # page 0 has no records

    async def write(record):
        await asyncio.sleep(0.1)
        records.append(record)

    chain = Chain(
        [
            Stage(
                "fetch", pages, config(queue_maxsize=2, max_attempts=2, concurrency=1), fan_out=True
            ),
            Stage("write", write, config(max_attempts=2, concurrency=1, queue_maxsize=3)),
        ]
    )
    report = run_virtual(chain.run(range(5)))
    assert records == [(page, row) for page in range(5) for row in range(page)]
    fetch = report.stages["fetch"]
    assert fetch.completed == 5 and fetch.outputs == 10 == fetch.handed_on
    assert report.children_added == 5
    assert report.completed == 10 and report.balanced


def test_fan_out_takes_generators_and_async_generators(config):
    async def agen(n):
        for i in range(n):
            await asyncio.sleep(0.01)
            yield i

    async def async_gen_handler(n):
        return agen(n)

    async def generator_handler(n):
        return (i for i in range(n))

    for handler in (async_gen_handler, generator_handler):
        chain = Chain(
            [
                Stage("split", handler, config(queue_maxsize=2, max_attempts=2), fan_out=True),
                Stage("sink", sleeping(0), config(queue_maxsize=2, max_attempts=2)),
            ]
        )
        report = run_virtual(chain.run([1, 2, 3]))
        assert report.completed == 6 and report.balanced


def test_a_plain_function_fan_out_and_batch_handler_run_on_threads_in_real_time(config):
    def split(n):
        return list(range(n))

    def insert(rows):
        return [row + 100 for row in rows]

    chain = Chain(
        [
            Stage(
                "split",
                split,
                config(queue_maxsize=2, max_attempts=2, concurrency=2, prefetch=2),
                fan_out=True,
            ),
            Stage(
                "insert",
                insert,
                config(queue_maxsize=2, max_attempts=2),
                batch_size=3,
                batch_window_s=0.01,
            ),
        ]
    )
    report = asyncio.run(asyncio.wait_for(chain.run([2, 3, 4]), timeout=30))
    assert report.completed == 9 and report.balanced
    assert report.stages["insert"].batches >= 3


# -- batching ------------------------------------------------------------------------------


def test_full_batches_go_at_once_and_a_partial_one_at_its_window(config):
    batches = []

    async def insert(rows):
        batches.append((asyncio.get_running_loop().time(), rows))
        await asyncio.sleep(0.1)

    async def source():
        for x in range(7):
            yield x
        await asyncio.sleep(10)  # the last partial batch goes at its window, not at the drain
        yield 7

    chain = Chain(
        [
            Stage("pass", sleeping(0), config(queue_maxsize=2, max_attempts=2, concurrency=1)),
            Stage(
                "insert",
                insert,
                config(queue_maxsize=2, max_attempts=2, concurrency=1),
                batch_size=3,
                batch_window_s=2.0,
            ),
        ]
    )
    report = run_virtual(chain.run(source()))
    assert [rows for _, rows in batches] == [[0, 1, 2], [3, 4, 5], [6], [7]]
    assert batches[2][0] == pytest.approx(2.0)  # the window ran from item 6's arrival at 0 s
    assert batches[3][0] == pytest.approx(10.0)  # the source ended: the drain sent it at once
    insert_report = report.stages["insert"]
    assert insert_report.batches == 4 and insert_report.completed == 8
    assert report.completed == 8 and report.balanced


def test_a_failed_batch_is_retried_whole_and_dead_lettered_per_item(config):
    calls = []

    async def insert(rows):
        calls.append(list(rows))
        rows.clear()  # editing the batch must not change the retry's
        raise ConnectionError("database down")

    chain = Chain(
        [
            Stage("pass", sleeping(0), config(queue_maxsize=2, max_attempts=2, concurrency=1)),
            Stage("insert", insert, config(queue_maxsize=2, max_attempts=3), batch_size=2),
        ]
    )
    report = run_virtual(chain.run(range(5)))
    insert_report = report.stages["insert"]
    assert [letter.payload for letter in insert_report.dead_letters] == [0, 1, 2, 3, 4]
    assert all(letter.attempts == 3 for letter in insert_report.dead_letters)
    assert all(letter.errors[0].type == "ConnectionError" for letter in insert_report.dead_letters)
    assert calls.count([0, 1]) == 3 and calls.count([4]) == 3
    assert insert_report.attempts == 9  # three calls for each of three batches
    assert report.completed == 0 and report.dead_lettered == 5 and report.balanced


def test_a_batch_handler_result_per_item_goes_on_and_a_wrong_length_is_a_failed_attempt(config):
    async def enrich(rows):
        return [row * 10 for row in rows] if rows[0] != 4 else [0]  # the batch [4, 5] is wrong

    seen = []

    async def record(x):
        seen.append(x)

    chain = Chain(
        [
            Stage("pass", sleeping(0), config(queue_maxsize=2, max_attempts=2, concurrency=1)),
            Stage(
                "enrich",
                enrich,
                config(queue_maxsize=2, concurrency=1, max_attempts=1),
                batch_size=2,
            ),
            Stage("record", record, config(queue_maxsize=2, max_attempts=2, concurrency=1)),
        ]
    )
    report = run_virtual(chain.run(range(6)))
    assert seen == [0, 10, 20, 30]
    letters = report.stages["enrich"].dead_letters
    assert [letter.payload for letter in letters] == [4, 5]
    assert "one result per payload" in letters[0].errors[0].message
    assert report.balanced


# -- drain ---------------------------------------------------------------------------------


def test_every_stage_drains_within_one_overall_timeout(config):
    chain = Chain(
        [
            Stage("a", sleeping(1.0), config(max_attempts=2, concurrency=1, queue_maxsize=6)),
            Stage("b", sleeping(1.0), config(max_attempts=2, concurrency=1, queue_maxsize=5)),
            Stage("c", sleeping(3.0), config(max_attempts=2, concurrency=1, queue_maxsize=5)),
        ],
        drain_timeout_s=4.0,
    )
    report = run_virtual(chain.run(range(6)))
    # Intake stops when the source ends, at 0 s (a's queue holds all six and its end).
    assert report.finished_s <= 4.0 + 1e-9
    assert report.drain_timed_out
    assert report.unfinished > 0
    assert report.balanced


def test_a_chain_without_drain_timeout_finishes_everything(config):
    chain = Chain(
        [
            Stage(name, sleeping(1.0), config(queue_maxsize=2, max_attempts=2, drain_timeout_s=0.5))
            for name in "abc"
        ],
        drain_timeout_s=None,
    )
    report = run_virtual(chain.run(range(10)))
    assert report.completed == 10 and report.unfinished == 0 and not report.drain_timed_out


def test_the_default_drain_timeout_is_the_first_stages(config):
    chain = Chain(
        [
            Stage("a", sleeping(1), config(queue_maxsize=2, max_attempts=2, drain_timeout_s=7.0)),
            Stage("b", sleeping(1)),
        ]
    )
    assert chain.drain_timeout_s == 7.0


def test_stop_stops_intake_at_the_head_and_the_rest_drains(config):
    async def endless():
        x = 0
        while True:
            await asyncio.sleep(0.5)
            yield x
            x += 1

    async def main():
        chain = Chain(
            [
                Stage("a", sleeping(0.3), config(queue_maxsize=2, max_attempts=2)),
                Stage("b", sleeping(0.7), config(queue_maxsize=2, max_attempts=2)),
            ]
        )
        loop = asyncio.get_running_loop()
        loop.call_later(10.0, chain.stop)
        return await chain.run(endless())

    report = run_virtual(main())
    assert 19 <= report.offered <= 21
    assert report.completed == report.offered and report.balanced


def test_stop_before_run_reads_nothing():
    chain = Chain([Stage("a", sleeping(1)), Stage("b", sleeping(1))])
    chain.stop()
    read = []
    report = run_virtual(chain.run(read.append(x) or x for x in range(5)))
    assert read == [] and report.offered == 0 and report.balanced


# -- memory bound --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_items_held_never_exceed_the_sum_of_the_stages_bounds(config, seed):
    rng = random.Random(seed)
    peak = [0]
    chain_box = []

    def observe(kind, now_s, item):
        if chain_box:
            peak[0] = max(peak[0], chain_box[0].statistics().items_held)

    def service(mean):
        async def handler(x):
            await asyncio.sleep(rng.expovariate(1 / mean))
            if rng.random() < 0.2:
                raise ValueError("flaky")
            return x

        return handler

    async def split(x):
        await asyncio.sleep(rng.expovariate(2.0))
        return [x] * 4

    stages = [
        Stage(
            "fetch",
            split,
            config(max_attempts=2, concurrency=2, queue_maxsize=3),
            fan_out=True,
            on_event=observe,
        ),
        Stage(
            "parse",
            service(0.3),
            config(max_attempts=2, concurrency=3, queue_maxsize=2),
            on_event=observe,
        ),
        Stage(
            "write",
            service(1.0),
            config(concurrency=2, queue_maxsize=2, max_attempts=3, backoff=Backoff(base_s=0.5)),
            batch_size=3,
            batch_window_s=0.4,
            on_event=observe,
        ),
    ]

    async def main():
        chain = Chain(stages, drain_timeout_s=None)
        chain_box.append(chain)
        return chain, await chain.run(range(40))

    chain, report = run_virtual(main())
    bound = chain.items_bound({"fetch": 4})
    assert bound == (3 + 2 * 4) + (2 + 3) + ((2 + 2) * 3 + 3)
    assert 0 < peak[0] <= bound
    assert report.balanced
    assert report.offered + report.children_added == 160


def test_an_unbounded_queue_makes_the_bound_none(config):
    chain = Chain(
        [
            Stage("a", sleeping(0), config(queue_maxsize=2, max_attempts=2)),
            Stage("b", sleeping(0), config(max_attempts=2, queue_maxsize=None)),
        ]
    )
    assert chain.items_bound() is None


# -- events and statistics -----------------------------------------------------------------


def test_each_stage_has_its_own_listener_and_statistics_count_items(config):
    events = {"a": [], "b": []}

    def listener(name):
        return lambda kind, now_s, item: events[name].append(kind)

    async def main():
        chain = Chain(
            [
                Stage(
                    "a",
                    sleeping(1),
                    config(queue_maxsize=2, max_attempts=2),
                    on_event=listener("a"),
                ),
                Stage(
                    "b",
                    sleeping(1),
                    config(queue_maxsize=2, max_attempts=2),
                    batch_size=2,
                    on_event=listener("b"),
                ),
            ]
        )
        task = asyncio.ensure_future(chain.run(range(4)))
        await asyncio.sleep(1.5)
        snapshot = chain.statistics()
        await task
        return snapshot

    snapshot = run_virtual(main())
    assert events["a"].count(EventKind.COMPLETED) == 4
    assert events["b"].count(EventKind.COMPLETED) == 2  # two batches of two
    assert snapshot.stages["a"].items_inside == 2 and snapshot.stages["b"].items_inside == 2


def test_statistics_before_the_run_is_a_clear_error():
    with pytest.raises(Exception, match="has not started"):
        Chain([Stage("a", sleeping(0))]).statistics()


def test_each_payload_has_one_outcome_per_stage(config):
    async def flaky(x):
        await asyncio.sleep(0.1)
        if x % 3 == 0:
            raise ValueError(x)
        return x

    chain = Chain(
        [
            Stage("a", flaky, config(queue_maxsize=2, max_attempts=2)),
            Stage("b", flaky, config(queue_maxsize=2, max_attempts=2)),
        ]
    )
    report = run_virtual(chain.run(range(10)))
    assert_each_payload_once(report.stages["a"], range(10))
    assert_each_payload_once(report.stages["b"], [x for x in range(10) if x % 3])
