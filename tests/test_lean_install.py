"""The engine installs alone: no third-party dependency, and one ImportError per missing extra.

A fresh virtualenv gets the package without extras (a wheel built once from
this tree, installed with ``--no-index``: a core dependency could not be
resolved, so it would fail the install) and runs the engine there. The other
tests run in this environment, with a module made missing the way Python
itself honours: ``sys.modules[name] = None`` makes ``import name`` fail.
"""

from __future__ import annotations

import asyncio
import email.parser
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from pipeline._extras import EXTRAS, MissingExtra, installed, missing, require
from tests.together import make_test_steps

ROOT = Path(__file__).resolve().parent.parent

# Imports every module of the engine (all of ``pipeline`` but the parts that need an
# extra), then runs it for real: retries, dead letters, a rate limit, a chain of two
# stages, dead letters written, read back and replayed. Prints the top-level modules it
# imported that are not the standard library's.
CORE_RUN = r"""
import sys
before = set(sys.modules)
import asyncio, importlib, json, os, pkgutil, tempfile

import pipeline
from pipeline import (Backoff, Chain, PipelineConfig, Pipeline, RateLimit, Stage,
                      export_jsonl, load_jsonl, replay)

OPTIONAL = {"pipeline.sim", "pipeline.viz", "pipeline.lessons", "pipeline.examples.ingest",
            "pipeline.metrics", "pipeline.tracing"}
def walk(package):  # not pkgutil.walk_packages: it imports every package, the optional too
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if info.name in OPTIONAL or info.name.endswith(".__main__"):
            continue
        module = importlib.import_module(info.name)
        if info.ispkg:
            walk(module)
walk(pipeline)

async def flaky(x):
    await asyncio.sleep(0)
    if x % 5 == 0:
        raise ValueError(f"item {x} fails every time")
    return x * 2

async def split(x):
    return [x, x + 1000]

async def main():
    quick = Backoff(base_s=0.001)
    config = PipelineConfig(concurrency=3, queue_maxsize=4, max_attempts=2, backoff=quick,
                            rate_limit=RateLimit(requests_per_minute=600_000))
    report = await Pipeline(flaky, config).run(range(20))
    chain = Chain([Stage("split", split, PipelineConfig(concurrency=2, queue_maxsize=2),
                         fan_out=True),
                   Stage("work", flaky, PipelineConfig(concurrency=2, queue_maxsize=2,
                                                       max_attempts=1))])
    chained = await chain.run(range(10))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "dead.jsonl")
        export_jsonl(report.dead_letters, path)
        again = await replay(load_jsonl(path), flaky, config)
    return report, chained, again

report, chained, again = asyncio.run(main())
assert (report.completed, len(report.dead_letters)) == (16, 4), report
assert chained.balanced and chained.stages["work"].completed == 16, chained
assert len(again.dead_letters) == 4, again
imported = {m.split(".")[0] for m in set(sys.modules) - before}
print(json.dumps(sorted(imported - set(sys.stdlib_module_names) - {"pipeline"})))
"""

# What a user without extras sees of the optional parts.
WITHOUT_EXTRAS = r"""
import json, sys
import pipeline
seen = {}
for part in ("pipeline.sim", "pipeline.viz", "pipeline.lessons", "pipeline.examples.ingest",
             "pipeline.metrics", "pipeline.tracing"):
    try:
        __import__(part)
    except ImportError as error:
        seen[part] = [type(error).__name__, str(error), part in sys.modules]
try:
    pipeline.Scenario
except ImportError as error:
    seen["pipeline.Scenario"] = [type(error).__name__, str(error), "pipeline.sim" in sys.modules]
scope = {}
exec("from pipeline import *", scope)
seen["star"] = sorted(set(pipeline.__all__) - set(scope))
seen["dir"] = sorted({"Scenario", "simulate", "sweep"} & set(dir(pipeline)))
print(json.dumps(seen))
"""

SCENARIO = ["--arrivals", "poisson:rate=3", "--service", "exponential:mean=1",
            "--items", "20", "--seed", "1"]  # fmt: skip
