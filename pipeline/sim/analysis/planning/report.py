"""The text of a :class:`~.result.Plan`: outcome, reasons, candidates."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ...running.drain_warning import drain_timeout_of
from .slo import DRAIN_CUT_METRICS

if TYPE_CHECKING:
    from .judgement import Judgement
    from .result import Plan

__all__: list[str] = []


def _num(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"


def _show(value: Any) -> str:
    return "unbounded" if value is None else str(value)


def _point(point: dict[str, Any]) -> str:
    return ", ".join(f"{name}={_show(value)}" for name, value in point.items())


def _per_look(plan: Plan) -> str:
    return f"{100 * plan.look_confidence:.4g}% per look"


def _outcome(plan: Plan, level: str) -> list[str]:
    target = plan._target
    if plan.status == "chosen":
        binding = plan.binding
        lines = [
            f"plan: chosen {_point(plan.chosen)}",
            f"  meets every SLO at {level} confidence (one-sided bounds over "
            f"{target.replications} replications, {_per_look(plan)}):",
        ]
        width = max(len(str(j.slo)) for j in target.judgements)
        for j in target.judgements:
            mark = "  <- binding: closest to its limit" if j.slo == binding.slo else ""
            if mark and plan.binding_scenario is not None:
                mark += f", in scenario {plan.binding_scenario!r}"
            side = "upper" if j.slo.upper else "lower"
            lines.append(
                f"    {j.slo!s:<{width}}  mean {_num(j.mean)}, {side} bound {_num(j.bound)}{mark}"
            )
            if j.note is not None:
                lines.append(f"    {'':<{width}}  ({j.note})")
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
        if plan.headroom is not None:
            which = "" if plan.binding_scenario is None else f" ({plan.binding_scenario})"
            lines += [f"  headroom{which}: " + line for line in plan.headroom.text().splitlines()]
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
        if plan.fallback is not None:
            lines.append(
                f"  {_point(plan.fallback)} meets every SLO, but a cheaper configuration "
                "above may meet them too"
            )
        lines.append(
            "  rerun with a larger replication budget (replications=(min, max), "
            "--max-replications) or longer runs"
        )
        return lines
    lines = [
        f"plan: infeasible -- no configuration in the search meets every SLO at {level} confidence",
    ]
    ran = [c for c in plan._candidates if c.replications]
    if ran:
        last = ran[-1]
        failed = ", ".join(str(j.slo) for j in last.judgements if j.verdict == "fails")
        lines.append(f"  the most expensive one run, {_point(last.point)}, fails {failed}")
    lines.append("  widen the search (more workers, other queue sizes) or relax an SLO")
    return lines


def _money(plan: Plan) -> list[str]:
    """The chosen configuration's cost per hour and per million items, when priced."""
    cost = plan.cost_per_hour
    if cost is None:
        return []
    line = f"  cost: {_num(cost.total)} per hour, {_num(cost.per_million_items)} per million items"
    if plan.prices is not None and plan.prices.wait_hour:
        line += (
            f" (workers {_num(cost.workers)}, waiting {_num(cost.waiting)}; "
            f"{_num(cost.low)} to {_num(cost.high)} at {_per_look(plan)}): the least total "
            "cost per hour of the configurations meeting every SLO"
        )
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
    for c in plan._candidates:
        cells = [_show(c.point[f]) for f in fields] + [str(c.replications), c.verdict]
        judgements = {j.slo: j for j in c.judgements}
        for slo in plan.slos:
            j = judgements.get(slo)
            if j is None:
                cells.append("-")
            else:
                cells.append(f"{_num(j.mean)}{_spread(j)} {j.verdict}")
        if priced:
            cells.append(_num(plan._estimate(c).total) if c.replications else "-")
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
    which = "chosen" if plan.status == "chosen" else "fallback"
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
    unstable = sum(c.verdict == "unstable" for c in plan._candidates)
    lines = _outcome(plan, level)
    lines.append(
        f"  examined {len(plan._candidates)} of {plan.total_candidates} configurations in "
        f"cost order ({', '.join(plan.cost)}), {unstable} rejected by queueing theory as "
        f"unstable; {plan.runs_total} runs ({plan.replications[0]} to "
        f"{plan.replications[1]} replications per configuration)"
    )
    cut = plan.runs_drain_timed_out
    if cut:
        timeouts = sorted(
            {drain_timeout_of(c.scenario) for c in plan._candidates if any(c.timed_out)}
        )
        judged = any(s.metric in DRAIN_CUT_METRICS for s in plan.slos)
        lines.append(
            f"  the drain timed out (drain_timeout_s={', '.join(map(str, timeouts))}) in "
            f"{cut} of {plan.runs_total} runs: the items left unfinished are missing from "
            "their latency and wait statistics"
            + (", so those runs count as failing every SLO on them" if judged else "")
            + "; drain_timeout_s=None lets every item finish"
        )
    lines += _scenario_table(plan)
    if plan._candidates:
        lines.append("")
        look = f"{100 * plan.look_confidence:.4g}%"
        lines.append(f"candidates (mean ± one-sided {look} half-width per look, verdict):")
        lines += _table(plan)
        bases = {j.basis for c in plan._candidates for j in c.judgements}
        if "binomial" in bases:
            lines.append(
                "  (binomial): every run gave the same fraction, so no t interval; the bound is "
                "the exact binomial one on the items pooled over the runs (about 3/N for none "
                "in N at 95%)"
            )
        if any(j.drain_timed_out for c in plan._candidates for j in c.judgements):
            lines.append(
                "  (drain timed out): some run of that configuration left items unfinished, "
                "missing from its latency and wait statistics: the SLO fails, whatever the mean"
            )
        if "exact" in bases:
            lines.append(
                "  (all runs equal): every run gave the same value; no interval to estimate"
            )
    return "\n".join(lines)
