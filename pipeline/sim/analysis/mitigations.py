"""``compare_controls()``: overload controls against no control, paired on common random numbers.

Which control gets a metastable system out of its retry storm, and what does
each cost when nothing is wrong? Run one scenario as it is (the row
``"none"``) and with each control in turn, every arm on the same traffic:
replication *r* of every arm draws its arrivals, service times and faults'
effects from the streams of ``(seed, r)`` (:func:`~pipeline.sim.compare`'s
machinery, :func:`~pipeline.sim.analysis.compare.paired_summaries`, for any
number of arms). Each control's difference from ``"none"`` is then taken
replication by replication, so the noise the arms share cancels.

The frame has one row per (arm, metric):

- ``mean``, ``mean_low``, ``mean_high``: the arm's mean over its runs and its
  interval at ``level`` (:func:`~pipeline.sim.stats.intervals.summarise_values`;
  for ``recovered``, the fraction of judged runs that recovered and its Wilson
  interval, :func:`~pipeline.sim.stats.proportions.proportion_ci`);
- ``difference``, ``low``, ``high``: the mean of ``arm - none`` over the pairs
  where both runs have a value, with its paired interval
  (:func:`~pipeline.sim.stats.intervals.paired_difference`; for ``recovered``,
  the difference of the recovered fractions with Newcombe's paired score
  interval, :func:`~pipeline.sim.stats.proportions.paired_proportion_difference`);
  NaN for ``"none"`` itself and where too few pairs have values (2; 1 for
  ``recovered``);
- ``pairs``: how many pairs that difference is over (for ``"none"``: its runs
  with a value).

A control's own counters (:data:`CONTROL_COUNTERS`: ``retries_denied``,
``breaker_open_s``, ``codel_shed``) are summary keys only of the runs that have
the control; in an arm without it each is 0 (no budget denies a retry, no
breaker is open), so that what a control did is in the same table, and its
difference from ``"none"`` is what it added.

A run has no ``recovered`` when the rule cannot judge it (no faults, or no
whole 10 s window after the last one) and no ``recovery_s`` when it did not
recover, so ``recovery_s``'s difference is over the pairs where both arms
recovered: how much sooner a control recovers when both do, not a penalty
for staying stuck (``recovered`` says that).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._validate import show
from ...overload import AIMD, CircuitBreaker, CoDel, Gradient2, RetryBudget
from ..stats.intervals import paired_difference, summarise_values
from ..stats.proportions import paired_proportion_difference, proportion_ci
from ..workloads.scenario import Scenario
from .compare import paired_summaries
from .planning.slo import DERIVED_METRICS, metric_value

if TYPE_CHECKING:
    from concurrent.futures import Executor

    import pandas as pd

__all__ = ["BASELINE", "COLUMNS", "CONTROL_COUNTERS", "compare_controls"]

BASELINE = "none"
"""The name of the arm that runs the scenario as given."""

COLUMNS = (
    "control",
    "metric",
    "mean",
    "mean_low",
    "mean_high",
    "difference",
    "low",
    "high",
    "pairs",
)
"""The columns of :func:`compare_controls`' frame, in order."""

CONTROL_COUNTERS = ("retries_denied", "breaker_open_s", "codel_shed")
"""Summary keys a run has only with a control; 0 in an arm without it."""

# Each control's PipelineConfig field, by its class.
_FIELD_OF = {
    RetryBudget: "retry_budget",
    CircuitBreaker: "breaker",
    AIMD: "concurrency_limit",
    Gradient2: "concurrency_limit",
    CoDel: "codel",
}


def _changes(name: str, control: Any) -> dict[str, Any]:
    """The ``PipelineConfig`` fields arm ``name`` sets (see :func:`compare_controls`)."""
    if isinstance(control, Mapping):
        return dict(control)
    listed = list(control) if isinstance(control, list | tuple) else [control]
    changes: dict[str, Any] = {}
    for each in listed:
        field = _FIELD_OF.get(type(each))
        if field is None:
            raise TypeError(
                f"controls[{name!r}] must be a control (RetryBudget, CircuitBreaker, AIMD, "
                "Gradient2, CoDel), a list of them, or a dict of PipelineConfig fields, "
                f"got {show(each)}"
            )
        if field in changes:
            raise ValueError(
                f"controls[{name!r}] sets {field} twice ({changes[field]!r} and {each!r}); "
                "allowed: one control of each kind"
            )
        changes[field] = each
    return changes


def _arms(scenario: Scenario, controls: Mapping[str, Any]) -> dict[str, Scenario]:
    """``"none"`` (the scenario) and each control's scenario, checked before any run."""
    if not isinstance(scenario, Scenario):
        raise TypeError(f"scenario must be a Scenario, got {show(scenario)}")
    if not isinstance(controls, Mapping) or not controls:
        raise ValueError(
            "controls must be a non-empty dict of name -> control (or a list of controls, "
            f"or a dict of PipelineConfig fields), got {show(controls)}"
        )
    if scenario.stages is not None:
        raise ValueError(
            "scenario has stages; allowed: one stage (give a chain's stage its controls in "
            "its StageSpec(config=...), and compare the chains with compare())"
        )
    arms = {BASELINE: scenario}
    for name, control in controls.items():
        if not isinstance(name, str) or not name or name == BASELINE:
            raise ValueError(
                f"controls' names must be non-empty strings other than {BASELINE!r} (the "
                f"scenario as given), got {show(name)}"
            )
        try:
            config = dataclasses.replace(scenario.config, **_changes(name, control))
        except (TypeError, ValueError) as error:
            raise type(error)(f"controls[{name!r}]: {error}") from None
        arms[name] = scenario.replace(config=config)
    return arms


