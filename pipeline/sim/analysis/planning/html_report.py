"""``report.html``: a plan as one self-contained page to share (figures embedded).

The page answers in order: the question (scenario, search, SLOs, confidence),
the answer, the SLO that binds, the cheaper configuration that fails and why,
cost and headroom when the plan has them (``cost_per_hour``, ``headroom`` in
:meth:`~.result.Plan.to_dict`), the sensitivity of the answer
(:mod:`~.sensitivity`), every candidate examined, and the statistics' method
and assumptions.

Self-contained: the figures are PNG data URIs, the style is inline, there is
no script, and a Content-Security-Policy forbids fetching anything, so the
file opens the same from a mail attachment, a CI artefact or a wiki. Every
string that came from the user (file names, stage names, SLO text, searched
values) is HTML-escaped: a stage named ``<script>`` shows as text.

Example:
    >>> p = plan(base, {"concurrency": range(1, 33)}, ["wait_mean_s<=0.2"])
    >>> write_report(p, "out", sensitivity=p.sensitivity())   # out/report.html
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...workloads.scenario import Scenario
    from .result import Plan
    from .sensitivity import Sensitivity

__all__ = ["render_report", "report_html", "write_report"]

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; max-width: 62rem; margin: 2rem auto;
       padding: 0 1rem; color: #222; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem;
     border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5rem 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: .2rem .5rem; text-align: left; }
th { background: #f3f3f3; }
.answer { font-size: 1.15rem; padding: .6rem .8rem; background: #eef4fb;
          border-left: 4px solid #4477aa; }
.fails { color: #cc3311; } .meets { color: #2a6a2a; } .undecided { color: #777; }
img { max-width: 100%; height: auto; }
code { background: #f6f6f6; padding: 0 .2rem; }
"""

