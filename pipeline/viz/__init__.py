"""Plots and widgets over simulation results: matplotlib figures and an ipywidgets explorer.

Everything here reads results; nothing here runs the engine except the
explorer, which re-simulates when a control moves.
"""

from __future__ import annotations

from .._extras import require

require("pipeline.viz", "viz")  # before matplotlib is imported: one ImportError naming the extra

from .explorer import Explorer, explore
from .focused import FocusedWidget
from .labels import metric_label
from .live_widget import LiveRunWidget
from .notebook import check, say
from .overlays import (
    plot_dead_letters_vs_theory,
    plot_shed_vs_theory,
    plot_sweep_heatmap,
    plot_wait_vs_theory,
    theory_for,
)
from .plan_explorer import PlanExplorer, explore_plan
from .plots import (
    human_bytes,
    memory_bound_bytes,
    oldest_unfinished_age,
    plot_depth,
    plot_lag,
    plot_memory,
    plot_retries,
    report_figure,
)
from .stage_explorer import StageExplorer, explore_stages
from .stages import plot_stages
from .sweeps import plot_sweep
from .tradeoffs import plot_batch_completion, plot_drain_tradeoff
from .warmup import plot_warmup

__all__ = [
    "Explorer",
    "FocusedWidget",
    "LiveRunWidget",
    "PlanExplorer",
    "StageExplorer",
    "check",
    "explore",
    "explore_plan",
    "explore_stages",
    "human_bytes",
    "memory_bound_bytes",
    "metric_label",
    "oldest_unfinished_age",
    "plot_batch_completion",
    "plot_dead_letters_vs_theory",
    "plot_depth",
    "plot_drain_tradeoff",
    "plot_lag",
    "plot_memory",
    "plot_retries",
    "plot_shed_vs_theory",
    "plot_stages",
    "plot_sweep",
    "plot_sweep_heatmap",
    "plot_wait_vs_theory",
    "plot_warmup",
    "report_figure",
    "say",
    "theory_for",
]
