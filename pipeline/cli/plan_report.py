"""``plan --sensitivity [PCT]`` and what ``plan --out`` adds: report.html, sensitivity.png.

- ``--sensitivity`` (default ±20%) or ``--sensitivity PCT`` (a number > 0 and
  < 100): after the plan chooses, each input of the chosen configuration is
  moved by ±PCT% on the plan's own replications
  (:mod:`~pipeline.sim.analysis.planning.sensitivity`). The text report gains a
  table sorted by effect; ``--json`` gains the key ``sensitivity`` (only with
  the flag, so the JSON is unchanged without it: null when the plan chose
  nothing); ``--out`` gains ``sensitivity.png``, a tornado chart. Give the
  flag after the scenario file (``plan scenario.toml --sensitivity``) or with
  its value (``--sensitivity 20``): a bare flag before the file would read the
  file's name as PCT.
- ``--out DIR`` always writes ``report.html``, one self-contained page
  (:mod:`pipeline.viz.report`).
"""

from __future__ import annotations

import math
import sys
from typing import Any

__all__ = ["parse_sensitivity", "run_sensitivity", "write_report_files"]

DEFAULT_PCT = "20"


def parse_sensitivity(text: Any) -> float | None:
    """``--sensitivity PCT`` -> the relative change (0.2), or None without the flag.

    Raises:
        ValueError: PCT is not a number > 0 and < 100.
    """
    if text is None:
        return None
    allowed = "expected a percentage > 0 and < 100 (e.g. 20 for ±20%)"
    try:
        pct = float(str(text).strip().removesuffix("%"))
    except ValueError:
        raise ValueError(f"--sensitivity: {allowed}, got {str(text)!r}") from None
    if not (math.isfinite(pct) and 0 < pct < 100):
        raise ValueError(f"--sensitivity: {allowed}, got {str(text)!r}")
    return pct / 100


def run_sensitivity(
    result: Any, change: float | None, *, executor: Any, processes: int | None
) -> Any:
    """The plan's sensitivity (None without the flag, or when it chose nothing: said on
    stderr)."""
    if change is None:
        return None
    if result.status != "chosen":
        print(
            f"pipeline: sensitivity skipped: the plan chose no configuration "
            f"(status {result.status})",
            file=sys.stderr,
        )
        return None
    return result.sensitivity(change=change, executor=executor, processes=processes)


def write_report_files(directory: str, result: Any, sensitivity: Any, source: str | None) -> None:
    """``report.html`` (and ``sensitivity.png``) into ``directory``, after ``frontier.png``."""
    from ..viz.report.page import write_report

    write_report(result, directory, sensitivity=sensitivity, source=source)
