"""``Plan``: what :func:`~.plan.plan` found: tables, text, JSON, a figure.

The outcome is read off the candidates examined, in cost order:

- ``"chosen"`` -- the cheapest configuration meeting every SLO, every cheaper
  one shown to fail (or rejected by queueing theory);
- ``"undecided"`` -- a cheaper configuration is still undecided when its
  replication budget ran out: ``chosen`` is None, :attr:`Plan.undecided` says
  which configuration, SLO and interval, with advice on run length, and
  :attr:`Plan.fallback` names the cheapest configuration known to meet every SLO;
- ``"infeasible"`` -- every configuration in the search fails some SLO.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .slo import SLO, Judgement, judgement_run_length_advice, slo_keys

if TYPE_CHECKING:
    import pandas as pd

    from ...workloads.scenario import Scenario
    from .candidate import Candidate

__all__ = ["Plan"]

# Config fields a chosen configuration always reports (the ones a deployment sets).
_CONFIG_FIELDS = ("concurrency", "queue_maxsize", "on_full", "max_attempts")


def _json_value(value: Any) -> Any:
    """A JSON-safe value: NaN/inf -> None, objects (a distribution, a failure model) -> repr."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item"):
        return _json_value(value.item())
    return repr(value)


def value_rank(value: Any, position: int) -> tuple[int, float]:
    """Sort key of one searched value: numbers ascending, then others as listed, None last.

    None is an unbounded queue (or no timeout): the most expensive choice.
    """
    if value is None:
        return (2, 0.0)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value))
    return (1, float(position))


def ranked_values(values: Sequence[Any]) -> list[Any]:
    """``values`` in cost order (see :func:`value_rank`)."""
    order = sorted(range(len(values)), key=lambda i: value_rank(values[i], i))
    return [values[i] for i in order]


def _point_text(point: Mapping[str, Any]) -> str:
    def show(value: Any) -> str:
        return "unbounded" if value is None else str(value)

    return ", ".join(f"{name}={show(value)}" for name, value in point.items())


