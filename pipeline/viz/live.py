"""Watch a real-time run while it happens: sample ``statistics()``, redraw a figure.

A :class:`LiveMonitor` is a task on the pipeline's own loop that takes a
:class:`~pipeline.Statistics` snapshot every ``every_s`` seconds of loop time,
so it works the same on a Jupyter kernel's loop and on the virtual clock.
:func:`monitor_run` runs a pipeline with a monitor and, when given an
``ipywidgets.Output``, redraws :func:`live_figure` in it at every sample.
:func:`paced` feeds items at given times (a real-time arrival process) and
:func:`timed` wraps a plain handler to record how long each call took, which
is what a virtual-time twin of the run needs as its service times, and how
much CPU it used (:func:`thread_usage` adds that up across threads).

Example (a notebook cell)::

    out = ipywidgets.Output(); display(out)
    report, samples = await monitor_run(Pipeline(handle, cfg), source, output=out)
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import math
import threading
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..engine import Pipeline, State
from ..records import RunReport
from .figures.png import displayed_size, figure_png, png_display_data

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = [
    "LiveMonitor",
    "busy_time",
    "live_figure",
    "live_summary",
    "monitor_run",
    "paced",
    "thread_usage",
    "timed",
]


def _check_period(every_s: object) -> float:
    if isinstance(every_s, bool) or not isinstance(every_s, int | float):
        raise TypeError(f"every_s must be a number of seconds > 0, got {every_s!r}")
    if not (math.isfinite(every_s) and every_s > 0):
        raise ValueError(f"every_s must be > 0 seconds, got {every_s!r}")
    return float(every_s)


class LiveMonitor:
    """Samples a pipeline's statistics every ``every_s`` seconds of loop time.

    Each sample is a dict: ``time_s`` (loop seconds since the monitor started)
    and every :class:`~pipeline.Statistics` field. Sampling stops by itself
    once the pipeline is closed (after one last sample), or on :meth:`stop`.

    Memory is bounded for a run of any length: :attr:`samples` holds at most
    ``max_samples`` evenly spaced samples (about 1 KiB each) plus the
    newest one. When it is full, every second sample is dropped and later
    ones are kept at twice the period (the newest is always last, replaced
    by the next unless it falls on the period): the kept samples span the
    whole run, ever more coarsely. What is lost is the detail between kept
    samples; exact totals and peaks are in the run's report.

    Args:
        pipe: the :class:`~pipeline.Pipeline` to watch.
        every_s: seconds of loop time between samples (> 0).
        on_sample: called with the list of samples so far after each sample
            (e.g. to redraw a figure); it runs on the loop, so keep it short.
        measure_memory: also record ``traced_memory_bytes``, the bytes Python
            has allocated and not freed (``tracemalloc``), so a real-time run's
            memory can be set beside the simulation's modelled memory. Tracing
            slows allocation-heavy code down noticeably; it is stopped again
            with the monitor if the monitor started it.
        max_samples: most samples kept, evenly spaced (>= 2), or None for every one.

    Raises:
        TypeError, ValueError: a bad ``pipe``, ``every_s`` or ``max_samples``.

    Example::

        monitor = LiveMonitor(pipe, every_s=0.25)
        monitor.start()
        report = await pipe.run(source)
        await monitor.stop()
        monitor.frame()          # DataFrame, one row per sample
    """

    def __init__(
        self,
        pipe: Pipeline,
        *,
        every_s: float = 0.25,
        on_sample: Callable[[list[dict[str, Any]]], None] | None = None,
        measure_memory: bool = False,
        max_samples: int | None = 10_000,
    ) -> None:
        if max_samples is not None and (
            isinstance(max_samples, bool) or not isinstance(max_samples, int) or max_samples < 2
        ):
            raise ValueError(f"max_samples must be an integer >= 2 or None, got {max_samples!r}")
        if not isinstance(pipe, Pipeline):
            raise TypeError(f"pipe must be a Pipeline, got {pipe!r}")
        if on_sample is not None and not callable(on_sample):
            raise TypeError(f"on_sample must be callable or None, got {on_sample!r}")
        self.pipe = pipe
        self.every_s = _check_period(every_s)
        self.on_sample = on_sample
        self.measure_memory = bool(measure_memory)
        self._started_tracing = False
        self.max_samples = max_samples
        self.samples: list[dict[str, Any]] = []
        self._taken = 0  # samples taken, kept or not
        self._stride = 1  # every how many taken samples one is kept
        self._provisional = False  # the last sample is only the newest, not a kept one
        self._task: asyncio.Task[None] | None = None
        self._started_s = 0.0

    def __repr__(self) -> str:
        state = "running" if self._task is not None and not self._task.done() else "stopped"
        return f"<LiveMonitor every_s={self.every_s} samples={len(self.samples)} {state}>"

    def start(self) -> asyncio.Task[None]:
        """Start sampling on the running loop; returns the sampling task.

        Raises:
            RuntimeError: already started, or no loop is running.
        """
        if self._task is not None:
            raise RuntimeError(f"{self!r} was already started")
        loop = asyncio.get_running_loop()
        if self.measure_memory and not tracemalloc.is_tracing():
            tracemalloc.start()
            self._started_tracing = True
        self._started_s = loop.time()
        self._task = loop.create_task(self._sample_until_closed(), name="live-monitor")
        return self._task

    async def stop(self) -> None:
        """Take a last sample and stop (harmless if already stopped)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            # wait(), not await: our own cancellation must propagate, the task's must not.
            await asyncio.wait([self._task])
            self.sample()
        if self._started_tracing:
            tracemalloc.stop()
            self._started_tracing = False

    def sample(self) -> dict[str, Any]:
        """Take one sample now (also called by the sampling task) and return it."""
        now = asyncio.get_running_loop().time()
        row = {"time_s": now - self._started_s, **dataclasses.asdict(self.pipe.statistics())}
        del row["first_attempt_waits_s"]  # one value per running item: not a column to plot
        if self.measure_memory and tracemalloc.is_tracing():
            row["traced_memory_bytes"] = tracemalloc.get_traced_memory()[0]
        self._keep(row)
        if self.on_sample is not None:
            self.on_sample(self.samples)
        return row

    def _keep(self, row: dict[str, Any]) -> None:
        samples = self.samples
        if self._provisional:
            samples.pop()
        keep = self._taken % self._stride == 0
        self._taken += 1
        samples.append(row)
        self._provisional = not keep
        if keep and self.max_samples is not None and len(samples) > self.max_samples:
            samples[:] = samples[::2]
            self._stride *= 2

    async def _sample_until_closed(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            self.sample()
            if self.pipe.state is State.CLOSED:
                return
            # Sleep to the next due time, not for every_s, so slow callbacks cause no
            # drift; ticks missed while a callback ran are skipped, not made up for.
            due = max(due + self.every_s, loop.time() + self.every_s / 2)
            await asyncio.sleep(due - loop.time())

    def frame(self) -> pd.DataFrame:
        """The samples as a DataFrame (one row per sample, ``time_s`` first)."""
        import pandas as pd

        return pd.DataFrame(self.samples)


def live_figure(
    samples: pd.DataFrame | Sequence[dict[str, Any]],
    *,
    title: str = "",
    compare: pd.DataFrame | Sequence[dict[str, Any]] | None = None,
) -> Figure:
    """Queue depth, busy workers and completions over time, from monitor samples.

    Returns a ``matplotlib.figure.Figure`` not attached to pyplot, so building
    one in a loop does not make the inline backend show extra copies.
    ``compare`` (a previous run's samples) is drawn faded behind; the axes fit
    the current run once it has samples, so the previous one never squashes it.
    Legends sit below the panels.
    """
    import pandas as pd
    from matplotlib.figure import Figure

    from .figures.panels import legend_below

    def frame_of(data):
        return data if isinstance(data, pd.DataFrame) else pd.DataFrame(list(data))

    frame = frame_of(samples)
    previous = frame_of(compare) if compare is not None else None
    # No layout engine and fixed legend places: this figure is redrawn during a run,
    # and constrained layout or loc="best" would triple the cost of each redraw.
    fig = Figure(figsize=(9, 3.8), dpi=80)
    top = 0.84 if title else 0.9
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.3, top=top, wspace=0.25)
    left, right = fig.subplots(1, 2)
    left.set(xlabel="seconds since start", ylabel="items", title="inside the pipeline")
    right.set(xlabel="seconds since start", ylabel="items (cumulative)", title="counters")
    faded = {"alpha": 0.3, "label": None}
    for data, style in ((previous, faded), (frame, {})):
        if data is None or not len(data):
            continue
        t = data["time_s"]
        left.step(t, data["queue_size"], where="post", color="C0", label="queue depth", **style)
        left.step(t, data["workers_busy"], where="post", color="C1", label="workers busy", **style)
        right.plot(t, data["offered"], ls="--", color="C0", label="offered", **style)
        right.plot(t, data["completed"], color="C1", label="completed", **style)
        right.plot(t, data["dead_lettered"], color="C3", label="dead-lettered", **style)
    if len(frame):
        end = max(float(frame["time_s"].iloc[-1]), 1e-3)
        bound = frame["queue_maxsize"].iloc[0]
        busiest = max(float(frame["queue_size"].max()), float(frame["workers_busy"].max()), 1.0)
        if bound is not None and bound == bound:  # neither None nor NaN: a bounded queue
            left.axhline(bound, ls=":", c="grey", label="maxsize")
            busiest = max(busiest, float(bound))
        left.set(xlim=(0, end), ylim=(0, busiest * 1.08))
        right.set(xlim=(0, end), ylim=(0, max(float(frame["offered"].max()), 1.0) * 1.08))
        legend_below(left, ncols=3)
        legend_below(right, ncols=3)
    if title:
        fig.suptitle(title)
    return fig