def _check_metrics(metrics: Sequence[str]) -> tuple[str, ...]:
    if isinstance(metrics, str) or not isinstance(metrics, Sequence) or not metrics:
        raise TypeError(
            f"metrics must be a non-empty sequence of summary keys, got {show(metrics)}"
        )
    for metric in metrics:
        if not isinstance(metric, str):
            raise TypeError(f"metrics must hold summary keys (strings), got {show(metric)}")
    return tuple(metrics)


def _value(summary: dict, metric: str) -> float:
    """``metric`` in one run as a float: True/False as 1/0, no value (None) as NaN."""
    if metric in DERIVED_METRICS:
        return metric_value(summary, metric)
    if metric in CONTROL_COUNTERS:
        return float(summary.get(metric, 0))
    value = summary[metric]
    return math.nan if value is None else float(value)


def compare_controls(
    scenario: Scenario,
    controls: Mapping[str, Any],
    *,
    metrics: Sequence[str] = ("goodput_per_s", "recovered", "recovery_s"),
    replications: int = 20,
    level: float = 0.95,
    engine: str = "auto",
    processes: int | None = 1,
    executor: Executor | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Each control against the scenario as given, paired on common random numbers.

    Args:
        scenario: one stage (a metastable one: a downstream, client timeouts and
            retries, a :class:`~pipeline.sim.CapacityDrop`; or no fault, for what
            a control costs when nothing is wrong).
        controls: arm name -> a control (``RetryBudget``, ``CircuitBreaker``,
            ``AIMD``, ``Gradient2``, ``CoDel``: set on the scenario's config), a list
            of controls, or a dict of ``PipelineConfig`` fields to replace (e.g.
            ``{"codel": CoDel(), "queue_maxsize": None}``). ``"none"`` is the
            scenario as given, always the first row.
        metrics: summary keys (``recovered`` as 1/0; a key that is None in a run
            has no value there; a control's counter, :data:`CONTROL_COUNTERS`, is 0
            in a run without the control) or a plan's derived fractions
            (``"dead_letter_fraction"``, ...).
        replications: runs per arm (>= 2); replication *r* of every arm on the
            streams of ``(seed, r)``.
        level: confidence of every interval, in (0, 1).
        engine, processes, executor, progress: as for :func:`~pipeline.sim.compare`
            (the controls run on the asyncio engine; ``"auto"`` picks it).

    Returns:
        One row per (arm, metric), arms in order (``"none"`` first), with the
        columns :data:`COLUMNS` (see the module).

    Raises:
        TypeError: a bad ``scenario``, control or ``metrics``.
        ValueError: no controls, a bad name, a control the configuration refuses
            (named ``controls[NAME]``), a chain, a metric the summary does not
            have, or what :func:`~pipeline.sim.compare` refuses; all before any
            run but the first.

    Example:
        >>> compare_controls(stuck, {"budget": RetryBudget(ratio=0.1), "aimd": AIMD()},
        ...                  replications=20)
    """
    import pandas as pd

    arms = _arms(scenario, controls)
    metrics = _check_metrics(metrics)

    def check_first(first: dict) -> None:
        for metric in metrics:
            if metric in DERIVED_METRICS or metric in CONTROL_COUNTERS:
                continue
            value = first.get(metric, "missing")
            if value is not None and not isinstance(value, bool | int | float):
                allowed = [k for k, v in first.items() if not isinstance(v, str)]
                raise ValueError(
                    f"metrics: {metric!r} is not a numeric summary key; allowed: "
                    f"{list(DERIVED_METRICS)} or {allowed}"
                )

    runs = paired_summaries(
        arms,
        (replications, level, engine, processes, executor, progress),
        what="compare_controls",
        check_first=check_first,
    )
    rows = []
    for metric in metrics:
        base = np.array([_value(s, metric) for s in runs[BASELINE]])
        for name, summaries in runs.items():
            values = np.array([_value(s, metric) for s in summaries])
            rows.append(_row(name, metric, values, base, level))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _row(name: str, metric: str, values: np.ndarray, base: np.ndarray, level: float) -> dict:
    """One arm's row for one metric (see the module for each column)."""
    have = np.isfinite(values)
    if metric == "recovered" and have.any():
        judged = values[have]
        interval = proportion_ci(int(judged.sum()), judged.size, level)
        mean, low, high = interval.estimate, interval.low, interval.high
    else:
        found = summarise_values(values[have], level) if have.any() else None
        mean = math.nan if found is None else found.mean
        half = math.nan if found is None else found.half_width
        low, high = mean - half, mean + half
    difference = low_d = high_d = math.nan
    pairs = int(have.sum())
    if name != BASELINE:
        both = have & np.isfinite(base)
        pairs = int(both.sum())
        if metric == "recovered" and pairs >= 1:
            found = paired_proportion_difference(base[both] == 1, values[both] == 1, level)
            difference, low_d, high_d = found.estimate, found.low, found.high
        elif pairs >= 2:
            paired = paired_difference(base[both], values[both], level)
            difference = paired.mean
            low_d, high_d = paired.mean - paired.half_width, paired.mean + paired.half_width
    return {
        "control": name,
        "metric": metric,
        "mean": mean,
        "mean_low": low,
        "mean_high": high,
        "difference": difference,
        "low": low_d,
        "high": high_d,
        "pairs": pairs,
    }
