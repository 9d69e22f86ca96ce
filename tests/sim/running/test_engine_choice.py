"""Every place that runs a scenario asks one module which engine runs it.

``simulate``, ``simulate_replication``, replications, ``sweep``, ``compare``,
``plan`` (its search) and ``Plan.sensitivity``, chains and the command line all
report the same engine for the same scenario and request, and refuse
``engine="kernel"`` outside the kernel's domain with the same one-line text
(a caller may say where first: ``grid point {...}: ``); and no module but
:mod:`pipeline.sim.running.engine_choice` decides it (no other compares an engine).
"""

from __future__ import annotations

import ast
import json
import warnings
from pathlib import Path

import pytest

from pipeline import Backoff, PipelineConfig, RateLimit
from pipeline.cli import main
from pipeline.sim import (
    Constant,
    DrainTimeoutWarning,
    Exponential,
    ItemClass,
    Poisson,
    Scenario,
    StageSpec,
    compare,
    plan,
    simulate,
    sweep,
)
from pipeline.sim.analysis import compare as compare_module
from pipeline.sim.analysis.planning import rounds as rounds_module
from pipeline.sim.analysis.sweep import simulate_replication
from pipeline.sim.running.engine_choice import (
    ENGINES,
    check_engine,
    choose_engine,
    refusal,
    run_chosen,
    unsupported,
)
from pipeline.sim.workloads.failures import Hangs

ROOT = Path(__file__).resolve().parents[3] / "pipeline"

BASE = Scenario(
    arrivals=Poisson(rate=2.0),
    service=Exponential(mean=1.0),
    config=PipelineConfig(concurrency=2),
    n_items=30,
    seed=3,
)


class MyBackoff(Backoff):
    pass


def low_first(payload: int) -> int:
    return payload % 2


def tandem(write: dict | None = None, **scenario) -> Scenario:
    return Scenario(
        arrivals=Poisson(rate=2.0),
        stages=[
            StageSpec(name="fetch", service=Exponential(mean=0.4)),
            StageSpec(
                name="write", service=Exponential(mean=0.3), config=PipelineConfig(**(write or {}))
            ),
        ],
        n_items=scenario.pop("n_items", 30),
        seed=2,
        **scenario,
    )


# A chain whose slow tail is still busy at the drain's deadline: only a run finds that out.
DECLINED = Scenario(
    arrivals=Poisson(rate=2.0),
    stages=[
        StageSpec(name="fetch", service=Constant(0.1), config=PipelineConfig(drain_timeout_s=1.0)),
        StageSpec(
            name="write",
            service=Constant(10.0),
            config=PipelineConfig(concurrency=1, drain_timeout_s=1.0),
        ),
    ],
    n_items=3,
    seed=2,
)

# (case, scenario, the feature that keeps the kernel out or None)
CASES = [
    ("inside", BASE, None),
    ("backlog", BASE.replace(initial_backlog=5), None),
    (
        "classes",
        BASE.replace(
            classes=[ItemClass(name="a", share=1, priority=0), ItemClass(name="b", share=1)]
        ),
        "item classes (Scenario.classes: priorities and patience)",
    ),
    ("priority", BASE.replace(priority=low_first), "priority keys (config.priority)"),
    (
        "rate limit",
        BASE.replace(rate_limit=RateLimit(requests_per_minute=600)),
        "rate limits (config.rate_limit)",
    ),
    ("attempt timeout", BASE.replace(attempt_timeout_s=5.0), None),
    ("deadline", BASE.replace(max_wait_s=5.0), "deadlines (config.max_wait_s)"),
    ("custom backoff", BASE.replace(backoff=MyBackoff()), "a backoff of its own (MyBackoff)"),
    ("hangs", BASE.replace(failures=Hangs(p=0.2, hang_s=2.0)), "hangs (Hangs failures)"),
    ("chain", tandem(), None),
    (
        "chain, one stage outside",
        tandem({"max_wait_s": 5.0}),
        "stage 'write': deadlines (config.max_wait_s)",
    ),
]
IDS = [case for case, _, _ in CASES]


