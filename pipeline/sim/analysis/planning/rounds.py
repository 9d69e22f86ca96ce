"""Running a plan's rounds: each ``(candidate, replication)`` task simulated, here, on
a process pool started once, or on the executor given, and what it measured recorded.

The task function (:func:`measure`, :func:`measure_set`) is at module level so
that worker processes and Dask workers can unpickle it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...executors.pool import bootstrapping, context, pool_workers, run_tasks
from ...running.kernel.run import unsupported
from ...running.replications import POOL_WORTH_S, estimated_seconds
from ...running.single import summary_once
from ...workloads.scenario import Scenario
from .candidate import Candidate
from .slo import SLO, metric_counts, metric_value, summary_keys

if TYPE_CHECKING:
    from concurrent.futures import Executor

__all__ = ["Rounds", "Runner", "measure", "measure_set", "pool_size"]


def measure(
    scenario: Scenario,
    replication: int,
    engine: str,
    metrics: tuple[str, ...],
    extra: tuple[str, ...] = (),
) -> tuple[tuple[float, ...], str, tuple[tuple[int, int] | None, ...], bool, int]:
    # Module level so worker processes (or Dask workers) can unpickle it; returns
    # only the values the SLOs need (then the ``extra`` ones a cost needs), the
    # engine that ran, the counts behind each SLO's fraction (for an exact bound
    # when the replications agree), and whether the drain timed out, leaving how
    # many items unfinished (latency SLOs then fail).
    # Only what those values need (no step series, no batch means when none is asked):
    # each the very number the whole summary holds.
    keys = summary_keys((*metrics, *extra))
    summary = summary_once(scenario, replication, engine, keys)
    values = tuple(metric_value(summary, m) for m in (*metrics, *extra))
    counts = tuple(metric_counts(summary, m) for m in metrics)
    cut = bool(summary["drain_timed_out"])
    return values, summary["engine"], counts, cut, int(summary["items_unfinished"])


def measure_set(
    scenarios: tuple[Scenario, ...],
    replication: int,
    engine: str,
    metrics: tuple[str, ...],
    extra: tuple[str, ...] = (),
) -> tuple[tuple[float, ...], str, tuple[tuple[int, int] | None, ...], tuple[bool, ...], int]:
    # One replication of every scenario of a set, on that scenario's streams of
    # (seed, replication): the SLO values of each in turn, then the cost metrics of
    # each in turn (a cost over the hours weighs every scenario), each one's drain cut.
    values: list[float] = []
    priced: list[float] = []
    counts: list[tuple[int, int] | None] = []
    ran: set[str] = set()
    cuts: list[bool] = []
    left = 0
    for scenario in scenarios:
        found, engine_ran, tally, cut, unfinished = measure(
            scenario, replication, engine, metrics, extra
        )
        values += found[: len(metrics)]
        priced += found[len(metrics) :]
        counts += tally
        ran.add(engine_ran)
        cuts.append(cut)
        left += unfinished
    return (*values, *priced), ",".join(sorted(ran)), tuple(counts), tuple(cuts), left


# -- running rounds of replications ------------------------------------------------------------


class Runner:
    """Runs a round's tasks on the executor given, a process pool started once, or here."""

    def __init__(
        self, executor: Executor | None, workers: int, stack: contextlib.ExitStack, asked: bool
    ):
        self._executor = executor
        self._workers = workers
        self._stack = stack
        self._asked = asked  # processes= was given, not left to the default

    def run(self, tasks: list[tuple[Any, ...]], bar: Any) -> list[Any]:
        executor = self._executor
        if executor is None and self._workers > 1 and len(tasks) > 1:
            if bootstrapping():
                raise RuntimeError(
                    "plan was called while a worker process imported the script that started "
                    "it; put the call under 'if __name__ == \"__main__\":'"
                )
            # From an unguarded script: stop at once (processes asked for) or run here.
            self._workers = pool_workers(self._workers, "plan", asked=self._asked)
        if executor is None and self._workers > 1 and len(tasks) > 1:
            from concurrent.futures import ProcessPoolExecutor

            # One pool for every round: starting one costs about a second.
            self._executor = executor = self._stack.enter_context(
                ProcessPoolExecutor(max_workers=self._workers, mp_context=context())
            )
        task = measure_set if tasks and isinstance(tasks[0][0], tuple) else measure
        return run_tasks(task, tasks, workers=1, bar=bar, what="plan", executor=executor)


def pool_size(
    processes: int | None, executor: Executor | None, base: Scenario, engine: str, first: int
) -> int:
    if executor is not None:
        return 1
    if processes is not None:
        return processes
    import os

    ran = "asyncio" if engine == "asyncio" or unsupported(base) is not None else "kernel"
    # A pool only when the first round alone would take a few seconds in one process.
    return (os.cpu_count() or 1) if estimated_seconds(base, ran, first) >= POOL_WORTH_S else 1


class Rounds:
    """Runs a round of ``(candidate, replication)`` tasks and records what each measured."""

    def __init__(
        self,
        runner: Runner,
        bar: Any,
        engine: str,
        metrics: tuple[str, ...],
        extra: tuple[str, ...],
        slos: Sequence[SLO],
        level: float,
    ) -> None:
        self.runner, self.bar, self.engine = runner, bar, engine
        self.metrics, self.extra, self.slos, self.level = metrics, extra, slos, level

    def run(self, tasks: Sequence[tuple[Candidate, int]]) -> None:
        """Run ``tasks`` (together, in parallel where the runner can) and judge again
        every candidate they touched. A candidate's tasks must be listed in replication order."""
        if not tasks:
            return
        self.bar.total += len(tasks)
        self.bar.refresh()
        k = len(self.metrics)
        payload = [
            (c.members or c.scenario, r, self.engine, self.metrics, self.extra) for c, r in tasks
        ]
        touched: dict[int, Candidate] = {}
        measured = self.runner.run(payload, self.bar)
        for (candidate, _), (values, ran, counts, cut, left) in zip(tasks, measured, strict=True):
            if candidate.names:  # a scenario set: every scenario's values, then its costs
                n = k * len(candidate.names)
                candidate.values.append(values[:n])
                candidate.extra.append(values[n:])
                candidate.cuts.append(cut)
                cut = any(cut)
            else:
                candidate.values.append(values[:k])
                candidate.extra.append(values[k:])
            candidate.counts.append(counts)
            candidate.engines.update(ran.split(","))
            candidate.timed_out.append(cut)
            candidate.unfinished.append(left)
            touched[id(candidate)] = candidate
        for candidate in touched.values():
            candidate.judge(self.slos, self.level)
