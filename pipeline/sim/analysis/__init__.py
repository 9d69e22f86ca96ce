"""Reading results: queueing theory, diagnostics, sweeps and capacity planning.

Besides the names of :mod:`pipeline.sim` (``sweep``, ``plan``, ``diagnose``, ...), a
study's tables and text come from here, each loaded on first use:
``from pipeline.sim.analysis import summarise_sweep, format_findings, metric_value``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_names

# The names _LAZY loads on first use, written out for editors and type checkers.
if TYPE_CHECKING:
    from .diagnostics.diagnose import format_findings
    from .planning.slo import metric_value
    from .sweep import summarise_sweep
del TYPE_CHECKING  # a switch for the block above, not a name of this package

__all__ = ["format_findings", "metric_value", "summarise_sweep"]

# Public names imported on first use (importing pipeline.sim.analysis.theory, say, must not
# load the sweeps, plans and diagnostics): name -> (module, attribute).
_LAZY = {
    # A sweep's frame as one row per grid point: means and 95% intervals of each metric.
    "summarise_sweep": ("sweep", "summarise_sweep"),
    # diagnose()'s findings as the text a notebook or the command line prints.
    "format_findings": ("diagnostics.diagnose", "format_findings"),
    # An SLO metric's value in a run's summary (the fractions derived from its counts).
    "metric_value": ("planning.slo", "metric_value"),
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals(), __all__)
del lazy_names  # the package's own machinery, not a name of it
