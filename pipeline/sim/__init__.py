"""Virtual-time simulation of the unchanged pipeline engine.

An hour of traffic through the real :class:`~pipeline.Pipeline` takes a
fraction of a second: a virtual clock (:mod:`~pipeline.sim.vloop`) jumps to
the next timer, arrival processes and service-time distributions drive the
engine, and a recorder turns its events into exact per-item records and
time series. The exact kernel computes the same run, much faster, for the
scenarios inside its domain (``simulate(engine="auto")``, the default, picks
it). :mod:`~pipeline.sim.analysis.theory` holds the queueing formulas the
results are checked against.

The package has three layers, each importing only those below it:
``analysis`` (theory, diagnostics, sweeps, plans) and, beside it,
``calibration`` (scenarios fitted to recorded runs and telemetry) over ``running``
(simulate, the engine's run and the kernel, the recorder) over ``workloads``
(distributions, arrivals, failures, traces, Scenario), all over the virtual
clock (``vloop``) and the step-function statistics (``stats``).

What ``python -m pipeline simulate`` needs is imported at once; sweeps
(process pools), traces, theory and diagnostics are imported on first use of
one of their names.
"""

from __future__ import annotations

from .._extras import require

require("pipeline.sim", "sim")  # before numpy is imported: one ImportError naming the extra
del require  # a check, not a name of this package

import importlib
from typing import TYPE_CHECKING

from .running.result import DrainTimeoutWarning
from .running.simulate import simulate
from .workloads.arrivals import OnOff, Poisson, TimeVarying, Trace
from .workloads.classes import ItemClass
from .workloads.distributions import (
    Constant,
    Empirical,
    Exponential,
    Gamma,
    LogNormal,
    parse_distribution,
)
from .workloads.failures import (
    IndependentFailures,
    NoFailures,
    Overload,
    PermanentFailures,
    ScriptedFailures,
    TokenQuota,
)
from .workloads.scenario import Scenario

# The names _LAZY loads on first use, written out for editors and type checkers, which
# follow these imports to each name's definition (tests/test_lazy_imports.py keeps the two
# lists the same names from the same modules).
if TYPE_CHECKING:
    from .analysis import theory
    from .analysis.compare import compare
    from .analysis.diagnostics.bottleneck import stage_loads
    from .analysis.diagnostics.diagnose import diagnose, format_findings
    from .analysis.planning.plan import plan
    from .analysis.planning.result import Plan
    from .analysis.planning.slo import SLO, metric_value
    from .analysis.sweep import simulate_replication, summarise_sweep, sweep
    from .analysis.warmup import detect_warmup
    from .calibration.daily import fit_daily_curve
    from .calibration.recorded import calibrate
    from .calibration.telemetry import calibrate_observed
    from .executors.cluster import scheduler_executor
    from .executors.run_cache import RunCache
    from .running.scrape import openmetrics_series, query_range_answer
    from .vloop import run_virtual
    from .workloads.stages import StageSpec
    from .workloads.telemetry.prometheus import read as read_prometheus
    from .workloads.traces.replay import load_trace
    from .workloads.traces.runtrace import TraceRecorder
    from .workloads.traces.window import trace_window
del TYPE_CHECKING  # a switch for the block above, not a name of this package

# What a notebook or a capacity study reaches for: run (Scenario ... run_virtual), build
# the traffic (distributions, arrivals, failure models, traces), and read the results
# (theory, sweeps, plans, diagnostics, warm-up, comparison, calibration). The rest of
# the catalogue (Deterministic, Uniform, Hangs, MarkovModulated, result and record
# types, ...) is importable from its module under pipeline.sim.workloads, .running and
# .analysis; confidence intervals are in pipeline.sim.stats.
__all__ = [
    "SLO",
    "Constant",
    "DrainTimeoutWarning",
    "Empirical",
    "Exponential",
    "Gamma",
    "IndependentFailures",
    "ItemClass",
    "LogNormal",
    "NoFailures",
    "OnOff",
    "Overload",
    "PermanentFailures",
    "Plan",
    "Poisson",
    "RunCache",
    "Scenario",
    "ScriptedFailures",
    "StageSpec",
    "TimeVarying",
    "TokenQuota",
    "Trace",
    "TraceRecorder",
    "calibrate",
    "calibrate_observed",
    "compare",
    "detect_warmup",
    "diagnose",
    "fit_daily_curve",
    "format_findings",
    "load_trace",
    "metric_value",
    "openmetrics_series",
    "parse_distribution",
    "plan",
    "query_range_answer",
    "read_prometheus",
    "run_virtual",
    "scheduler_executor",
    "simulate",
    "simulate_replication",
    "stage_loads",
    "summarise_sweep",
    "sweep",
    "theory",
    "trace_window",
]

# Public names imported on first use: name -> (module, attribute; None for the module itself).
_LAZY = {
    # The virtual loop runs the asyncio engine; the kernel's runs need none of it (start-up).
    "run_virtual": ("vloop", "run_virtual"),
    "calibrate": ("calibration.recorded", "calibrate"),
    "TraceRecorder": ("workloads.traces.runtrace", "TraceRecorder"),
    "compare": ("analysis.compare", "compare"),
    "detect_warmup": ("analysis.warmup", "detect_warmup"),
    "diagnose": ("analysis.diagnostics.diagnose", "diagnose"),
    "format_findings": ("analysis.diagnostics.diagnose", "format_findings"),
    "scheduler_executor": ("executors.cluster", "scheduler_executor"),
    "Plan": ("analysis.planning.result", "Plan"),
    "SLO": ("analysis.planning.slo", "SLO"),
    "metric_value": ("analysis.planning.slo", "metric_value"),
    "plan": ("analysis.planning.plan", "plan"),
    "fit_daily_curve": ("calibration.daily", "fit_daily_curve"),
    "trace_window": ("workloads.traces.window", "trace_window"),
    "RunCache": ("executors.run_cache", "RunCache"),
    "simulate_replication": ("analysis.sweep", "simulate_replication"),
    "summarise_sweep": ("analysis.sweep", "summarise_sweep"),
    "sweep": ("analysis.sweep", "sweep"),
    "theory": ("analysis.theory", None),
    "StageSpec": ("workloads.stages", "StageSpec"),
    "stage_loads": ("analysis.diagnostics.bottleneck", "stage_loads"),
    "load_trace": ("workloads.traces.replay", "load_trace"),
    # Telemetry a team already has: a Prometheus query_range answer read and fitted, and a
    # simulated run turned back into the same answer (notebook 10).
    "read_prometheus": ("workloads.telemetry.prometheus", "read"),
    "calibrate_observed": ("calibration.telemetry", "calibrate_observed"),
    "query_range_answer": ("running.scrape", "query_range_answer"),
    "openmetrics_series": ("running.scrape", "openmetrics_series"),
}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(f"{__name__}.{module_name}")
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