def live_summary(report: RunReport, samples: pd.DataFrame) -> dict[str, Any]:
    """Headline numbers of a real-time run, keyed like a simulation's ``summary``.

    Counts, ``producer_blocked_s`` and ``queue_depth_max`` (the queue's exact
    peak) come from the report; ``queue_depth_mean`` is time-weighted over the
    samples (each held until the next), so it is only as fine as the sampling.
    ``sim_time_s`` is the run's duration in loop seconds.

    Args:
        report: the run's :class:`~pipeline.RunReport`.
        samples: the DataFrame :func:`monitor_run` returned.
    """
    import numpy as np

    from ..sim.stats.stepstats import weighted_sum

    duration = report.duration_s
    times = samples["time_s"].to_numpy(dtype=float)
    held = np.diff(np.append(times, max(duration, times[-1]))) if len(times) else np.empty(0)
    depth = samples["queue_size"].to_numpy(dtype=float)
    return {
        "items_offered": report.offered,
        "items_completed": report.completed,
        "items_dead_lettered": len(report.dead_letters),
        "items_unfinished": len(report.unfinished),
        "items_shed": len(report.shed),
        "attempts_total": report.attempts,
        "throughput_per_s": report.completed / duration if duration > 0 else float("nan"),
        "queue_depth_mean": weighted_sum(depth, held) / held.sum() if held.sum() > 0 else 0.0,
        "queue_depth_max": report.statistics.queue_peak,
        "producer_blocked_s": report.statistics.producer_blocked_s,
        "sim_time_s": duration,
    }


