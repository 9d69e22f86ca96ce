"""Where independent simulations run: a local process pool (:mod:`.pool`, guarded by
:mod:`.main_guard`), a Dask cluster (:mod:`.cluster`), and an executor that remembers
runs (:mod:`.run_cache`).

``sweep(..., executor=)`` and ``plan(..., executor=)`` take any
:class:`concurrent.futures.Executor`; the two a study reaches for are importable from
here, each loaded on first use: ``from pipeline.sim.executors import RunCache,
scheduler_executor``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_names

# The names _LAZY loads on first use, written out for editors and type checkers.
if TYPE_CHECKING:
    from .cluster import scheduler_executor
    from .run_cache import RunCache
del TYPE_CHECKING  # a switch for the block above, not a name of this package

__all__ = ["RunCache", "scheduler_executor"]

# Public names imported on first use (a process pool's run must not load the cache, nor
# anything load Dask before a cluster is asked for): name -> (module, attribute).
_LAZY = {
    "RunCache": ("run_cache", "RunCache"),
    "scheduler_executor": ("cluster", "scheduler_executor"),
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals(), __all__)
del lazy_names  # the package's own machinery, not a name of it
