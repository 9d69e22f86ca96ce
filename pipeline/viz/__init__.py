"""Plots and widgets over simulation results: matplotlib figures and an ipywidgets explorer.

Everything here reads results; nothing here runs the engine except the
explorer, which re-simulates when a control moves.
"""

from __future__ import annotations

from .explorer import Explorer, explore
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
from .sweeps import plot_sweep
from .warmup import plot_warmup

__all__ = [
    "Explorer",
    "PlanExplorer",
    "check",
    "explore",
    "explore_plan",
    "human_bytes",
    "memory_bound_bytes",
    "oldest_unfinished_age",
    "plot_dead_letters_vs_theory",
    "plot_depth",
    "plot_lag",
    "plot_memory",
    "plot_retries",
    "plot_shed_vs_theory",
    "plot_sweep",
    "plot_sweep_heatmap",
    "plot_wait_vs_theory",
    "plot_warmup",
    "report_figure",
    "say",
    "theory_for",
]
