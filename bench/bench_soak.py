"""Soak: the real-time engine under sustained overload keeps flat memory and exact counts.

Two runs on the real clock, each for ``--seconds`` (two minutes by default):

- **pipeline**: a source that offers items in bursts of 64 per loop turn to a
  ``Pipeline`` (4 workers, queue 16, ``on_full="reject"``, each attempt 1 ms
  of waiting): most of each burst is shed. One item in 10 is refused once
  with ``RetryLater`` and one in 7 once more (retries after 0.5 ms), and a
  slow consumer reads ``results(maxsize=8)``, pausing after every tenth
  result, so the workers wait for it too.
- **chain**: the same bursts into a ``Chain``: a ``split`` stage that fans
  each item out into 2 records, a ``write`` stage (2 workers, queue 8,
  ``on_full="reject"``, the same retries) whose handler is the slow
  consumer.

Every ``--every`` items offered the run prints its resident memory
(``VmRSS`` from ``/proc/self/status``); at the end it checks every count:
offered = completed + shed, nothing dead-lettered or unfinished, every result
seen by the consumer with exactly the attempts its item needed, and the
engine's attempts equal the handler's calls. The memory growth printed is
from the first checkpoint after warm-up to the last. Exit 1 when a count is
wrong or memory grew by more than ``--limit-mb``.

The suite runs the same two scenarios briefly (``tests/core/test_soak.py``), with
``tracemalloc`` comparing a small run against a ten times larger one.

Usage: ``OPENBLAS_NUM_THREADS=1 python bench/bench_soak.py [--seconds 120] [--every 200000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's pipeline

BURST = 64


def refusals(item: int) -> int:
    """How many times ``item`` is refused before it goes through (0, 1 or 2)."""
    return (item % 10 == 0) + (item % 7 == 0)


class Soak:
    """One soak run's counters, checked by :meth:`problems` at the end.

    Args:
        items: most items to offer (None: until ``seconds`` have passed).
        seconds: loop seconds to keep offering (None: until ``items``).
        pause_s: the slow consumer's pause after every tenth result.
        on_checkpoint: called with the items offered so far every ``every`` items.
    """

    def __init__(
        self,
        *,
        items: int | None = None,
        seconds: float | None = None,
        pause_s: float = 0.0,
        every: int = 0,
        on_checkpoint: Callable[[int], None] | None = None,
    ) -> None:
        self.items, self.seconds, self.pause_s = items, seconds, pause_s
        self.every, self.on_checkpoint = every, on_checkpoint
        self.offered = 0
        self.calls = 0
        self.consumed = 0
        self.wrong_attempts = 0
        self.report: Any = None

    async def source(self):
        loop = asyncio.get_running_loop()
        end = None if self.seconds is None else loop.time() + self.seconds
        while (self.items is None or self.offered < self.items) and (
            end is None or loop.time() < end
        ):
            for _ in range(BURST):
                if self.items is not None and self.offered >= self.items:
                    break
                item = self.offered
                self.offered += 1
                yield [item, 0]  # [item, attempts so far]: the payload counts its own attempts
                if self.every and self.offered % self.every == 0 and self.on_checkpoint:
                    self.on_checkpoint(self.offered)
            await asyncio.sleep(0)  # the burst is offered: let the workers run

    async def attempt(self, payload: list[int]) -> list[int]:
        from pipeline import RetryLater

        self.calls += 1
        payload[1] += 1
        await asyncio.sleep(0.001)  # the work: far slower than the bursts arrive
        if payload[1] <= refusals(payload[0]):
            raise RetryLater("busy", retry_after_s=0.0005)
        return payload

    async def consume(self, result: Any) -> None:
        self.consumed += 1
        if result.attempts != 1 + refusals(result.payload[0]):
            self.wrong_attempts += 1
        if self.consumed % 10 == 0:
            await asyncio.sleep(self.pause_s)

    # -- the two scenarios ----------------------------------------------------------------

    async def run_pipeline(self) -> Any:
        from pipeline import Backoff, Pipeline, PipelineConfig

        config = PipelineConfig(
            concurrency=4,
            queue_maxsize=16,
            on_full="reject",
            max_attempts=4,
            backoff=Backoff.constant(0.0005),
            keep_shed=100,
            drain_timeout_s=None,
        )
        pipe = Pipeline(self.attempt, config)
        results = pipe.results(maxsize=8)

        async def reader():
            async for result in results:
                await self.consume(result)

        reading = asyncio.get_running_loop().create_task(reader())
        self.report = await pipe.run(self.source())
        await reading
        return self.report

    async def run_chain(self) -> Any:
        from pipeline import Backoff, Chain, PipelineConfig, Stage
        from pipeline.records import Result

        async def split(payload: list[int]) -> tuple[list[int], ...]:
            return ([2 * payload[0], 0], [2 * payload[0] + 1, 0])

        async def write(payload: list[int]) -> None:
            await self.attempt(payload)  # refusals first, then the slow consumer
            await self.consume(Result(payload, None, payload[1]))

        head = PipelineConfig(
            concurrency=2, queue_maxsize=16, on_full="reject", keep_shed=100, drain_timeout_s=None
        )
        tail = PipelineConfig(
            concurrency=2,
            queue_maxsize=8,
            on_full="reject",
            max_attempts=4,
            backoff=Backoff.constant(0.0005),
            keep_shed=100,
            drain_timeout_s=None,
        )
        chain = Chain([Stage("split", split, head, fan_out=True), Stage("write", write, tail)])
        self.report = await chain.run(self.source())
        return self.report

    def problems(self) -> list[str]:
        """What is wrong with the counts (empty when every one is exact)."""
        found = []
        report = self.report
        stages = getattr(report, "stages", None)
        if stages is None:  # a Pipeline's RunReport
            if report.offered != self.offered:
                found.append(f"offered {report.offered} != {self.offered} from the source")
            if report.completed + len(report.shed) != report.offered:
                found.append(f"completed + shed != offered: {report}")
            if report.dead_letters or report.unfinished:
                found.append("dead letters or unfinished items in a run with neither")
            if self.consumed != report.completed:
                found.append(f"the consumer saw {self.consumed} of {report.completed} results")
            if report.attempts != self.calls:
                found.append(f"attempts {report.attempts} != handler calls {self.calls}")
        else:
            split, write = stages["split"], stages["write"]
            if report.offered != self.offered or split.offered != self.offered:
                found.append(f"offered {report.offered} != {self.offered} from the source")
            if split.completed + len(split.shed) != split.offered:
                found.append("split: completed + shed != offered")
            if write.offered != 2 * split.completed:
                found.append(f"write offered {write.offered} != 2 x {split.completed} split")
            if write.completed + len(write.shed) != write.offered:
                found.append("write: completed + shed != offered")
            if any(s.dead_letters or s.unfinished or s.stranded for s in stages.values()):
                found.append("dead letters, unfinished or stranded items in a run with none")
            if self.consumed != write.completed:
                found.append(f"the consumer saw {self.consumed} of {write.completed} writes")
            if write.attempts != self.calls:
                found.append(f"write attempts {write.attempts} != handler calls {self.calls}")
        if self.wrong_attempts:
            found.append(f"{self.wrong_attempts} results with the wrong number of attempts")
        return found


def rss_mb() -> float:
    with open("/proc/self/status") as lines:
        fields = dict(line.split(":", 1) for line in lines)
    return int(fields["VmRSS"].split()[0]) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="per scenario")
    parser.add_argument("--every", type=int, default=200_000, help="items between checkpoints")
    parser.add_argument("--limit-mb", type=float, default=5.0)
    args = parser.parse_args()
    print(
        f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores"
    )
    failed = False
    for name in ("pipeline", "chain"):
        points: list[tuple[int, float]] = []
        soak = Soak(
            seconds=args.seconds,
            pause_s=0.0005,
            every=args.every,
            on_checkpoint=lambda n, points=points: points.append((n, rss_mb())),
        )
        began = time.perf_counter()
        asyncio.run(soak.run_pipeline() if name == "pipeline" else soak.run_chain())
        wall = time.perf_counter() - began
        report = soak.report
        shed = len(report.shed) if not hasattr(report, "stages") else report.shed
        print(f"\n{name}: {soak.offered:,} offered in {wall:.0f} s, {shed:,} shed, "
              f"{soak.consumed:,} consumed, {soak.calls:,} calls")  # fmt: skip
        for offered, mb in points:
            print(f"  {offered:>11,} offered  RSS {mb:7.1f} MB")
        warm = points[len(points) // 4 :] if len(points) >= 4 else points
        growth = warm[-1][1] - warm[0][1] if len(warm) >= 2 else 0.0
        problems = soak.problems()
        print(f"  growth after warm-up: {growth:+.1f} MB (limit {args.limit_mb:g} MB)")
        print("  counts: " + ("exact" if not problems else "; ".join(problems)))
        failed |= bool(problems) or growth > args.limit_mb
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
