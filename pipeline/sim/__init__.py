"""Virtual-time simulation of the unchanged pipeline engine.

An hour of traffic through the real :class:`~pipeline.Pipeline` takes a
fraction of a second: a virtual clock (:mod:`~pipeline.sim.vloop`) jumps to
the next timer, arrival processes and service-time distributions drive the
engine, and a recorder turns its events into exact per-item records and
time series. :mod:`~pipeline.sim.theory` holds the queueing formulas the
results are checked against.

What ``python -m pipeline simulate`` needs is imported at once; sweeps
(process pools), traces and diagnostics are imported on first use of one of
their names (``pipeline.sim.sweep`` and friends work as before).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from .arrivals import (
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
from .distributions import (
    Constant,
    Distribution,
    Empirical,
    Exponential,
    Gamma,
    LogNormal,
    Uniform,
    parse_distribution,
)
from .failures import (
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
from .scenario import Scenario, ServiceTrace
from .simulate import Replications, SimulationResult, simulate
from .vloop import VirtualEventLoop, new_virtual_loop, run_virtual

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
]

# Public names imported on first use: name -> submodule that defines it.
_LAZY = {
    "Finding": "diagnostics",
    "diagnose": "diagnostics",
    "findings_frame": "diagnostics",
    "format_findings": "diagnostics",
    "simulate_replication": "sweep",
    "summarise_sweep": "sweep",
    "sweep": "sweep",
    "ScriptedFailures": "trace",
    "TraceWorkload": "trace",
    "exact_fcfs_waits": "trace",
    "load_trace": "trace",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """This package's module type: importing a submodule never hides the function it exports.

    ``pipeline.sim.sweep`` is the function ``sweep``, as it was when the
    package imported it eagerly. Python binds a submodule to its parent's
    attribute when it is first imported (here, lazily, or by anyone's
    ``import pipeline.sim.sweep``); that binding is skipped for names this
    package exports, so they keep meaning the function.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
