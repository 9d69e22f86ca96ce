"""The README's diagram names every way an offered item ends, as the engine counts them."""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.sim.running.recorder import ItemColumns

SVG = Path(__file__).resolve().parents[2] / "docs" / "pipeline.svg"


def test_the_diagram_names_each_outcome_of_an_offered_item():
    text = SVG.read_text(encoding="utf-8")
    [line] = re.findall(r"ends as exactly one of: ([^<]+)<", text)
    named = {word.strip() for word in re.split(r",| or ", line) if word.strip()}
    outcomes = {o.replace("_", "-") for o in ItemColumns.OUTCOMES} - {"not-offered"}
    assert named == outcomes
    for outcome in outcomes - {"completed", "unfinished"}:  # each exit has its own box or label
        assert outcome.split("-")[0] in text.replace(line, "")
