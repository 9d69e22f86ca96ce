"""Virtual-time simulation of the unchanged pipeline engine.

An hour of traffic through the real :class:`~pipeline.Pipeline` takes a
fraction of a second: a virtual clock (:mod:`~pipeline.sim.vloop`) jumps to
the next timer, arrival processes and service-time distributions drive the
engine, and a recorder turns its events into exact per-item records and
time series. :mod:`~pipeline.sim.running.kernel` computes the same run exactly, and
much faster, for the scenarios inside its domain (``simulate(engine="auto")``,
the default, picks it). :mod:`~pipeline.sim.analysis.theory` holds the queueing
formulas the results are checked against.
"""

from __future__ import annotations

from .analysis import theory
from .analysis.diagnostics import Finding, diagnose, findings_frame, format_findings
from .analysis.sweep import simulate_replication, summarise_sweep, sweep
from .running.simulate import Replications, SimulationResult, simulate
from .vloop import VirtualEventLoop, new_virtual_loop, run_virtual
from .workloads.arrivals import (
    ArrivalProcess,
    DailyCurve,
    Deterministic,
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
    SimulatedFailure,
    TokenQuota,
)
from .workloads.scenario import Scenario, ServiceTrace
from .workloads.traces import ScriptedFailures, TraceWorkload, exact_fcfs_waits, load_trace

__all__ = [
    "ArrivalProcess",
    "CombinedFailures",
    "Constant",
    "DailyCurve",
    "Deterministic",
    "Distribution",
    "Empirical",
    "Exponential",
    "FailureModel",
    "Finding",
    "Gamma",
    "Hangs",
    "IndependentFailures",
    "LogNormal",
    "MarkovModulated",
    "NoFailures",
    "OnOff",
    "Overload",
    "PermanentFailures",
    "PiecewiseLinear",
    "Poisson",
    "Replications",
    "Scenario",
    "ScriptedFailures",
    "ServiceTrace",
    "SimulatedFailure",
    "SimulationResult",
    "TimeVarying",
    "TokenQuota",
    "Trace",
    "TraceWorkload",
    "Uniform",
    "VirtualEventLoop",
    "daily_curve",
    "diagnose",
    "exact_fcfs_waits",
    "findings_frame",
    "format_findings",
    "load_trace",
    "new_virtual_loop",
    "parse_arrivals",
    "parse_distribution",
    "run_virtual",
    "simulate",
    "simulate_replication",
    "summarise_sweep",
    "sweep",
    "theory",
]
