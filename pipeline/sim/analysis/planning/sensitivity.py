"""How fragile a plan's answer is: each input moved up and down, each SLO's metric after.

For the chosen configuration of a :class:`~.result.Plan`, each input of the
scenario (:mod:`~pipeline.sim.analysis.planning.perturb`: arrival rate, service
mean, service spread, failure rate, item size) is multiplied by ``1 - change``
and ``1 + change`` (±20% by default) in turn, everything else held, and the
chosen configuration is run again on the same replications the plan ran it on:
replication *r* uses the streams of ``(seed, r)`` (common random numbers), so
the difference from the plan's own runs is the input's effect, not noise.

For every input and SLO, :class:`SensitivityRow` holds the metric's mean at
the plan's input and at each end, the change with a paired half-width (at the plan's
``confidence``, two-sided; Student t widened for skew,
:func:`~pipeline.sim.stats.intervals.robust_mean_ci`), and whether the SLO
still *meets* at each end (judged as the plan judges, one look at the plan's
confidence). Rows are sorted by effect: the larger of the two changes,
relative to the SLO's limit. :attr:`Sensitivity.fragile` names the input the
answer is most fragile to: the first one that breaks an SLO at an end, else
the first that leaves one undecided, else the one with the largest effect.

Example:
    >>> p = plan(base, {"concurrency": range(1, 33)}, ["wait_mean_s<=0.2"])
    >>> s = p.sensitivity()            # ±20%; sensitivity(p, change=0.1) for ±10%
    >>> s.fragile, s.table             # the weakest input; one row per input and SLO
    >>> s.figure()                     # a tornado chart
"""

from __future__ import annotations

import decimal
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...executors.pool import run_tasks
from ...running.engine_choice import request_again
from ...stats.intervals import robust_mean_ci
from .judgement import judge
from .perturb import NotApplicable, inputs_of, perturbed
from .rounds import RunBar, measure, pool_size
from .slo import SLO

if TYPE_CHECKING:
    from concurrent.futures import Executor

    import pandas as pd

    from .result import Plan

__all__ = ["DEFAULT_CHANGE", "Sensitivity", "SensitivityRow", "sensitivity"]

DEFAULT_CHANGE = 0.2
"""How far each input moves by default: ±20%."""


@dataclass(frozen=True)
class SensitivityRow:
    """One input moved down and up, and what one SLO's metric did.

    Attributes:
        input: the input's name (``arrival_rate``, ``write.service_mean``, ...).
        slo: the SLO whose metric this row follows.
        factor_low, factor_high: what the input was multiplied by (0.8 and 1.2).
        base: the metric's mean over the plan's runs at the chosen configuration.
        low, high: its mean with the input at each end, in the metric's unit.
        change_low, change_high: ``low - base`` and ``high - base``, paired by replication.
        half_width_low, half_width_high: two-sided skew-robust t half-widths of those
            changes at the plan's confidence (0 when every pair moved alike).
        verdict_low, verdict_high: the SLO at each end: ``meets``, ``fails`` or
            ``undecided`` (one look at the plan's confidence).
        effect: ``max(|change_low|, |change_high|)`` over ``|limit|`` (over 1 for
            a limit of 0): comparable across SLOs of different units.
    """

    input: str
    slo: SLO
    factor_low: float
    factor_high: float
    base: float
    low: float
    high: float
    change_low: float
    change_high: float
    half_width_low: float
    half_width_high: float
    verdict_low: str
    verdict_high: str
    effect: float

    @property
    def breaks(self) -> bool:
        """True when the SLO fails at either end."""
        return "fails" in (self.verdict_low, self.verdict_high)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the attributes, the SLO as text."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["slo"] = str(self.slo)
        return {k: _finite(v) for k, v in out.items()}