class _Redraw:
    """Redraws :func:`live_figure` into an output, spending at most ~1/4 of the time drawing.

    Drawing holds the loop (and the GIL): on a slow or busy machine one redraw
    can take longer than the sampling period, so redraws are spaced by at least
    ``every_s`` and by three times the last redraw's cost.
    """

    def __init__(self, output: Any, title: str, every_s: float, compare: Any = None) -> None:
        self.output = output
        self.title = title
        self.every_s = every_s
        self.compare = compare
        self._next_s = 0.0

    def __call__(self, samples: list[dict[str, Any]], *, force: bool = False) -> None:
        from IPython.display import display

        began = time.perf_counter()
        if not force and began < self._next_s:
            return
        fig = live_figure(samples, title=self.title, compare=self.compare)
        if hasattr(self.output, "outputs"):
            # An ipywidgets Output: set its outputs directly. Capturing with ``with output:``
            # depends on which message the kernel is handling, and a redraw from a task
            # that a button started (not a cell) would go nowhere.

            png = figure_png(fig, scale=1)
            self.output.outputs = (png_display_data(png, displayed_size(fig), "<live figure>"),)
        else:
            with self.output:
                self.output.clear_output(wait=True)
                display(fig)
        spent = time.perf_counter() - began
        self._next_s = began + max(self.every_s, 4 * spent)


async def monitor_run(
    pipeline: Pipeline,
    source: Iterable[Any] | Any,
    *,
    every_s: float = 0.25,
    output: Any = None,
    title: str = "",
    measure_memory: bool = False,
    compare: pd.DataFrame | None = None,
) -> tuple[RunReport, pd.DataFrame]:
    """Run ``pipeline`` over ``source`` on the running loop while sampling it.

    Args:
        pipeline: a fresh :class:`~pipeline.Pipeline`.
        source: what :meth:`Pipeline.run` accepts (iterable or async iterable).
        every_s: seconds of loop time between samples (and redraws).
        output: an ``ipywidgets.Output`` (or any object with ``clear_output``
            usable as a context manager) to redraw :func:`live_figure` in, or None.
            Redraws are spaced out on a slow machine (see ``_Redraw``); the last
            one, after the run, always happens.
        title: the figure's title.
        measure_memory: sample ``tracemalloc`` too (see :class:`LiveMonitor`).
        compare: a previous run's samples, drawn faded in the figure.

    Returns:
        ``(report, samples)``: the run's :class:`~pipeline.RunReport` and a
        DataFrame with one row per sample (see :class:`LiveMonitor`).

    Raises:
        Whatever :meth:`Pipeline.run` raises; the monitor is stopped first.
    """
    redraw = _Redraw(output, title, every_s, compare) if output is not None else None
    if redraw is not None:
        # The first figure of a session is slow to draw (fonts, caches): pay for it
        # before the run starts, not by stalling the loop in the middle of it.
        redraw([], force=True)
    monitor = LiveMonitor(
        pipeline, every_s=every_s, on_sample=redraw, measure_memory=measure_memory
    )
    monitor.start()
    try:
        report = await pipeline.run(source)
    finally:
        await monitor.stop()
    if redraw is not None:
        redraw(monitor.samples, force=True)
    return report, monitor.frame()


