"""The public API is small and deliberate: each root's ``__all__`` is pinned here.

A name joins or leaves ``pipeline``, ``pipeline.sim`` or ``pipeline.viz`` only
by changing its list below, on purpose. Every listed name imports, ``dir()``
shows what a module offers and nothing it does not, and every notebook and
every Python example in the README and the docs imports only public names:
those of the roots, or of a module listed in :data:`PUBLIC_MODULES` with the
reason it is public.
"""

from __future__ import annotations
import __future__

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent

PIPELINE = [
    "AIMD",
    "Autoscaler",
    "Backoff",
    "Chain",
    "CircuitBreaker",
    "CoDel",
    "DeadLetter",
    "DeadlockError",
    "EventKind",
    "Gradient2",
    "PermanentError",
    "Pipeline",
    "PipelineClosed",
    "PipelineConfig",
    "PipelineError",
    "QueueFull",
    "RateLimit",
    "RateLimited",
    "RetryBudget",
    "RetryLater",
    "RetryPolicy",
    "RunReport",
    "SourceError",
    "Stage",
    "State",
    "Statistics",
    "export_csv",
    "export_jsonl",
    "load_jsonl",
    "replay",
]

SIM = [
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

VIZ = [
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

LESSONS = [
    "FocusedWidget",
    "burst_widget",
    "drain_widget",
    "knee_widget",
    "provider_widget",
    "retry_widget",
    "slider",
]

STATS = [
    "MeanCI",
    "ProportionCI",
    "QuantileCI",
    "batch_means_ci",
    "mean_bounds",
    "mean_ci",
    "paired_difference",
    "proportion_bound",
    "proportion_ci",
    "quantile_ci",
    "robust_mean_ci",
    "summarise_values",
]

# Namespaces of pipeline.sim for what a study needs beyond the root's names.
CALIBRATION = [
    "calibrate",
    "calibrate_observed",
    "fit_daily_curve",
    "openmetrics_series",
    "query_range_answer",
    "read_prometheus",
    "trace_window",
]
ANALYSIS = ["format_findings", "metric_value", "summarise_sweep"]
EXECUTORS = ["RunCache", "scheduler_executor"]

# Its own public module (not a root's name): it needs the [metrics] extra, and a lean
# ``import pipeline`` must not pull prometheus-client in.
METRICS = ["MetricsServer", "serve"]
TRACING = ["Instrumentation", "instrument"]

PINNED = {
    "pipeline": PIPELINE,
    "pipeline.sim": SIM,
    "pipeline.viz": VIZ,
    "pipeline.lessons": LESSONS,
    "pipeline.sim.stats": STATS,
    "pipeline.sim.calibration": CALIBRATION,
    "pipeline.sim.analysis": ANALYSIS,
    "pipeline.sim.executors": EXECUTORS,
    "pipeline.metrics": METRICS,
    "pipeline.tracing": TRACING,
}

# Importable from a root without being in its __all__, and why.
FORWARDED = {
    # Contract names at home in pipeline.sim (they need its extra): out of __all__ so
    # that ``from pipeline import *`` needs the standard library only.
    "pipeline": {"ItemClass", "Scenario", "simulate", "sweep"},
}

# Modules besides the roots that notebooks and examples may import from, and why.
PUBLIC_MODULES = {
    "pipeline": "the engine: real-time pipelines, chains, dead letters",
    "pipeline.sim": "virtual time: scenarios, runs, sweeps, plans, diagnostics",
    "pipeline.viz": "figures and explorers over results, and the notebooks' check",
    "pipeline.lessons": "the notebooks' own one-question widgets (teaching material)",
    "pipeline.lessons.retries": "notebook 03's exercises as their checks and solutions run them",
    "pipeline.sim.stats": "confidence intervals for a study's own replications",
    "pipeline.sim.calibration": "telemetry and recorded traffic fitted, and a run as telemetry",
    "pipeline.sim.analysis": "a sweep's table, findings as text, an SLO metric's value",
    "pipeline.sim.executors": "a cache of runs and a Dask cluster for sweeps and plans",
    "pipeline.metrics": "the Prometheus exporter: serve() and its server, an extra of its own",
    "pipeline.tracing": "OpenTelemetry spans and histograms: instrument(), the [metrics] extra",
    "pipeline.viz.live": "the live view of a real-time run: needs a running loop and a kernel",
    "pipeline.examples.approval": "notebook 07's worked system: the code is the lesson",
    "pipeline.examples.naive": "notebook 03's deadlocking pool: the code is the lesson",
    "pipeline.examples.ingest.chain": "notebook 09's real ingest chain",
    "pipeline.examples.ingest.record": "notebook 09's recording of a real run",
    "pipeline.examples.ingest.server": "notebook 09's partner service",
    "pipeline.examples.ingest.twin": "notebook 09's twin of the ingest chain",
}
# The queueing formulas are public as ``from pipeline.sim import theory`` (``theory.mmc``,
# ...): a module that is itself a name of pipeline.sim, not a path to import from.


def module_all(name: str) -> list[str]:
    return list(importlib.import_module(name).__all__)


# The names DESIGN.md promises from pipeline.sim through any reorganisation.
SIM_CONTRACT = [
    "Constant", "Exponential", "Gamma", "IndependentFailures", "LogNormal",
    "PermanentFailures", "Poisson", "Scenario", "StageSpec", "Trace", "TraceRecorder",
    "calibrate", "detect_warmup", "parse_distribution", "plan", "run_virtual", "simulate",
    "simulate_replication", "stage_loads", "sweep", "theory",
]  # fmt: skip


def test_the_simulation_root_keeps_its_contract_and_stays_small():
    # A root a newcomer can read at a glance: at most 40 names, the rest in namespaces
    # (pipeline.sim.calibration, .analysis, .executors, .stats).
    assert set(SIM_CONTRACT) <= set(SIM)
    assert len(SIM) <= 40


def test_a_name_lives_in_one_public_namespace_of_the_simulation():
    # The namespaces hold what the root does not; calibrate is both (the contract's name in
    # the root, and the room it belongs to).
    roots = ["pipeline.sim", "pipeline.sim.calibration", "pipeline.sim.analysis",
             "pipeline.sim.executors", "pipeline.sim.stats"]  # fmt: skip
    seen: dict[str, list[str]] = {}
    for root in roots:
        for name in PINNED[root]:
            seen.setdefault(name, []).append(root)
    assert {name: where for name, where in seen.items() if len(where) > 1} == {
        "calibrate": ["pipeline.sim", "pipeline.sim.calibration"]
    }


@pytest.mark.parametrize("name", sorted(PINNED))
def test_all_is_pinned(name):
    assert module_all(name) == PINNED[name]


@pytest.mark.parametrize("name", sorted(PINNED))
def test_every_listed_name_imports(name):
    module = importlib.import_module(name)
    for attribute in module.__all__:
        scope: dict[str, object] = {}
        exec(f"from {name} import {attribute}", scope)
        assert scope[attribute] is getattr(module, attribute)


def _shown(module: ModuleType) -> set[str]:
    """Public names ``dir()`` shows, leaving out modules (subpackages, ``logging``)."""
    names = set()
    for name in dir(module):
        if name.startswith("_"):
            continue
        value = getattr(module, name)  # a name dir() shows must be there
        if isinstance(value, ModuleType) and name not in module.__all__:
            continue
        if isinstance(value, __future__._Feature):
            continue
        names.add(name)
    return names


@pytest.mark.parametrize("name", sorted(PINNED))
def test_dir_shows_the_public_names_and_nothing_else(name):
    module = importlib.import_module(name)
    assert _shown(module) == set(module.__all__) | FORWARDED.get(name, set())


@pytest.mark.parametrize("name", sorted(FORWARDED))
def test_forwarded_names_are_the_home_modules_objects(name):
    module = importlib.import_module(name)
    sim = importlib.import_module("pipeline.sim")
    for attribute in FORWARDED[name]:
        assert getattr(module, attribute) is getattr(sim, attribute)


def test_star_import_of_the_core_needs_no_simulation():
    code = (
        "import json, sys\nfrom pipeline import *\n"
        "print(json.dumps(sorted(m for m in ('pipeline.sim', 'numpy') if m in sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


# -- what notebooks and examples import ----------------------------------------------


def _notebook_sources() -> list[tuple[str, str]]:
    sources = []
    for path in sorted((ROOT / "notebooks").glob("**/*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for number, cell in enumerate(cells):
            if cell["cell_type"] != "code":
                continue
            lines = "".join(cell["source"]).splitlines()
            # IPython magics and shell lines are not Python.
            code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines)
            sources.append((f"{path.relative_to(ROOT)} cell {number}", code))
    return sources


_FENCE = re.compile(r"^```(?:python|py|pycon)\s*\n(.*?)^```", re.S | re.M)


def _document_sources() -> list[tuple[str, str]]:
    sources = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]:
        text = path.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            code = match.group(1)
            if code.lstrip().startswith(">>>"):
                code = "\n".join(
                    row[4:] for row in code.splitlines() if row.startswith((">>> ", "... "))
                )
            sources.append((f"{path.relative_to(ROOT)} line {line}", code))
    return sources


def _non_public_imports(where: str, code: str) -> list[str]:
    problems = []
    for node in ast.walk(ast.parse(code, where)):
        if isinstance(node, ast.Import):
            modules = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [(node.module, [alias.name for alias in node.names])]
        else:
            continue
        for module, names in modules:
            if module.split(".")[0] != "pipeline":
                continue
            if module not in PUBLIC_MODULES:
                problems.append(f"{where}: {module} is not a public module")
                continue
            public = module_all(module)
            problems += [
                f"{where}: {module}.{name} is not in its __all__"
                for name in names or []
                if name not in public and name not in FORWARDED.get(module, set())
            ]
    return problems


@pytest.mark.parametrize(
    ("where", "code"),
    [
        pytest.param(where, code, id=where)
        for where, code in _notebook_sources() + _document_sources()
    ],
)
def test_examples_import_only_public_names(where, code):
    assert _non_public_imports(where, code) == []


def test_the_check_sees_deep_imports():
    code = "from pipeline.sim.analysis.planning.slo import SLO\nfrom pipeline import WorkQueue\n"
    assert _non_public_imports("x", code) == [
        "x: pipeline.sim.analysis.planning.slo is not a public module",
        "x: pipeline.WorkQueue is not in its __all__",
    ]


def test_examples_are_found():
    # A glob or fence pattern that matched nothing would pass the test above vacuously.
    notebooks = {where.split(" cell ")[0] for where, _ in _notebook_sources()}
    assert len(notebooks) >= 20
    found = [where for where, _ in _document_sources()]
    assert sum(where.startswith("README.md") for where in found) >= 2  # the thirty seconds
    assert sum(where.startswith("docs/guide/") for where in found) >= 8  # the user guide


@pytest.mark.parametrize("name", sorted(PUBLIC_MODULES))
def test_public_modules_declare_their_names(name):
    assert module_all(name), name