@dataclass(frozen=True)
class Sensitivity:
    """Every input moved by ``change``, for the chosen configuration of a plan.

    Attributes:
        chosen: the configuration moved (the plan's ``chosen``).
        change: the relative move, 0.2 for ±20%.
        replications: runs per input and end (those the plan made at ``chosen``).
        confidence: the level of the half-widths and verdicts.
        rows: one :class:`SensitivityRow` per input and SLO, largest effect first.
        skipped: ``(input, reason)`` for each input that does not apply.
        scenario: for a scenario set, the scenario whose inputs were moved (the
            binding one); None for a plan of one scenario.
    """

    chosen: dict[str, Any]
    change: float
    replications: int
    confidence: float
    rows: tuple[SensitivityRow, ...]
    skipped: tuple[tuple[str, str], ...]
    scenario: str | None = None

    @property
    def fragile(self) -> str | None:
        """The input the answer is most fragile to: of the rows with the largest
        effect first, the first that fails an SLO at an end, else the first left
        undecided at an end, else the first; None when no input applied."""
        if not self.rows:
            return None
        for verdict in ("fails", "undecided"):
            for row in self.rows:
                if verdict in (row.verdict_low, row.verdict_high):
                    return row.input
        return self.rows[0].input

    @property
    def table(self) -> pd.DataFrame:
        """The rows as a DataFrame, largest effect first (columns as :class:`SensitivityRow`)."""
        import pandas as pd

        return pd.DataFrame([row.to_dict() for row in self.rows])

    def to_dict(self) -> dict[str, Any]:
        """What ``plan --sensitivity --json`` prints as ``sensitivity``."""
        return {
            "chosen": dict(self.chosen),
            "change": self.change,
            "replications": self.replications,
            "confidence": self.confidence,
            "fragile": self.fragile,
            "rows": [row.to_dict() for row in self.rows],
            "skipped": [{"input": name, "reason": why} for name, why in self.skipped],
            **({} if self.scenario is None else {"scenario": self.scenario}),
        }

    def figure(self, ax: Any = None) -> Any:
        """A tornado chart: one panel per SLO, one bar per input, drawn by
        :func:`pipeline.viz.figures.tornado.tornado_figure` (needs the ``[viz]`` extra)."""
        from ....viz.figures.tornado import tornado_figure

        return tornado_figure(self.to_dict(), ax)

    def report(self) -> str:
        """The table in words, largest effect first."""
        pct = f"{100 * self.change:.4g}%"
        lines = [
            "sensitivity of the chosen configuration"
            + ("" if self.scenario is None else f" in scenario {self.scenario!r}")
            + f", each input ±{pct} "
            "(mean at the low end .. at the plan .. at the high end; the SLO at each end):"
        ]
        names = [row.input for row in self.rows] + [name for name, _ in self.skipped]
        left = max(map(len, names), default=0)
        middle = max((len(str(row.slo)) for row in self.rows), default=0)
        for row in self.rows:
            lines.append(
                f"  {row.input:<{left}}  {row.slo!s:<{middle}}  {_num(row.low)} .. "
                f"{_num(row.base)} .. {_num(row.high)}  ({row.verdict_low} / {row.verdict_high})"
            )
        for name, why in self.skipped:
            lines.append(f"  {name:<{left}}  skipped: {why}")
        if self.fragile is not None:
            lines.append(f"  most fragile to: {self.fragile}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _num(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.4g}"


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _check_change(change: Any) -> float:
    # Any real number (numpy's, a Decimal) but a bool; NaN fails the comparison.
    if (
        isinstance(change, bool)
        or not isinstance(change, numbers.Real | decimal.Decimal)
        or not 0 < float(change) < 1
    ):
        raise ValueError(f"change must be a number > 0 and < 1 (0.2 for ±20%), got {change!r}")
    return float(change)


def sensitivity(
    plan: Plan,
    *,
    change: float = DEFAULT_CHANGE,
    inputs: Sequence[str] | None = None,
    executor: Executor | None = None,
    processes: int | None = None,
) -> Sensitivity:
    """Move each input of ``plan``'s chosen configuration by ±``change``; see the module.

    Args:
        plan: a plan with status ``"chosen"``.
        change: the relative move, > 0 and < 1 (0.2: each input × 0.8 and × 1.2).
        inputs: which inputs to move (default: all of
            :func:`~pipeline.sim.analysis.planning.perturb.inputs_of` the scenario).
        executor: a :class:`concurrent.futures.Executor` to run on; left open.
        processes: local worker processes when no ``executor`` is given (default:
            one per CPU when the runs would take a few seconds, else 1).

    Returns:
        A :class:`Sensitivity`; inputs that do not apply are in ``skipped`` with why.

    Raises:
        ValueError: the plan chose nothing (undecided or infeasible), a bad
            ``change``, an unknown input, or bad ``processes``.
    """
    if plan.status != "chosen":
        raise ValueError(
            f"sensitivity needs a plan that chose a configuration, got status {plan.status!s}"
        )
    change = _check_change(change)
    if processes is not None and (
        isinstance(processes, bool) or not isinstance(processes, int) or processes < 1
    ):
        raise ValueError(f"processes must be an integer >= 1 or None, got {processes!r}")
    target = plan.target
    if plan.binding_scenario is not None:  # a scenario set: the binding scenario's inputs
        target = target.of_scenario(plan.binding_scenario)
    scenario = target.scenario
    names = inputs_of(scenario)
    if inputs is None:
        chosen_inputs = names
    else:
        chosen_inputs = list(inputs)
        unknown = [name for name in chosen_inputs if name not in names]
        if unknown:
            raise ValueError(f"inputs {unknown} are not inputs of this scenario; allowed: {names}")
    factors = (1.0 - change, 1.0 + change)
    moved: list[tuple[str, tuple[Any, Any]]] = []
    skipped: list[tuple[str, str]] = []
    for name in chosen_inputs:
        try:
            moved.append((name, tuple(perturbed(scenario, name, f) for f in factors)))
        except NotApplicable as exc:
            skipped.append((name, str(exc)))

    slos = plan.slos
    metrics = tuple(slo.metric for slo in slos)
    reps = target.replications
    engine = request_again(target.engines)
    tasks = [(end, r, engine, metrics) for _, ends in moved for end in ends for r in range(reps)]
    # The plan's own measurement, no progress bar (the plan's has closed).
    measured = run_tasks(
        measure,
        tasks,
        workers=pool_size(processes, None, scenario, engine, len(tasks)),
        bar=RunBar(False),
        what="sensitivity",
        executor=executor,
        workers_asked=processes is not None,
    )
    base = np.array(target.values, dtype=np.float64)  # replications x metrics
    rows: list[SensitivityRow] = []
    for index, (name, _) in enumerate(moved):
        ends = []
        for side in range(2):
            start = (2 * index + side) * reps
            chunk = measured[start : start + reps]
            ends.append(
                (
                    np.array([values for values, *_ in chunk], dtype=np.float64),
                    [counts for _, _, counts, _, _ in chunk],
                    [cut for *_, cut, _ in chunk],
                )
            )
        for column, slo in enumerate(slos):
            rows.append(_row(name, slo, column, base, ends, factors, plan.confidence))
    # Largest effect first; an effect that could not be measured (NaN: no value) last.
    rows.sort(key=lambda row: -row.effect if math.isfinite(row.effect) else math.inf)
    return Sensitivity(
        chosen=dict(plan.chosen),
        change=change,
        replications=reps,
        confidence=plan.confidence,
        rows=tuple(rows),
        skipped=tuple(skipped),
        scenario=plan.binding_scenario,
    )


def _row(
    name: str,
    slo: SLO,
    column: int,
    base: np.ndarray,
    ends: list[tuple[np.ndarray, list[Any], list[bool]]],
    factors: tuple[float, float],
    confidence: float,
) -> SensitivityRow:
    at_base = base[:, column]
    out: dict[str, Any] = {}
    for label, (values, counts, cut) in zip(("low", "high"), ends, strict=True):
        x = values[:, column]
        tally = [c[column] for c in counts]
        judgement = judge(
            slo,
            x,
            confidence=confidence,
            counts=None if None in tally else tally,
            timed_out=cut,
        )
        diff = x - at_base
        out[label] = float(np.mean(x))
        out[f"change_{label}"] = float(np.mean(diff))
        out[f"half_width_{label}"] = _half_width(diff, confidence)
        out[f"verdict_{label}"] = judgement.verdict
    scale = abs(slo.limit) if slo.limit != 0 else 1.0
    effect = max(abs(out["change_low"]), abs(out["change_high"])) / scale
    return SensitivityRow(
        input=name,
        slo=slo,
        factor_low=factors[0],
        factor_high=factors[1],
        base=float(np.mean(at_base)),
        effect=effect,
        **out,
    )


def _half_width(diff: np.ndarray, confidence: float) -> float:
    """Two-sided skew-robust half-width of the mean of paired differences (robust_mean_ci)."""
    n = diff.size
    if n < 2 or not np.all(np.isfinite(diff)):
        return math.nan
    return robust_mean_ci(diff, confidence).half_width
