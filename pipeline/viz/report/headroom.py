"""The Headroom section of ``report.html``: how far the traffic (and the service time)
can grow before an SLO breaks, in words, then as one table of factors -- never the
headroom's raw JSON values (:meth:`~pipeline.sim.analysis.planning.headroom.Headroom.to_dict`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .cells import escape, judged_word, number, table, verdict

__all__ = ["headroom_section"]


def headroom_section(payload: Mapping[str, Any]) -> str:
    """How much more traffic the configuration takes before an SLO breaks (empty unless
    asked for)."""
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
            f" in scenario <code>{escape(where)}</code> (the binding one; the others may break "
            "at other factors)"
            if where
            else ""
        )
        high = headroom.get("high")
        if isinstance(high, int | float) and not isinstance(high, bool):
            bracket = (
                f"; the limit lies between {number(headroom.get('low'))} × and {number(high)} × "
                f"(<code>{escape(headroom.get('breaks'))}</code> shown to break at "
                f"{number(high)} ×)"
            )
        else:
            bracket = "; nothing was shown to fail at the factors tried"
        undecided = [f for f in headroom.get("undecided") or [] if isinstance(f, int | float)]
        if undecided:
            bracket += f"; {', '.join(f'{number(f)} ×' for f in undecided)} undecided"
        parts.append(
            f"<p>The {escape(judged_word(payload))} configuration meets every SLO{where_text} up "
            f"to {number(factor)} × the arrival rate (shown){bracket}: it can take "
            f"{escape(f'{more}%')} more traffic before an SLO breaks.</p>"
        )
    # Each search in words, a paragraph each, then the brackets as a table: no raw values.
    parts += [
        f"<p>{escape(line)}</p>"
        for line in str(headroom.get("text") or "").splitlines()
        if line.strip()
    ]
    searches = [_headroom_search(headroom, ""), _headroom_search(headroom, "service_time_")]
    rows = [
        [escape(label), *(cells[i] for cells in searches)] for i, label in enumerate(_HEADROOM_ROWS)
    ]
    parts.append(table(["", "arrival rate", "mean service time"], rows))
    confidence = headroom.get("confidence")
    runs = headroom.get("runs")
    level = f"{100 * confidence:.4g}%" if isinstance(confidence, int | float) else "-"
    count = f"{runs:,}" if isinstance(runs, int) and not isinstance(runs, bool) else "-"
    parts.append(
        f"<p>Each bracket holds the limit at {escape(level)} confidence; the two searches "
        f"made {escape(count)} runs.</p>"
    )
    return "\n".join(parts)


_HEADROOM_ROWS = (
    "shown to meet every SLO up to",
    "shown to break an SLO at",
    "the SLO that breaks",
    "left undecided",
    "factors judged (verdict, runs)",
)


def _times(value: Any) -> str:
    """A factor as ``× 1.45`` ("-" when there is none)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"× {number(value)}"
    return "-"


def _headroom_search(headroom: Mapping[str, Any], prefix: str) -> list[str]:
    """One search's cells, in the order of :data:`_HEADROOM_ROWS`: ``prefix`` is ``""``
    for the arrival rate's keys, ``"service_time_"`` for the service time's (its note is
    in the prose above the table)."""
    low = headroom.get(f"{prefix}low")
    high = headroom.get(f"{prefix}high")
    points = headroom.get(f"{prefix}points") or []
    tried = [p[0] for p in points if isinstance(p, list | tuple) and len(p) == 3]
    if isinstance(high, int | float) and not isinstance(high, bool):
        broke = _times(high)
    elif low is None:
        broke = "-"
    else:
        broke = f"nothing, up to {_times(max(tried, default=low))}"
    undecided = [_times(f) for f in headroom.get(f"{prefix}undecided") or []]
    judged = ", ".join(
        f"{_times(p[0])} {verdict(p[1])} ({number(p[2])})"
        for p in points
        if isinstance(p, list | tuple) and len(p) == 3
    )
    breaks = headroom.get(f"{prefix}breaks")
    return [
        _times(low),
        broke,
        f"<code>{escape(breaks)}</code>" if breaks else "-",
        ", ".join(undecided) or "none",
        judged or "-",
    ]
