"""Plots and widgets over simulation results: matplotlib figures and an ipywidgets explorer.

Everything here reads results; nothing here runs the engine except the
explorer, which re-simulates when a control moves.
"""

from __future__ import annotations

from .._units import human_bytes, metric_label
from .figures.run import (
    oldest_unfinished_age,
    plot_depth,
    plot_lag,
    plot_memory,
    plot_retries,
    report_figure,
)
from .figures.series import memory_bound_bytes
from .figures.stages import plot_stages
from .figures.sweep import plot_sweep
from .figures.theory import (
    plot_dead_letters_vs_theory,
    plot_shed_vs_theory,
    plot_wait_vs_theory,
    theory_for,
)
from .figures.tradeoffs import plot_batch_completion, plot_drain_tradeoff
from .figures.warmup import plot_warmup
from .notebook import check, say
from .widgets.explorer import Explorer, explore
from .widgets.focused import FocusedWidget
from .widgets.live_run import LiveRunWidget
from .widgets.plan_explorer import PlanExplorer, explore_plan
from .widgets.stage_explorer import StageExplorer, explore_stages

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
    "plot_wait_vs_theory",
    "plot_warmup",
    "report_figure",
    "say",
    "theory_for",
]
