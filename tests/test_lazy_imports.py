"""Public names load on first use; the command line's JSON path imports only what it needs."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import pipeline
import pipeline.sim

# Not needed to simulate and print a JSON summary.
HEAVY = [
    "multiprocessing",
    "concurrent.futures.process",
    "pipeline.deadletters.export",
    "pipeline.deadletters.jsoncodec",
    "pipeline.sim.analysis.sweep",
    "pipeline.sim.analysis.diagnostics.diagnose",
    "pipeline.sim.workloads.traces.replay",
    "pipeline.sim.analysis.theory",
    "pipeline.sim.analysis.planning.slo_table",
    "pipeline.sim.calibration.daily",
    "pipeline.sim.workloads.traces.window",
    "pipeline.sim.analysis.planning.plan",
    "pipeline.chain.chain",  # a single-stage run needs no chain of stages
    "pipeline.chain.report",
    "pipeline.sim.running.chained",
    "pipeline.sim.running.downstream",  # the run of a scenario's downstream
    "pipeline.sim.running.pooltrace",  # an autoscaled pool's series
    "distributed",
    "aiohttp",
    "numpy.ma",  # np.percentile and np.unique import it: 6 ms of start-up
    "pandas",
    "matplotlib",
]


def run_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_the_json_path_imports_nothing_it_does_not_need():
    code = f"""
import contextlib, io, json, sys
from pipeline.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    main(["simulate", "--arrivals", "poisson:rate=3.2", "--service", "exponential:mean=1.0",
          "--items", "50", "--seed", "1", "--json"])
assert json.loads(out.getvalue())["items_completed"] == 50
print(json.dumps(sorted(set({HEAVY!r}) & set(sys.modules))))
"""
    assert json.loads(run_python(code)) == []


def test_a_summary_with_batch_means_imports_no_numpy_ma():
    # From 10,000 items on, the summary bounds the mean wait and latency by batch means,
    # whose lognormal bound takes two quantiles: np.quantile would import numpy.ma there.
    code = """
import contextlib, io, json, sys
from pipeline.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    main(["simulate", "--arrivals", "poisson:rate=3.2", "--service", "exponential:mean=1.0",
          "--items", "10000", "--seed", "1", "--json"])
assert json.loads(out.getvalue())["wait_mean_ci95_s"] > 0
print(json.dumps("numpy.ma" in sys.modules))
"""
    assert json.loads(run_python(code)) is False


def test_every_public_name_resolves_and_is_listed():
    for module in (pipeline, pipeline.sim):
        for name in module.__all__:
            assert getattr(module, name) is not None, f"{module.__name__}.{name}"
        assert set(module.__all__) <= set(dir(module))
    from pipeline import Scenario, export_jsonl, replay, simulate, sweep
    from pipeline.sim import diagnose, load_trace, simulate_replication

    assert replay.__module__ == export_jsonl.__module__ == "pipeline.deadletters.export"
    assert Scenario is pipeline.sim.Scenario and simulate is pipeline.sim.simulate
    assert sweep is pipeline.sim.sweep and callable(sweep)
    replay = "pipeline.sim.workloads.traces.replay"
    assert load_trace.__module__ == replay
    assert diagnose.__module__ == "pipeline.sim.analysis.diagnostics.diagnose"
    assert simulate_replication.__module__ == "pipeline.sim.analysis.sweep"


def test_star_imports_give_every_public_name():
    code = """
import json
scope = {}
exec("from pipeline import *", scope)
exec("from pipeline.sim import *", scope)
import pipeline, pipeline.sim
missing = [n for n in pipeline.__all__ + pipeline.sim.__all__ if n not in scope]
print(json.dumps(missing))
"""
    assert json.loads(run_python(code)) == []


def test_sweep_stays_the_function_when_its_module_is_imported_first():
    code = """
import importlib, json
import pipeline.sim.analysis.sweep             # the submodule, before the package's name
module = importlib.import_module("pipeline.sim.analysis.sweep")
from pipeline.sim import sweep
import pipeline
print(json.dumps([callable(sweep), sweep is module.sweep, pipeline.sim.sweep is module.sweep,
                  pipeline.sweep is module.sweep]))
"""
    assert json.loads(run_python(code)) == [True, True, True, True]


def test_unknown_names_are_attribute_errors():
    for module in (pipeline, pipeline.sim):
        with pytest.raises(AttributeError, match="no_such_name"):
            module.no_such_name  # noqa: B018


def lazy_and_typed_imports(module) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(name, "module:attribute") pairs of the module's _LAZY table and TYPE_CHECKING imports.

    Both are read from the source: the table as written, the imports as an editor and a type
    checker follow them. A module itself (``theory``) is spelled as its package's attribute.
    """
    package = module.__name__
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    table = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["_LAZY"]
    )
    lazy = set()
    for name, where in ast.literal_eval(table).items():
        home, attribute = (where, name) if isinstance(where, str) else where
        home = importlib.util.resolve_name(home if home.startswith(".") else "." + home, package)
        if attribute is None:
            home, _, attribute = home.rpartition(".")
        lazy.add((name, f"{home}:{attribute}"))
    blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    assert len(blocks) == 1, f"{package}: one `if TYPE_CHECKING:` block, found {len(blocks)}"
    typed = set()
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom) and node.level >= 1, ast.unparse(node)
        home = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
        typed |= {(alias.asname or alias.name, f"{home}:{alias.name}") for alias in node.names}
    return lazy, typed


LAZY_PACKAGES = [
    "pipeline",
    "pipeline.sim",
    "pipeline.sim.analysis",
    "pipeline.sim.calibration",
    "pipeline.sim.executors",
]


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_type_checking_imports_name_what_loads_lazily(name):
    module = importlib.import_module(name)
    lazy, typed = lazy_and_typed_imports(module)
    assert sorted(lazy - typed) == [], "in _LAZY, not under TYPE_CHECKING (or another home)"
    assert sorted(typed - lazy) == [], "under TYPE_CHECKING, not in _LAZY (or another home)"
    for name, home in lazy:  # and each home really holds the name the package hands out
        module_name, attribute = home.split(":")
        value = getattr(importlib.import_module(module_name), attribute)
        assert getattr(module, name) is value, f"{module.__name__}.{name} is not {home}"
