"""The sections of ``report.html``, each from a plan's :meth:`~pipeline.sim.Plan.to_dict`
payload: the question, the answer, what binds, cost, a scenario set, headroom,
sensitivity, every configuration examined, and the method and assumptions (headroom has
a module of its own, :mod:`.headroom`).

Each returns its HTML (an empty string when the plan has nothing for it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .cells import (
    escape,
    image,
    is_check,
    judged,
    judged_word,
    model,
    money,
    number,
    point,
    point_plain,
    table,
    verdict,
)

if TYPE_CHECKING:
    from ...sim.workloads.scenario import Scenario

__all__ = [
    "answer_section",
    "binding_section",
    "candidates_section",
    "cost_section",
    "method_section",
    "question_section",
    "scenarios_section",
    "sensitivity_section",
]


def question_section(
    payload: Mapping[str, Any], scenario: Scenario | None, source: str | None
) -> str:
    """The question: the scenario's inputs, the search (or the configuration checked), the
    SLOs, the confidence and the replications."""
    parts = ["<h2>The question</h2>"]
    if source is not None:
        parts.append(f"<p>Scenario file: <code>{escape(source)}</code></p>")
    if scenario is not None:
        rows = [["arrivals", model(scenario.arrivals)]]
        if scenario.stages is None:
            rows.append(["service time (s)", model(scenario.service)])
            rows.append(["failures", model(scenario.failures)])
        else:
            for stage in scenario.stages:
                rows.append(
                    [
                        f"stage <code>{escape(stage.name)}</code>",
                        f"service {model(stage.service)}, failures {model(stage.failures)}, "
                        f"fan-out {escape(stage.fan_out)}",
                    ]
                )
        length = (
            f"{scenario.n_items:,} items"
            if scenario.n_items is not None
            else f"{scenario.duration_s:g} s of arrivals"
        )
        rows += [
            ["run length", escape(length)],
            ["item size (bytes)", escape(f"{scenario.item_size_bytes:,}")],
            ["seed", escape(scenario.seed)],
        ]
        if scenario.warmup_s:
            rows.append(["warm-up excluded (s)", escape(f"{scenario.warmup_s:g}")])
        parts.append(table(["input", "value"], rows))
    search = payload.get("search") or {}
    if is_check(payload):
        parts.append(
            f"<p>The configuration checked: {point(payload.get('configuration') or {})}</p>"
        )
    else:
        parts.append(
            "<p>Search, cheapest first by "
            + ", ".join(f"<code>{escape(f)}</code>" for f in payload.get("cost") or [])
            + ":</p>"
        )
        parts.append(
            table(
                ["field", "values"],
                [
                    [f"<code>{escape(k)}</code>", ", ".join(escape(v) for v in vs)]
                    for k, vs in search.items()
                ],
            )
        )
    slos = "".join(f"<li><code>{escape(s)}</code></li>" for s in payload.get("slos") or [])
    replications = payload.get("replications") or {}
    parts.append(f"<p>Every SLO must hold:</p><ul>{slos}</ul>")
    parts.append(
        f"<p>Confidence {number(payload.get('confidence'))} (one-sided), each look at "
        f"{number(payload.get('look_confidence'))}; {number(replications.get('min'))} to "
        f"{number(replications.get('max'))} replications per configuration.</p>"
    )
    return "\n".join(parts)


_CHECK_WORDS = {
    "meets": "every SLO is shown to hold",
    "fails": "an SLO is shown to break",
    "undecided": "the runs cannot yet tell whether every SLO holds",
}


def _budget(payload: Mapping[str, Any]) -> str:
    budget = payload.get("budget")
    if not isinstance(budget, Mapping):
        return ""

    def count(value: Any) -> str:
        return (
            escape(f"{value:,}") if isinstance(value, int) and not isinstance(value, bool) else "-"
        )

    text = (
        f" {count(budget.get('runs_used'))} of the budget of "
        f"{count(budget.get('runs_allowed'))} runs used"
    )
    if budget.get("exhausted"):
        text += " (used up: some verdicts stayed open for want of runs)"
    return text + "."


def _check_answer(payload: Mapping[str, Any]) -> str:
    outcome = payload.get("verdict")
    parts = [
        "<h2>The answer</h2>",
        f'<p class="answer">Check: {verdict(outcome)} -- '
        f"{escape(_CHECK_WORDS.get(str(outcome), ''))}: {point(payload.get('configuration') or {})}"
        "</p>",
    ]
    if payload.get("note"):
        parts.append(f"<p>{escape(payload['note'])}</p>")
    rows = [
        [
            f"<code>{escape(j.get('slo'))}</code>",
            judged(j),
            number(j.get("replications")),
            escape(j.get("note") or ""),
        ]
        for j in payload.get("judgements") or []
    ]
    parts.append(table(["SLO", "mean (bound) verdict", "runs", "note"], rows))
    advice = [
        f"<li><code>{escape(q.get('slo'))}</code>: {escape(q.get('advice'))}</li>"
        for q in payload.get("undecided") or []
    ]
    if advice:
        parts.append(f"<p>To decide:</p><ul>{''.join(advice)}</ul>")
    parts.append(f"<p>Judged in {number(payload.get('runs'))} runs.{_budget(payload)}</p>")
    return "\n".join(parts)


def answer_section(payload: Mapping[str, Any]) -> str:
    """The answer: the choice, what is left undecided (with advice), or infeasible; for a
    check, its verdict and one judgement per SLO."""
    if is_check(payload):
        return _check_answer(payload)
    status = payload.get("status")
    parts = ["<h2>The answer</h2>"]
    examined = (
        f"{number(payload.get('candidates_examined'))} of "
        f"{number(payload.get('candidates_total'))} configurations examined, "
        f"{number(payload.get('runs'))} runs.{_budget(payload)}"
    )
    if status == "chosen":
        parts.append(f'<p class="answer">Chosen: {point(payload["chosen"])}</p>')
    elif status == "undecided":
        parts.append(
            '<p class="answer">Undecided: the replication budget ran out before every '
            "cheaper configuration was decided, so none is chosen.</p>"
        )
        rows = [
            [
                point(q.get("candidate") or {}),
                f"<code>{escape(q.get('slo'))}</code>",
                number(q.get("replications")),
                f"{number(q.get('mean'))} [{number(q.get('low'))}, {number(q.get('high'))}]",
                escape(q.get("advice")),
            ]
            for q in payload.get("undecided") or []
        ]
        parts.append(table(["configuration", "SLO", "runs", "mean [interval]", "advice"], rows))
        if payload.get("fallback"):
            parts.append(
                f"<p>Known to meet every SLO (perhaps not the cheapest): "
                f"{point(payload['fallback'])}</p>"
            )
    else:
        parts.append(
            '<p class="answer">Infeasible: every configuration searched fails some SLO.</p>'
        )
    parts.append(f"<p>{examined}</p>")
    return "\n".join(parts)


def binding_section(payload: Mapping[str, Any]) -> str:
    """The binding SLO, its bound against the limit, and each configuration one step
    cheaper with why it fails (empty unless chosen)."""
    binding = payload.get("binding")
    if not binding:
        return ""
    slack = binding.get("slack")
    slack_text = "-" if slack is None else escape(f"{100 * slack:.3g}%")
    parts = [
        "<h2>What binds</h2>",
        f"<p>The binding SLO is <code>{escape(binding.get('slo'))}</code>: its bound "
        f"{number(binding.get('bound'))} against the limit {number(binding.get('limit'))} "
        f"(slack {slack_text} of the limit)"
        + (
            f", in scenario <code>{escape(payload['binding_scenario'])}</code>"
            if payload.get("binding_scenario")
            else ""
        )
        + ".</p>",
    ]
    steps = binding.get("cheaper") or []
    if steps:
        rows = []
        for step in steps:
            failed = step.get("failed") or []
            why = ", ".join(f"<code>{escape(s)}</code>" for s in failed) or escape(
                step.get("note") or ""
            )
            rows.append([point(step.get("change") or {}), verdict(step.get("verdict")), why])
        parts.append("<p>One step cheaper in each searched field:</p>")
        parts.append(table(["cheaper", "verdict", "why"], rows))
    else:
        parts.append("<p>Nothing in the search is cheaper.</p>")
    return "\n".join(parts)


def cost_section(payload: Mapping[str, Any], scenario: Scenario | None) -> str:
    """The cost per hour (and per million items), its split and the scenarios' shares of
    the hours (empty unless priced)."""
    chosen = payload.get("chosen") or {}
    cost = chosen.get("cost_per_hour", payload.get("cost_per_hour"))
    if cost is None:
        return ""
    parts = [
        "<h2>Cost</h2>",
        f"<p>The {escape(judged_word(payload))} configuration costs {money(cost)} per hour",
    ]
    total = cost.get("total") if isinstance(cost, Mapping) else cost
    breakdown = payload.get("cost_breakdown")
    rate = getattr(getattr(scenario, "arrivals", None), "rate", None)
    if isinstance(breakdown, Mapping) and breakdown.get("per_million_items") is not None:
        # The plan's own: items completed per hour, over the hours of a set.
        parts[-1] += f", {money(breakdown['per_million_items'])} per million items"
    elif isinstance(total, int | float) and isinstance(rate, int | float) and rate > 0:
        parts[-1] += f", {money(total / (rate * 3600) * 1e6)} per million items"
    parts[-1] += ".</p>"
    if isinstance(breakdown, Mapping) and (payload.get("prices") or {}).get("wait_hour"):
        least = (
            ""
            if is_check(payload)
            else ": the least total cost per hour of the configurations meeting every SLO"
        )
        parts.append(
            f"<p>Workers {money(breakdown.get('workers_per_hour'))}, waiting "
            f"{money(breakdown.get('waiting_per_hour'))} per hour (the total between "
            f"{money(breakdown.get('low'))} and {money(breakdown.get('high'))}){least}.</p>"
        )
        if breakdown.get("note"):
            parts.append(f"<p>{escape(breakdown['note'])}</p>")
    shares = (payload.get("prices") or {}).get("scenario_shares")
    if isinstance(shares, Mapping):
        given = (payload.get("prices") or {}).get("scenario_shares_given")
        hours = ", ".join(
            f"<code>{escape(n)}</code> {escape(f'{100 * v:.4g}%')}" for n, v in shares.items()
        )
        parts.append(
            f"<p>Averaged over the hours: {hours} "
            + ("(as given)." if given else "(equal shares: none given).")
            + "</p>"
        )
    return "\n".join(parts)


def scenarios_section(
    payload: Mapping[str, Any],
    figures: Mapping[str, bytes],
    members: Mapping[str, Scenario] | None,
) -> str:
    """A scenario set: per scenario, its inputs, its table at the chosen configuration
    and at each one step cheaper, and its frontier."""
    found = payload.get("scenarios")
    if not isinstance(found, Mapping) or not found:
        return ""
    binding = payload.get("binding_scenario")
    which = "chosen" if payload.get("status") == "chosen" else "fallback"
    if is_check(payload):
        which = "configuration"
    parts = [
        "<h2>Scenarios</h2>",
        f"<p>One configuration must meet every SLO in each of {number(len(found))} scenarios "
        f"({', '.join(f'<code>{escape(n)}</code>' for n in found)}), each judged on its own "
        "replications."
        + (
            f" The binding scenario is <code>{escape(binding)}</code>: its bound is the closest "
            "to its limit at the choice."
            if binding
            else ""
        )
        + "</p>",
    ]
    slos = list(payload.get("slos") or [])
    for name, there in found.items():
        mark = " (binding)" if name == binding else ""
        heading = verdict(there.get("verdict"))
        parts.append(f"<h3>Scenario <code>{escape(name)}</code>{escape(mark)}: {heading}</h3>")
        member = (members or {}).get(name)
        if member is not None:
            workload = (
                f"service {model(member.service)}"
                if member.stages is None
                else ", ".join(
                    f"<code>{escape(st.name)}</code> {model(st.service)}" for st in member.stages
                )
            )
            parts.append(f"<p>Arrivals {model(member.arrivals)}, {workload}.</p>")
        steps = there.get("cheaper") or []
        header = ["SLO", f"{which}: {point_plain(payload.get(which) or {})}"]
        header += [f"one step cheaper: {point_plain(st.get('change') or {})}" for st in steps]
        rows = []
        for i, slo in enumerate(slos):
            judgements = there.get("judgements") or []
            row = [
                f"<code>{escape(slo)}</code>",
                judged(judgements[i]) if i < len(judgements) else "-",
            ]
            for step in steps:
                theirs = step.get("judgements") or []
                row.append(
                    judged(theirs[i])
                    if i < len(theirs)
                    else f"{verdict(step.get('verdict'))} {escape(step.get('note') or '')}"
                )
            rows.append(row)
        parts.append(table(header, rows))
        png = figures.get(f"scenario:{name}")
        if png is not None:
            parts.append(image(png, f"frontier in scenario {name}"))
    return "\n".join(parts)


def sensitivity_section(sensitivity: Mapping[str, Any] | None, png: bytes | None) -> str:
    """Each input moved down and up and what each SLO did, with the tornado chart (or how
    to ask for it)."""
    parts = ["<h2>Sensitivity</h2>"]
    if sensitivity is None:
        parts.append(
            "<p>Not computed: <code>plan --sensitivity</code> (or "
            "<code>Plan.sensitivity()</code>) moves each input of the chosen "
            "configuration by ±20% and shows what each SLO's metric does.</p>"
        )
        return "\n".join(parts)
    pct = f"{100 * float(sensitivity.get('change', 0)):.4g}%"
    parts.append(
        f"<p>Each input of the chosen configuration moved by ±{escape(pct)}, one at a time, on "
        f"the same {number(sensitivity.get('replications'))} replications as the plan "
        "(common random numbers). Largest effect first; the verdict is the SLO's at each "
        f"end. Changes are ± a {number(sensitivity.get('confidence'))} paired t half-width.</p>"
    )
    if sensitivity.get("fragile") is not None:
        parts.append(
            f"<p>The answer is most fragile to <code>{escape(sensitivity['fragile'])}</code>.</p>"
        )
    if png is not None:
        parts.append(image(png, "tornado chart: each input moved down and up"))
    rows = []
    for row in sensitivity.get("rows") or []:
        rows.append(
            [
                f"<code>{escape(row.get('input'))}</code>",
                f"<code>{escape(row.get('slo'))}</code>",
                number(row.get("base")),
                f"{number(row.get('low'))} ({number(row.get('change_low'))} ± "
                f"{number(row.get('half_width_low'))})",
                verdict(row.get("verdict_low")),
                f"{number(row.get('high'))} ({number(row.get('change_high'))} ± "
                f"{number(row.get('half_width_high'))})",
                verdict(row.get("verdict_high")),
                number(row.get("effect")),
            ]
        )
    parts.append(
        table(
            ["input", "SLO", "at plan", "low end", "SLO", "high end", "SLO", "effect"],
            rows,
        )
    )
    skipped = sensitivity.get("skipped") or []
    if skipped:
        items = "".join(
            f"<li><code>{escape(s.get('input'))}</code>: {escape(s.get('reason'))}</li>"
            for s in skipped
        )
        parts.append(f"<p>Not moved:</p><ul>{items}</ul>")
    return "\n".join(parts)


def candidates_section(payload: Mapping[str, Any]) -> str:
    """Every configuration examined, one row each, in cost order."""
    rows = payload.get("candidates") or []
    if not rows:
        return ""
    fields = list(payload.get("search") or {})
    slo_columns = [k for k in rows[0] if k.endswith(("_mean", "_bound"))]
    extra = ["cost_per_hour"] if any("cost_per_hour" in r for r in rows) else []
    header = [*fields, "verdict", "replications", *extra, *slo_columns]
    body = [
        [
            *(escape(r.get(f)) for f in fields),
            verdict(r.get("verdict")),
            number(r.get("replications")),
            *(money(r.get(k)) for k in extra),
            *(number(r.get(k)) for k in slo_columns),
        ]
        for r in rows
    ]
    # A note (why a configuration was rejected unrun) is a sentence: it gets a row of its
    # own under its configuration, the table's whole width, not a column one word wide.
    notes = [escape(r.get("note") or "") for r in rows]
    return "<h2>Every configuration examined</h2>\n" + table(header, body, notes=notes)


def method_section(payload: Mapping[str, Any], scenario: Scenario | None) -> str:
    """How the verdicts were reached and what they assume."""
    replications = payload.get("replications") or {}
    start = (
        f"the first {scenario.warmup_s:g} s of each run are left out"
        if scenario is not None and scenario.warmup_s
        else "each run starts empty and its start is included (give a warm-up to leave it out)"
    )
    items = [
        "Each configuration is simulated several times; replication <em>r</em> of every "
        "configuration uses the random streams of (seed, <em>r</em>), so configurations are "
        "compared on the same traffic (common random numbers).",
        "An SLO <em>meets</em> when the one-sided bound on its metric across replications "
        "(Student t, widened for skew by Hall's correction and a lognormal bound) "
        "is on the safe side of the limit; it <em>fails</em> when the opposite "
        "bound is on the wrong side; otherwise it is <em>undecided</em> and the configuration "
        f"gets more replications (from {number(replications.get('min'))}, doubling, up to "
        f"{number(replications.get('max'))}), within the plan's run budget: a "
        "configuration's next replications are run whole or not at all, so every look is one "
        "the schedule planned.",
        f"Looking again after more replications gives a wrong verdict more chances, so each "
        f"look is judged at {number(payload.get('look_confidence'))} (Bonferroni over the looks): "
        f"each verdict is wrong with probability at most "
        f"{number(1 - float(payload.get('confidence') or 0))}.",
        "Replications that agree exactly are judged on the exact value; a fraction then on "
        "the exact binomial bound of the pooled counts.",
        "A run whose drain timed out left items unfinished: it fails every latency and wait SLO.",
        "Assumptions: the replications are independent; their means are close enough to "
        "normal for a t bound (on short runs with skewed means, such as waits near "
        "saturation, a bound can hold less often than its level; longer runs help); "
        f"{start}.",
    ]
    return (
        "<h2>Method and assumptions</h2>\n<ul>"
        + "".join(f"<li>{i}</li>" for i in items)
        + ("</ul>")
    )
