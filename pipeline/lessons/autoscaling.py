"""Notebook 13's view of an autoscaled pool: its size, second by second, in a simulated run.

A simulation's summary says what an autoscaled pool cost (``workers_mean``,
``worker_seconds``, ``scale_events``), and its time series where the queue was; not
how many workers the pool had at each moment. :func:`watch_pool` finds that out by
running the simulated run again on the same engine, the items arriving when they
arrived and each taking the time it took, and reading the pipeline's
``statistics()`` every ``every_s`` seconds of virtual time. The engine and its
autoscaler are deterministic, so the run it watches is the simulated one: it checks
that every item starts when it started there.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING

import numpy as np

from .._validate import real
from ..engine import Pipeline
from ..sim.vloop import run_virtual

if TYPE_CHECKING:
    import pandas as pd

    from pipeline.sim.running.result import SimulationResult

__all__ = ["POOL_COLUMNS", "watch_pool"]

POOL_COLUMNS = ("time_s", "workers", "workers_starting", "workers_busy", "queue", "desired")
"""The columns of :func:`watch_pool`'s table: the pool (cold-starting workers included),
those still cold-starting, those busy, the items waiting, and the count the autoscaler's
metric asked for at its last sync (NaN before the first, or without an autoscaler)."""


def watch_pool(result: SimulationResult, *, every_s: float = 1.0) -> pd.DataFrame:
    """The pool of a simulated run every ``every_s`` seconds, found by running it again.

    Args:
        result: one simulated run of a single-stage scenario on the asyncio engine
            (an autoscaled one always is), whose items each took one attempt.
        every_s: seconds of virtual time between two readings (> 0).

    Returns:
        A DataFrame with :data:`POOL_COLUMNS`, one row per reading, from 0 s to the
        run's end.

    Raises:
        TypeError: ``every_s`` is not a real number.
        ValueError: ``every_s`` is not positive and finite, ``result`` is not such a run,
            or the run again does not start every item when the simulated one did.
    """
    import pandas as pd

    every_s = real("every_s", every_s, "seconds between two readings", above=0)
    items = result.items
    if result.engine != "asyncio" or result.scenario.stages is not None:
        raise ValueError(
            f"watch_pool needs a single-stage run on the asyncio engine, got engine "
            f"{result.engine!r}: simulate(scenario, engine='asyncio')"
        )
    scenario = result.scenario
    if scenario.classes or scenario.downstream is not None:
        raise ValueError(
            "watch_pool runs again a scenario without item classes or a downstream: "
            "their priorities, deadlines and servers are not replayed"
        )
    if (items["attempts"] != 1).any() or (items["outcome"] != "completed").any():
        raise ValueError("watch_pool needs a run whose every item completed at its first attempt")
    arrivals = items["arrival_s"].tolist()
    took = (items["finish_s"] - items["start_s"]).tolist()
    starts = np.full(len(arrivals), np.nan)
    rows = run_virtual(_watch(result, arrivals, took, starts, every_s))
    if not np.allclose(starts, items["start_s"].to_numpy(), rtol=0, atol=1e-9):
        raise ValueError("the run again started items at other times than the simulated run")
    return pd.DataFrame(rows, columns=list(POOL_COLUMNS))


async def _watch(
    result: SimulationResult,
    arrivals: list[float],
    took: list[float],
    starts: np.ndarray,
    every_s: float,
) -> list[tuple]:
    loop = asyncio.get_running_loop()

    async def handle(item_id: int) -> None:
        starts[item_id] = loop.time()
        await asyncio.sleep(took[item_id])

    async def arriving():
        for item_id, at in enumerate(arrivals):
            await asyncio.sleep(at - loop.time())
            yield item_id

    pipe = Pipeline(handle, result.scenario.config, name="watched")
    rows: list[tuple] = []
    running = asyncio.ensure_future(pipe.run(arriving()))
    while not running.done():
        s = pipe.statistics()
        desired = math.nan if s.workers_desired is None else s.workers_desired
        rows.append(
            (loop.time(), s.workers, s.workers_starting, s.workers_busy, s.queue_size, desired)
        )
        await asyncio.wait([running], timeout=every_s)
    await running
    return rows
