"""Plots and widgets over simulation results: matplotlib figures and an ipywidgets explorer.

Everything here reads results; nothing here runs the engine except the
explorer, which re-simulates when a control moves.
"""

from __future__ import annotations

from .._extras import require

require("pipeline.viz", "viz")  # before matplotlib is imported: one ImportError naming the extra
del require  # a check, not a name of this package

from .._units import human_bytes, metric_label, slo_text
from .figures.classes import plot_class_depth, plot_class_waits
from .figures.run import plot_depth, plot_lag, plot_memory, plot_retries, report_figure
from .figures.stages import plot_stages
from .figures.sweep import plot_sweep
from .figures.tradeoffs import plot_batch_completion, plot_drain_tradeoff
from .figures.warmup import plot_warmup
from .notebook import check
from .widgets.animate import animate
from .widgets.explorer import explore
from .widgets.plan_explorer import explore_plan
from .widgets.stage_explorer import explore_stages

# The figures of a run (and of its item classes), a sweep, a chain and a warm-up; the
# three explorers; a run's animation (animate, with its Play control and .save to a GIF); the words
# for metrics; and the notebooks' check. Widget classes, the theory overlays and the
# figure helpers are importable from their modules (pipeline.viz.figures.*,
# pipeline.viz.widgets.*); the live view of a real-time run is pipeline.viz.live.
__all__ = [
    "animate",
    "check",
    "explore",
    "explore_plan",
    "explore_stages",
    "human_bytes",
    "metric_label",
    "plot_batch_completion",
    "plot_class_depth",
    "plot_class_waits",
    "plot_depth",
    "plot_drain_tradeoff",
    "plot_lag",
    "plot_memory",
    "plot_retries",
    "plot_stages",
    "plot_sweep",
    "plot_warmup",
    "report_figure",
    "slo_text",
]