# No fetch of any kind: images only from data URIs, the style inline, no script.
_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _e(value: Any) -> str:
    """``value`` as escaped HTML text (None as "unbounded", as the plan's text does)."""
    return html.escape("unbounded" if value is None else str(value), quote=True)


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _e(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    return _e(f"{value:.4g}")


def _point(point: Mapping[str, Any]) -> str:
    return ", ".join(f"<code>{_e(k)}={_e(v)}</code>" for k, v in point.items())


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table from already-escaped cells (the header is escaped here)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _verdict(verdict: Any) -> str:
    css = verdict if verdict in ("meets", "fails", "undecided") else ""
    return f'<span class="{css}">{_e(verdict)}</span>'


def _image(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{_e(alt)}">'


def _is_check(payload: Mapping[str, Any]) -> bool:
    """A check's payload (``plan --check``): it carries the verdict."""
    return "verdict" in payload and "judgements" in payload


def _judged_word(payload: Mapping[str, Any]) -> str:
    return "checked" if _is_check(payload) else "chosen"


def _money(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{_e(k)} {_money(v)}" for k, v in value.items())
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _e(f"{value:,.2f}")
    return _e(value)


# -- the sections ----------------------------------------------------------------------


def _question(payload: Mapping[str, Any], scenario: Scenario | None, source: str | None) -> str:
    parts = ["<h2>The question</h2>"]
    if source is not None:
        parts.append(f"<p>Scenario file: <code>{_e(source)}</code></p>")
    if scenario is not None:
        rows = [["arrivals", _e(scenario.arrivals)]]
        if scenario.stages is None:
            rows.append(["service time (s)", _e(scenario.service)])
            rows.append(["failures", _e(scenario.failures)])
        else:
            for stage in scenario.stages:
                rows.append(
                    [
                        f"stage <code>{_e(stage.name)}</code>",
                        f"service {_e(stage.service)}, failures {_e(stage.failures)}, "
                        f"fan-out {_e(stage.fan_out)}",
                    ]
                )
        length = (
            f"{scenario.n_items:,} items"
            if scenario.n_items is not None
            else f"{scenario.duration_s:g} s of arrivals"
        )
        rows += [
            ["run length", _e(length)],
            ["item size (bytes)", _e(f"{scenario.item_size_bytes:,}")],
            ["seed", _e(scenario.seed)],
        ]
        if scenario.warmup_s:
            rows.append(["warm-up excluded (s)", _e(f"{scenario.warmup_s:g}")])
        parts.append(_table(["input", "value"], rows))
    search = payload.get("search") or {}
    if _is_check(payload):
        parts.append(
            f"<p>The configuration checked: {_point(payload.get('configuration') or {})}</p>"
        )
    else:
        parts.append(
            "<p>Search, cheapest first by "
            + ", ".join(f"<code>{_e(f)}</code>" for f in payload.get("cost") or [])
            + ":</p>"
        )
        parts.append(
            _table(
                ["field", "values"],
                [
                    [f"<code>{_e(k)}</code>", ", ".join(_e(v) for v in vs)]
                    for k, vs in search.items()
                ],
            )
        )
    slos = "".join(f"<li><code>{_e(s)}</code></li>" for s in payload.get("slos") or [])
    replications = payload.get("replications") or {}
    parts.append(f"<p>Every SLO must hold:</p><ul>{slos}</ul>")
    parts.append(
        f"<p>Confidence {_num(payload.get('confidence'))} (one-sided), each look at "
        f"{_num(payload.get('look_confidence'))}; {_num(replications.get('min'))} to "
        f"{_num(replications.get('max'))} replications per configuration.</p>"
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
        return _e(f"{value:,}") if isinstance(value, int) and not isinstance(value, bool) else "-"

    text = (
        f" {count(budget.get('runs_used'))} of the budget of "
        f"{count(budget.get('runs_allowed'))} runs used"
    )
    if budget.get("exhausted"):
        text += " (used up: some verdicts stayed open for want of runs)"
    return text + "."


def _check_answer(payload: Mapping[str, Any]) -> str:
    verdict = payload.get("verdict")
    parts = [
        "<h2>The answer</h2>",
        f'<p class="answer">Check: {_verdict(verdict)} -- '
        f"{_e(_CHECK_WORDS.get(str(verdict), ''))}: {_point(payload.get('configuration') or {})}"
        "</p>",
    ]
    if payload.get("note"):
        parts.append(f"<p>{_e(payload['note'])}</p>")
    rows = [
        [
            f"<code>{_e(j.get('slo'))}</code>",
            _judged(j),
            _num(j.get("replications")),
            _e(j.get("note") or ""),
        ]
        for j in payload.get("judgements") or []
    ]
    parts.append(_table(["SLO", "mean (bound) verdict", "runs", "note"], rows))
    advice = [
        f"<li><code>{_e(q.get('slo'))}</code>: {_e(q.get('advice'))}</li>"
        for q in payload.get("undecided") or []
    ]
    if advice:
        parts.append(f"<p>To decide:</p><ul>{''.join(advice)}</ul>")
    parts.append(f"<p>Judged in {_num(payload.get('runs'))} runs.{_budget(payload)}</p>")
    return "\n".join(parts)


def _answer(payload: Mapping[str, Any]) -> str:
    if _is_check(payload):
        return _check_answer(payload)
    status = payload.get("status")
    parts = ["<h2>The answer</h2>"]
    examined = (
        f"{_num(payload.get('candidates_examined'))} of {_num(payload.get('candidates_total'))} "
        f"configurations examined, {_num(payload.get('runs'))} runs.{_budget(payload)}"
    )
    if status == "chosen":
        parts.append(f'<p class="answer">Chosen: {_point(payload["chosen"])}</p>')
    elif status == "undecided":
        parts.append(
            '<p class="answer">Undecided: the replication budget ran out before every '
            "cheaper configuration was decided, so none is chosen.</p>"
        )
        rows = [
            [
                _point(q.get("candidate") or {}),
                f"<code>{_e(q.get('slo'))}</code>",
                _num(q.get("replications")),
                f"{_num(q.get('mean'))} [{_num(q.get('low'))}, {_num(q.get('high'))}]",
                _e(q.get("advice")),
            ]
            for q in payload.get("undecided") or []
        ]
        parts.append(_table(["configuration", "SLO", "runs", "mean [interval]", "advice"], rows))
        if payload.get("fallback"):
            parts.append(
                f"<p>Known to meet every SLO (perhaps not the cheapest): "
                f"{_point(payload['fallback'])}</p>"
            )
    else:
        parts.append(
            '<p class="answer">Infeasible: every configuration searched fails some SLO.</p>'
        )
    parts.append(f"<p>{examined}</p>")
    return "\n".join(parts)


def _binding(payload: Mapping[str, Any]) -> str:
    binding = payload.get("binding")
    if not binding:
        return ""
    slack = binding.get("slack")
    slack_text = "-" if slack is None else _e(f"{100 * slack:.3g}%")
    parts = [
        "<h2>What binds</h2>",
        f"<p>The binding SLO is <code>{_e(binding.get('slo'))}</code>: its bound "
        f"{_num(binding.get('bound'))} against the limit {_num(binding.get('limit'))} "
        f"(slack {slack_text} of the limit)"
        + (
            f", in scenario <code>{_e(payload['binding_scenario'])}</code>"
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
            why = ", ".join(f"<code>{_e(s)}</code>" for s in failed) or _e(step.get("note") or "")
            rows.append([_point(step.get("change") or {}), _verdict(step.get("verdict")), why])
        parts.append("<p>One step cheaper in each searched field:</p>")
        parts.append(_table(["cheaper", "verdict", "why"], rows))
    else:
        parts.append("<p>Nothing in the search is cheaper.</p>")
    return "\n".join(parts)


def _cost(payload: Mapping[str, Any], scenario: Scenario | None) -> str:
    chosen = payload.get("chosen") or {}
    cost = chosen.get("cost_per_hour", payload.get("cost_per_hour"))
    if cost is None:
        return ""
    parts = [
        "<h2>Cost</h2>",
        f"<p>The {_e(_judged_word(payload))} configuration costs {_money(cost)} per hour",
    ]
    total = cost.get("total") if isinstance(cost, Mapping) else cost
    breakdown = payload.get("cost_breakdown")
    rate = getattr(getattr(scenario, "arrivals", None), "rate", None)
    if isinstance(breakdown, Mapping) and breakdown.get("per_million_items") is not None:
        # The plan's own: items completed per hour, over the hours of a set.
        parts[-1] += f", {_money(breakdown['per_million_items'])} per million items"
    elif isinstance(total, int | float) and isinstance(rate, int | float) and rate > 0:
        parts[-1] += f", {_money(total / (rate * 3600) * 1e6)} per million items"
    parts[-1] += ".</p>"
    if isinstance(breakdown, Mapping) and (payload.get("prices") or {}).get("wait_hour"):
        least = (
            ""
            if _is_check(payload)
            else ": the least total cost per hour of the configurations meeting every SLO"
        )
        parts.append(
            f"<p>Workers {_money(breakdown.get('workers_per_hour'))}, waiting "
            f"{_money(breakdown.get('waiting_per_hour'))} per hour (the total between "
            f"{_money(breakdown.get('low'))} and {_money(breakdown.get('high'))}){least}.</p>"
        )
        if breakdown.get("note"):
            parts.append(f"<p>{_e(breakdown['note'])}</p>")
    shares = (payload.get("prices") or {}).get("scenario_shares")
    if isinstance(shares, Mapping):
        given = (payload.get("prices") or {}).get("scenario_shares_given")
        hours = ", ".join(
            f"<code>{_e(n)}</code> {_e(f'{100 * v:.4g}%')}" for n, v in shares.items()
        )
        parts.append(
            f"<p>Averaged over the hours: {hours} "
            + ("(as given)." if given else "(equal shares: none given).")
            + "</p>"
        )
    return "\n".join(parts)


def _judged(judgement: Mapping[str, Any]) -> str:
    """One judgement as a cell: mean, the bound on the safe side, verdict."""
    slo = str(judgement.get("slo") or "")
    side = "≥" if ">=" in slo else "≤"
    return (
        f"{_num(judgement.get('mean'))} (bound {side} {_num(judgement.get('bound'))}) "
        f"{_verdict(judgement.get('verdict'))}"
    )


def _scenarios(
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
    if _is_check(payload):
        which = "configuration"
    parts = [
        "<h2>Scenarios</h2>",
        f"<p>One configuration must meet every SLO in each of {_num(len(found))} scenarios "
        f"({', '.join(f'<code>{_e(n)}</code>' for n in found)}), each judged on its own "
        "replications."
        + (
            f" The binding scenario is <code>{_e(binding)}</code>: its bound is the closest "
            "to its limit at the choice."
            if binding
            else ""
        )
        + "</p>",
    ]
    slos = list(payload.get("slos") or [])
    for name, verdict in found.items():
        mark = " (binding)" if name == binding else ""
        judged = _verdict(verdict.get("verdict"))
        parts.append(f"<h3>Scenario <code>{_e(name)}</code>{_e(mark)}: {judged}</h3>")
        member = (members or {}).get(name)
        if member is not None:
            workload = (
                f"service {_e(member.service)}"
                if member.stages is None
                else ", ".join(
                    f"<code>{_e(st.name)}</code> {_e(st.service)}" for st in member.stages
                )
            )
            parts.append(f"<p>Arrivals {_e(member.arrivals)}, {workload}.</p>")
        steps = verdict.get("cheaper") or []
        header = ["SLO", f"{which}: {_point_text(payload.get(which) or {})}"]
        header += [f"one step cheaper: {_point_text(st.get('change') or {})}" for st in steps]
        rows = []
        for i, slo in enumerate(slos):
            judgements = verdict.get("judgements") or []
            row = [
                f"<code>{_e(slo)}</code>",
                _judged(judgements[i]) if i < len(judgements) else "-",
            ]
            for step in steps:
                theirs = step.get("judgements") or []
                row.append(
                    _judged(theirs[i])
                    if i < len(theirs)
                    else f"{_verdict(step.get('verdict'))} {_e(step.get('note') or '')}"
                )
            rows.append(row)
        parts.append(_table(header, rows))
        png = figures.get(f"scenario:{name}")
        if png is not None:
            parts.append(_image(png, f"frontier in scenario {name}"))
    return "\n".join(parts)


def _point_text(point: Mapping[str, Any]) -> str:
    """A configuration as plain text (for a header, which is escaped where it is drawn)."""
    return ", ".join(f"{k}={'unbounded' if v is None else v}" for k, v in point.items())


def _headroom(payload: Mapping[str, Any]) -> str:
    headroom = payload.get("headroom")
    if not isinstance(headroom, Mapping):
        return ""
    factor = headroom.get("arrival_rate_factor")
    parts = ["<h2>Headroom</h2>"]
    if isinstance(factor, int | float) and not isinstance(factor, bool):
        # The factor shown to meet, rounded down: never more than was shown.
        more = math.floor(100 * (factor - 1) + 1e-9)
        where = payload.get("binding_scenario")
        where_text = (
            f" in scenario <code>{_e(where)}</code> (the binding one; the others may break "
            "at other factors)"
            if where
            else ""
        )
        high = headroom.get("high")
        if isinstance(high, int | float) and not isinstance(high, bool):
            bracket = (
                f"; the limit lies between {_num(headroom.get('low'))} × and {_num(high)} × "
                f"(<code>{_e(headroom.get('breaks'))}</code> shown to break at {_num(high)} ×)"
            )
        else:
            bracket = "; nothing was shown to fail at the factors tried"
        undecided = [f for f in headroom.get("undecided") or [] if isinstance(f, int | float)]
        if undecided:
            bracket += f"; {', '.join(f'{_num(f)} ×' for f in undecided)} undecided"
        parts.append(
            f"<p>The {_e(_judged_word(payload))} configuration meets every SLO{where_text} up "
            f"to {_num(factor)} × the arrival rate (shown){bracket}: it can take "
            f"{_e(f'{more}%')} more traffic before an SLO breaks.</p>"
        )
    rows = [[_e(k), _num(v)] for k, v in headroom.items()]
    parts.append(_table(["", "value"], rows))
    return "\n".join(parts)


def _sensitivity(sensitivity: Mapping[str, Any] | None, png: bytes | None) -> str:
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
        f"<p>Each input of the chosen configuration moved by ±{_e(pct)}, one at a time, on "
        f"the same {_num(sensitivity.get('replications'))} replications as the plan "
        "(common random numbers). Largest effect first; the verdict is the SLO's at each "
        f"end. Changes are ± a {_num(sensitivity.get('confidence'))} paired t half-width.</p>"
    )
    if sensitivity.get("fragile") is not None:
        parts.append(
            f"<p>The answer is most fragile to <code>{_e(sensitivity['fragile'])}</code>.</p>"
        )
    if png is not None:
        parts.append(_image(png, "tornado chart: each input moved down and up"))
    rows = []
    for row in sensitivity.get("rows") or []:
        rows.append(
            [
                f"<code>{_e(row.get('input'))}</code>",
                f"<code>{_e(row.get('slo'))}</code>",
                _num(row.get("base")),
                f"{_num(row.get('low'))} ({_num(row.get('change_low'))} ± "
                f"{_num(row.get('half_width_low'))})",
                _verdict(row.get("verdict_low")),
                f"{_num(row.get('high'))} ({_num(row.get('change_high'))} ± "
                f"{_num(row.get('half_width_high'))})",
                _verdict(row.get("verdict_high")),
                _num(row.get("effect")),
            ]
        )
    parts.append(
        _table(
            ["input", "SLO", "at plan", "low end", "SLO", "high end", "SLO", "effect"],
            rows,
        )
    )
    skipped = sensitivity.get("skipped") or []
    if skipped:
        items = "".join(
            f"<li><code>{_e(s.get('input'))}</code>: {_e(s.get('reason'))}</li>" for s in skipped
        )
        parts.append(f"<p>Not moved:</p><ul>{items}</ul>")
    return "\n".join(parts)


def _candidates(payload: Mapping[str, Any]) -> str:
    rows = payload.get("candidates") or []
    if not rows:
        return ""
    fields = list(payload.get("search") or {})
    slo_columns = [k for k in rows[0] if k.endswith(("_mean", "_bound"))]
    extra = ["cost_per_hour"] if any("cost_per_hour" in r for r in rows) else []
    header = [*fields, "verdict", "replications", *extra, *slo_columns, "note"]
    body = [
        [
            *(_e(r.get(f)) for f in fields),
            _verdict(r.get("verdict")),
            _num(r.get("replications")),
            *(_money(r.get(k)) for k in extra),
            *(_num(r.get(k)) for k in slo_columns),
            _e(r.get("note") or ""),
        ]
        for r in rows
    ]
    return "<h2>Every configuration examined</h2>\n" + _table(header, body)


def _method(payload: Mapping[str, Any], scenario: Scenario | None) -> str:
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
        f"gets more replications (from {_num(replications.get('min'))}, doubling, up to "
        f"{_num(replications.get('max'))}), within the plan's run budget: a "
        "configuration's next replications are run whole or not at all, so every look is one "
        "the schedule planned.",
        f"Looking again after more replications gives a wrong verdict more chances, so each "
        f"look is judged at {_num(payload.get('look_confidence'))} (Bonferroni over the looks): "
        f"each verdict is wrong with probability at most "
        f"{_num(1 - float(payload.get('confidence') or 0))}.",
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


def render_report(
    payload: Mapping[str, Any],
    *,
    figures: Mapping[str, bytes] | None = None,
    sensitivity: Mapping[str, Any] | None = None,
    scenario: Scenario | None = None,
    source: str | None = None,
    members: Mapping[str, Scenario] | None = None,
) -> str:
    """The page for a plan's :meth:`~.result.Plan.to_dict` ``payload``, as a string.

    Args:
        payload: what :meth:`~.result.Plan.to_dict` returns (``cost_per_hour`` and
            ``headroom`` are shown when present).
        figures: PNG bytes by name: ``"frontier"``, ``"sensitivity"``, and for a
            scenario set ``"scenario:NAME"``, each scenario's frontier.
        sensitivity: a :meth:`~.sensitivity.Sensitivity.to_dict`, or None.
        scenario: the plan's base scenario, for the question's inputs.
        source: the scenario file's name, shown as given.
        members: a scenario set's scenarios by name, for each one's inputs.
    """
    figures = dict(figures or {})
    if _is_check(payload):
        title = f"Capacity check: {payload.get('verdict')}" + (f": {source}" if source else "")
    else:
        title = "Capacity plan" + (f": {source}" if source else "")
    body = [
        f"<h1>{_e(title)}</h1>",
        _question(payload, scenario, source),
        _answer(payload),
        _binding(payload),
        _cost(payload, scenario),
        _scenarios(payload, figures, members),
        _headroom(payload),
        _sensitivity(sensitivity, figures.get("sensitivity")),
    ]
    if "frontier" in figures and _is_check(payload):
        body.append(
            "<h2>Each SLO</h2>\n<p>The configuration checked: each SLO's metric with its "
            "bounds and the limit (dashed).</p>\n"
            + _image(figures["frontier"], "each SLO's metric at the configuration checked")
        )
    elif "frontier" in figures:
        body.append(
            "<h2>The frontier</h2>\n<p>Each SLO's metric against cost, with its bounds, the "
            "limit (dashed) and the choice (a star).</p>\n"
            + _image(figures["frontier"], "frontier: each SLO's metric against cost")
        )
    body += [_candidates(payload), _method(payload, scenario)]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(part for part in body if part)
        + "\n</body>\n</html>\n"
    )


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def report_html(
    plan: Plan,
    *,
    sensitivity: Sensitivity | None = None,
    source: str | None = None,
    figures: Mapping[str, bytes] | None = None,
) -> str:
    """The page for ``plan`` (see :func:`render_report`); figures not given are drawn."""
    import matplotlib

    matplotlib.use("Agg")  # a file, not a window
    figures = dict(figures or {})
    if "frontier" not in figures:
        figures["frontier"] = _png(plan.figure())
    if sensitivity is not None and "sensitivity" not in figures:
        figures["sensitivity"] = _png(sensitivity.figure())
    payload = plan.to_dict()
    if payload.get("scenarios"):
        for name in plan.scenario_names:
            figures.setdefault(f"scenario:{name}", _png(plan.figure(scenario=name)))
    return render_report(
        payload,
        figures=figures,
        sensitivity=None if sensitivity is None else sensitivity.to_dict(),
        scenario=plan.base,
        source=source,
        members=dict(zip(plan.mix.names, plan.mix.scenarios, strict=False)) or None,
    )


def write_report(
    plan: Plan,
    directory: str | os.PathLike[str],
    *,
    sensitivity: Sensitivity | None = None,
    source: str | None = None,
) -> str:
    """Write ``report.html`` (and ``sensitivity.png`` with ``sensitivity``) into ``directory``.

    A ``frontier.png`` already in ``directory`` is embedded as it is; else the
    frontier is drawn. Returns the report's path.
    """
    directory = os.fspath(directory)
    figures: dict[str, bytes] = {}
    frontier = os.path.join(directory, "frontier.png")
    if os.path.exists(frontier):
        with open(frontier, "rb") as file:
            figures["frontier"] = file.read()
    if sensitivity is not None:
        import matplotlib

        matplotlib.use("Agg")
        figures["sensitivity"] = _png(sensitivity.figure())
        with open(os.path.join(directory, "sensitivity.png"), "wb") as file:
            file.write(figures["sensitivity"])
    path = os.path.join(directory, "report.html")
    text = report_html(plan, sensitivity=sensitivity, source=source, figures=figures)
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)
    return path
