"""``RunCache``: an executor that remembers runs, so a plan asked again re-uses them.

A plan asked again with another limit (a slider moved in a notebook) needs
mostly the runs it already made: the same configurations, the same
replications, the same random streams. :func:`~pipeline.sim.plan`,
:func:`~pipeline.sim.sweep` and :func:`~pipeline.sim.compare` take any
:class:`concurrent.futures.Executor`; a :class:`RunCache` is one that looks
each call up before running it. The key is a SHA-256 digest of the pickled
function and arguments, so a run is re-used only when its scenario,
replication and engine are the same; the answer is the same as without the
cache, only sooner.

Calls run in this process, one after the other, unless another executor is
given to run the misses (a Dask client's ``get_executor()``, a process pool).
A call whose arguments or result cannot be pickled runs every time, uncached;
a call that raises is not remembered. Each hit gets its own copy of the
result, so a caller that changes a result cannot change what the cache holds.

Example:
    >>> cache = RunCache()
    >>> first = plan(base, search, ["latency_p95_s<=30"], executor=cache)
    >>> again = plan(base, search, ["latency_p95_s<=20"], executor=cache)  # mostly hits
    >>> cache.hits, cache.misses
"""

from __future__ import annotations

import hashlib
import pickle
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["RunCache"]


class RunCache(Executor):
    """A :class:`concurrent.futures.Executor` that remembers each call's result.

    Args:
        executor: where calls that miss the cache run (default: here, at once,
            in :meth:`submit`). It is left open: :meth:`shutdown` does not close it.
        max_entries: most results kept; the oldest are forgotten first.

    Attributes:
        hits: calls answered from the cache.
        misses: calls that ran (the uncacheable ones included).

    Raises:
        TypeError: ``executor`` is not an Executor.
        ValueError: ``max_entries`` is not an integer >= 1.
    """

    def __init__(self, executor: Executor | None = None, *, max_entries: int = 100_000) -> None:
        if executor is not None and not isinstance(executor, Executor):
            raise TypeError(
                f"executor must be a concurrent.futures.Executor or None, got {executor!r:.60}"
            )
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries must be an integer >= 1, got {max_entries!r}")
        self._executor = executor
        self._max_entries = max_entries
        self._results: dict[bytes, bytes] = {}  # digest of the call -> pickled result
        self._lock = threading.Lock()
        self._closed = False
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._results)

    def __repr__(self) -> str:
        return (
            f"<RunCache entries={len(self._results)} hits={self.hits} misses={self.misses}"
            f"{' closed' if self._closed else ''}>"
        )

    @staticmethod
    def _key(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes | None:
        try:
            blob = pickle.dumps((fn, args, sorted(kwargs.items())), protocol=5)
        except Exception:  # a lambda, a lock, an open file: run it, uncached
            return None
        return hashlib.sha256(blob).digest()

    def _remember(self, key: bytes, result: Any) -> None:
        try:
            blob = pickle.dumps(result, protocol=5)
        except Exception:
            return
        with self._lock:
            self._results[key] = blob
            while len(self._results) > self._max_entries:
                del self._results[next(iter(self._results))]

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Look the call up; on a miss run it (here, or on the executor given) and remember it.

        Raises:
            RuntimeError: after :meth:`shutdown`.
        """
        if self._closed:
            raise RuntimeError("cannot submit to a RunCache after shutdown()")
        key = self._key(fn, args, kwargs)
        with self._lock:
            blob = self._results.get(key) if key is not None else None
            if blob is not None:
                self.hits += 1
            else:
                self.misses += 1
        if blob is not None:
            done: Future = Future()
            done.set_result(pickle.loads(blob))
            return done
        if self._executor is not None:
            future = self._executor.submit(fn, *args, **kwargs)
            if key is not None:
                future.add_done_callback(lambda f: self._store_outcome(key, f))
            return future
        future = Future()
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # the caller sees it through the future, as from a pool
            future.set_exception(exc)
            return future
        if key is not None:
            self._remember(key, result)
        future.set_result(result)
        return future

    def _store_outcome(self, key: bytes, future: Future) -> None:
        if not future.cancelled() and future.exception() is None:
            self._remember(key, future.result())

    def clear(self) -> None:
        """Forget every result (the counters stay)."""
        with self._lock:
            self._results.clear()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse further calls; the results stay readable, the inner executor stays open."""
        self._closed = True
