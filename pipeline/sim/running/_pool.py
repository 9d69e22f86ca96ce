"""Running independent simulations on a local process pool, with a progress bar.

Shared by :func:`~pipeline.sim.sweep` (grid points x replications) and
:func:`~pipeline.sim.simulate` (replications). Results come back in task
order, so they do not depend on how many processes ran them.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import multiprocessing.context
    from concurrent.futures import Executor

__all__: list[str] = []

_MAIN_GUARD = (
    "a worker process failed while starting: worker processes re-import the script that "
    "started them, so in a script put the call under 'if __name__ == \"__main__\":' "
    "(or pass processes=1)"
)


def context() -> multiprocessing.context.BaseContext:
    """forkserver where there is one, else spawn: never plain fork.

    The parent (a Jupyter kernel, pytest) may run threads, which fork copies
    in whatever state they are.
    """
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def check_picklable(scenarios: Sequence[Any], processes: int, what: str) -> None:
    """Raise a ValueError naming the first scenario a worker process could not receive."""
    for scenario in scenarios:
        try:
            pickle.dumps(scenario)
        except Exception as exc:  # pickling raises several types (PicklingError, AttributeError)
            raise ValueError(
                f"{what} runs scenarios in {processes} worker processes, so they must be "
                f"picklable, but {scenario!r} is not ({type(exc).__name__}: {exc}); define "
                "functions at module level (e.g. TimeVarying.from_profile or daily_curve "
                "instead of a lambda), or pass processes=1"
            ) from None


def bootstrapping() -> bool:
    """True inside a worker process that is still importing its parent's script."""
    import multiprocessing

    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def run_tasks(
    function: Callable[..., Any],
    tasks: Sequence[tuple[Any, ...]],
    *,
    workers: int,
    bar: Any,
    what: str,
    executor: Executor | None = None,
) -> list[Any]:
    """``[function(*task) for task in tasks]``: on ``executor``, or on ``workers`` processes.

    ``function`` must be defined at module level (worker processes import it).
    ``bar.update()`` is called as each task finishes. An ``executor`` given
    (any :class:`concurrent.futures.Executor`, e.g. a Dask client's
    ``get_executor()``) runs every task, whatever ``workers`` is, and is left
    open; otherwise ``workers`` > 1 starts a process pool for this call.

    Raises:
        RuntimeError: called (``workers`` > 1) by a worker process that is
            still importing the script that started it (no ``__main__`` guard).
        Whatever a task raises; pickling and start-up failures carry a note
            saying how to fix them.
    """
    results: list[Any] = [None] * len(tasks)
    if executor is None and workers <= 1:
        for index, task in enumerate(tasks):
            results[index] = function(*task)
            bar.update()
        return results
    if executor is not None:
        return _gather(executor, function, tasks, bar, what, results)
    if bootstrapping():
        # A script without the guard, re-imported by the pool's worker: say so here,
        # where the user sees it, instead of letting this worker start a pool of its own.
        raise RuntimeError(
            f"{what} was called while a worker process imported the script that started "
            "it; put the call under 'if __name__ == \"__main__\":'"
        )
    # Imported here: a run that needs no pool (the command line's) does not pay for it.
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers, mp_context=context()) as pool:
        return _gather(pool, function, tasks, bar, what, results)


def _gather(
    executor: Executor,
    function: Callable[..., Any],
    tasks: Sequence[tuple[Any, ...]],
    bar: Any,
    what: str,
    results: list[Any],
) -> list[Any]:
    """Submit every task and fill ``results`` in task order; on an error, cancel the rest."""
    from concurrent.futures import as_completed
    from concurrent.futures.process import BrokenProcessPool

    futures = {executor.submit(function, *task): index for index, task in enumerate(tasks)}
    try:
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            bar.update()
    except BaseException as exc:
        for future in futures:
            future.cancel()
        if isinstance(exc, AttributeError | ImportError | pickle.PicklingError):
            exc.add_note(
                f"{what}: a worker process could not rebuild the scenario; "
                "functions defined in a notebook or __main__ cannot be sent to "
                "worker processes -- move them to a module or pass processes=1"
            )
        elif isinstance(exc, BrokenProcessPool):
            exc.add_note(f"{what}: {_MAIN_GUARD}")
        raise
    return results


def default_workers(processes: int | None, tasks: int) -> int:
    """``processes`` (or the CPU count), at most one per task."""
    return max(1, min(processes or os.cpu_count() or 1, tasks))
