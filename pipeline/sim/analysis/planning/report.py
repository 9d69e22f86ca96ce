"""The text of a :class:`~.result.Plan`: outcome, reasons, candidates."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...._spelling import setting_value
from ...running.drain_warning import drain_timeout_of
from .records import point_text, value_text
from .slo import DRAIN_CUT_METRICS

if TYPE_CHECKING:
    from .judgement import Judgement
    from .result import Plan

__all__: list[str] = []


def _num(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"


def _point(point: dict[str, Any]) -> str:
    return point_text(point)


def _per_look(plan: Plan) -> str:
    return f"{100 * plan.look_confidence:.4g}% per look"


def _outcome(plan: Plan, level: str) -> list[str]:
    target = plan.target
    if plan.status == "chosen":
        binding = plan.binding
        lines = [
            f"plan: chosen {_point(plan.chosen)}",
            f"  meets every SLO at {level} confidence (one-sided bounds over "
            f"{target.replications} replications, {_per_look(plan)}):",
        ]
        lines += _judgement_lines(target.judgements, binding.slo, plan.binding_scenario)
        if any(target.timed_out):
            lines.append(
                f"  its drain timed out in {sum(target.timed_out)} of {target.replications} "
                f"runs (up to {max(target.unfinished):,} items unfinished): no SLO here is on "
                "latency or wait, which would count those runs as failing; bound "
                "unfinished_fraction to limit them"
            )
        for step in binding.cheaper:
            why = ", ".join(map(str, step.failed)) if step.failed else (step.note or "")
            lines.append(
                f"  one step cheaper, {_point(step.change)}: {step.verdict}"
                + (f" ({why})" if why else "")
            )
        lines += _money(plan)
        lines += _headroom(plan)
        return lines
    if plan.status == "undecided":
        lines = [
            "plan: undecided -- the replication budget ran out before every cheaper "
            "configuration was decided, so none is chosen",
        ]
        for q in plan.undecided:
            lines.append(
                f"  {_point(q.candidate)}: {q.slo} is undecided after "
                f"{q.replications} replications: mean {_num(q.mean)}, {_per_look(plan)} "
                f"bounds [{_num(q.low)}, {_num(q.high)}]"
            )
            if q.note is not None and q.note not in q.advice:
                lines.append(f"    ({q.note})")
            lines.append(f"    advice: {q.advice}")
        if plan.unrun:
            lines.append(
                "  not run, the plan's run budget used up first: "
                + "; ".join(_point(point) for point in plan.unrun)
            )
        elif plan.budget is not None and plan.budget.exhausted and not plan.undecided:
            lines.append(
                "  the plan's run budget was used up before the search reached a configuration "
                "meeting every SLO"
            )
        if plan.fallback is not None:
            lines.append(
                f"  {_point(plan.fallback)} meets every SLO, but a cheaper configuration "
                "above may meet them too"
            )
        lines.append(
            "  rerun with a larger replication budget (replications=(min, max), "
            "--max-replications; the plan's run budget: budget=, --budget) or longer runs"
        )
        return lines
    lines = [
        f"plan: infeasible -- no configuration in the search meets every SLO at {level} confidence",
    ]
    ran = [c for c in plan.examined if c.replications]
    if ran:
        last = ran[-1]
        failed = ", ".join(str(j.slo) for j in last.judgements if j.verdict == "fails")
        lines.append(f"  the most expensive one run, {_point(last.point)}, fails {failed}")
    lines.append("  widen the search (more workers, other queue sizes) or relax an SLO")
    return lines


def _judgement_lines(
    judgements: Sequence[Judgement], binding: Any = None, scenario: str | None = None
) -> list[str]:
    """One line per judgement: mean and the bound that decides it (its note below); the
    binding SLO marked. Without ``binding`` (a check) each line starts with its verdict,
    and a failing SLO shows the bound on the wrong side of its limit."""
    lines = []
    width = max((len(str(j.slo)) for j in judgements), default=0)
    for j in judgements:
        if j.basis == "theory":  # judged unrun: the note is the whole story
            lines.append(f"    {j.slo!s:<{width}}  {j.verdict}: {j.note}")
            continue
        mark = "  <- binding: closest to its limit" if j.slo == binding else ""
        if mark and scenario is not None:
            mark += f", in scenario {scenario!r}"
        upper = j.slo.upper
        bound = j.bound
        if binding is None and j.verdict == "fails":
            upper, bound = not upper, j.low if upper else j.high
        side = "upper" if upper else "lower"
        verdict = "" if binding is not None else f"{j.verdict}: "
        lines.append(
            f"    {j.slo!s:<{width}}  {verdict}mean {_num(j.mean)}, {side} bound "
            f"{_num(bound)}{mark}"
        )
        if j.note is not None:
            lines.append(f"    {'':<{width}}  ({j.note})")
    return lines


def _headroom(plan: Plan) -> list[str]:
    if plan.headroom is None:
        return []
    which = "" if plan.binding_scenario is None else f" ({plan.binding_scenario})"
    return [f"  headroom{which}: " + line for line in plan.headroom.text().splitlines()]


_CHECK_WORDS = {
    "meets": "every SLO is shown to hold",
    "fails": "an SLO is shown to break",
    "undecided": "not decided: the runs cannot yet tell whether every SLO holds",
}


def _check_outcome(plan: Plan, level: str) -> list[str]:
    """A check's verdict, each SLO's judgement, and its cost and headroom when asked."""
    check = plan.check
    assert check is not None
    lines = [f"Check: {check.text().removeprefix('check: ')}"]
    if check.replications:
        lines.append(
            f"  {_CHECK_WORDS[check.verdict]} at {level} confidence (one-sided bounds over "
            f"{check.replications} replications, {_per_look(plan)}):"
        )
    else:
        lines.append(f"  {_CHECK_WORDS[check.verdict]} by queueing theory, without a run:")
    lines += _judgement_lines(check.judgements)
    for q in plan.undecided:
        lines.append(f"    advice for {q.slo}: {q.advice}")
    lines += _money(plan, check=True)
    lines += _headroom(plan)
    return lines


def _money(plan: Plan, *, check: bool = False) -> list[str]:
    """The chosen (or checked) configuration's cost per hour and per million items,
    when priced."""
    cost = plan.cost_per_hour
    if cost is None:
        return []
    line = f"  cost: {_num(cost.total)} per hour, {_num(cost.per_million_items)} per million items"
    if plan.prices is not None and plan.prices.wait_hour:
        line += (
            f" (workers {_num(cost.workers)}, waiting {_num(cost.waiting)}; "
            f"{_num(cost.low)} to {_num(cost.high)} at {_per_look(plan)})"
        )
        if not check:
            line += ": the least total cost per hour of the configurations meeting every SLO"
    lines = [line]
    mix = plan.mix
    if mix.names:
        hours = ", ".join(
            f"{name} {100 * share:.4g}%" for name, share in zip(mix.names, mix.shares, strict=True)
        )
        how = "as given" if mix.given else "equal shares, none given"
        lines.append(
            f"    (averaged over the hours: {hours}, {how}; set them with "
            "--scenario NAME=FILE@SHARE or plan(shares=...))"
        )
    if cost.note is not None:
        lines.append(f"    ({cost.note})")
    return lines


def _table(plan: Plan) -> list[str]:
    fields = list(plan.search)
    priced = plan.prices is not None
    headers = [*fields, "runs", "verdict", *(str(s) for s in plan.slos)]
    headers += ["cost/hour"] if priced else []
    rows = []
    for c in plan.examined:
        cells = [value_text(f, c.point[f]) for f in fields] + [str(c.replications), c.verdict]
        judgements = {j.slo: j for j in c.judgements}
        for slo in plan.slos:
            j = judgements.get(slo)
            if j is None:
                cells.append("-")
            else:
                cells.append(f"{_num(j.mean)}{_spread(j)} {j.verdict}")
        if priced:
            cells.append(_num(plan.cost_estimate(c).total) if c.replications else "-")
        rows.append(cells)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    out = ["  " + "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    out += ["  " + "  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)) for r in rows]
    return out


def _spread(j: Judgement) -> str:
    """How far the bound is from the mean, as the table shows it."""
    cut = " (drain timed out)" if j.drain_timed_out else ""
    if j.basis == "binomial":  # exact, one-sided, and not symmetric: show the bound itself
        return f" {'≤' if j.slo.upper else '≥'} {_num(j.bound)} (binomial){cut}"
    if j.basis == "exact":
        return " (all runs equal)" + cut
    return ("" if not math.isfinite(j.half_width) else f" ± {_num(j.half_width)}") + cut


def _scenario_table(plan: Plan) -> list[str]:
    """A scenario set: one line per scenario at the chosen (or fallback) configuration."""
    found = plan.scenarios
    if found is None:
        return []
    which = (
        "checked" if plan.check is not None else "chosen" if plan.status == "chosen" else "fallback"
    )
    heads = [str(slo) for slo in plan.slos]
    rows = []
    for name, verdict in found.items():
        cells = [
            f"{_num(j.mean)} {'≤' if j.slo.upper else '≥'} {_num(j.bound)} {j.verdict}"
            for j in verdict.judgements
        ]
        mark = "  <- binding" if name == plan.binding_scenario else ""
        rows.append([name, verdict.verdict, *cells, mark])
    widths = [
        max(len(r[i]) for r in [["scenario", "verdict", *heads, ""], *rows])
        for i in range(2 + len(heads))
    ]
    out = ["", f"scenarios at the {which} configuration (mean, bound on the safe side, verdict):"]
    for row in [["scenario", "verdict", *heads, ""], *rows]:
        cells = "  ".join(f"{c:<{w}}" for c, w in zip(row, widths, strict=False))
        out.append(f"  {cells}{row[-1]}".rstrip())
    return out


def plan_report(plan: Plan) -> str:
    """Outcome, reasons, what was searched, and one line per configuration examined."""
    level = f"{100 * plan.confidence:.4g}%"
    unstable = sum(c.verdict == "unstable" for c in plan.examined)
    lines = _check_outcome(plan, level) if plan.check is not None else _outcome(plan, level)
    if plan.check is not None:
        lines.append(f"  judged in {plan.runs_total} runs")
    else:
        lines.append(
            f"  examined {len(plan.examined)} of {plan.total_candidates} configurations in "
            f"cost order ({', '.join(plan.cost)}), {unstable} rejected by queueing theory as "
            f"unstable; {plan.runs_total} runs ({plan.replications[0]} to "
            f"{plan.replications[1]} replications per configuration)"
        )
    if plan.budget is not None:
        lines.append(f"  {plan.budget.text()}")
    cut = plan.runs_drain_timed_out
    if cut:
        timeouts = sorted({drain_timeout_of(c.scenario) for c in plan.examined if any(c.timed_out)})
        judged = any(s.metric in DRAIN_CUT_METRICS for s in plan.slos)
        shown = ", ".join(setting_value("drain_timeout_s", t) for t in timeouts)
        lines.append(
            f"  the drain timed out ({shown}) in "
            f"{cut} of {plan.runs_total} runs: the items left unfinished are missing from "
            "their latency and wait statistics"
            + (", so those runs count as failing every SLO on them" if judged else "")
            + f"; {setting_value('drain_timeout_s', None)} lets every item finish"
        )
    lines += _scenario_table(plan)
    if plan.examined:
        lines.append("")
        look = f"{100 * plan.look_confidence:.4g}%"
        lines.append(f"candidates (mean ± one-sided {look} half-width per look, verdict):")
        lines += _table(plan)
        bases = {j.basis for c in plan.examined for j in c.judgements}
        if "binomial" in bases:
            lines.append(
                "  (binomial): every run gave the same fraction, so no t interval; the bound is "
                "the exact binomial one on the items pooled over the runs (about 3/N for none "
                "in N at 95%)"
            )
        if any(j.drain_timed_out for c in plan.examined for j in c.judgements):
            lines.append(
                "  (drain timed out): some run of that configuration left items unfinished, "
                "missing from its latency and wait statistics: the SLO fails, whatever the mean"
            )
        if "exact" in bases:
            lines.append(
                "  (all runs equal): every run gave the same value; no interval to estimate"
            )
    return "\n".join(lines)