def expected(scenario: Scenario, feature: str | None, engine: str) -> str:
    """The engine ("kernel" or "asyncio") or the refusal's text: the rule, written out."""
    if feature is None:
        return "asyncio" if engine == "asyncio" else "kernel"
    if engine == "kernel":
        assert feature in unsupported(scenario)
        return refusal(unsupported(scenario))
    return "asyncio"


def engines_of(run) -> str:
    """What ``run()`` reports: the engine that ran (all runs agree), or the refusal's text."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DrainTimeoutWarning)
            ran = run()
    except ValueError as exc:
        message = str(exc)
        assert "\n" not in message
        return message
    assert len(ran) == 1, ran
    return ran.pop()


def places(scenario: Scenario, engine: str, monkeypatch) -> dict[str, object]:
    """Each place that runs a scenario, as a call giving the set of engines that ran."""
    chain = scenario.stages is not None
    field = "write.concurrency" if chain else "concurrency"
    value = 1 if chain else 2

    def replications():
        return {
            r.summary["engine"]
            for r in simulate(
                scenario, replications=2, engine=engine, processes=1, progress=False
            ).results
        }

    def a_sweep():
        frame = sweep(scenario, {}, replications=1, processes=1, progress=False, engine=engine)
        return set(frame["engine"])

    def a_compare():
        ran = set()

        def spy(s, r, e):
            summary = run_task(s, r, e)
            ran.add(summary["engine"])
            return summary

        run_task = compare_module.run_task
        with monkeypatch.context() as patch:
            patch.setattr(compare_module, "run_task", spy)
            compare(
                scenario,
                scenario.replace(seed=9),
                metric="items_completed",
                replications=2,
                engine=engine,
                processes=1,
                progress=False,
            )
        return ran

    def planned():
        return plan(
            scenario,
            {field: [value]},
            ["items_completed>=0"],
            replications=3,
            skip_unstable=False,
            processes=1,
            progress=False,
            engine=engine,
        )

    def a_plan():
        return {e for row in planned().candidates["engine"] for e in row.split(",")}

    def a_sensitivity():
        p = planned()
        ran = set()

        def spy(s, r, e, keys):
            summary = summary_once(s, r, e, keys)
            ran.add(summary["engine"])
            return summary

        # the sensitivity measures each move as the plan measures its runs (rounds.measure)
        summary_once = rounds_module.summary_once
        with monkeypatch.context() as patch:
            patch.setattr(rounds_module, "summary_once", spy)
            p.sensitivity(inputs=["arrival_rate"], processes=1)
        return ran

    return {
        "simulate": lambda: {simulate(scenario, engine=engine).summary["engine"]},
        "replications": replications,
        "simulate_replication": lambda: {
            simulate_replication(scenario, 1, engine=engine).summary["engine"]
        },
        "sweep": a_sweep,
        "compare": a_compare,
        "plan": a_plan,
        "sensitivity": a_sensitivity,
    }


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("case", "scenario", "feature"), CASES, ids=IDS)
def test_every_place_reports_the_same_engine_or_refusal(
    monkeypatch, case, scenario, feature, engine
):
    want = expected(scenario, feature, engine)
    chosen = engines_of(lambda: {choose_engine(scenario, engine).engine})
    assert chosen == want
    for place, run in places(scenario, engine, monkeypatch).items():
        if place == "sensitivity" and want not in ENGINES:
            continue  # the plan refused first: there is nothing to move
        got = engines_of(run)
        if want in ENGINES:
            assert got == want, (place, got)
        else:  # a place may say where first ("grid point {}: ", "b: ", "search[...] = 2: ")
            assert got.endswith(want), (place, got)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_chain_the_kernel_declines_part_way_is_the_same_everywhere(monkeypatch, engine):
    # choose_engine cannot know (the kernel is chosen); the run declines, and run_chosen
    # gives it to the engine ("auto") or refuses it in one line ("kernel"), for every caller.
    assert choose_engine(DECLINED, engine).engine == (
        "asyncio" if engine == "asyncio" else "kernel"
    )
    seen = {place: engines_of(run) for place, run in places(DECLINED, engine, monkeypatch).items()}
    if engine == "kernel":
        refusals = {
            text.split(": ", 1)[-1] if not text.startswith("engine=") else text
            for place, text in seen.items()
            if place != "sensitivity"
        }
        assert len(refusals) == 1, seen
        (text,) = refusals
        assert text.startswith("engine='kernel' does not support ") and "drain" in text
        assert seen["sensitivity"] == text  # its plan refused in the same words
    else:
        assert set(seen.values()) == {"asyncio"}, seen


def test_run_chosen_falls_back_only_when_the_kernel_declines():
    from pipeline.sim.running.kernel.run import KernelDeclined

    def declines():
        raise KernelDeclined("a drain that reaches its timeout (drain_timeout_s)")

    assert run_chosen(BASE, "auto", declines, lambda: "asyncio") == "asyncio"
    with pytest.raises(ValueError, match=r"^engine='kernel' does not support a drain that"):
        run_chosen(BASE, "kernel", declines, lambda: "asyncio")
    assert run_chosen(BASE, "kernel", lambda: "kernel", lambda: "asyncio") == "kernel"
    outside = BASE.replace(max_wait_s=1.0)
    assert run_chosen(outside, "auto", declines, lambda: "asyncio") == "asyncio"


@pytest.mark.parametrize("engine", ["fast", "", None, 1, "Kernel", "AUTO"])
def test_a_bad_request_is_named_in_one_line(engine):
    with pytest.raises(ValueError, match=r"^engine must be 'auto', 'asyncio' or 'kernel', got"):
        check_engine(engine)
    with pytest.raises(ValueError, match=r"^engine must be"):
        choose_engine(BASE, engine)


def test_compare_refuses_before_any_run(monkeypatch):
    # b outside the domain: nothing runs, a's replications included.
    def never(*args):
        raise AssertionError("ran")

    monkeypatch.setattr(compare_module, "run_task", never)
    with pytest.raises(ValueError, match=r"^b: engine='kernel' does not support deadlines"):
        compare(
            BASE,
            BASE.replace(max_wait_s=5.0),
            metric="items_completed",
            replications=2,
            engine="kernel",
            processes=1,
            progress=False,
        )


CLI_CASES = [
    ('arrivals = "poisson:rate=2"\nservice = "exponential:mean=1"\nitems = 30\n', None),
    (
        'arrivals = "poisson:rate=2"\nservice = "exponential:mean=1"\nitems = 30\n'
        "[codel]\ntarget_s = 0.5\ninterval_s = 5.0\n",
        "CoDel queue shedding (config.codel)",
    ),
    (
        'arrivals = "poisson:rate=2"\nitems = 30\n\n[[stages]]\nname = "fetch"\n'
        'service = "exponential:mean=0.4"\n\n[[stages]]\nname = "write"\n'
        'service = "exponential:mean=0.3"\nattempt_timeout = 5\n',
        None,  # a stage's attempt timeouts are inside the kernel's domain
    ),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("text", "feature"), CLI_CASES, ids=["inside", "outside", "chain"])
def test_the_command_line_reports_the_same_engine_and_refusal(
    tmp_path, capsys, text, feature, engine
):
    from pipeline._spelling import speaking
    from pipeline.cli.values import flag_spelling

    (tmp_path / "s.toml").write_text(text)
    if feature is not None and engine == "kernel":
        with speaking(flag_spelling):
            want = refusal(feature)
    else:
        want = "asyncio" if engine == "asyncio" or feature is not None else "kernel"
    sweep = ["sweep", "--grid", "item-size=100", "--replications", "1", "--processes", "1"]
    for command in (["simulate"], [*sweep, "--out", str(tmp_path / "sweep")]):
        status = main([*command, str(tmp_path / "s.toml"), "--engine", engine, "--json"])
        out, err = capsys.readouterr()
        if want in ENGINES:
            assert status == 0, err
            assert json.loads(out)["engine"] == want, command
        else:
            assert (status, out) == (2, ""), err
            assert err.strip().endswith(want) and err.count("\n") == 1, (command, err)


def test_the_command_lines_engine_names_are_the_choosers():
    from pipeline.cli.values import ENGINE_NAMES

    assert ENGINE_NAMES == ENGINES


# -- one module decides ------------------------------------------------------------------------

ENGINE_NAMES = {"engine", "ran", "engines"}


def _engine_comparisons(tree: ast.AST) -> list[int]:
    """Lines comparing an engine: ``engine == ...``, ``... != "kernel"``, ``in ENGINES``."""

    def named(node: ast.AST) -> bool:
        if isinstance(node, ast.Name | ast.Attribute):
            return (node.id if isinstance(node, ast.Name) else node.attr) in ENGINE_NAMES
        if isinstance(node, ast.Constant):
            return node.value in ("asyncio", "kernel")  # "auto" names other choices too
        if isinstance(node, ast.Subscript):  # summary["engine"], frame["engine"]
            return isinstance(node.slice, ast.Constant) and node.slice.value in ENGINE_NAMES
        if isinstance(node, ast.Set | ast.Tuple | ast.List):
            return any(named(e) for e in node.elts)
        return False

    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare) and any(named(n) for n in (node.left, *node.comparators))
    ]


def test_no_module_but_the_chooser_compares_an_engine():
    chooser = ROOT / "sim" / "running" / "engine_choice.py"
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == chooser:
            continue
        for line in _engine_comparisons(ast.parse(path.read_text(), str(path))):
            found.append(f"{path.relative_to(ROOT.parent)}:{line}")
    assert found == []


def test_the_scan_sees_each_way_of_comparing_an_engine():
    for source in (
        'engine == "kernel"',
        'x if engine != "asyncio" else y',
        'target.engines == {"asyncio"}',
        'self.engine == "kernel"',
        'value not in ("auto", "asyncio", "kernel")',
        'ran = "asyncio" if engine == "asyncio" else "kernel"',
        'summary["engine"] == x',
    ):
        assert _engine_comparisons(ast.parse(source)) == [1], source
    assert _engine_comparisons(ast.parse('summary["engine"]; engine = "auto"')) == []


def test_the_cost_guess_that_sizes_a_pool_is_for_the_engine_that_will_run():
    # A run outside the domain costs the engine's time however it was asked for; one inside
    # costs the kernel's unless the engine was asked for (replications, plan, sensitivity).
    from pipeline.sim.running.replications import SECONDS_PER_ITEM, estimated_seconds

    outside = BASE.replace(rate_limit=RateLimit(requests_per_minute=600))
    for engine in ("auto", "asyncio"):
        assert estimated_seconds(outside, engine, 10) == 300 * SECONDS_PER_ITEM["asyncio"]
    assert estimated_seconds(BASE, "auto", 10) == 300 * SECONDS_PER_ITEM["kernel"]
    assert estimated_seconds(BASE, "asyncio", 10) == 300 * SECONDS_PER_ITEM["asyncio"]


def test_a_plan_refuses_the_kernel_only_for_a_configuration_outside_its_domain():
    # The base is outside twice over, and the search takes both features away: every
    # configuration is inside, so "kernel" runs them all, as "auto" does.
    base = BASE.replace(rate_limit=RateLimit(requests_per_minute=600), max_wait_s=5.0)
    search = {"rate_limit": [None], "max_wait_s": [None]}
    options = dict(replications=3, processes=1, progress=False)
    for engine in ("auto", "kernel"):
        p = plan(base, search, ["items_completed>=0"], engine=engine, **options)
        assert p.candidates["engine"].tolist() == ["kernel"]
    # One value keeps a feature: the configurations with it are outside, and named.
    search = {"rate_limit": [None], "max_wait_s": [None, 5.0]}
    with pytest.raises(ValueError) as caught:
        plan(base, search, ["items_completed>=0"], engine="kernel", **options)
    assert str(caught.value) == (
        "search point {'rate_limit': None, 'max_wait_s': 5.0}: "
        + refusal("deadlines (config.max_wait_s)")
    )