async def paced(items: Iterable[Any], times_s: Iterable[float]) -> AsyncIterator[Any]:
    """Yield each item at its time (seconds of loop time after the first ``anext``).

    A real-time arrival process: pair items with arrival offsets (for example
    from ``Poisson(rate).times(rng, n=...)``). An item whose time has passed
    (because the consumer was blocked) is yielded at once, as it would be by
    an upstream that queued it meanwhile.
    """
    loop = asyncio.get_running_loop()
    start = loop.time()
    for item, offset in zip(items, times_s, strict=False):
        delay = start + float(offset) - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        yield item


def timed(handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Wrap a plain (non-async) handler so each call's duration is recorded.

    The wrapper keeps, per call (failed calls included) and in call order:
    ``durations_s``, wall-clock seconds measured inside the thread the pipeline
    runs it on; ``cpu_s``, the CPU seconds that thread spent in the call
    (``time.thread_time``); and ``started_s``, the ``time.perf_counter()`` at
    which it began. The durations are what a virtual-time twin of the run needs
    as its service times; :func:`thread_usage` sums them all up. The wrapper is
    still a plain function, so the pipeline still offloads it.

    Raises:
        TypeError: ``handler`` is a coroutine function (time it inside instead).
    """
    if inspect.iscoroutinefunction(handler):
        raise TypeError(f"timed() wraps plain functions, got coroutine function {handler!r}")
    durations: list[float] = []
    cpu: list[float] = []
    started: list[float] = []
    lock = threading.Lock()  # calls end on several threads: keep the three lists aligned

    @functools.wraps(handler)
    def wrapper(payload: Any) -> Any:
        began = time.perf_counter()
        cpu_began = time.thread_time()
        try:
            return handler(payload)
        finally:
            cpu_spent = time.thread_time() - cpu_began
            ended = time.perf_counter()
            with lock:
                durations.append(ended - began)
                cpu.append(cpu_spent)
                started.append(began)

    wrapper.durations_s = durations  # type: ignore[attr-defined]
    wrapper.cpu_s = cpu  # type: ignore[attr-defined]
    wrapper.started_s = started  # type: ignore[attr-defined]
    return wrapper


_TIMED = ("durations_s", "cpu_s", "started_s")


def busy_time(spans: Iterable[tuple[float, float]]) -> float:
    """Seconds covered by at least one ``(start, end)`` span (overlaps counted once)."""
    total = 0.0
    current_start = current_end = None
    for start, end in sorted(spans):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


def thread_usage(handler: Callable[[Any], Any]) -> dict[str, float]:
    """How a :func:`timed` handler's calls shared threads and CPU.

    Returns a dict with ``calls``; ``thread_s``, the seconds spent inside calls
    added up over threads (two calls in flight for 1 s count 2 s); ``busy_s``,
    the wall-clock seconds during which at least one call was in flight;
    ``cpu_s``, the CPU seconds the calls used; and ``cores``,
    ``cpu_s / busy_s``: how many cores' worth of CPU the calls had while any
    ran. Pure-Python work holds CPython's global interpreter lock, so however
    many threads run it, ``cores`` stays at most 1 (a hair above, at most, for
    the lock's hand-overs); work that releases the lock (I/O, sleeping, numpy)
    can reach the number of cores.

    Raises:
        TypeError: ``handler`` was not made by :func:`timed`.
    """
    durations, cpu, started = (getattr(handler, name, None) for name in _TIMED)
    if durations is None or cpu is None or started is None:
        raise TypeError(f"thread_usage() needs a handler made by timed(), got {handler!r}")
    busy = busy_time((s, s + d) for s, d in zip(started, durations, strict=True))
    cpu_total = float(sum(cpu))
    return {
        "calls": len(durations),
        "thread_s": float(sum(durations)),
        "busy_s": busy,
        "cpu_s": cpu_total,
        "cores": cpu_total / busy if busy > 0 else float("nan"),
    }
