"""What a run whose drain timed out tells its caller: one :class:`DrainTimeoutWarning`.

Shared by ``simulate``, ``sweep``, ``plan`` and ``compare``, which all warn
once for all their runs, with how many timed out and how many items were left.
:func:`drain_cut` is the one rule for which metrics such a run understates:
a plan fails an SLO on them, and a sweep marks their cells.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from ..workloads.scenario import Scenario
from .result import DrainTimeoutWarning

__all__ = [
    "DRAIN_CUT_TEXT",
    "drain_cut",
    "drain_timeout_of",
    "drain_timeout_text",
    "warn_drain_timeouts",
]

DRAIN_CUT_TEXT = (
    "the drain timed out in some runs: the items left unfinished have no wait or latency, "
    "so the value leaves out the slowest tail and looks better than the configuration is"
)
"""What a mark on a drain-cut value means, for a table's or a figure's note."""


def drain_cut(metric: str) -> bool:
    """Whether ``metric`` leaves out the items a timed-out drain left unfinished.

    The items' waits and latencies (``wait_*``, ``latency_*``; a class's
    ``classes.NAME.latency_p95_s`` and a stage's ``write.wait_mean_s`` alike):
    an unfinished item has none, so a run whose drain timed out reports only
    the items that finished, without the slowest tail. Such a value looks
    better than the configuration is and cannot show an SLO on it is met.

    Example:
        >>> drain_cut("latency_p95_s"), drain_cut("write.wait_mean_s"), drain_cut("items_shed")
        (True, True, False)
    """
    return str(metric).rsplit(".", 1)[-1].startswith(("wait_", "latency_"))


def drain_timeout_of(scenario: Scenario) -> float | None:
    """The ``drain_timeout_s`` a run of ``scenario`` drains within (a chain: its first stage's)."""
    config = scenario.config if scenario.stages is None else scenario.stages[0].config
    return config.drain_timeout_s


def drain_timeout_text(
    runs: Sequence[tuple[Scenario, Mapping[str, Any]]],
    *,
    what: str,
    where: str | None = None,
    then: str = "",
) -> str | None:
    """The :class:`DrainTimeoutWarning` message for some runs, or None if every drain finished.

    Args:
        runs: each run's scenario and summary (``drain_timed_out``, ``items_unfinished``).
        what: the runs' name in ``K of N <what>`` ("replications", "sweep runs").
        where: says which runs instead of ``K of N <what>`` (``"the run"``).
        then: a clause on what the caller made of those runs, after the count.
    """
    cut = [(scenario, summary) for scenario, summary in runs if summary["drain_timed_out"]]
    if not cut:
        return None
    # A chain's summary counts its unfinished items (stranded ones too).
    left = sum(int(summary["items_unfinished"]) for _, summary in cut)
    # Only a finite drain_timeout_s can time out.
    timeouts = sorted({drain_timeout_of(scenario) for scenario, _ in cut})
    timeout = ", ".join(str(t) for t in timeouts)
    where = where or f"{len(cut)} of {len(runs)} {what}"
    return (
        f"the drain timed out (drain_timeout_s={timeout}) in {where}: {left:,} item(s) were "
        "left unfinished and are missing from the latency statistics (the slowest tail)"
        f"{then}; use drain_timeout_s=None (or a longer one) to let every item finish, or "
        "simulate fewer items"
    )


def warn_drain_timeouts(
    runs: Sequence[tuple[Scenario, Mapping[str, Any]]],
    *,
    what: str,
    where: str | None = None,
    then: str = "",
    stacklevel: int = 2,
) -> int:
    """Warn once (:class:`DrainTimeoutWarning`) if any of ``runs`` timed out; returns how many did.

    ``stacklevel`` is as for :func:`warnings.warn`, counted from the caller of this function.
    """
    message = drain_timeout_text(runs, what=what, where=where, then=then)
    if message is None:
        return 0
    warnings.warn(message, DrainTimeoutWarning, stacklevel=stacklevel + 1)
    return sum(bool(summary["drain_timed_out"]) for _, summary in runs)
