"""Record one real ingestion and measure it the way the simulator measures its twin.

:func:`record_run` opens the client and the sink, runs :func:`ingest` with a
:class:`~pipeline.examples.ingest.meter.WriteMeter` on the write stage and
(unless ``trace=False``) a bounded :class:`~pipeline.sim.TraceRecorder` on
both stages, and returns a :class:`Recording`: the run, its
:class:`~pipeline.sim.RunTrace` and its measurements. The measurements come
from the meter, as the run goes, in memory that does not grow with the
record count; :func:`measure` computes the same numbers from a whole trace.
They are the three numbers a twin predicts, with the simulator's definitions:

- ``throughput_per_s``: records written per second, from the start (when the
  whole listing was available) to the end of the drain;
- ``latency_p95_s``: the 95th percentile, over written records, of the time
  from the start to the record's write (end to end: the listing was there at
  the start, so that is how long a record waited to land);
- ``queue_depth_max``: the most records waiting for the database: in the
  write stage's queue, or held by a worker waiting for the single writer (the
  twin, with one server, queues them all).

:func:`record_fastest` keeps the fastest of a few runs: other work on the
machine can only slow a run, so that is the least disturbed one, to fit a
twin on or to hold a twin's prediction against.

:func:`live_figure` draws the samples a live run takes (notebook 09).
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...sim.workloads.traces.runtrace import RunTrace, TraceRecorder
from .chain import IngestConfig, IngestRun, ingest
from .client import PartnerClient
from .meter import WriteMeter
from .sink import open_sink

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "METRICS",
    "Recording",
    "live_figure",
    "measure",
    "record_fastest",
    "record_run",
    "redraw_in",
]

METRICS = ("throughput_per_s", "latency_p95_s", "queue_depth_max")
"""What a twin predicts and a real run measures, by the simulator's summary keys."""


@dataclass
class Recording:
    """One real run: what happened, its trace, and its measurements.

    Attributes:
        run: the :class:`~pipeline.examples.ingest.chain.IngestRun`.
        trace: the :class:`~pipeline.sim.RunTrace` (times from the start), or
            None when recorded with ``trace=False``. Its recorder keeps the
            first ``max_events`` events (see :class:`~pipeline.sim.TraceRecorder`):
            a long run's trace covers its start, which is what a twin is fitted on.
        measured: the :class:`~pipeline.examples.ingest.meter.WriteMeter`'s
            numbers, over the whole run (:func:`measure` of a whole trace).
        writers: writes the database did at once (the sink's ``writers``).
    """

    run: IngestRun
    trace: RunTrace | None
    measured: dict[str, float]
    writers: int


def measure(trace: RunTrace, *, written_by: str = "write") -> dict[str, float]:
    """Throughput, p95 end-to-end latency and peak write queue of a recorded run.

    The trace must hold the whole run (a recorder that dropped events measures
    only their start): :func:`record_run` measures with a
    :class:`~pipeline.examples.ingest.meter.WriteMeter` instead, whose numbers
    equal these.
    """
    write = trace.stages[written_by]
    done = write.finish_s[write.outcome == "completed"]
    _times, depth = write.waiting_depth()
    span = trace.duration_s
    return {
        "throughput_per_s": float(done.size / span) if span > 0 else math.nan,
        "latency_p95_s": float(np.percentile(done, 95)) if done.size else math.nan,
        "queue_depth_max": float(depth.max()) if depth.size else 0.0,
        "records_written": int(done.size),
        "duration_s": float(span),
    }


