"""Where sweeps and plans run: this machine's processes, or a Dask distributed cluster.

:func:`scheduler_executor` turns the command line's ``--scheduler`` into a
:class:`concurrent.futures.Executor` for ``sweep(..., executor=...)`` and
``plan(..., executor=...)``:

- ``"local"`` starts a ``LocalCluster`` of worker processes on this machine
  (one per CPU, one thread each: a simulation holds the GIL while it runs);
- anything else is a scheduler's address, ``tcp://host:8786``, to connect to.

Both go through ``Client.get_executor()``, Dask's own
``concurrent.futures`` interface, so the code that submits the runs is the
same one that drives a local process pool. Dask is imported only here, and
only when a scheduler is asked for.

Example:
    >>> with scheduler_executor("local") as executor:
    ...     frame = sweep(base, {"concurrency": [4, 8]}, executor=executor)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..._extras import require
from .main_guard import unguarded_call_site

if TYPE_CHECKING:
    from concurrent.futures import Executor

__all__ = ["scheduler_executor"]


@contextlib.contextmanager
def scheduler_executor(scheduler: str, *, workers: int | None = None) -> Iterator[Executor]:
    """An executor on a Dask cluster, closed (and a local cluster stopped) on exit.

    Args:
        scheduler: ``"local"`` for a LocalCluster on this machine, or a
            scheduler address such as ``"tcp://SCHEDULER:8786"`` (your scheduler's host).
        workers: worker processes of a local cluster (default: CPU count).

    Raises:
        ValueError: an empty ``scheduler``, or ``workers`` < 1.
        ImportError: Dask is not installed (one
            :class:`~pipeline._extras.MissingExtra` naming ``[cluster]``).
        RuntimeError: ``"local"`` asked for from the top level of a script
            without an ``if __name__ == "__main__":`` guard (the cluster's
            worker processes would re-run the script).
        OSError: the scheduler cannot be reached (Dask's own error, with the address).
    """
    if not isinstance(scheduler, str) or not scheduler.strip():
        raise ValueError(f"scheduler must be 'local' or an address, got {scheduler!r}")
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        raise ValueError(f"workers must be an integer >= 1 or None, got {workers!r}")
    require("the Dask executor", "cluster", "distributed")
    from distributed import Client, LocalCluster

    local = scheduler.strip().lower() == "local"
    if local:
        _refuse_unguarded_script()
    with contextlib.ExitStack() as stack:
        if local:
            cluster = stack.enter_context(
                LocalCluster(
                    n_workers=workers or os.cpu_count() or 1,
                    threads_per_worker=1,
                    processes=True,
                    # A random free port: None still serves the dashboard on 8787, and a
                    # second cluster (another notebook's, a test's) then fails to start.
                    dashboard_address=":0",
                )
            )
            client = stack.enter_context(Client(cluster))
        else:
            client = stack.enter_context(Client(scheduler.strip(), timeout="10s"))
        yield client.get_executor()


def _refuse_unguarded_script() -> None:
    """A LocalCluster's workers are spawned processes: they re-run an unguarded script."""
    site = unguarded_call_site()
    if site is not None:
        raise RuntimeError(
            f"scheduler_executor('local') at {os.path.basename(site[0])}:{site[1]} would "
            "start worker processes, and each re-runs this script from the top; put the "
            "call under 'if __name__ == \"__main__\":'"
        )
