"""The package's import graph has no cycle, counting imports inside functions.

Every module of ``pipeline`` is read as source (nothing is imported), and each
``import`` is an edge from the module to the module it names: at module level
and inside functions alike, except under ``if TYPE_CHECKING:``, which never
runs. ``from package import name`` is an edge to ``package.name`` when that
is a module, else to ``package``. A package's ``__init__`` is a module like
any other, but importing ``a.b.c`` is not counted as importing ``a`` and
``a.b`` (every package would otherwise be a cycle with its own children).

An import inside a function hides nothing only when it is there for a reason
other than a cycle; each one is listed in :data:`DEFERRED` with that reason,
and an unlisted one fails the test, as does a listed one that is gone.
No module imports a name with a leading underscore from another module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "pipeline"

# Why an import is inside a function. Key: (module, function, imported module). Each
# reason was checked when written: importing the module alone does not load the target
# (or, for LIVE_LEAN, the module's own imports do not); an import that was loaded anyway
# has moved to module level.
CLI_FIRST = (
    "the command line checks every flag before it loads numpy and the simulator, so a bad "
    "flag answers at once; the JSON path loads only what it needs (tests/test_lazy_imports.py)"
)
INGEST_FIRST = (
    "python -m pipeline.examples.ingest checks its flags (exit status 2 on a bad one) before "
    "it loads aiohttp, the API server, the sink and the twin"
)
OPTIONAL = "an optional dependency (an extra: dask, ipywidgets) that only this function needs"
POOL_ONLY = (
    "multiprocessing and concurrent.futures.process load only when runs go to a process "
    "pool (tests/test_lazy_imports.py)"
)
CHAIN_ONLY = "chains (pipeline.chain, the chained runner) load only for a chained scenario"
KERNEL_ONLY = 'the kernel loads only when a run is given to it (engine="asyncio" never is)'
GUARD_EXACT = (
    "the kernel's exact rates (64-bit integers) are worked out only for a retry budget or a "
    "breaker, to say whether the kernel can run them"
)
KERNEL_PATH = (
    "each of the kernel's paths loads when a run takes it: the FCFS recursion, or the "
    "replay (compiled or plain) and a chain's report"
)
PLAN_OUTPUTS = (
    "a Plan's tables (pandas, through sweep), its figure (matplotlib) and its HTML report "
    "load only when asked for; plan() and the command line's text need none of them"
)
DRAWN_BY_VIZ = (
    "a Plan and its Sensitivity are drawn by pipeline.viz (the frontier, the tornado, "
    "report.html): their figure() and to_html() load it when called, so the simulation "
    "layer imports no matplotlib (tests/sim/analysis/planning/test_plan_layers.py)"
)
CSV_ONLY = "the csv module and the column reader load only for values read from a file"
VIZ_ANALYSIS = (
    "import pipeline.viz loads every figure module; the analysis one figure draws "
    "(queueing formulas, MSER-5) loads when that figure is drawn"
)
THEORY_NAME = (
    "pipeline.sim.theory is a lazy name: taking it at import would load the queueing "
    "formulas for every lesson widget, not only the two that draw them"
)
THEORY_CHECK = (
    "the queueing formulas load only when the queue-saturated check suggests a maxsize; "
    "diagnose() on a run that sheds nothing never needs them"
)
LIVE_ON_USE = (
    "the live monitor (pipeline.viz.live) loads when a live run starts, not with every "
    "import pipeline.viz"
)
LIVE_LEAN = (
    "pipeline.viz.live imports neither numpy nor matplotlib at module level (it watches "
    "real-time engine runs; its own numpy and matplotlib imports wait too): only its "
    "figure and summary functions load them"
)
ENGINE_ONLY = (
    "the virtual loop and the OpenMetrics writer load only for a run on the engine or an "
    "export: the kernel's simulate starts without them (start-up)"
)
FEATURE_ONLY = (
    "a run's downstream and its autoscaled pool's trace load only for a scenario with a "
    "downstream or an autoscaler: a plain engine run pays neither import"
)
REASONS = (
    ENGINE_ONLY,
    FEATURE_ONLY,
    CLI_FIRST,
    INGEST_FIRST,
    OPTIONAL,
    POOL_ONLY,
    CHAIN_ONLY,
    KERNEL_ONLY,
    KERNEL_PATH,
    GUARD_EXACT,
    PLAN_OUTPUTS,
    DRAWN_BY_VIZ,
    CSV_ONLY,
    VIZ_ANALYSIS,
    THEORY_NAME,
    THEORY_CHECK,
    LIVE_ON_USE,
    LIVE_LEAN,
)

DEFERRED: dict[tuple[str, str, str], str] = {
    ("pipeline.cli.axes", "axis_change", "pipeline.sim.workloads.failures"): CLI_FIRST,
    ("pipeline.cli.output", "run_length_notes", "pipeline.sim.stats.runlength"): CLI_FIRST,
    ("pipeline.cli.classes", "_one_class", "pipeline.sim.workloads.classes"): CLI_FIRST,
    ("pipeline.cli.downstream", "_one_fault", "pipeline.sim.workloads.faults"): CLI_FIRST,
    ("pipeline.cli.downstream", "parse_downstream", "pipeline.sim.workloads.downstream"): CLI_FIRST,
    ("pipeline.cli.output", "_summary_of", "pipeline.sim.stats.intervals"): CLI_FIRST,
    ("pipeline.cli.output", "write_out", "pipeline.viz.figures.run"): CLI_FIRST,
    ("pipeline.cli.output", "write_out", "pipeline.viz.figures.stages"): CLI_FIRST,
    ("pipeline.cli.plan_settings", "read_cost", "pipeline.sim.analysis.planning.cost"): CLI_FIRST,
    (
        "pipeline.cli.plan_settings",
        "_check_cost",
        "pipeline.sim.analysis.planning.cost",
    ): CLI_FIRST,
    ("pipeline.cli.plan_report", "write_report_files", "pipeline.viz.report.page"): PLAN_OUTPUTS,
    ("pipeline.cli.sweep", "_summary_metrics", "pipeline.sim.running.class_summary"): CLI_FIRST,
    ("pipeline.cli.sweep", "_summary_metrics", "pipeline.sim.running.result"): CLI_FIRST,
    (
        "pipeline.sim.analysis.planning.result",
        "sensitivity",
        "pipeline.sim.analysis.planning.sensitivity",
    ): PLAN_OUTPUTS,
    ("pipeline.sim.analysis.planning.result", "to_html", "pipeline.viz.report.page"): DRAWN_BY_VIZ,
    (
        "pipeline.sim.analysis.planning.sensitivity",
        "figure",
        "pipeline.viz.figures.tornado",
    ): DRAWN_BY_VIZ,
    ("pipeline.cli.plan", "_run", "pipeline.sim.analysis.planning.plan"): CLI_FIRST,
    ("pipeline.cli.plan", "_run", "pipeline.sim.executors.cluster"): OPTIONAL,
    ("pipeline.cli.settings", "_chain_scenario", "pipeline.sim.workloads.scenario"): CLI_FIRST,
    ("pipeline.cli.settings", "build_scenario", "pipeline.sim.workloads.failures"): CLI_FIRST,
    ("pipeline.cli.settings", "_scenario", "pipeline.sim.workloads.scenario"): CLI_FIRST,
    ("pipeline.cli.settings", "_scenario", "pipeline.sim.workloads.traces.replay"): CLI_FIRST,
    ("pipeline.cli.calibrate", "_calibrate", "pipeline.sim.calibration.telemetry"): CLI_FIRST,
    ("pipeline.cli.calibrate", "_calibrate", "pipeline.sim.workloads.telemetry"): CLI_FIRST,
    ("pipeline.cli.calibrate", "scenario_file", "pipeline.sim.workloads.arrivals"): CLI_FIRST,
    ("pipeline.cli.calibrate", "scenario_file", "pipeline.sim.workloads.distributions"): CLI_FIRST,
    ("pipeline.cli.simulate", "_run", "pipeline.sim.analysis.diagnostics.diagnose"): CLI_FIRST,
    ("pipeline.cli.simulate", "_simulate", "pipeline.sim.workloads.randomness"): CLI_FIRST,
    ("pipeline.cli.simulate", "_run", "pipeline.sim.running.openmetrics"): CLI_FIRST,
    ("pipeline.cli.simulate", "_run", "pipeline.sim.running.result"): CLI_FIRST,
    ("pipeline.cli.simulate", "_run", "pipeline.sim.running.simulate"): CLI_FIRST,
    ("pipeline.cli.stages", "_fan_out", "pipeline.sim.workloads.stages"): CLI_FIRST,
    ("pipeline.cli.stages", "_one_stage", "pipeline.sim.workloads.failures"): CLI_FIRST,
    ("pipeline.cli.stages", "_one_stage", "pipeline.sim.workloads.stages"): CLI_FIRST,
    ("pipeline.cli.sweep", "_plot_axes", "pipeline.viz.figures.sweep"): CLI_FIRST,
    ("pipeline.cli.sweep", "_points", "pipeline.sim.stats.intervals"): CLI_FIRST,
    ("pipeline.cli.sweep", "_points", "pipeline.sim.running.drain_warning"): CLI_FIRST,
    ("pipeline.cli.sweep", "_table", "pipeline.sim.running.drain_warning"): CLI_FIRST,
    ("pipeline.cli.sweep", "_summary_metrics", "pipeline.sim.running.simulate"): CLI_FIRST,
    ("pipeline.cli.sweep", "_sweep_frame", "pipeline.sim.analysis.sweep"): CLI_FIRST,
    ("pipeline.cli.sweep", "_sweep_frame", "pipeline.sim.executors.cluster"): OPTIONAL,
    ("pipeline.cli.sweep", "_write_files", "pipeline.viz.figures.sweep"): CLI_FIRST,
    ("pipeline.cli.values", "_arrivals", "pipeline.sim.workloads.arrivals"): CLI_FIRST,
    ("pipeline.cli.values", "_item_size", "pipeline.sim.workloads.scenario"): CLI_FIRST,
    ("pipeline.cli.values", "_items", "pipeline.sim.workloads.scenario"): CLI_FIRST,
    ("pipeline.cli.values", "_backlog", "pipeline.sim.workloads.scenario"): CLI_FIRST,
    ("pipeline.cli.values", "_service", "pipeline.sim.workloads.distributions"): CLI_FIRST,
    ("pipeline.cli.values", "parse_backoff", "pipeline.sim.workloads.distributions"): CLI_FIRST,
    ("pipeline.examples.approval", "approval_widget", "pipeline.sim"): OPTIONAL,
    ("pipeline.examples.approval", "approval_widget", "pipeline.viz.live"): OPTIONAL,
    ("pipeline.examples.approval", "approval_widget", "pipeline.viz.widgets.focused"): OPTIONAL,
    ("pipeline.examples.approval", "approval_widget", "pipeline.viz.widgets.live_run"): OPTIONAL,
    ("pipeline.examples.ingest.__main__", "main", "pipeline.examples.ingest.chain"): INGEST_FIRST,
    ("pipeline.examples.ingest.__main__", "main", "pipeline.examples.ingest.server"): INGEST_FIRST,
    ("pipeline.examples.ingest.__main__", "main", "pipeline.examples.ingest.sink"): INGEST_FIRST,
    ("pipeline.examples.ingest.__main__", "main", "pipeline.examples.ingest.twin"): INGEST_FIRST,
    ("pipeline.examples.ingest.__main__", "_metrics_server", "pipeline.metrics"): OPTIONAL,
    ("pipeline.lessons.widgets", "knee_widget.draw", "pipeline.sim"): THEORY_NAME,
    ("pipeline.lessons.widgets", "knee_widget.summarise", "pipeline.sim"): THEORY_NAME,
    ("pipeline.lessons.widgets", "retry_widget.summarise", "pipeline.sim"): THEORY_NAME,
    (
        "pipeline.sim.analysis.diagnostics.checks",
        "_maxsize_for",
        "pipeline.sim.analysis.theory",
    ): VIZ_ANALYSIS,
    (
        "pipeline.sim.analysis.planning.result",
        "candidates",
        "pipeline.sim.analysis.sweep",
    ): PLAN_OUTPUTS,
    ("pipeline.sim.analysis.planning.result", "figure", "pipeline.viz.figures.plan"): DRAWN_BY_VIZ,
    (
        "pipeline.sim.analysis.planning.result",
        "report",
        "pipeline.sim.analysis.planning.report",
    ): PLAN_OUTPUTS,
    ("pipeline.sim.analysis.planning.result", "runs", "pipeline.sim.analysis.sweep"): PLAN_OUTPUTS,
    (
        "pipeline.sim.running.chained",
        "simulate_chain",
        "pipeline.sim.running.kernel.run",
    ): KERNEL_ONLY,
    (
        "pipeline.sim.running.engine_choice",
        "run_chosen",
        "pipeline.sim.running.kernel.run",
    ): KERNEL_ONLY,
    (
        "pipeline.sim.running.kernel.run",
        "run_chain_kernel",
        "pipeline.sim.running.kernel.driver",
    ): KERNEL_PATH,
    (
        "pipeline.sim.running.kernel.run",
        "run_chain_kernel",
        "pipeline.chain.report",
    ): CHAIN_ONLY,
    (
        "pipeline.sim.running.kernel.run",
        "run_kernel",
        "pipeline.sim.running.kernel.driver",
    ): KERNEL_PATH,
    (
        "pipeline.sim.running.kernel.run",
        "run_kernel",
        "pipeline.sim.running.kernel.fcfs",
    ): KERNEL_PATH,
    (
        "pipeline.sim.running.kernel.run",
        "_cuts",
        "pipeline.sim.running.kernel.cuts",
    ): KERNEL_PATH,
    (
        "pipeline.sim.running.kernel.run",
        "run_chain_kernel",
        "pipeline.sim.running.kernel.cuts",
    ): KERNEL_PATH,
    (
        "pipeline.sim.running.engine_choice",
        "_exact_fits",
        "pipeline.sim.running.kernel.guard",
    ): GUARD_EXACT,
    (
        "pipeline.sim.running.kernel.run",
        "_merged_series",
        "pipeline.sim.running.kernel.driver",
    ): KERNEL_PATH,
    ("pipeline.sim.running.replications", "replicate", "pipeline.sim.executors.pool"): POOL_ONLY,
    ("pipeline.sim.running.simulate", "simulate", "pipeline.sim.executors.pool"): POOL_ONLY,
    ("pipeline.sim.running.result", "to_openmetrics", "pipeline.sim.running.openmetrics"): (
        ENGINE_ONLY
    ),
    ("pipeline.sim.running.single", "__init__", "pipeline.sim.vloop"): ENGINE_ONLY,
    ("pipeline.sim.running.single", "run_engine", "pipeline.sim.vloop"): ENGINE_ONLY,
    ("pipeline.sim.running.single", "run_engine", "pipeline.sim.running.downstream"): FEATURE_ONLY,
    ("pipeline.sim.running.single", "run_engine", "pipeline.sim.running.pooltrace"): FEATURE_ONLY,
    ("pipeline.sim.running.kernel.run", "_cuts", "pipeline.sim.running.downstream"): FEATURE_ONLY,
    (
        "pipeline.sim.running.kernel.driver",
        "_stage_rows",
        "pipeline.sim.running.downstream",
    ): FEATURE_ONLY,
    (
        "pipeline.sim.running.kernel.letters",
        "_cut_errors",
        "pipeline.sim.running.downstream",
    ): FEATURE_ONLY,
    (
        "pipeline.sim.running.kernel.run",
        "_downstream_stats",
        "pipeline.sim.running.downstream",
    ): FEATURE_ONLY,
    (
        "pipeline.sim.running.kernel.run",
        "_pool_series",
        "pipeline.sim.running.pooltrace",
    ): FEATURE_ONLY,
    ("pipeline.sim.running.single", "_engine_once", "pipeline.sim.vloop"): ENGINE_ONLY,
    ("pipeline.sim.running.single", "simulate_once", "pipeline.sim.running.chained"): CHAIN_ONLY,
    (
        "pipeline.sim.running.single",
        "_kernel_once",
        "pipeline.sim.running.kernel.run",
    ): KERNEL_ONLY,
    (
        "pipeline.sim.running.single",
        "_kernel_summary",
        "pipeline.sim.running.kernel.run",
    ): KERNEL_ONLY,
    (
        "pipeline.sim.workloads.arrivals",
        "from_counts_csv",
        "pipeline.sim.workloads.csvcolumn",
    ): CSV_ONLY,
    (
        "pipeline.sim.workloads.distributions",
        "from_csv",
        "pipeline.sim.workloads.csvcolumn",
    ): CSV_ONLY,
    ("pipeline.viz.figures.theory", "theory_for", "pipeline.sim.analysis.theory"): VIZ_ANALYSIS,
    ("pipeline.viz.figures.warmup", "plot_warmup", "pipeline.sim.analysis.warmup"): VIZ_ANALYSIS,
    ("pipeline.viz.live", "live_figure", "pipeline.viz.figures.panels"): LIVE_LEAN,
    ("pipeline.viz.live", "live_summary", "pipeline.sim.stats.stepstats"): LIVE_LEAN,
    ("pipeline.viz.widgets.live_run", "_run", "pipeline.viz.live"): LIVE_ON_USE,
    ("pipeline.viz.widgets.live_run", "_show", "pipeline.viz.live"): LIVE_ON_USE,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def resolve(module: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".")
    if MODULES[module].name != "__init__.py":
        package.pop()
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str) -> Iterator[tuple[str | None, str, list[str]]]:
    """(function or None, imported module, names taken from it), for every import run."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))

    def walk(node: ast.AST, function: str | None) -> Iterator[tuple[str | None, str, list[str]]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and is_type_checking(child.test):
                for other in child.orelse:
                    yield from walk(other, function)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield function, alias.name, []
            elif isinstance(child, ast.ImportFrom):
                base = resolve(module, child)
                for alias in child.names:
                    if f"{base}.{alias.name}" in MODULES:
                        yield function, f"{base}.{alias.name}", []
                    else:
                        yield function, base, [alias.name]
            inner = function
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = child.name if function is None else f"{function}.{child.name}"
            yield from walk(child, inner)

    yield from walk(tree, None)


def internal(target: str) -> bool:
    return target in MODULES


GRAPH: dict[str, set[str]] = {m: set() for m in MODULES}
FUNCTION_LEVEL: set[tuple[str, str, str]] = set()
PRIVATE: list[str] = []
for _module in MODULES:
    for _function, _target, _names in imports(_module):
        if not internal(_target) or _target == _module:
            continue
        GRAPH[_module].add(_target)
        if _function is not None:
            FUNCTION_LEVEL.add((_module, _function, _target))
        PRIVATE.extend(
            f"{_module} imports {name} from {_target}"
            for name in _names
            if name.startswith("_") and not name.startswith("__")
        )


def cycles() -> list[list[str]]:
    """Each strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(GRAPH[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    return found


def test_the_walk_sees_the_package():
    assert len(MODULES) > 100
    assert "pipeline.sim.running.simulate" in GRAPH["pipeline.sim"]


def test_no_import_cycle():
    assert cycles() == []


def test_every_import_inside_a_function_is_listed_with_its_reason():
    unlisted = sorted(FUNCTION_LEVEL - set(DEFERRED))
    assert unlisted == [], "imports inside functions without a reason in DEFERRED"


def test_every_listed_deferral_is_still_there():
    assert sorted(set(DEFERRED) - FUNCTION_LEVEL) == []


def test_the_library_never_imports_its_examples():
    assert [
        (module, target)
        for module, targets in GRAPH.items()
        if not module.startswith("pipeline.examples")
        for target in targets
        if target.startswith("pipeline.examples")
    ] == []


def test_no_private_name_crosses_a_module():
    assert PRIVATE == []


@pytest.mark.parametrize("reason", sorted(set(DEFERRED.values())))
def test_every_reason_is_one_of_the_stated_ones(reason):
    assert reason in REASONS


def test_the_plan_result_does_not_import_the_search_even_for_types():
    # The result reads candidates (planning.candidate), not the search that made them.
    result = "pipeline.sim.analysis.planning.result"
    tree = ast.parse(MODULES[result].read_text())
    named = {
        f"{resolve(result, node)}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert "pipeline.sim.analysis.planning.plan" not in {n.rsplit(".", 1)[0] for n in named}
    assert "pipeline.sim.analysis.planning.plan" not in named


def test_calibration_is_one_room_beside_analysis():
    # Every fit of a scenario to recorded data lives in pipeline.sim.calibration; it stands
    # beside analysis (neither imports the other) and no layer below imports it.
    room = "pipeline.sim.calibration"
    calibration = {m for m in MODULES if m == room or m.startswith(room + ".")}
    assert {f"{room}.recorded", f"{room}.telemetry", f"{room}.daily"} <= calibration
    below = ("pipeline.sim.running", "pipeline.sim.workloads", "pipeline.sim.stats")
    assert [
        (module, target)
        for module, targets in GRAPH.items()
        if module.startswith((*below, "pipeline.sim.analysis", "pipeline.sim.vloop"))
        for target in targets
        if target in calibration
    ] == []
    assert [
        (module, target)
        for module in calibration
        for target in GRAPH[module]
        if target.startswith("pipeline.sim.analysis")
    ] == []