async def record_run(
    url: str,
    target: str | os.PathLike[str],
    config: IngestConfig | None = None,
    *,
    pool_size: int = 10,
    trace: bool = True,
    max_events: int | None = 1 << 18,
    **ingest_options: Any,
) -> Recording:
    """Ingest from the partner at ``url`` into ``target`` (a path or a DSN), recorded.

    Args:
        url: the partner API, ``http://127.0.0.1:PORT``.
        target: an SQLite file path, or a ``postgresql://`` DSN.
        config: the :class:`IngestConfig`.
        pool_size: Postgres connections (ignored for SQLite).
        trace: record a trace (for a twin); False measures only.
        max_events: the trace recorder's bound (see :class:`~pipeline.sim.TraceRecorder`).
        **ingest_options: passed to :func:`ingest` (``on_sample``, ``every_s``,
            ``stop_on_sigterm``, ``stop_event``).

    Raises:
        SinkError: the database cannot be opened (one line).
    """
    config = config or IngestConfig()
    recorder = TraceRecorder(max_events=max_events) if trace else None
    client = PartnerClient(
        url,
        page_size=config.page_size,
        timeout_s=config.request_timeout_s,
        max_retry_after_s=config.max_retry_after_s,
    )
    async with open_sink(target, pool_size=pool_size) as sink, client:
        meter = WriteMeter(capacity=sink.writers, concurrency=config.write.concurrency)
        run = await ingest(client, sink, config, recorder=recorder, meter=meter, **ingest_options)
        writers = sink.writers
    if recorder is None:
        return Recording(run, None, meter.measured(), writers)
    # The whole listing was there at the start: a backlog of pages at time 0.
    listed = math.ceil(run.total / config.page_size) if run.total else 0
    pages = max(1, listed, run.report.stages["fetch"].offered)
    frozen = recorder.trace(
        configs={"fetch": config.fetch, "write": config.write},
        source_arrivals_s=[0.0] * pages,
    )
    return Recording(run, frozen, meter.measured(), writers)


async def record_fastest(
    url: str,
    target: str | os.PathLike[str],
    config: IngestConfig | None = None,
    *,
    runs: int = 3,
    **options: Any,
) -> Recording:
    """The fastest (in records/s) of ``runs`` :func:`record_run` calls, one after another.

    A browser drawing the page, a test run, any other work on the machine can
    only slow a run down, never speed it up: the fastest run is the least
    disturbed. Only it and the run going on are held. Every run writes the
    same rows into ``target`` (upserts: nothing is duplicated).

    Args:
        runs: how many runs to make, at least 1.
        **options: passed to :func:`record_run`.

    Raises:
        ValueError: ``runs`` is not a whole number >= 1 (before any run).
    """
    if isinstance(runs, bool) or not isinstance(runs, numbers.Integral) or runs < 1:
        raise ValueError(f"runs must be a whole number >= 1, got {runs!r}")
    fastest: Recording | None = None
    for _ in range(int(runs)):
        recording = await record_run(url, target, config, **options)
        if fastest is None or _rate(recording) > _rate(fastest):
            fastest = recording
    assert fastest is not None
    return fastest


def _rate(recording: Recording) -> float:
    """Records/s; a run that wrote nothing (NaN) is slower than any that wrote."""
    rate = recording.measured["throughput_per_s"]
    return -math.inf if math.isnan(rate) else rate


def live_figure(samples: list[dict[str, Any]], *, total: int | None = None) -> Figure:
    """Records written and the write queue, against seconds since the start."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.2), layout="constrained")
    t = [s["time_s"] for s in samples]
    left.plot(t, [s["written"] for s in samples], drawstyle="steps-post")
    if total:
        left.axhline(total, color="grey", lw=0.8, ls="--", label=f"{total:,} listed")
        left.legend(loc="lower right")
    left.set(xlabel="seconds since start", ylabel="records written", title="Progress")
    right.plot(t, [s["write_queue"] for s in samples], drawstyle="steps-post", color="C1")
    right.set(xlabel="seconds since start", ylabel="records queued", title="Write queue")
    return fig


def redraw_in(output: Any, *, total: int | None = None, every_s: float = 0.25) -> Any:
    """An ``on_sample`` callback that redraws :func:`live_figure` in an ``ipywidgets.Output``.

    It redraws at most every ``every_s`` seconds of samples, and always for the
    last sample (the run's end), so the figure keeps up without slowing the run.
    """
    import matplotlib.pyplot as plt

    last = {"time_s": -math.inf}

    def redraw(samples: list[dict[str, Any]]) -> None:
        now = samples[-1]["time_s"]
        final = samples[-1].get("writers_busy") == 0 and samples[-1].get("write_queue") == 0
        if now - last["time_s"] < every_s and not final:
            return
        last["time_s"] = now
        with output:
            output.clear_output(wait=True)
            live_figure(samples, total=total)
            plt.show()

    return redraw
