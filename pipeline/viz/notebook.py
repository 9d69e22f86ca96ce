"""Small helpers that keep notebook cells short and their prose true.

Numbers in a notebook's text must come from the run, never be typed by hand:
:func:`check` states a teaching claim, asserts it and shows it as a tick, so
a notebook that stops teaching the truth fails its test run.
"""

from __future__ import annotations

__all__ = ["check"]


def check(claim: bool, statement: str) -> None:
    """Assert a teaching claim and show it; raises AssertionError naming it if false.

    Example:
        >>> check(result.summary["memory_peak_bytes"] <= bound, "memory stays under its bound")
    """
    if not claim:
        raise AssertionError(f"claim no longer holds: {statement}")
    from IPython.display import Markdown, display

    display(Markdown(f"✔ *{statement}*"))
