"""RUN_TOO_SHORT: a run too short for the precision asked of its mean latency.

Not a failure of the pipeline but of the study: one run's mean latency, with
its batch-means half-width, against the relative precision ``diagnose`` was
asked for (``precision=``). The fix says how many items would do, or, when
the run is too short for batch means at all, that replications would (unless
the run replays a recorded trace: every replication replays the same one).
"""

from __future__ import annotations

import math

import numpy as np

from ...._spelling import Placeholder, setting_value
from ...._units import percent_text as _pct
from ...running.summary import BATCH_MEANS_MIN_ITEMS
from ...stats.runlength import run_length_advice, scaled_run_length
from ...workloads.randomness import fixed_workload
from .facts import Facts
from .findings import Finding
from .wording import count_text as _n
from .wording import seconds_text as _s

__all__ = ["run_too_short"]


def run_too_short(f: Facts) -> Finding | None:
    precision = f.precision
    summary = f.result.summary
    mean, half = summary.get("latency_mean_s"), summary.get("latency_mean_ci95_s")
    if precision is None or mean is None or half is None or not math.isfinite(mean):
        return None
    if f.rho >= 1.0:  # an overloaded run has no steady state to estimate; CONSUMER_LAG says so
        return None
    c = f.columns
    counted = int(np.count_nonzero((c.arrival_s >= f.scenario.warmup_s) & (c.outcome == 0)))
    if not math.isfinite(half):
        return _too_short_for_batch_means(f, mean, counted) if counted > 0 else None
    utilisation = summary.get("utilisation")
    advice = run_length_advice(
        mean,
        half,
        max(counted, 1),
        metric="latency_mean_s",
        relative_precision=precision,
        unit="items",
        utilisation=utilisation,
    )
    if advice is None:
        return None
    needed = scaled_run_length(counted, half, precision * abs(mean)) if mean else math.inf
    return Finding(
        code="RUN_TOO_SHORT",
        severity="info",
        title="The run is too short for a precise mean",
        evidence=(
            f"Mean latency {_s(mean)} ± {_s(half)} (95%, batch means of {_n(counted)} completed "
            f"items): ±{_pct(half / abs(mean))} of the mean, wider than the {_pct(precision)} "
            "asked for."
        ),
        explanation=(
            "Consecutive items share their queue, so their latencies are correlated and one run "
            "holds fewer independent observations than items. Batch means measure that: the "
            "half-width shrinks like one over the square root of the run length, and slower "
            "the nearer utilisation is to 1."
        ),
        fix=f"{advice} {_more_samples(f)}",
        numbers={
            "latency_mean_s": mean,
            "half_width_s": half,
            "relative_half_width": half / abs(mean) if mean else math.inf,
            "items_counted": counted,
            "suggested_items": needed,
        },
    )


def _replications() -> str:
    """How the reader asks for R replications: ``replications=R``, or ``--replications R``."""
    return setting_value("replications", Placeholder("R"))


def _more_samples(f: Facts) -> str:
    """Where more independent samples come from: replications, unless nothing is random."""
    if fixed_workload(f.scenario) is None:
        return f"Or run replications ({_replications()}) and read their interval."
    # A replayed trace: replication r replays the same recording, so it adds nothing.
    return (
        "Replications cannot help: the run replays a recorded trace, and every replication "
        "replays the same one (one recorded day is one sample). Record a longer trace, or "
        "more of them, or fit a model to it (calibrate) and replicate that."
    )


def _too_short_for_batch_means(f: Facts, mean: float, counted: int) -> Finding:
    """RUN_TOO_SHORT for a run with too few items for the summary's batch-means half-width."""
    return Finding(
        code="RUN_TOO_SHORT",
        severity="info",
        title="The run is too short to know its own precision",
        evidence=(
            f"Mean latency {_s(mean)} from {_n(counted)} completed items: fewer than the "
            f"{_n(BATCH_MEANS_MIN_ITEMS)} a batch-means interval needs, so the summary gives none."
        ),
        explanation=(
            "Consecutive items share their queue, so their latencies are correlated. Batch "
            "means of a short run are correlated too, and their spread understates how far the "
            "mean may be off: an interval from them would claim more precision than the run has."
        ),
        fix=(
            f"Run at least {_n(BATCH_MEANS_MIN_ITEMS)} items, or run replications "
            f"({_replications()}) and read their interval, which holds at any length."
            if fixed_workload(f.scenario) is None
            else f"Replay a recording of at least {_n(BATCH_MEANS_MIN_ITEMS)} items. "
            + _more_samples(f)
        ),
        numbers={
            "latency_mean_s": mean,
            "half_width_s": math.nan,
            "relative_half_width": math.nan,
            "items_counted": counted,
            "suggested_items": BATCH_MEANS_MIN_ITEMS,
        },
    )
