"""Finding a chain's bottleneck: diagnose(), stage_loads(), plot_stages() and stage sweeps.

One three-stage chain (fetch pages, parse, write records), made slow in turn
at each stage: diagnose() must name that stage, say where the backlog waits
and what to change, with the demanded utilisation within its sampling error
of the truth.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import (
    Constant,
    Exponential,
    IndependentFailures,
    PermanentFailures,
    Poisson,
    Scenario,
    StageSpec,
    Trace,
    diagnose,
    simulate,
    stage_loads,
    sweep,
)
from pipeline.sim.workloads.arrivals import Deterministic
from pipeline.viz import plot_stages
from pipeline.viz.figures.stages import STAGE_ROWS

RATE, FAN_OUT = 2.0, 5  # pages per second at the source; records per page
MEANS = {"fetch": 1.0, "parse": 0.2, "write": 0.5}  # seconds per attempt
N_PAGES = 600


def chain(fetch=4, parse=4, write=8, maxsize=(10, 10, 10), n=N_PAGES, failures=None):
    workers = {"fetch": fetch, "parse": parse, "write": write}
    return Scenario(
        arrivals=Poisson(rate=RATE),
        stages=[
            StageSpec(
                name=name,
                service=Exponential(mean=MEANS[name]),
                config=PipelineConfig(
                    concurrency=workers[name], queue_maxsize=bound, drain_timeout_s=None
                ),
                fan_out=FAN_OUT if name == "fetch" else 1,
                failures=(failures or {}).get(name, IndependentFailures(0.0)),
            )
            for name, bound in zip(MEANS, maxsize, strict=True)
        ],
        n_items=n,
        seed=7,
    )


def demanded(name: str, concurrency: int) -> float:
    """The true demanded utilisation of a stage: its arrival rate x mean service / workers."""
    rate = RATE * (1 if name == "fetch" else FAN_OUT)
    return rate * MEANS[name] / concurrency


# Each stage in turn made the bottleneck (demanded utilisation 1.6-2.0).
SLOW = {
    "fetch": {"fetch": 1},
    "parse": {"parse": 1},
    "write": {"write": 3},
}


@pytest.fixture(scope="module")
def runs():
    return {name: simulate(chain(**change)) for name, change in SLOW.items()}


@pytest.mark.parametrize("slow", list(SLOW))
def test_diagnose_names_the_saturated_stage(runs, slow):
    result = runs[slow]
    (finding,) = [f for f in diagnose(result) if f.code == "BOTTLENECK"]
    assert finding.severity == "critical"
    assert finding.numbers["stage"] == slow
    assert finding.title == f"Stage '{slow}' is the bottleneck"
    # The estimate is arrival rate x mean attempt time: its relative error is about
    # sqrt(1/arrivals + cv^2/attempts) (cv = 1, exponential); allow 4 standard errors.
    concurrency = SLOW[slow][slow]
    attempts = result.report.stages[slow].attempts
    relative_se = math.sqrt(1 / N_PAGES + 1 / attempts)
    truth = demanded(slow, concurrency)
    assert finding.numbers["demanded_utilisation"] == pytest.approx(truth, rel=4 * relative_se)
    # What to change: workers for that stage, enough for about 80%.
    suggested = finding.numbers["suggested_concurrency"]
    assert suggested >= math.ceil(finding.numbers["load"] / 0.8)
    assert f"Add workers to stage '{slow}': concurrency {concurrency} -> {suggested}" in finding.fix
    # With every queue bounded, the backlog ends up at the source.
    assert finding.numbers["backlog_where"].startswith("upstream at the source")


def stated_busy(fix: str) -> float:
    """The share busy the advice states for the suggested workers ("about 66.1% busy")."""
    match = re.search(r"concurrency \d+ -> \d+ \(about ([0-9.]+)% busy at this load\)", fix)
    assert match, fix
    return float(match.group(1)) / 100


@pytest.mark.parametrize("slow", list(SLOW))
def test_the_advice_states_the_utilisation_the_suggested_workers_give(runs, slow):
    (finding,) = [f for f in diagnose(runs[slow]) if f.code == "BOTTLENECK"]
    busy = finding.numbers["load"] / finding.numbers["suggested_concurrency"]
    assert stated_busy(finding.fix) == pytest.approx(busy, abs=0.0005)


def test_a_load_of_two_on_one_worker_is_advised_at_the_share_it_really_gives():
    # Deterministic: one item per second, 2 s each at 'write': a load of exactly 2 workers.
    scenario = Scenario(
        arrivals=Deterministic(rate=1.0),
        stages=[
            # The chain drains within its first stage's drain_timeout_s.
            StageSpec(
                name="fetch",
                service=Constant(0.1),
                config=PipelineConfig(drain_timeout_s=None),
            ),
            StageSpec(name="write", service=Constant(2.0), config=PipelineConfig(concurrency=1)),
        ],
        n_items=100,
        seed=1,
    )
    (finding,) = [f for f in diagnose(simulate(scenario)) if f.code == "BOTTLENECK"]
    load, workers = finding.numbers["load"], finding.numbers["suggested_concurrency"]
    assert load == pytest.approx(2.0, rel=0.02)
    assert stated_busy(finding.fix) == pytest.approx(load / workers, abs=0.0005)


def nothing_reaches_write(arrivals, n):
    """'fetch' dead-letters every item: no item ever reaches 'write'."""
    return Scenario(
        arrivals=arrivals,
        stages=[
            StageSpec(
                name="fetch",
                service=Constant(0.5),
                config=PipelineConfig(concurrency=1, max_attempts=1),
                failures=PermanentFailures(1.0),
            ),
            StageSpec(name="write", service=Exponential(mean=0.1)),
        ],
        n_items=n,
        seed=3,
    )


@pytest.mark.parametrize(
    "scenario",
    [
        nothing_reaches_write(Poisson(rate=1.0), 50),  # a rate: demanded utilisation
        nothing_reaches_write(Poisson(rate=4.0), 50),  # 'fetch' overloaded: advice given
        nothing_reaches_write(Trace([0.0] * 20), 20),  # a batch: capacities
    ],
    ids=["keeps-up", "overloaded", "batch"],
)
@pytest.mark.parametrize("engine", ["kernel", "asyncio"])
def test_a_stage_no_item_reached_is_said_so_never_nan(scenario, engine):
    result = simulate(scenario, engine=engine)
    (finding,) = [f for f in diagnose(result) if f.code == "BOTTLENECK"]
    assert finding.numbers["stage"] == "fetch"
    text = " ".join((finding.title, finding.evidence, finding.explanation, finding.fix))
    assert not re.search(r"\bnan\b|\binf\b", text, re.IGNORECASE), text
    assert "'write' (no item reached it)" in finding.evidence
    if "concurrency 1 ->" in finding.fix:
        assert "then 'write'" not in finding.fix  # a stage with no measured demand is no pace


@pytest.mark.parametrize("slow", list(SLOW))
def test_stages_before_the_bottleneck_block_and_after_it_idle(runs, slow):
    loads = {load.name: load for load in stage_loads(runs[slow])}
    order = list(MEANS)
    at = order.index(slow)
    assert loads[slow].busy_share > 0.9
    for name in order[:at]:
        assert loads[name].blocked_share > 0.2, (name, loads[name])
        assert loads[name].queue_full_share > 0.5
    for name in order[at + 1 :]:
        assert loads[name].busy_share < 0.75 and loads[name].blocked_share < 0.05
    assert loads[order[-1]].blocked_share == 0.0
    if at:
        assert "more workers before it would not help" in next(
            f.fix for f in diagnose(runs[slow]) if f.code == "BOTTLENECK"
        )


def test_an_unbounded_queue_before_the_bottleneck_holds_the_backlog():
    result = simulate(chain(write=3, maxsize=(10, 10, None)))
    (finding,) = [f for f in diagnose(result) if f.code == "BOTTLENECK"]
    assert finding.numbers["stage"] == "write"
    assert finding.numbers["backlog_where"] == "in the queue of stage 'write'"
    assert finding.numbers["backlog_mean"] > 50
    assert "bound the queue of stage 'write' (queue_maxsize=12, 4 per worker)" in finding.fix


def test_a_chain_that_keeps_up_gets_only_an_info_finding():
    findings = diagnose(simulate(chain(n=300)))
    assert [(f.code, f.severity) for f in findings] == [("BOTTLENECK", "info")]
    assert findings[0].numbers["stage"] == "write"  # 5 of 8 workers: the busiest
    assert findings[0].fix.startswith("Nothing needs changing")


def test_each_stages_own_findings_carry_its_name():
    failing = {"parse": IndependentFailures(0.3)}
    findings = diagnose(simulate(chain(n=200, failures=failing)))
    dead = [f for f in findings if f.code == "DEAD_LETTERS"]
    assert dead and all(f.title.startswith("stage 'parse': ") for f in dead)
    assert dead[0].numbers["stage"] == "parse"
    assert not [f for f in findings if f.code == "LOST_TASK"]


# -- the figure -----------------------------------------------------------------------------


def test_plot_stages_draws_three_rows_per_stage(runs):
    result = runs["parse"]
    fig = plot_stages(result)
    axes = np.array(fig.axes).reshape(len(STAGE_ROWS), 3)
    assert [ax.get_title().split("\n")[0] for ax in axes[0]] == list(MEANS)
    busy = axes[1, 1].get_lines()[0].get_ydata()
    assert 0 < busy.max() <= 1  # parse's one worker (window means past OCCUPANCY_BUCKETS steps)
    # Row 3 of a stage is the next stage's blocked producers: the fetch workers waiting,
    # drawn as their time-weighted mean per window: the same average over the run.
    blocked = axes[2, 0].get_lines()[0]
    x, y = np.asarray(blocked.get_xdata()), np.asarray(blocked.get_ydata())
    series = result.stages["parse"].series
    drawn = float((y[:-1] * np.diff(x)).sum() / (x[-1] - x[0]))
    held = np.diff(np.append(series.time_s, series.end_s))
    whole = float((series.producers_blocked * held).sum() / (series.end_s - series.time_s[0]))
    assert drawn == pytest.approx(whole, rel=1e-9) and whole > 0
    assert "nothing to hand on" in axes[2, 2].texts[0].get_text()
    # The bound of each queue is drawn, as a dashed line at maxsize.
    assert any(
        line.get_linestyle() == "--" and line.get_ydata()[0] == 10
        for line in axes[0, 0].get_lines()
    )


def test_plot_stages_fades_a_previous_run_behind(runs):
    fig = plot_stages(runs["write"], compare=runs["parse"])
    faded = [line for line in fig.axes[0].get_lines() if line.get_alpha() == 0.3]
    assert faded and all(not line.get_label() or line.get_label().startswith("_") for line in faded)


def test_plot_stages_refuses_what_is_not_a_chain(runs):
    single = simulate(Scenario(arrivals=Poisson(rate=1), service=Exponential(mean=0.5), n_items=5))
    with pytest.raises(TypeError, match="result must be a simulated chain"):
        plot_stages(single)
    other = simulate(
        Scenario(
            arrivals=Poisson(rate=1),
            stages=[StageSpec(name="only", service=Exponential(mean=0.5))],
            n_items=5,
        )
    )
    with pytest.raises(ValueError, match="compare must have the same stages"):
        plot_stages(runs["write"], compare=other)


# -- varying one stage ----------------------------------------------------------------------


def test_replace_changes_one_stage_by_its_qualified_name():
    base = chain()
    changed = base.replace(
        **{"write.concurrency": 12, "fetch.queue_maxsize": 3, "parse.fan_out": 2}
    )
    by_name = {stage.name: stage for stage in changed.stages}
    assert by_name["write"].config.concurrency == 12
    assert by_name["fetch"].config.queue_maxsize == 3
    assert by_name["parse"].fan_out == 2
    assert by_name["parse"].config == base.stages[1].config
    assert base.stages[2].config.concurrency == 8  # the original is untouched


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"store.concurrency": 2}, "no stage named 'store'; stages: fetch, parse, write"),
        ({"write.workers": 2}, "unknown stage field 'workers'"),
        ({"write.name": "w"}, "unknown stage field 'name'"),
        ({"concurrency": 2}, "name the stage, e.g. 'write.concurrency'"),
        ({"write.concurrency": 0}, "concurrency must be"),
        ({"write.fan_out": math.nan}, "fan_out must be"),
    ],
)
def test_replace_refuses_bad_stage_fields(change, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        chain().replace(**change)


def test_replace_with_a_stage_field_on_a_single_stage_scenario_is_an_error():
    single = Scenario(arrivals=Poisson(rate=1), service=Exponential(mean=0.5), n_items=5)
    with pytest.raises(ValueError, match="this scenario has no stages"):
        single.replace(**{"write.concurrency": 4})


def test_sweep_varies_one_stage():
    frame = sweep(
        chain(n=200), {"write.concurrency": [2, 8]}, replications=1, processes=1, progress=False
    )
    assert list(frame["write.concurrency"]) == [2, 8]
    slow, fast = frame["latency_p95_s"]
    assert slow > fast


@pytest.mark.parametrize(("fetch_s", "slow"), [(0.3, "write"), (3.0, "fetch")])
def test_a_batch_is_paced_by_its_lowest_capacity_stage(fetch_s, slow):
    """Every page at t=0 (no arrival rate): the stage with the least capacity sets the pace."""
    from pipeline.sim import LogNormal

    pages = 60
    scenario = Scenario(
        arrivals=Trace([0.0] * pages),
        stages=[
            StageSpec(
                name="fetch",
                service=LogNormal(mean=fetch_s, cv=0.5),
                config=PipelineConfig(concurrency=1, queue_maxsize=1),
                fan_out=100,
            ),
            StageSpec(
                name="write",
                service=Exponential(mean=0.1),
                config=PipelineConfig(concurrency=20, queue_maxsize=80, drain_timeout_s=None),
            ),
        ],
        n_items=pages,
        seed=1,
    )
    result = simulate(scenario)
    (finding,) = diagnose(result)
    assert finding.code == "BOTTLENECK" and finding.severity == "warning"
    assert finding.numbers["stage"] == slow
    assert finding.title == f"Stage '{slow}' sets the pace of the batch"
    # The pace it names is the run's: source items per second over the run, within 10%
    # (the run's start and end are not at full pace).
    pace = pages / result.summary["sim_time_s"]
    assert finding.numbers["capacity_per_s"] == pytest.approx(pace, rel=0.1)


# -- the widget -----------------------------------------------------------------------------


def test_the_stage_explorer_resimulates_and_keeps_the_previous_run():
    from pipeline.viz import explore_stages

    explorer = explore_stages(chain(n=100, maxsize=(10, 10, None)))
    first = explorer.result
    assert explorer.settings()["write.queue_maxsize"] is None  # unbounded stays unbounded
    explorer.controls["write"]["concurrency"].value = 2
    assert explorer.previous is first
    assert explorer.scenario.stages[2].config.concurrency == 2
    assert explorer.result.summary["sim_time_s"] > first.summary["sim_time_s"]
    assert "Stage 'write' is the bottleneck" in explorer.summary.value
    explorer.controls["parse"]["queue_maxsize"].value = 3
    assert explorer.scenario.stages[1].config.queue_maxsize == 3


def test_the_stage_explorer_needs_a_chain():
    from pipeline.viz import explore_stages

    with pytest.raises(TypeError, match="scenario must be a chain"):
        explore_stages(Scenario(arrivals=Poisson(rate=1), service=Exponential(mean=1), n_items=5))
