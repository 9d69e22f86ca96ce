"""Nothing is ever lost: on randomized workloads every offered item is accounted for once."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import Backoff, PermanentError, Pipeline, PipelineConfig
from pipeline.sim.vloop import run_virtual


@settings(max_examples=60, deadline=None)
@given(
    n_items=st.integers(0, 60),
    concurrency=st.integers(1, 6),
    maxsize=st.one_of(st.none(), st.integers(1, 8)),
    on_full=st.sampled_from(["block", "reject"]),
    max_attempts=st.integers(1, 4),
    failure=st.floats(0.0, 1.0),
    drain_timeout_s=st.one_of(st.none(), st.floats(0.0, 50.0)),
    attempt_timeout_s=st.one_of(st.none(), st.floats(0.5, 5.0)),
    stop_at=st.one_of(st.none(), st.floats(0.0, 40.0)),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_item_is_accounted_for_exactly_once(
    n_items,
    concurrency,
    maxsize,
    on_full,
    max_attempts,
    failure,
    drain_timeout_s,
    attempt_timeout_s,
    stop_at,
    seed,
):
    rng = random.Random(seed)
    offered = []  # every payload the source handed over
    completed = []  # every payload whose handler call returned

    async def handler(x):
        await asyncio.sleep(rng.expovariate(1.0))
        roll = rng.random()
        if roll < failure / 2:
            raise RuntimeError("transient")
        if roll < failure:
            raise PermanentError("bad")
        completed.append(x)
        return x

    async def source():
        for item in range(n_items):
            await asyncio.sleep(rng.expovariate(2.0))
            offered.append(item)
            yield item

    config = PipelineConfig(
        concurrency=concurrency,
        queue_maxsize=maxsize,
        on_full=on_full,
        max_attempts=max_attempts,
        backoff=Backoff(base_s=0.5, jitter=True),
        drain_timeout_s=drain_timeout_s,
        attempt_timeout_s=attempt_timeout_s,
    )

    async def main():
        pipe = Pipeline(handler, config, rng=random.Random(seed))
        run = asyncio.ensure_future(pipe.run(source()))
        if stop_at is not None:
            await asyncio.sleep(stop_at)
            pipe.stop()
        return await run

    report = run_virtual(main())
    assert report.balanced
    seen = [*report.shed, *report.unfinished, *(d.payload for d in report.dead_letters)]
    assert len(seen) == len(set(seen))
    assert report.offered == report.completed + len(seen)
    # Payload by payload, not only in counts: every offered payload comes back exactly once,
    # as completed (its handler returned), shed, unfinished or a dead letter.
    assert len(completed) == report.completed
    assert Counter(completed + seen) == Counter(offered)
    assert len(offered) == report.offered
    assert report.statistics.workers_busy == 0
    assert report.statistics.retry_waiting == 0
