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
from .._lazy import lazy_names

require("pipeline.sim", "sim")  # before numpy is imported: one ImportError naming the extra
del require  # a check, not a name of this package

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
from .workloads.downstream import Downstream
from .workloads.failures import (
    IndependentFailures,
    NoFailures,
    Overload,
    PermanentFailures,
    ScriptedFailures,
    TokenQuota,
)
from .workloads.faults import CapacityDrop, LoadSpike
from .workloads.scenario import Scenario

# The names _LAZY loads on first use, written out for editors and type checkers, which
# follow these imports to each name's definition (tests/test_lazy_imports.py keeps the two
# lists the same names from the same modules).
if TYPE_CHECKING:
    from .analysis import theory
    from .analysis.compare import compare
    from .analysis.diagnostics.bottleneck import stage_loads
    from .analysis.diagnostics.diagnose import diagnose
    from .analysis.mitigations import compare_controls
    from .analysis.planning.plan import plan
    from .analysis.planning.result import Plan
    from .analysis.planning.slo import SLO
    from .analysis.recovery_map import recovery_map
    from .analysis.sweep import simulate_replication, sweep
    from .analysis.warmup import detect_warmup
    from .calibration.recorded import calibrate
    from .vloop import run_virtual
    from .workloads.stages import StageSpec
    from .workloads.traces.replay import load_trace
    from .workloads.traces.runtrace import TraceRecorder
del TYPE_CHECKING  # a switch for the block above, not a name of this package

# What a notebook or a capacity study reaches for: run (Scenario ... run_virtual), build
# the traffic (distributions, arrivals, failure models, traces), and read the results
# (theory, sweeps, plans, diagnostics, warm-up, comparison, calibration), and overload
# (a downstream, its faults, a recovery map, the controls compared). The rest has a
# namespace of its own: pipeline.sim.calibration (telemetry read and fitted, a day's
# curve, a window of a trace, a run as Prometheus would answer for it),
# pipeline.sim.analysis (a sweep's table, findings as text, an SLO metric's value),
# pipeline.sim.executors (a cache of runs, a Dask cluster) and pipeline.sim.stats
# (confidence intervals). The rest of the catalogue (Deterministic, Uniform, Hangs,
# MarkovModulated, result and record types, ...) is importable from its module under
# pipeline.sim.workloads, .running and .analysis.
__all__ = [
    "SLO",
    "CapacityDrop",
    "Constant",
    "Downstream",
    "DrainTimeoutWarning",
    "Empirical",
    "Exponential",
    "Gamma",
    "IndependentFailures",
    "ItemClass",
    "LoadSpike",
    "LogNormal",
    "NoFailures",
    "OnOff",
    "Overload",
    "PermanentFailures",
    "Plan",
    "Poisson",
    "Scenario",
    "ScriptedFailures",
    "StageSpec",
    "TimeVarying",
    "TokenQuota",
    "Trace",
    "TraceRecorder",
    "calibrate",
    "compare",
    "compare_controls",
    "detect_warmup",
    "diagnose",
    "load_trace",
    "parse_distribution",
    "plan",
    "recovery_map",
    "run_virtual",
    "simulate",
    "simulate_replication",
    "stage_loads",
    "sweep",
    "theory",
]

# Public names imported on first use: name -> (module, attribute; None for the module itself).
_LAZY = {
    # The virtual loop runs the asyncio engine; the kernel's runs need none of it (start-up).
    "run_virtual": ("vloop", "run_virtual"),
    "calibrate": ("calibration.recorded", "calibrate"),
    "TraceRecorder": ("workloads.traces.runtrace", "TraceRecorder"),
    "compare": ("analysis.compare", "compare"),
    "compare_controls": ("analysis.mitigations", "compare_controls"),
    "detect_warmup": ("analysis.warmup", "detect_warmup"),
    "diagnose": ("analysis.diagnostics.diagnose", "diagnose"),
    "Plan": ("analysis.planning.result", "Plan"),
    "SLO": ("analysis.planning.slo", "SLO"),
    "plan": ("analysis.planning.plan", "plan"),
    "recovery_map": ("analysis.recovery_map", "recovery_map"),
    "simulate_replication": ("analysis.sweep", "simulate_replication"),
    "sweep": ("analysis.sweep", "sweep"),
    "theory": ("analysis.theory", None),
    "StageSpec": ("workloads.stages", "StageSpec"),
    "stage_loads": ("analysis.diagnostics.bottleneck", "stage_loads"),
    "load_trace": ("workloads.traces.replay", "load_trace"),
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals(), __all__)
del lazy_names  # the package's own machinery, not a name of it
