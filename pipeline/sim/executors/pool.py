"""Running independent simulations on a local process pool, with a progress bar.

Shared by :func:`~pipeline.sim.sweep` (grid points x replications) and
:func:`~pipeline.sim.simulate` (replications). Results come back in task
order, so they do not depend on how many processes ran them.
"""

from __future__ import annotations

import os
import pickle
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from .main_guard import unguarded_call_site

if TYPE_CHECKING:
    import multiprocessing.context
    from concurrent.futures import Executor

__all__: list[str] = []

_MAIN_GUARD = "put the call under 'if __name__ == \"__main__\":'"

_WORKER_DIED = (
    "a worker process died. If it printed that it re-ran the script, " + _MAIN_GUARD + "; "
    "otherwise it may have run out of memory (try fewer processes or shorter runs), "
    "or pass processes=1 to see the error in this process"
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


def check_executor(executor: object) -> None:
    """Raise a TypeError unless ``executor`` is None or a :class:`concurrent.futures.Executor`."""
    if executor is None:
        return
    from concurrent.futures import Executor

    if not isinstance(executor, Executor):
        raise TypeError(
            "executor must be a concurrent.futures.Executor (e.g. ProcessPoolExecutor, "
            f"or a Dask client's get_executor()) or None, got {type(executor).__name__} "
            f"{executor!r:.60}"
        )


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
    workers_asked: bool = True,
) -> list[Any]:
    """``[function(*task) for task in tasks]``: on ``executor``, or on ``workers`` processes.

    ``function`` must be defined at module level (worker processes import it).
    ``bar.update()`` is called as each task finishes. An ``executor`` given
    (any :class:`concurrent.futures.Executor`, e.g. a Dask client's
    ``get_executor()``) runs every task, whatever ``workers`` is, and is left
    open; otherwise ``workers`` > 1 starts a process pool for this call.

    Worker processes re-run the script that started them (see
    :mod:`~pipeline.sim.executors.main_guard`). Called from a script's top level
    without an ``if __name__ == "__main__":`` guard, a pool would only break,
    so none is started: the call raises at once if the caller asked for the
    processes (``workers_asked``), or runs here with a warning saying how to
    get them if the number was a default.

    Raises:
        RuntimeError: ``workers`` > 1 were asked for by a call at the top level of
            a script without a ``__main__`` guard.
        Whatever a task raises; pickling and start-up failures carry a note
            saying how to fix them.
    """
    results: list[Any] = [None] * len(tasks)
    if executor is not None:
        return _gather(executor, function, tasks, bar, what, results)
    if workers > 1 and bootstrapping():
        _stop_bootstrapping_worker(what)
    workers = pool_workers(workers, what, asked=workers_asked)
    if workers <= 1:
        for index, task in enumerate(tasks):
            results[index] = function(*task)
            bar.update()
        return results
    # Imported here: a run that needs no pool (the command line's) does not pay for it.
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers, mp_context=context()) as pool:
        return _gather(pool, function, tasks, bar, what, results)


def pool_workers(workers: int, what: str, *, asked: bool) -> int:
    """The worker processes a pool may start here: ``workers``, or 1 from an unguarded script.

    Worker processes re-run the script that started them (see
    :mod:`~pipeline.sim.executors.main_guard`), so from the top level of a script
    without an ``if __name__ == "__main__":`` guard a pool would only break.
    Then a call that ``asked`` for the processes stops at once, naming the
    line; one that left the number to a default runs in this process, with a
    warning that says how to get them.

    Raises:
        RuntimeError: ``workers`` > 1 were asked for by an unguarded call.
    """
    if workers <= 1:
        return workers
    site = unguarded_call_site()
    if site is None:
        return workers
    place = f"{os.path.basename(site[0])}:{site[1]}"
    if asked:
        raise RuntimeError(
            f"{what} at {place} would start {workers} worker processes, and each "
            f"re-runs this script from the top; {_MAIN_GUARD} or pass processes=1"
        )
    warnings.warn_explicit(
        f"{what} runs in this process, not {workers}: worker processes would re-run "
        f"this script from the top; {_MAIN_GUARD} to use them",
        RuntimeWarning,
        site[0],
        site[1],
    )
    return 1


def _stop_bootstrapping_worker(what: str) -> NoReturn:
    """End a worker process that is re-running an unguarded script and reached a pool.

    :func:`unguarded_call_site` catches this in the parent; this is the safety
    net for scripts it cannot read. The worker cannot carry on (it would start
    a pool of its own); one line on stderr, not a traceback per worker, then
    an exit that the parent reports as a broken pool.
    """
    print(
        f"pipeline: a worker process re-ran the script that started it and reached "
        f"{what} again; {_MAIN_GUARD}",
        file=sys.stderr,
        flush=True,
    )
    raise SystemExit(1)


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

    futures: dict[Any, int] = {}
    try:
        # Submitting inside the try: a pool can break while tasks are still submitted.
        for index, task in enumerate(tasks):
            futures[executor.submit(function, *task)] = index
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
            exc.add_note(f"{what}: {_WORKER_DIED}")
        raise
    return results


def default_workers(processes: int | None, tasks: int) -> int:
    """``processes`` (or the CPU count), at most one per task."""
    return max(1, min(processes or os.cpu_count() or 1, tasks))