SIMULATE = ["simulate", *SCENARIO, "--json"]
SWEEP = ["sweep", *SCENARIO, "--grid", "concurrency=1,2", "--json"]
PLAN = ["plan", *SCENARIO, "--search", "concurrency=1..4", "--slo", "wait_mean_s<=1", "--json"]
CALIBRATE = ["calibrate", "range.json", "--format", "prometheus", "--json"]
COMMANDS = {"simulate": SIMULATE, "sweep": SWEEP, "plan": PLAN, "calibrate": CALIBRATE}


def run(python: Path | str, code: str, *, cwd: Path) -> str:
    done = subprocess.run(
        [str(python), "-I", "-c", code], capture_output=True, text=True, cwd=cwd, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def blocked(modules: list[str], code: str) -> str:
    """``code`` run in this environment with ``modules`` missing (and the worktree importable)."""
    return (
        f"import sys\nsys.modules.update(dict.fromkeys({modules!r}))\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n{code}"
    )


# -- a fresh virtualenv -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a virtualenv with only pipeline-lab in it, the wheel it was installed from)."""
    work = tmp_path_factory.mktemp("lean")
    source = work / "source"  # a copy, so the build writes nothing into the tree
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "pipeline", source / "pipeline", ignore=shutil.ignore_patterns("__pycache__")
    )
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    # setuptools from this environment (the [test] extra has it): no download to build.
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"), "."],
        cwd=source, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = (work / "dist").glob("pipeline_lab-*.whl")
    env = work / "venv"
    venv.create(env, with_pip=False)  # nothing but the standard library in it
    python = env / "bin" / "python"
    # --no-index without --no-deps: a dependency of the core could not be found, so it
    # would fail this install; this environment's pip installs into the new one.
    done = subprocess.run(
        [*pip, "--python", str(python), "install", "--no-index", str(wheel)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return python, wheel


@pytest.mark.install
def test_the_wheel_requires_nothing_without_an_extra(lean):
    _, wheel = lean
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(archive.read(name).decode())
    requires = metadata.get_all("Requires-Dist") or []
    assert requires, "the extras are missing from the metadata"
    assert [r for r in requires if "extra ==" not in r] == []
    assert set(EXTRAS) <= set(metadata.get_all("Provides-Extra"))


@pytest.mark.install
def test_a_real_time_run_imports_only_the_standard_library_in_a_fresh_virtualenv(lean, tmp_path):
    python, _ = lean
    site = run(python, "import pipeline, sys; print(pipeline.__file__)", cwd=tmp_path)
    assert Path(site).is_relative_to(python.parent.parent), "the tree, not the install, ran"
    assert json.loads(run(python, CORE_RUN, cwd=tmp_path)) == []


@pytest.mark.install
def test_each_part_without_its_extra_is_one_import_error_naming_it(lean, tmp_path):
    python, _ = lean
    seen = json.loads(run(python, WITHOUT_EXTRAS, cwd=tmp_path))
    sim = "pipeline.sim needs numpy, pandas and tqdm: pip install 'pipeline-lab[sim]'"
    assert seen["pipeline.sim"] == ["MissingExtra", sim, False]  # nothing left half-imported
    assert seen["pipeline.Scenario"] == ["MissingExtra", sim, False]
    assert seen["pipeline.viz"][1].endswith("pip install 'pipeline-lab[viz]'")
    assert seen["pipeline.lessons"][1].endswith("pip install 'pipeline-lab[viz]'")
    assert seen["pipeline.examples.ingest"][1].endswith("pip install 'pipeline-lab[twin]'")
    assert seen["pipeline.metrics"] == [
        "MissingExtra",
        "pipeline.metrics needs numpy and prometheus_client: pip install 'pipeline-lab[metrics]'",
        False,
    ]
    assert seen["pipeline.tracing"] == [
        "MissingExtra",
        "pipeline.tracing needs opentelemetry: pip install 'pipeline-lab[metrics]'",
        False,
    ]
    assert seen["star"] == [] and seen["dir"] == []  # star import and dir() stay honest


@pytest.mark.install
@pytest.mark.parametrize("command", ["simulate", "sweep", "plan", "calibrate"])
def test_the_command_line_without_sim_says_so_in_one_line(lean, tmp_path, command):
    python, _ = lean
    argv = [*COMMANDS[command], "--out", str(tmp_path / "out")]
    done = subprocess.run(
        [str(python), "-I", "-m", "pipeline", *argv], capture_output=True, text=True, cwd=tmp_path
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "pipeline: error: pipeline.sim needs numpy, pandas and tqdm: "
        "pip install 'pipeline-lab[sim]'\n"
    )
    assert not (tmp_path / "out").exists()
    helped = subprocess.run([str(python.parent / "pipeline-lab"), command, "--help"],
                            capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert helped.returncode == 0 and helped.stdout.startswith("usage: pipeline")


# -- this environment ---------------------------------------------------------------------------


def test_a_real_time_run_here_imports_only_the_standard_library(tmp_path):
    # numpy and the rest are installed here: the engine must not pick them up on the way.
    code = f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n{CORE_RUN}"
    assert json.loads(run(sys.executable, code, cwd=tmp_path)) == []


def _name(requirement: str) -> tuple[str, list[str]]:
    match = re.match(r"\s*([A-Za-z0-9._-]+)\s*(?:\[([^\]]*)\])?", requirement)
    assert match, requirement
    extras = [e.strip() for e in (match.group(2) or "").split(",") if e.strip()]
    return re.sub(r"[-_.]+", "-", match.group(1)).lower(), extras


def _distributions(extras: dict[str, list[str]], extra: str) -> set[str]:
    """The distributions ``extra`` installs: its own, its pipeline-lab[...] ones', and the
    distributions a requirement's own extras add (dask[distributed] -> distributed)."""
    found: set[str] = set()
    for requirement in extras[extra]:
        name, wanted = _name(requirement)
        if name == "pipeline-lab":
            for other in wanted:
                found |= _distributions(extras, other)
            continue
        found.add(name)
        for dependency in importlib.metadata.requires(name) or []:
            if any(re.search(rf"extra\s*==\s*['\"]{w}['\"]", dependency) for w in wanted):
                found.add(_name(dependency)[0])
    return found


def test_the_extras_table_is_what_pyproject_installs():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert extras["dependencies"] == []
    extras = extras["optional-dependencies"]
    providers = {
        module: {_name(d)[0] for d in dists}
        for module, dists in importlib.metadata.packages_distributions().items()
    }
    for extra, modules in EXTRAS.items():
        dists = _distributions(extras, extra)
        for module in modules:  # every module checked for is installed by the extra
            assert providers.get(module, set()) & dists, f"[{extra}] does not install {module}"
        # and every distribution the extra installs directly is one the check knows of
        own = {_name(r)[0] for r in extras[extra]} - {"pipeline-lab"}
        known = {d for m in modules for d in providers.get(m, ())} | {"dask"}
        assert own <= known, f"[{extra}] installs {own - known}, not in pipeline._extras"
    for bundle in ("lab", "test"):  # make lab and make test: everything the notebooks need
        assert {"sim", "viz", "twin", "cluster"} <= _extras_of(extras, bundle)
    assert set(EXTRAS) <= _extras_of(extras, "test")
    assert all(installed(extra) for extra in EXTRAS)  # as make test installs it


def _extras_of(extras: dict[str, list[str]], extra: str) -> set[str]:
    found = set()
    for requirement in extras[extra]:
        name, wanted = _name(requirement)
        if name == "pipeline-lab":
            for other in wanted:
                found |= {other} | _extras_of(extras, other)
    return found


def test_the_makefile_installs_every_extra():
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install --quiet -e '.[lab,test]'" in makefile


def _make_dry_run(target: str, tmp_path: Path) -> str:
    """What ``make TARGET`` would run on a fresh clone (no .venv yet): ``make -n``."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    done = subprocess.run(
        [shutil.which("make"), "-n", target, "PYTHON=python3"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=True,
    )
    return done.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_lab_installs_the_notebooks_needs_and_no_more(tmp_path):
    lab = _make_dry_run("lab", tmp_path)
    installs = [line for line in lab.splitlines() if "pip install" in line and " -e " in line]
    assert installs == [".venv/bin/pip install --quiet -e '.[lab]'"]
    assert "playwright" not in lab and "test]" not in lab
    test = _make_dry_run("test", tmp_path)
    assert ".venv/bin/pip install --quiet -e '.[lab,test]'" in test
    assert "touch .venv/.installed .venv/.lab-installed" in test  # a test install serves the lab
    docs = _make_dry_run("docs", tmp_path)
    assert ".venv/bin/pip install --quiet -e '.[docs]'" in docs


def test_make_test_runs_the_kernels_tests_without_numba_too():
    # The whole suite with numba, the browser and server tests, the site's build and the
    # kernel's tests without numba at the same time (tests/together.py); then what
    # measures, alone. The three selections partition the suite: every test runs once (the
    # later two collect the files that may hold their marks: tests/marked_files.py).
    [warm], together, [measured] = make_test_steps()[-3:]
    assert warm == "$(BIN)/python -m tests.warm_kernel"  # numba compiles the replay once, first
    unit, served, site, without = together
    assert unit == (
        "$(BIN)/pytest -n 3 --dist loadfile --no-loadscope-reorder"
        ' -m "not browser and not service and not measures"'
    )
    assert served == (
        '$(BIN)/pytest -n 2 --dist worksteal -m "(browser or service) and not measures"'
        " $$($(BIN)/python -m tests.marked_files browser service)"
    )
    assert site == "$(BIN)/python -m tests.docs.site_builds"  # the site the two then copy
    assert measured == "$(BIN)/pytest -m measures $$($(BIN)/python -m tests.marked_files measures)"
    # numba cannot be imported; the randomized checks run the fast tier's share of examples
    assert without.split()[:3] == [
        "PIPELINE_TEST_WITHOUT_NUMBA=1",
        "PIPELINE_TEST_TIER=fast",
        "$(BIN)/pytest",
    ]
    # what auto picks and what falls back, not the plain replay's equality again (the
    # suite runs the equality files' plain cases, the same code with or without numba)
    named = [word for word in without.split() if word.startswith("tests/")]
    assert named == [
        "tests/sim/running/kernel/test_paths.py",
        "tests/sim/running/kernel/test_kernel_arrays.py",
        "tests/sim/running/kernel/test_summary_once.py",
        "tests/cli/test_cli_golden.py",
    ]
    assert all((ROOT / path).is_file() for path in named)


def test_without_numba_the_suite_cannot_import_it():
    child = subprocess.run(
        [sys.executable, "-c", "import sys, tests.conftest\n"
         "try:\n    import numba\nexcept ImportError:\n    sys.exit(0)\nsys.exit(1)"],
        cwd=ROOT, env=dict(os.environ, PIPELINE_TEST_WITHOUT_NUMBA="1"), timeout=120,
    )  # fmt: skip
    assert child.returncode == 0


@pytest.mark.parametrize(
    ("module", "statement", "part", "extra"),
    [
        ("numpy", "import pipeline.sim", "pipeline.sim", "sim"),
        ("pandas", "import pipeline.sim.workloads.scenario", "pipeline.sim", "sim"),
        ("numpy", "from pipeline import simulate", "pipeline.sim", "sim"),
        ("matplotlib", "import pipeline.viz", "pipeline.viz", "viz"),
        ("ipywidgets", "from pipeline.viz import plot_depth", "pipeline.viz", "viz"),
        ("aiohttp", "import pipeline.examples.ingest.server", "pipeline.examples.ingest", "twin"),
        ("distributed", "from pipeline.sim.executors import scheduler_executor\n"
                        "with scheduler_executor('local'): pass", "the Dask executor", "cluster"),
    ],
)  # fmt: skip
def test_a_missing_module_is_one_import_error_naming_its_extra(module, statement, part, extra):
    code = f"""
import json, sys
def attempt():
    try:
{chr(10).join("        " + line for line in statement.splitlines())}
    except ImportError as error:
        return [type(error).__name__, str(error), error.__cause__ is None]
errors = [attempt(), attempt()]  # the same the second time: nothing half-imported
print(json.dumps(errors))
"""
    first, second = json.loads(run(sys.executable, blocked([module], code), cwd=ROOT))
    assert first == second == [
        "MissingExtra", f"{part} needs {module}: pip install 'pipeline-lab[{extra}]'", True
    ]  # fmt: skip


def test_dir_lists_the_simulation_names_only_where_they_resolve():
    import pipeline

    assert {"Scenario", "simulate", "sweep"} <= set(dir(pipeline))
    code = "import json, pipeline\nprint(json.dumps(sorted(set(dir(pipeline)))))"
    # Both in fresh processes: in this one, earlier tests have imported subpackages
    # (pipeline.chain, ...), which then appear in dir() as attributes.
    with_sim = set(json.loads(run(sys.executable, blocked([], code), cwd=ROOT)))
    without = set(json.loads(run(sys.executable, blocked(["numpy"], code), cwd=ROOT)))
    assert without == with_sim - {"ItemClass", "Scenario", "simulate", "sweep"}


@pytest.mark.parametrize(
    ("module", "argv", "extra"),
    [
        ("numpy", [*SIMULATE, "--out", "{out}"], "sim"),
        ("tqdm", [*SWEEP, "--out", "{out}"], "sim"),
        ("pandas", [*PLAN, "--out", "{out}"], "sim"),
        ("matplotlib", [*SIMULATE, "--out", "{out}"], "viz"),
        ("ipywidgets", [*SIMULATE, "--out", "{out}"], "viz"),  # report.png is pipeline.viz's
        ("matplotlib", [*SWEEP, "--out", "{out}"], "viz"),
        ("ipywidgets", [*SWEEP, "--out", "{out}"], "viz"),  # the heatmaps come from pipeline.viz
        ("matplotlib", [*PLAN, "--out", "{out}"], "viz"),
        ("distributed", [*SWEEP, "--out", "{out}", "--scheduler", "local"], "cluster"),
        ("distributed", [*PLAN, "--out", "{out}", "--scheduler", "local"], "cluster"),
    ],
)
def test_the_command_line_says_a_missing_extra_in_one_line_before_any_work(
    tmp_path, module, argv, extra
):
    out = tmp_path / "out"
    argv = [a.replace("{out}", str(out)) for a in argv]
    code = f"from pipeline.cli import main\nraise SystemExit(main({argv!r}))"
    done = subprocess.run(
        [sys.executable, "-c", blocked([module], code)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("pipeline: error: ")
    assert done.stderr.endswith(f"pip install 'pipeline-lab[{extra}]'\n")
    assert not out.exists()  # nothing ran, nothing written


def test_the_postgres_sink_without_asyncpg_is_one_sink_error(monkeypatch):
    from pipeline.examples.ingest.sink import PostgresSink, SinkError

    monkeypatch.setitem(sys.modules, "asyncpg", None)

    async def enter() -> None:
        async with PostgresSink("postgresql://user@127.0.0.1:1/none"):
            pass

    with pytest.raises(SinkError, match=re.escape("pip install 'pipeline-lab[postgres]'")):
        asyncio.run(enter())


def test_the_helper_names_every_missing_module_and_refuses_unknown_extras(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    monkeypatch.setitem(sys.modules, "tqdm", None)
    assert missing("sim") == ["pandas", "tqdm"] and missing("sim", "numpy") == []
    with pytest.raises(MissingExtra) as caught:
        require("pipeline.sim", "sim")
    assert str(caught.value) == (
        "pipeline.sim needs pandas and tqdm: pip install 'pipeline-lab[sim]'"
    )
    assert (caught.value.name, caught.value.extra, caught.value.modules) == (
        "pipeline.sim", "sim", ["pandas", "tqdm"]
    )  # fmt: skip
    assert isinstance(caught.value, ImportError)
    with pytest.raises(ValueError, match="extra must be one of"):
        require("x", "nope")
    with pytest.raises(ValueError, match="modules must come from the 'sim' extra"):
        missing("sim", "matplotlib")
