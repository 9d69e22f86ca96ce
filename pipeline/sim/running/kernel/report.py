"""The reports a kernel run hands back, as the engine's and the chain's close build them."""

from __future__ import annotations

from typing import Any

from pipeline.config import PipelineConfig
from pipeline.overload.breaker import STATES
from pipeline.records import RunReport
from pipeline.statistics import Statistics

__all__ = ["COUNTS", "make_report"]

COUNTS = ("offered", "admitted", "completed", "attempts", "retried", "queue_peak",
          "producer_blocked_s")  # fmt: skip
"""The counters of a run that :func:`make_report` reads (a dict with these keys)."""


def make_report(
    config: PipelineConfig,
    counts: dict[str, Any],
    unfinished: list[int],
    drain_timed_out: bool,
    finished_s: float,
    kind: type[RunReport] = RunReport,
    pool: dict[str, Any] | None = None,
    **stage: Any,
) -> RunReport:
    """The :class:`~pipeline.RunReport` the engine's close would have built.

    ``counts`` holds :data:`COUNTS`, ``dead_letters`` and ``shed``. A chain's stage
    passes ``kind=StageReport`` and, as ``stage``, its ``name`` and its hand-off's
    ``outputs``, ``handed_on`` and ``hand_off_blocked_s`` (nothing is stranded in a
    chain whose drain finished). An autoscaled pipeline passes its ``pool``: the
    statistics ``workers``, ``workers_peak``, ``worker_seconds``, ``scale_events`` and
    ``workers_desired`` at its close; a fixed pool had every worker from 0 s to the close.

    At the close every worker has stopped and the queue, the retry timers and the
    producers' waits are empty, so those statistics are 0. Every failed attempt was
    retried or dead-lettered; ``counts`` may hold ``timed_out``, those of them that
    their attempt timeout cut (the others failed).
    """
    c = {name: counts[name] for name in COUNTS}
    dead_letters, shed = counts["dead_letters"], counts["shed"]
    fixed = {"workers": config.concurrency, "workers_peak": config.concurrency,
             "worker_seconds": config.concurrency * finished_s}  # fmt: skip
    statistics = Statistics(
        state="closed", queue_size=0, queue_maxsize=config.queue_maxsize, workers_busy=0,
        retry_waiting=0, tasks_waiting_put=0, dead_lettered=len(dead_letters), shed=len(shed),
        unfinished=len(unfinished),
        attempts_failed=c["retried"] + len(dead_letters) - counts.get("timed_out", 0),
        attempts_timed_out=counts.get("timed_out", 0), **c, **(pool or fixed),
        **_overload_statistics(config, counts.get("guard"), finished_s),
    )  # fmt: skip
    return kind(
        offered=c["offered"], admitted=c["admitted"], completed=c["completed"],
        dead_letters=dead_letters, unfinished=unfinished, shed=shed, attempts=c["attempts"],
        drain_timed_out=drain_timed_out, started_s=0.0, finished_s=finished_s,
        statistics=statistics, **stage,
    )  # fmt: skip


def _overload_statistics(config: PipelineConfig, guard: tuple | None, now: float) -> dict[str, Any]:
    """``Guard.statistics(now)`` from the replay's counts: ``guard`` is (retries denied, calls
    refused, the breaker's state code, when its last spell opened, its spells' open seconds),
    None when the run counted none (nothing for the defaults to correct)."""
    if guard is None:
        return {}
    denied, refused, code, opened_s, open_total_s = guard
    breaker = config.breaker
    if breaker is None:
        return {"retries_denied": denied}
    state, open_s = STATES[code], open_total_s
    if state == "open":  # as BreakerState.state_at and open_time_s
        if now >= opened_s + breaker.open_s:
            state = "half_open"
        open_s += min(breaker.open_s, max(0.0, now - opened_s))
    return {"retries_denied": denied, "breaker_state": state, "breaker_calls_refused": refused,
            "breaker_open_s": open_s}  # fmt: skip
