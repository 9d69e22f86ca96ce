"""``simulate()``: run the unchanged :class:`~pipeline.Pipeline` on a virtual clock.

The simulated source sleeps (in virtual time) until each arrival and yields
the item's id; the simulated handler sleeps for the attempt's service time and
then succeeds or fails as the failure model says. Everything else -- the
bounded queue, backpressure, retries, dead letters, the drain -- is the real
engine, recorded event by event (:mod:`.single`). That asyncio engine is the reference
semantics; for scenarios inside its domain, ``engine="auto"`` (the default)
computes the same run with the exact kernel (:mod:`pipeline.sim.running.kernel.run`),
item by item, many times faster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..workloads.randomness import check_replications
from ..workloads.scenario import Scenario
from .drain_warning import warn_drain_timeouts
from .engine_choice import choose_engine
from .replications import Replications, replicate
from .result import SimulationResult
from .single import simulate_once

if TYPE_CHECKING:
    from concurrent.futures import Executor

__all__ = ["simulate"]


def simulate(
    scenario: Scenario,
    *,
    replications: int | None = None,
    engine: str = "auto",
    processes: int | None = None,
    progress: bool | None = None,
    executor: Executor | None = None,
) -> Any:
    """Run a scenario on the virtual clock.

    Works from a script, from pytest and from a Jupyter cell (where the kernel
    already runs a loop: the virtual loop then runs on a helper thread).

    Args:
        scenario: the :class:`~pipeline.sim.Scenario` to run.
        replications: None for one run (a :class:`SimulationResult`), or R >= 1
            for :class:`Replications` with confidence intervals.
        engine: ``"auto"`` (default) runs the exact kernel when the scenario is
            inside its domain and the asyncio engine otherwise; ``"asyncio"``
            always runs the engine (the reference semantics); ``"kernel"``
            refuses a scenario outside the kernel's domain. The summary's
            ``engine`` key says which one ran. See :mod:`pipeline.sim.running.kernel.run`.
        processes: worker processes for replications; None (default) uses a
            pool only when the runs are long enough to repay starting it (a few
            seconds of work); 1 runs everything in this process. Results are
            the same either way (except ``wall_time_s``).
        progress: show a tqdm progress bar over the replications; None
            (default) shows one when a pool or an executor is used or the runs are long.
        executor: a :class:`concurrent.futures.Executor` to run the
            replications on instead of a local process pool (``processes`` is
            then ignored), e.g. a Dask client's ``get_executor()`` (see
            :func:`~pipeline.sim.executors.cluster.scheduler_executor`); results
            are the same as a local run's (except ``wall_time_s``). It is left
            open. Needs ``replications``.

    Returns:
        A :class:`SimulationResult`, or :class:`Replications` when asked.

    Warns:
        DrainTimeoutWarning: a run's drain hit ``drain_timeout_s`` (default 30 s)
            and left items unfinished, so they are missing from the latency
            statistics; the message says how many and what to change.

    Raises:
        TypeError: ``scenario`` is not a Scenario, or ``executor`` is not a
            :class:`concurrent.futures.Executor`.
        ValueError: ``replications`` < 1, bad ``engine`` or ``processes``,
            ``engine="kernel"`` for a scenario outside the kernel's domain
            (the one-line message names the feature), an ``executor`` without
            ``replications``, a scenario an executor cannot be sent, or
            ``replications`` > 1 of a scenario nothing in which is random (a
            replayed trace is one recorded sample: every replication would be
            the same run, with an interval of 0;
            :func:`~pipeline.sim.workloads.randomness.fixed_workload`).
        RuntimeError: ``processes`` > 1 asked for from the top level of a script
            without an ``if __name__ == "__main__":`` guard (worker processes
            re-run the script); with the default ``processes`` such a call runs
            in this process, with a warning.
        DeadlockError: the run can never progress (a bug in custom code).
        Whatever a replication raises on the executor.

    Example:
        >>> result = simulate(Scenario(arrivals=Poisson(rate=3.2),
        ...     service=Exponential(mean=1.0), config=PipelineConfig(concurrency=4),
        ...     n_items=10_000, seed=1))
        >>> result.summary["wait_mean_s"], result.summary["engine"]
    """
    if not isinstance(scenario, Scenario):
        raise TypeError(f"scenario must be a Scenario, got {scenario!r}")
    choose_engine(scenario, engine)  # a bad engine, or the kernel's refusal, before any run
    if processes is not None and (
        isinstance(processes, bool) or not isinstance(processes, int) or processes < 1
    ):
        raise ValueError(f"processes must be an integer >= 1 or None, got {processes!r}")
    if executor is not None:
        from ..executors.pool import check_executor

        check_executor(executor)
        if replications is None:
            raise ValueError(
                "executor runs replications: pass replications=R (R >= 1) with it, "
                "got replications=None"
            )
    if replications is None:
        result = simulate_once(scenario, 0, engine)
        _warn_if_drain_timed_out([result])
        return result
    if isinstance(replications, bool) or not isinstance(replications, int) or replications < 1:
        raise ValueError(f"replications must be an integer >= 1 or None, got {replications!r}")
    check_replications(scenario, replications, f"replications={replications}")
    runs = Replications(replicate(scenario, replications, engine, processes, progress, executor))
    _warn_if_drain_timed_out(runs.results)
    return runs


def _warn_if_drain_timed_out(results: list[SimulationResult]) -> None:
    where = "the run" if len(results) == 1 else None
    # stacklevel 3: the warning points at the caller of simulate().
    warn_drain_timeouts(
        [(r.scenario, r.summary) for r in results],
        what="replications",
        where=where,
        stacklevel=3,
    )
