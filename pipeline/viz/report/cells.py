"""The cells of ``report.html``: every value escaped, numbers to four figures, verdicts
coloured, configurations as code, tables from cells already escaped.

Every string that came from the user (file names, stage names, SLO text, searched
values) passes through :func:`escape`: a stage named ``<script>`` shows as text.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "escape",
    "image",
    "is_check",
    "judged",
    "judged_word",
    "model",
    "money",
    "number",
    "point",
    "point_plain",
    "table",
    "verdict",
]


def escape(value: Any) -> str:
    """``value`` as escaped HTML text (None as "unbounded", as the plan's text does)."""
    return html.escape("unbounded" if value is None else str(value), quote=True)


# A number given as a keyword's value in a model's notation (``mean=0.1271230134081788``).
_LONG_NUMBER = re.compile(r"(?<==)-?\d+\.\d{5,}(?:e[+-]?\d+)?")


def model(value: Any) -> str:
    """A workload model (an arrival process, a distribution, a failure model) in the
    notation it is built with, each number to four significant figures, escaped:
    ``LogNormal(mean=0.1271, cv=2.338)``, not the fitted floats' 16 digits."""
    text = _LONG_NUMBER.sub(lambda m: f"{float(m.group()):.4g}", str(value))
    return escape(text)


def number(value: Any) -> str:
    """A number to four significant figures; "-" for None, NaN or an infinity."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return escape(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    return escape(f"{value:.4g}")


def point(fields: Mapping[str, Any]) -> str:
    """A configuration as ``<code>name=value</code>`` items."""
    return ", ".join(f"<code>{escape(k)}={escape(v)}</code>" for k, v in fields.items())


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    notes: Sequence[str] | None = None,
) -> str:
    """A table from already-escaped cells (the header is escaped here), in a box that
    scrolls sideways when the table is wider than the page (the page itself never does).

    ``notes``, one per row (already escaped; empty for none): each a row of its own under
    its row, across the table's whole width.
    """
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
        if notes is not None and notes[i]:
            body.append(f'<tr class="note"><td colspan="{len(header)}">{notes[i]}</td></tr>')
    return (
        f'<div class="table"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def verdict(word: Any) -> str:
    """A verdict, coloured by its class (meets, fails, undecided)."""
    css = word if word in ("meets", "fails", "undecided") else ""
    return f'<span class="{css}">{escape(word)}</span>'


def image(png: bytes, alt: str) -> str:
    """PNG bytes as an ``<img>`` with a data URI (the page fetches nothing)."""
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{escape(alt)}">'


def is_check(payload: Mapping[str, Any]) -> bool:
    """A check's payload (``plan --check``): it carries the verdict."""
    return "verdict" in payload and "judgements" in payload


def judged_word(payload: Mapping[str, Any]) -> str:
    """ "checked" for a check's payload, else "chosen"."""
    return "checked" if is_check(payload) else "chosen"


def money(value: Any) -> str:
    """Money to two decimals with thousands separators (a mapping: each entry; "-" for
    none, as for a configuration not run)."""
    if value is None:
        return "-"
    if isinstance(value, Mapping):
        return ", ".join(f"{escape(k)} {money(v)}" for k, v in value.items())
    if isinstance(value, int | float) and not isinstance(value, bool):
        return escape(f"{value:,.2f}")
    return escape(value)


def judged(judgement: Mapping[str, Any]) -> str:
    """One judgement as a cell: mean, the bound on the safe side, verdict."""
    slo = str(judgement.get("slo") or "")
    side = "≥" if ">=" in slo else "≤"
    return (
        f"{number(judgement.get('mean'))} (bound {side} {number(judgement.get('bound'))}) "
        f"{verdict(judgement.get('verdict'))}"
    )


def point_plain(fields: Mapping[str, Any]) -> str:
    """A configuration as plain text (for a header, which is escaped where it is drawn)."""
    return ", ".join(f"{k}={'unbounded' if v is None else v}" for k, v in fields.items())