class Plan:
    """The outcome of a capacity plan (see the module docstring for the statuses).

    Attributes:
        status: ``"chosen"``, ``"undecided"`` or ``"infeasible"``.
        chosen: the chosen configuration's searched fields plus ``concurrency``,
            ``queue_maxsize``, ``on_full`` and ``max_attempts`` (None unless
            chosen); for a chain, those of every stage, ``"write.concurrency"``.
        binding: which constraint binds (None unless chosen): ``slo``, the SLO
            whose bound is closest to its limit at the chosen point, with its
            ``bound``, ``limit`` and relative ``slack``; and ``cheaper``, for each
            searched field, the configuration one step cheaper in that field
            alone, with its verdict and the SLOs that rejected it.
        fallback: with status ``"undecided"``, the cheapest configuration shown
            to meet every SLO (not chosen: a cheaper one may meet too); else None.
        undecided: with status ``"undecided"``, one dict per open question:
            ``candidate``, ``slo``, ``replications``, ``mean``, ``low``, ``high``, ``advice``.
        slos: the SLOs, in the order given.
        confidence: the one-sided confidence level asked for.
        look_confidence: the level of each look at a verdict (Bonferroni over
            the looks the replication schedule allows); the bounds in
            :attr:`candidates` are at this level.
        replications: ``(min, max)`` replications per configuration.
        search: field -> values searched; ``cost``: the fields in cost order.
        base: the scenario every configuration started from.
    """

    def __init__(
        self,
        *,
        base: Scenario,
        search: Mapping[str, Sequence[Any]],
        cost: Sequence[str],
        slos: Sequence[SLO],
        confidence: float,
        look_confidence: float,
        replications: tuple[int, int],
        candidates: Sequence[Candidate],
        total: int,
    ) -> None:
        self.base = base
        self.search = {k: list(v) for k, v in search.items()}
        self.cost = list(cost)
        self.slos = tuple(slos)
        self.confidence = confidence
        self.look_confidence = look_confidence
        self.replications = replications
        self.total_candidates = total
        self._candidates = list(candidates)
        self._keys = slo_keys(self.slos)
        target = next((c for c in self._candidates if c.verdict == "meets"), None)
        cheaper = self._candidates[: target.rank] if target else self._candidates
        open_ = [c for c in cheaper if c.verdict == "undecided"]
        self._target = target
        self._open = open_
        if open_:
            self.status = "undecided"
        elif target is not None:
            self.status = "chosen"
        else:
            self.status = "infeasible"
        self.chosen = self._config(target) if self.status == "chosen" else None
        self.fallback = self._config(target) if self.status == "undecided" and target else None
        self.binding = self._binding(target) if self.status == "chosen" else None
        self.undecided = [item for c in open_ for item in self._questions(c)]

    # -- derived facts -----------------------------------------------------------------

    @property
    def runs_total(self) -> int:
        """Simulation runs the plan made."""
        return sum(c.replications for c in self._candidates)

    @property
    def chosen_scenario(self) -> Scenario | None:
        """The base scenario with the chosen configuration applied (None unless chosen)."""
        return self._target.scenario if self.status == "chosen" else None

    def _config(self, candidate: Candidate) -> dict[str, Any]:
        scenario = candidate.scenario
        out = dict(candidate.point)
        if scenario.stages is not None:
            # A chain has no config of its own: each stage's, named "stage.field".
            for stage in scenario.stages:
                for name in _CONFIG_FIELDS:
                    out.setdefault(f"{stage.name}.{name}", getattr(stage.config, name))
            return out
        for name in _CONFIG_FIELDS:
            out.setdefault(name, getattr(scenario.config, name))
        return out

    def _binding(self, target: Candidate) -> dict[str, Any]:
        def slack(j: Judgement) -> float:
            gap = (j.slo.limit - j.bound) if j.slo.upper else (j.bound - j.slo.limit)
            return gap / abs(j.slo.limit) if j.slo.limit != 0 else gap

        closest = min(target.judgements, key=slack)
        cheaper = []
        for name in self.cost:
            ranked = self._ranked_values(name)
            index = ranked.index(target.point[name])
            if index == 0:
                continue
            point = {**target.point, name: ranked[index - 1]}
            # Cheaper in cost order, so examined before the target; a scan, not a dict:
            # searched values need not hash.
            neighbour = next(c for c in self._candidates if c.point == point)
            cheaper.append(
                {
                    "change": {name: ranked[index - 1]},
                    "verdict": neighbour.verdict,
                    "failed": [str(j.slo) for j in neighbour.judgements if j.verdict == "fails"],
                    "note": neighbour.note,
                }
            )
        return {
            "slo": str(closest.slo),
            "bound": closest.bound,
            "limit": closest.slo.limit,
            "slack": slack(closest),
            "cheaper": cheaper,
        }

    def _ranked_values(self, name: str) -> list[Any]:
        """The field's values in cost order, as the search walked them."""
        return ranked_values(self.search[name])

    def _questions(self, candidate: Candidate) -> list[dict[str, Any]]:
        scenario = candidate.scenario
        return [
            {
                "candidate": dict(candidate.point),
                "slo": str(j.slo),
                "replications": j.replications,
                "mean": j.mean,
                "low": j.low,
                "high": j.high,
                "note": j.note,
                "advice": judgement_run_length_advice(j, scenario.n_items, scenario.duration_s),
            }
            for j in candidate.judgements
            if j.verdict == "undecided"
        ]

    # -- tables ------------------------------------------------------------------------

    def _rows(self) -> list[dict[str, Any]]:
        rows = []
        for c in self._candidates:
            row: dict[str, Any] = dict(c.point)
            row.update(
                rank=c.rank,
                replications=c.replications,
                verdict=c.verdict,
                engine=",".join(sorted(c.engines)) or None,
                note=c.note,
            )
            judgements = {j.slo: j for j in c.judgements}
            for slo in self.slos:
                key, j = self._keys[slo], judgements.get(slo)
                row[f"{key}_mean"] = j.mean if j else math.nan
                row[f"{key}_bound"] = j.bound if j else math.nan
                row[f"{key}_half_width"] = j.half_width if j else math.nan
                row[f"{key}_verdict"] = j.verdict if j else None
                row[f"{key}_note"] = j.note if j else None
            rows.append(row)
        return rows

    @cached_property
    def candidates(self) -> pd.DataFrame:
        """One row per configuration examined, in cost order.

        Columns: the searched fields, ``rank`` (place in cost order),
        ``replications``, ``verdict`` (meets, fails, undecided, unstable),
        ``engine``, ``note`` (why it was rejected without runs), then for each
        SLO (named by its metric; ``metric_le``/``metric_ge`` when one metric
        is bounded from both sides) ``_mean``, ``_bound`` (the one-sided bound
        on the SLO's safe side), ``_half_width``, ``_verdict`` and ``_note`` (None,
        or why the bound is not a t bound: the replications agreed exactly, see
        :func:`~pipeline.sim.analysis.planning.slo.judge`).
        """
        import pandas as pd

        from ..sweep import keep_none

        rows = self._rows()
        return keep_none(pd.DataFrame(rows), rows, list(self.search))

    @cached_property
    def runs(self) -> pd.DataFrame:
        """One row per simulation run: the searched fields, ``replication``, each SLO metric."""
        import pandas as pd

        from ..sweep import keep_none

        rows = []
        for c in self._candidates:
            for r, values in enumerate(c.values):
                row = {**c.point, "replication": r}
                row.update(zip((s.metric for s in self.slos), values, strict=True))
                rows.append(row)
        columns = [*self.search, "replication", *dict.fromkeys(s.metric for s in self.slos)]
        return keep_none(pd.DataFrame(rows, columns=columns), rows, list(self.search))

    # -- output ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict: status, chosen, binding, fallback, undecided, candidates, ...

        NaN and infinities become None; ``candidates`` is a list of objects with
        the columns of :attr:`candidates`.
        """

        def clean(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [clean(v) for v in value]
            return _json_value(value)

        return clean(
            {
                "status": self.status,
                "chosen": self.chosen,
                "binding": self.binding,
                "fallback": self.fallback,
                "undecided": self.undecided,
                "slos": [str(s) for s in self.slos],
                "confidence": self.confidence,
                "look_confidence": self.look_confidence,
                "replications": {"min": self.replications[0], "max": self.replications[1]},
                "search": self.search,
                "cost": self.cost,
                "candidates_examined": len(self._candidates),
                "candidates_total": self.total_candidates,
                "runs": self.runs_total,
                "candidates": self._rows(),
            }
        )

    def figure(self, ax: Any = None, *, previous: Plan | None = None) -> Any:
        """The frontier: each SLO's metric against cost, with bounds, limits and the choice.

        One panel per SLO (or the axes given, one per SLO); ``previous``, an
        earlier plan of the same metrics with other limits, adds its choice (a
        hollow star) and its limits (faded) for comparison. See
        :func:`~pipeline.sim.analysis.planning.figure.frontier_figure`.
        """
        from .figure import frontier_figure

        return frontier_figure(self, ax, previous)

    def __repr__(self) -> str:
        chosen = "" if self.chosen is None else f" chosen={_point_text(self._target.point)}"
        return (
            f"<Plan status={self.status}{chosen} examined={len(self._candidates)}"
            f"/{self.total_candidates} runs={self.runs_total}>"
        )

    def __str__(self) -> str:
        return self.report()

    def report(self) -> str:
        """The plan in words: the outcome, why, and the table of candidates."""
        from .report import plan_report

        return plan_report(self)
