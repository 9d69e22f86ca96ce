"""``report.html``: a plan as one self-contained page to share (figures embedded).

The page answers in order: the question (scenario, search, SLOs, confidence),
the answer, the SLO that binds, the cheaper configuration that fails and why,
cost and headroom when the plan has them (``cost_per_hour``, ``headroom`` in
:meth:`~pipeline.sim.Plan.to_dict`), the sensitivity of the answer
(:mod:`~pipeline.sim.analysis.planning.sensitivity`), every candidate examined,
and the statistics' method and assumptions.

Self-contained: the figures are PNG data URIs, the style is inline, there is
no script, and a Content-Security-Policy forbids fetching anything, so the
file opens the same from a mail attachment, a CI artefact or a wiki. The
sections are :mod:`.sections`, their cells :mod:`.cells` (every user string
escaped). ``Plan.to_html()`` and ``plan --out`` write the page through here, so
the simulation layer never imports matplotlib.

Example:
    >>> p = plan(base, {"concurrency": range(1, 33)}, ["wait_mean_s<=0.2"])
    >>> write_report(p, "out", sensitivity=p.sensitivity())   # out/report.html
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .cells import escape, image, is_check
from .headroom import headroom_section
from .sections import (
    answer_section,
    binding_section,
    candidates_section,
    cost_section,
    method_section,
    question_section,
    scenarios_section,
    sensitivity_section,
)

if TYPE_CHECKING:
    from ...sim.analysis.planning.result import Plan
    from ...sim.analysis.planning.sensitivity import Sensitivity
    from ...sim.workloads.scenario import Scenario

__all__ = ["render_report", "report_html", "write_report"]

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; max-width: 62rem; margin: 2rem auto;
       padding: 0 1rem; color: #222; overflow-wrap: break-word; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem;
     border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5rem 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: .2rem .5rem; text-align: left; }
th { background: #f3f3f3; overflow-wrap: anywhere; }
.table { max-width: 100%; overflow-x: auto; }
tr.note td { color: #555; font-size: 12px; border-top: none; padding-left: 1.5rem; }
.answer { font-size: 1.15rem; padding: .6rem .8rem; background: #eef4fb;
          border-left: 4px solid #4477aa; }
.fails { color: #cc3311; } .meets { color: #2a6a2a; } .undecided { color: #777; }
img { max-width: 100%; height: auto; }
code { background: #f6f6f6; padding: 0 .2rem; }
"""

# No fetch of any kind: images only from data URIs, the style inline, no script.
_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def render_report(
    payload: Mapping[str, Any],
    *,
    figures: Mapping[str, bytes] | None = None,
    sensitivity: Mapping[str, Any] | None = None,
    scenario: Scenario | None = None,
    source: str | None = None,
    members: Mapping[str, Scenario] | None = None,
) -> str:
    """The page for a plan's :meth:`~pipeline.sim.Plan.to_dict` ``payload``, as a string.

    Args:
        payload: what :meth:`~pipeline.sim.Plan.to_dict` returns (``cost_per_hour`` and
            ``headroom`` are shown when present).
        figures: PNG bytes by name: ``"frontier"``, ``"sensitivity"``, and for a
            scenario set ``"scenario:NAME"``, each scenario's frontier.
        sensitivity: a
            :meth:`~pipeline.sim.analysis.planning.sensitivity.Sensitivity.to_dict`,
            or None.
        scenario: the plan's base scenario, for the question's inputs.
        source: the scenario file's name, shown as given.
        members: a scenario set's scenarios by name, for each one's inputs.
    """
    figures = dict(figures or {})
    if is_check(payload):
        title = f"Capacity check: {payload.get('verdict')}" + (f": {source}" if source else "")
    else:
        title = "Capacity plan" + (f": {source}" if source else "")
    body = [
        f"<h1>{escape(title)}</h1>",
        question_section(payload, scenario, source),
        answer_section(payload),
        binding_section(payload),
        cost_section(payload, scenario),
        scenarios_section(payload, figures, members),
        headroom_section(payload),
        sensitivity_section(sensitivity, figures.get("sensitivity")),
    ]
    if "frontier" in figures and is_check(payload):
        body.append(
            "<h2>Each SLO</h2>\n<p>The configuration checked: each SLO's metric with its "
            "bounds and the limit (dashed).</p>\n"
            + image(figures["frontier"], "each SLO's metric at the configuration checked")
        )
    elif "frontier" in figures:
        body.append(
            "<h2>The frontier</h2>\n<p>Each SLO's metric against cost, with its bounds, the "
            "limit (dashed) and the choice (a star).</p>\n"
            + image(figures["frontier"], "frontier: each SLO's metric against cost")
        )
    body += [candidates_section(payload), method_section(payload, scenario)]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(part for part in body if part)
        + "\n</body>\n</html>\n"
    )


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
