"""Running a plan's rounds: each ``(candidate, replication)`` task simulated, here, on
a process pool started once, or on the executor given, and what it measured recorded,
within the plan's run budget (:class:`Budget`).

The task function (:func:`measure`, :func:`measure_set`) is at module level so
that worker processes and Dask workers can unpickle it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...executors.pool import bootstrapping, context, pool_workers, run_tasks
from ...running.replications import POOL_WORTH_S, estimated_seconds
from ...running.single import summary_once
from ...workloads.scenario import Scenario
from .candidate import Candidate
from .slo import SLO, metric_counts, metric_value, summary_keys

if TYPE_CHECKING:
    from concurrent.futures import Executor

__all__ = [
    "DEFAULT_BUDGET",
    "MAX_BUDGET",
    "Budget",
    "Rounds",
    "RunBar",
    "Runner",
    "check_budget",
    "measure",
    "measure_set",
    "pool_size",
]

DEFAULT_BUDGET = 2_000
"""Simulation runs a plan may make in all, unless told otherwise."""

MAX_BUDGET = 10_000_000
"""The largest run budget accepted."""


def check_budget(budget: Any) -> int:
    """``budget`` checked: an integer in ``[1, MAX_BUDGET]``; None gives :data:`DEFAULT_BUDGET`.

    Raises:
        ValueError: anything else (a bool, a float, NaN, 0, a negative or huge number).
    """
    if budget is None:
        return DEFAULT_BUDGET
    if isinstance(budget, bool) or not isinstance(budget, int | np.integer):
        raise ValueError(
            f"budget must be an integer number of runs, 1 to {MAX_BUDGET:,}, got {budget!r}"
        )
    if not 1 <= int(budget) <= MAX_BUDGET:
        raise ValueError(
            f"budget must be an integer number of runs, 1 to {MAX_BUDGET:,}, got {budget!r}"
        )
    return int(budget)


@dataclass(frozen=True)
class Budget:
    """How much of a plan's run budget it used.

    Attributes:
        runs_used: simulation runs made (candidates, the wait-cost search, headroom).
        runs_allowed: the budget.
        exhausted: True when some runs the plan wanted did not fit: a verdict left
            open (or a configuration left unrun) for want of budget.
    """

    runs_used: int
    runs_allowed: int
    exhausted: bool

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ``plan --json`` prints as ``budget``."""
        return {
            "runs_used": self.runs_used,
            "runs_allowed": self.runs_allowed,
            "exhausted": self.exhausted,
        }

    def text(self) -> str:
        """``budget: 66 of 2,000 runs used`` (and whether it ran out)."""
        line = f"budget: {self.runs_used:,} of {self.runs_allowed:,} runs used"
        if self.exhausted:
            line += " -- used up: some verdicts stayed open for want of runs (raise the budget)"
        return line


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

    # A pool only when the first round alone would take a few seconds in one process.
    return (os.cpu_count() or 1) if estimated_seconds(base, engine, first) >= POOL_WORTH_S else 1


class RunBar:
    """The plan's progress bar (tqdm, on stderr), drawn from the first run it is told of: a
    plan that runs nothing (every answer already cached, a search with no run left in its
    budget) shows nothing rather than an empty ``plan: 0run``."""

    def __init__(self, shown: bool) -> None:
        self._shown = shown
        self._bar: Any = None

    def add(self, runs: int) -> None:
        """``runs`` more runs to come."""
        if self._bar is None:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=0, desc="plan", unit="run", disable=not self._shown)
        self._bar.total += runs
        self._bar.refresh()

    def update(self, n: int = 1) -> None:
        """``n`` runs done."""
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


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
        *,
        budget: int = DEFAULT_BUDGET,
    ) -> None:
        self.runner, self.bar, self.engine = runner, bar, engine
        self.metrics, self.extra, self.slos, self.level = metrics, extra, slos, level
        self.allowed, self.used, self.exhausted = budget, 0, False

    def budget(self) -> Budget:
        """The runs used so far, of the budget."""
        return Budget(self.used, self.allowed, self.exhausted)

    def _within_budget(self, tasks: Sequence[tuple[Candidate, int]]) -> list[tuple[Candidate, int]]:
        """``tasks`` that fit the budget left: each candidate's whole or none (so its
        verdict is looked at only where the replication schedule planned a look),
        in the order given (cheapest first)."""
        batches: dict[int, list[tuple[Candidate, int]]] = {}
        for task in tasks:
            batches.setdefault(id(task[0]), []).append(task)
        kept: list[tuple[Candidate, int]] = []
        left = self.allowed - self.used
        for batch in batches.values():
            cost = len(batch) * max(1, len(batch[0][0].names))
            if cost <= left:
                kept += batch
                left -= cost
            else:
                self.exhausted = True
        return kept

    def run(self, tasks: Sequence[tuple[Candidate, int]]) -> int:
        """Run ``tasks`` (together, in parallel where the runner can) and judge again
        every candidate they touched; returns the runs made (0: nothing fitted the budget).
        A candidate's tasks must be listed in replication order, and are run whole or not
        at all (see :meth:`_within_budget`)."""
        tasks = self._within_budget(tasks)
        if not tasks:
            return 0
        made = sum(max(1, len(c.names)) for c, _ in tasks)
        self.used += made
        self.bar.add(len(tasks))
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
        return made
