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
``analysis`` (theory, diagnostics, sweeps, plans) over ``running``
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

import importlib
from typing import Any

from .running.replications import Replications
from .running.result import DrainTimeoutWarning, SimulationResult
from .running.simulate import simulate
from .vloop import VirtualEventLoop, new_virtual_loop, run_virtual
from .workloads.arrivals import (
    ArrivalProcess,
    DailyCurve,
    Deterministic,
    IntervalCounts,
    MarkovModulated,
    OnOff,
    PiecewiseLinear,
    Poisson,
    TimeVarying,
    Trace,
    daily_curve,
    parse_arrivals,
)
from .workloads.distributions import (
    Constant,
    Distribution,
    Empirical,
    Exponential,
    Gamma,
    LogNormal,
    Uniform,
    parse_distribution,
)
from .workloads.failures import (
    CombinedFailures,
    FailureModel,
    Hangs,
    IndependentFailures,
    NoFailures,
    Overload,
    PermanentFailures,
    ScriptedFailures,
    SimulatedFailure,
    TokenQuota,
)
from .workloads.scenario import Scenario
from .workloads.traces.service import ServiceTrace

__all__ = [
    "SLO",
    "ArrivalProcess",
    "Calibration",
    "ChainSimulationResult",
    "CombinedFailures",
    "Comparison",
    "Constant",
    "DailyCurve",
    "Deterministic",
    "Distribution",
    "DrainTimeoutWarning",
    "Empirical",
    "Exponential",
    "FailureModel",
    "Finding",
    "Gamma",
    "Hangs",
    "InconsistentWorkloadWarning",
    "IndependentFailures",
    "IntervalCounts",
    "LogNormal",
    "MarkovModulated",
    "NoFailures",
    "OnOff",
    "Overload",
    "PermanentFailures",
    "PiecewiseLinear",
    "Plan",
    "Poisson",
    "Replications",
    "RunCache",
    "RunTrace",
    "Scenario",
    "ScriptedFailures",
    "ServiceTrace",
    "SimulatedFailure",
    "SimulationResult",
    "StageLoad",
    "StageSpec",
    "StageTrace",
    "TimeVarying",
    "TokenQuota",
    "Trace",
    "TraceRecorder",
    "TraceWorkload",
    "Uniform",
    "VirtualEventLoop",
    "WarmupCut",
    "calibrate",
    "compare",
    "daily_curve",
    "detect_warmup",
    "diagnose",
    "exact_fcfs_waits",
    "findings_frame",
    "format_findings",
    "load_trace",
    "mser5",
    "new_virtual_loop",
    "parse_arrivals",
    "parse_distribution",
    "plan",
    "run_virtual",
    "scheduler_executor",
    "simulate",
    "simulate_replication",
    "stage_loads",
    "summarise_sweep",
    "sweep",
    "theory",
]

# Public names imported on first use: name -> (module, attribute; None for the module itself).
_LAZY = {
    "Calibration": ("analysis.calibrate", "Calibration"),
    "calibrate": ("analysis.calibrate", "calibrate"),
    "RunTrace": ("workloads.traces.runtrace", "RunTrace"),
    "StageTrace": ("workloads.traces.runtrace", "StageTrace"),
    "TraceRecorder": ("workloads.traces.runtrace", "TraceRecorder"),
    "Comparison": ("analysis.compare", "Comparison"),
    "compare": ("analysis.compare", "compare"),
    "WarmupCut": ("analysis.warmup", "WarmupCut"),
    "detect_warmup": ("analysis.warmup", "detect_warmup"),
    "mser5": ("analysis.warmup", "mser5"),
    "ChainSimulationResult": ("running.chained", "ChainSimulationResult"),
    "Finding": ("analysis.diagnostics.diagnose", "Finding"),
    "diagnose": ("analysis.diagnostics.diagnose", "diagnose"),
    "findings_frame": ("analysis.diagnostics.diagnose", "findings_frame"),
    "format_findings": ("analysis.diagnostics.diagnose", "format_findings"),
    "scheduler_executor": ("executors.cluster", "scheduler_executor"),
    "Plan": ("analysis.planning.result", "Plan"),
    "SLO": ("analysis.planning.slo", "SLO"),
    "plan": ("analysis.planning.plan", "plan"),
    "RunCache": ("executors.run_cache", "RunCache"),
    "simulate_replication": ("analysis.sweep", "simulate_replication"),
    "summarise_sweep": ("analysis.sweep", "summarise_sweep"),
    "sweep": ("analysis.sweep", "sweep"),
    "theory": ("analysis.theory", None),
    "StageSpec": ("workloads.stages", "StageSpec"),
    "StageLoad": ("analysis.diagnostics.bottleneck", "StageLoad"),
    "stage_loads": ("analysis.diagnostics.bottleneck", "stage_loads"),
    "TraceWorkload": ("workloads.traces.replay", "TraceWorkload"),
    "InconsistentWorkloadWarning": ("workloads.fitting", "InconsistentWorkloadWarning"),
    "exact_fcfs_waits": ("workloads.traces.replay", "exact_fcfs_waits"),
    "load_trace": ("workloads.traces.replay", "load_trace"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(f"{__name__}.{module_name}")
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
