"""``Plan``: what :func:`~.plan.plan` found: tables, text, JSON, a figure.

The outcome is read off the candidates examined, in cost order:

- ``"chosen"`` -- the cheapest configuration meeting every SLO, every cheaper
  one shown to fail (or rejected by queueing theory);
- ``"undecided"`` -- a cheaper configuration is still undecided when its
  replication budget ran out (or the plan's run budget left it unrun, or left
  the search short of any configuration meeting every SLO): ``chosen`` is None,
  :attr:`Plan.undecided` says which configuration, SLO and interval, with advice
  on run length, and :attr:`Plan.fallback` names the cheapest configuration
  known to meet every SLO;
- ``"infeasible"`` -- every configuration in the search fails some SLO.

The parts of the answer are frozen records (:mod:`~.records`): ``PlanStatus``,
``Binding`` with its ``CheaperStep`` per searched field, ``OpenQuestion`` and
``ScenarioVerdict``. Their ``to_dict()`` is what ``plan --json`` prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .candidate import verdict_of_judgements
from .cost import Cost, CostEstimate, Mix, difference_bounds, estimate
from .judgement import Judgement, judgement_run_length_advice
from .records import (
    Binding,
    CheaperStep,
    OpenQuestion,
    PlanStatus,
    ScenarioStep,
    ScenarioVerdict,
    configuration,
    json_value,
    point_text,
    ranked_values,
)
from .slo import SLO, slo_keys

if TYPE_CHECKING:
    import pandas as pd

    from ...workloads.scenario import Scenario
    from .candidate import Candidate
    from .check import CheckVerdict
    from .decision import Decision
    from .headroom import Headroom
    from .rounds import Budget

__all__ = ["Plan"]


@dataclass(frozen=True, eq=False, repr=False)
class Plan:
    """The outcome of a capacity plan (see the module docstring for the statuses): a
    frozen record of what :func:`~.plan.plan` examined and decided.

    Read off the decision (properties, each with its own entry below): ``status``,
    ``chosen``, ``binding``, ``fallback``, ``undecided``, ``unrun``,
    ``binding_scenario``, ``cost_per_hour`` and ``target``.

    Attributes:
        base: the scenario every configuration started from.
        search: field -> values searched; ``cost``: the fields in cost order.
        slos: the SLOs, in the order given.
        confidence: the one-sided confidence level asked for.
        look_confidence: the level of each look at a verdict (Bonferroni over
            the looks the replication schedule allows); the bounds in
            :attr:`candidates` are at this level.
        replications: ``(min, max)`` replications per configuration.
        total_candidates: how many configurations the search space holds.
        examined: the configurations examined, in cost order (each a
            :class:`~.candidate.Candidate`: its runs, judgements and verdict).
        decision: the :class:`~.decision.Decision` the plan reached (its status,
            the configuration it rests on, what was left open or unrun).
        mix: the scenarios a cost per hour averages over (:class:`~.cost.Mix`).
        prices: the :class:`~.cost.Cost` the plan was priced with, else None.
        budget: the runs used of the plan's run budget (a :class:`~.rounds.Budget`;
            None for a plan made without one).
        headroom: the chosen configuration's :class:`~.headroom.Headroom` when it
            was asked for and could be found, else None; ``headroom_asked`` says
            whether it was asked for.
        scenario_names: a scenario set's names (``plan(scenarios=...)``), else empty.
        check: for ``plan(check=True)``, the :class:`~.check.CheckVerdict` (the
            verdict and one judgement per SLO); else None.
    """

    base: Scenario
    search: dict[str, list[Any]]
    cost: list[str]
    slos: tuple[SLO, ...]
    confidence: float
    look_confidence: float
    replications: tuple[int, int]
    total_candidates: int
    examined: tuple[Candidate, ...]
    decision: Decision
    mix: Mix
    prices: Cost | None = None
    budget: Budget | None = None
    headroom: Headroom | None = None
    headroom_asked: bool = False
    scenario_names: tuple[str, ...] = ()
    check: CheckVerdict | None = None

    # -- the decision, described -------------------------------------------------------

    @property
    def status(self) -> PlanStatus:
        """How the plan ended, a :class:`PlanStatus`: ``"chosen"``, ``"undecided"`` or
        ``"infeasible"`` (see the module docstring)."""
        return self.decision.status

    @property
    def target(self) -> Candidate | None:
        """The configuration the decision rests on: the choice, or with status
        ``"undecided"`` the fallback; else None."""
        return self.decision.target

    @property
    def unrun(self) -> tuple[dict[str, Any], ...]:
        """The configurations cheaper than any meeting every SLO that the run budget left
        without a run (their points, in cost order); they keep the plan undecided."""
        return self.decision.unrun

    @cached_property
    def chosen(self) -> dict[str, Any] | None:
        """The chosen configuration's searched fields plus ``concurrency``,
        ``queue_maxsize``, ``on_full`` and ``max_attempts`` (None unless chosen); for a
        chain, those of every stage, ``"write.concurrency"``."""
        if self.status is not PlanStatus.CHOSEN:
            return None
        return configuration(self.target.point, self.target.scenario)

    @cached_property
    def fallback(self) -> dict[str, Any] | None:
        """With status ``"undecided"``, the cheapest configuration shown to meet every SLO
        (not chosen: a cheaper one may meet too); else None."""
        if self.status is not PlanStatus.UNDECIDED or self.target is None:
            return None
        return configuration(self.target.point, self.target.scenario)

    @cached_property
    def binding(self) -> Binding | None:
        """Which constraint binds, a :class:`Binding` (None unless chosen): ``slo``, the
        SLO whose bound is closest to its limit at the chosen point, with its ``bound``,
        ``limit`` and relative ``slack``; and ``cheaper``, for each searched field, the
        configuration one step cheaper in that field alone, with its verdict and the SLOs
        that rejected it (:class:`CheaperStep`)."""
        return self._binding(self.target) if self.status is PlanStatus.CHOSEN else None

    @cached_property
    def undecided(self) -> tuple[OpenQuestion, ...]:
        """With status ``"undecided"``, one :class:`OpenQuestion` per open question
        (``candidate``, ``slo``, ``replications``, ``mean``, ``low``, ``high``, ``note``,
        ``advice``); else empty."""
        return tuple(item for c in self.decision.open for item in self._questions(c))

    @cached_property
    def binding_scenario(self) -> str | None:
        """With a set and status ``"chosen"``, the scenario whose bound is closest to its
        limit at the choice; else None."""
        if self.status is not PlanStatus.CHOSEN or not self.scenario_names:
            return None
        return self.target.binding_scenario()

    @cached_property
    def cost_per_hour(self) -> CostEstimate | None:
        """The chosen configuration's cost per hour (None unless chosen and priced)."""
        if self.status is not PlanStatus.CHOSEN or self.prices is None:
            return None
        return self._cost_of(self.target)

    @property
    def scenarios(self) -> dict[str, ScenarioVerdict] | None:
        """A scenario set's verdicts for the chosen configuration (the fallback when
        undecided; for a plan over one configuration, a check, that one whatever its
        verdict): name -> :class:`ScenarioVerdict`; None without a set or such a
        configuration (or when queueing theory rejected it without runs)."""
        target = self.target
        if target is None and self.total_candidates == 1 and self.examined:
            target = self.examined[0]
        if not self.scenario_names or target is None or not target.by_scenario:
            return None
        return {
            name: ScenarioVerdict(
                verdict_of_judgements(found), found, cheaper=self._cheaper_in(name)
            )
            for name, found in target.by_scenario.items()
        }

    def _cheaper_in(self, name: str) -> tuple[ScenarioStep, ...]:
        """Each configuration one step cheaper than the choice, judged in scenario ``name``."""
        if self.binding is None:
            return ()
        steps = []
        for step in self.binding.cheaper:
            point = {**self.target.point, **step.change}
            neighbour = next((c for c in self.examined if c.point == point), None)
            found = () if neighbour is None else neighbour.by_scenario.get(name, ())
            verdict = verdict_of_judgements(found) if found else step.verdict
            steps.append(ScenarioStep(dict(step.change), verdict, found, step.note))
        return tuple(steps)

    # -- derived facts -----------------------------------------------------------------

    @property
    def runs_total(self) -> int:
        """Simulation runs the plan made (a replication of a scenario set runs each scenario)."""
        return sum(c.replications * max(1, len(c.names)) for c in self.examined)

    @property
    def runs_drain_timed_out(self) -> int:
        """Runs whose drain hit ``drain_timeout_s``, leaving items unfinished (see
        :data:`~pipeline.sim.analysis.planning.slo.DRAIN_CUT_METRICS`: their latency and wait
        SLOs fail)."""
        return sum(sum(c.timed_out) for c in self.examined)

    def cost_estimate(self, candidate: Candidate) -> CostEstimate:
        """``candidate``'s cost per hour, with its bounds at the per-look level (priced
        plans only)."""
        assert self.prices is not None
        return estimate(
            self.prices, self.mix, candidate.point, candidate.extra, self.look_confidence
        )

    def _cost_of(self, target: Candidate) -> CostEstimate:
        """The chosen configuration's cost, naming any rival not told apart from it."""
        assert self.prices is not None
        found = self.cost_estimate(target)
        measured = any(self.mix.autoscales(self.prices, c.point) for c in self.examined)
        if not self.prices.wait_hour and not measured:
            return found  # every cost exact: no rival within reach
        rivals = []
        for c in self.examined:
            if c is target or c.verdict != "meets":
                continue
            lowest, _ = difference_bounds(
                self.prices,
                self.mix,
                target.extra,
                target.point,
                c.extra,
                c.point,
                self.look_confidence,
            )
            if lowest <= 0:
                rivals.append(point_text(c.point))
        if not rivals:
            return found
        from dataclasses import replace

        return replace(
            found,
            note=(
                f"not told apart from {'; '.join(rivals)} after the replication budget: "
                "the paired difference of total cost per hour still holds 0; the choice "
                "has the lower mean"
            ),
        )

    @property
    def chosen_scenario(self) -> Scenario | None:
        """The base scenario with the chosen configuration applied (None unless chosen)."""
        return self.target.scenario if self.status is PlanStatus.CHOSEN else None

    def _binding(self, target: Candidate) -> Binding:
        def slack(j: Judgement) -> float:
            gap = (j.slo.limit - j.bound) if j.slo.upper else (j.bound - j.slo.limit)
            return gap / abs(j.slo.limit) if j.slo.limit != 0 else gap

        closest = min(target.judgements, key=slack)
        cheaper = []
        for name in self.cost:
            ranked = ranked_values(self.search[name])
            index = ranked.index(target.point[name])
            if index == 0:
                continue
            point = {**target.point, name: ranked[index - 1]}
            # Cheaper in cost order, so examined before the target; a scan, not a dict:
            # searched values need not hash.
            neighbour = next((c for c in self.examined if c.point == point), None)
            if neighbour is None:
                continue
            cheaper.append(
                CheaperStep(
                    change={name: ranked[index - 1]},
                    verdict=neighbour.verdict,
                    failed=tuple(j.slo for j in neighbour.judgements if j.verdict == "fails"),
                    note=neighbour.note,
                )
            )
        return Binding(
            slo=closest.slo,
            bound=closest.bound,
            limit=closest.slo.limit,
            slack=slack(closest),
            cheaper=tuple(cheaper),
        )

    def _questions(self, candidate: Candidate) -> list[OpenQuestion]:
        scenario = candidate.scenario
        return [
            OpenQuestion(
                candidate=dict(candidate.point),
                slo=j.slo,
                replications=j.replications,
                mean=j.mean,
                low=j.low,
                high=j.high,
                note=j.note,
                advice=judgement_run_length_advice(j, scenario.n_items, scenario.duration_s),
            )
            for j in candidate.judgements
            if j.verdict == "undecided"
        ]

    # -- tables ------------------------------------------------------------------------

    def _rows(self) -> list[dict[str, Any]]:
        rows = []
        keys = slo_keys(self.slos)
        for c in self.examined:
            row: dict[str, Any] = dict(c.point)
            row.update(
                rank=c.rank,
                replications=c.replications,
                verdict=c.verdict,
                engine=",".join(sorted(c.engines)) or None,
                note=c.note,
                drain_timed_out=sum(c.timed_out),
                items_unfinished_max=max(c.unfinished, default=None),
            )
            judgements = {j.slo: j for j in c.judgements}
            for slo in self.slos:
                key, j = keys[slo], judgements.get(slo)
                row[f"{key}_mean"] = j.mean if j else math.nan
                row[f"{key}_bound"] = j.bound if j else math.nan
                row[f"{key}_half_width"] = j.half_width if j else math.nan
                row[f"{key}_verdict"] = j.verdict if j else None
                row[f"{key}_note"] = j.note if j else None
            if self.prices is not None:
                cost = self.cost_estimate(c)
                row.update(
                    cost_per_hour=cost.total,
                    cost_per_hour_low=cost.low,
                    cost_per_hour_high=cost.high,
                    workers_cost_per_hour=cost.workers,
                    waiting_cost_per_hour=cost.waiting,
                    cost_per_million_items=cost.per_million_items,
                )
            rows.append(row)
        return rows

    @cached_property
    def candidates(self) -> pd.DataFrame:
        """One row per configuration examined, in cost order.

        Columns: the searched fields, ``rank`` (place in cost order),
        ``replications``, ``verdict`` (meets, fails, undecided, unstable),
        ``engine``, ``note`` (why it was rejected without runs),
        ``drain_timed_out`` (how many of its runs hit the drain timeout: then
        its latency and wait SLOs fail) and ``items_unfinished_max`` (the most
        items one of its runs left unfinished; None without runs), then for each
        SLO (named by its metric; ``metric_le``/``metric_ge`` when one metric
        is bounded from both sides) ``_mean``, ``_bound`` (the one-sided bound
        on the SLO's safe side), ``_half_width``, ``_verdict`` and ``_note`` (None,
        or why the bound is not a t bound: the replications agreed exactly, see
        :func:`~pipeline.sim.analysis.planning.judgement.judge`).
        """
        import pandas as pd

        from ..sweep import keep_none

        rows = self._rows()
        return keep_none(pd.DataFrame(rows), rows, list(self.search))

    @cached_property
    def runs(self) -> pd.DataFrame:
        """One row per simulation run: the searched fields, ``replication``, each SLO
        metric, ``drain_timed_out`` and ``items_unfinished``."""
        import pandas as pd

        from ..sweep import keep_none

        rows = []
        k = len(self.slos)
        for c in self.examined:
            for r, values in enumerate(c.values):
                if not c.names:
                    row = {**c.point, "replication": r}
                    row.update(zip((s.metric for s in self.slos), values, strict=True))
                    row.update(drain_timed_out=c.timed_out[r], items_unfinished=c.unfinished[r])
                    rows.append(row)
                    continue
                for i, name in enumerate(c.names):  # a scenario set: a row per scenario
                    row = {**c.point, "scenario": name, "replication": r}
                    row.update(
                        zip((s.metric for s in self.slos), values[i * k : i * k + k], strict=True)
                    )
                    # The unfinished count is the replication's total over the scenarios.
                    row.update(drain_timed_out=c.cuts[r][i], items_unfinished=c.unfinished[r])
                    rows.append(row)
        columns = [
            *self.search,
            *(["scenario"] if self.scenario_names else []),
            "replication",
            *dict.fromkeys(s.metric for s in self.slos),
            "drain_timed_out",
            "items_unfinished",
        ]
        return keep_none(pd.DataFrame(rows, columns=columns), rows, list(self.search))

    # -- output ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict: status, chosen, binding, fallback, undecided, candidates, ...

        NaN and infinities become None; ``candidates`` is a list of objects with
        the columns of :attr:`candidates`; ``runs_drain_timed_out`` counts the
        runs whose drain timed out (:attr:`runs_drain_timed_out`); ``budget``
        (``runs_used``, ``runs_allowed``, ``exhausted``) and ``unrun`` (the
        configurations the budget left unrun) when the plan had a run budget;
        for a check, also ``verdict``, ``configuration``, ``note`` and
        ``judgements`` (:meth:`~.check.CheckVerdict.to_dict`).
        """

        def clean(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [clean(v) for v in value]
            return json_value(value)

        payload = {
            "status": self.status.value,
            "chosen": self.chosen,
            "binding": None if self.binding is None else self.binding.to_dict(),
            "fallback": self.fallback,
            "undecided": [question.to_dict() for question in self.undecided],
            "slos": [str(s) for s in self.slos],
            "confidence": self.confidence,
            "look_confidence": self.look_confidence,
            "replications": {"min": self.replications[0], "max": self.replications[1]},
            "search": self.search,
            "cost": self.cost,
            "candidates_examined": len(self.examined),
            "candidates_total": self.total_candidates,
            "runs": self.runs_total,
            "runs_drain_timed_out": self.runs_drain_timed_out,
            "candidates": self._rows(),
        }
        if self.budget is not None:
            payload["budget"] = self.budget.to_dict()
            payload["unrun"] = [dict(point) for point in self.unrun]
        if self.check is not None:
            payload.update(self.check.to_dict())
        if self.prices is not None:
            # Only when priced or asked for: a plan without these flags keeps its keys.
            payload["prices"] = self.prices.to_dict()
            shares = self.mix.to_dict()
            if shares is not None:
                payload["prices"]["scenario_shares"] = shares["shares"]
                payload["prices"]["scenario_shares_given"] = shares["given"]
            chosen_cost = self.cost_per_hour
            payload["cost_per_hour"] = None if chosen_cost is None else chosen_cost.total
            payload["cost_breakdown"] = None if chosen_cost is None else chosen_cost.to_dict()
        if self.headroom_asked:
            payload["headroom"] = None if self.headroom is None else self.headroom.to_dict()
        if self.scenario_names:
            found = self.scenarios
            payload["scenarios"] = (
                None if found is None else {n: v.to_dict() for n, v in found.items()}
            )
            payload["binding_scenario"] = self.binding_scenario
        return clean(payload)

    def figure(
        self, ax: Any = None, *, previous: Plan | None = None, scenario: str | None = None
    ) -> Any:
        """The frontier: each SLO's metric against cost, with bounds, limits and the choice.

        One panel per SLO (or the axes given, one per SLO); ``previous``, an
        earlier plan of the same metrics with other limits, adds its choice (a
        hollow star) and its limits (faded) for comparison; ``scenario``, one
        scenario of a set, draws that scenario's values alone (by default each
        configuration shows the scenario that decides each SLO). Drawn by
        :func:`pipeline.viz.figures.plan.frontier_figure` (needs the ``[viz]`` extra).

        Raises:
            ValueError: ``scenario`` is not one of the plan's set.
        """
        from ....viz.figures.plan import frontier_figure

        return frontier_figure(self, ax, previous, scenario=scenario)

    def __repr__(self) -> str:
        chosen = "" if self.chosen is None else f" chosen={point_text(self.target.point)}"
        return (
            f"<Plan status={self.status}{chosen} examined={len(self.examined)}"
            f"/{self.total_candidates} runs={self.runs_total}>"
        )

    def __str__(self) -> str:
        return self.report()

    def report(self) -> str:
        """The plan in words: the outcome, why, and the table of candidates."""
        from .report import plan_report

        return plan_report(self)

    def sensitivity(self, **options: Any) -> Any:
        """Each input of the chosen configuration moved by ±20%, and each SLO after: a
        :class:`~.sensitivity.Sensitivity` (see :func:`~.sensitivity.sensitivity`)."""
        from .sensitivity import sensitivity

        return sensitivity(self, **options)

    def to_html(self, path: Any, *, sensitivity: Any = None, source: str | None = None) -> None:
        """Write the plan as one self-contained HTML page (see :mod:`pipeline.viz.report`;
        needs the ``[viz]`` extra)."""
        from ....viz.report.page import report_html

        text = report_html(self, sensitivity=sensitivity, source=source)
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
