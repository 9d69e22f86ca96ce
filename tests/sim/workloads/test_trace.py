"""Trace replay: the loader's errors, exact FCFS waits, scripted failures."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Scenario, Trace, simulate
from pipeline.sim.workloads.failures import FailureModel, SimulatedFailure
from pipeline.sim.workloads.traces.replay import (
    ScriptedFailures,
    TraceWorkload,
    exact_fcfs_waits,
    load_trace,
)
from pipeline.sim.workloads.traces.service import ServiceTrace


def write_csv(path, header, rows):
    lines = [header, *(",".join(str(v) for v in row) for row in rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def random_trace(tmp_path_factory):
    """5,000 items, Poisson at 3/s, exponential services of mean 1 s, written at full precision."""
    rng = np.random.default_rng(2026)
    arrivals = np.cumsum(rng.exponential(1 / 3.0, 5000))
    service = rng.exponential(1.0, 5000)
    path = tmp_path_factory.mktemp("trace") / "trace.csv"
    rows = zip(map(repr, arrivals.tolist()), map(repr, service.tolist()), strict=True)
    write_csv(path, "arrival_s,service_s", rows)
    return path, arrivals, service


# -- the loader ------------------------------------------------------------------------------


def test_load_trace_reads_every_column(tmp_path):
    path = write_csv(
        tmp_path / "t.csv",
        "arrival_s,service_s,fails,note",
        [
            (0.0, 1.5, 0, "a"),
            (0.5, 0.25, 2, "b"),
            (0.5, 3, 1, "c"),
        ],
    )
    workload = load_trace(path)
    assert isinstance(workload, TraceWorkload)
    assert len(workload) == workload.n_items == 3
    assert isinstance(workload.arrivals, Trace)
    assert workload.arrivals.arrival_times.tolist() == [0.0, 0.5, 0.5]
    assert workload.service == ServiceTrace((1.5, 0.25, 3.0))
    assert workload.failures == ScriptedFailures((0, 2, 1))
    assert workload.path == str(path)


def test_fails_column_is_optional(tmp_path):
    workload = load_trace(write_csv(tmp_path / "t.csv", "service_s,arrival_s", [(1, 0), (1, 2)]))
    assert workload.failures.fails == (0, 0)


def test_the_example_message(tmp_path):
    rows = [(t, 1.0) for t in (0, 1, 2, 3, 4, 12.5, 12.0)]
    path = write_csv(tmp_path / "trace.csv", "arrival_s,service_s", rows)
    with pytest.raises(ValueError) as info:
        load_trace(path)
    assert str(info.value) == (
        f"{path} row 7: arrival_s must be >= the previous row's (12.5), got 12.0"
    )


@pytest.mark.parametrize(
    ("header", "row", "column", "words"),
    [
        ("arrival_s,service_s", ("x", 1), "arrival_s", "must be a number"),
        ("arrival_s,service_s", (-1, 1), "arrival_s", ">= 0"),
        ("arrival_s,service_s", ("inf", 1), "arrival_s", "finite"),
        ("arrival_s,service_s", (1, ""), "service_s", "missing"),
        ("arrival_s,service_s", (1, -0.5), "service_s", ">= 0"),
        ("arrival_s,service_s,fails", (1, 1, -1), "fails", "integer >= 0"),
        ("arrival_s,service_s,fails", (1, 1, 1.5), "fails", "integer >= 0"),
        ("arrival_s,service_s,fails", (1, 1, ""), "fails", "missing"),
    ],
)
def test_bad_values_name_file_row_and_column(tmp_path, header, row, column, words):
    path = write_csv(tmp_path / "bad.csv", header, [(0, 1, 0)[: len(row)], row])
    with pytest.raises(ValueError) as info:
        load_trace(path)
    message = str(info.value)
    assert message.startswith(f"{path} row 2: {column} ")
    assert words in message and "\n" not in message


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("arrival_s\n1\n", "service_s"),
        ("time,service_s\n1,1\n", "arrival_s"),
        ("", "arrival_s, service_s"),
        ("arrival_s,service_s\n", "no data rows"),
    ],
)
def test_bad_files(tmp_path, text, words):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=words) as info:
        load_trace(path)
    assert str(path) in str(info.value)


def test_missing_file_is_an_oserror(tmp_path):
    with pytest.raises(OSError):
        load_trace(tmp_path / "nope.csv")


# -- exact replay ------------------------------------------------------------------------------


def test_exact_fcfs_waits_by_hand():
    # two servers: items 0 and 1 start at once; item 2 waits for the first to free (t=2)
    waits = exact_fcfs_waits([0.0, 0.0, 1.0, 5.0], [2.0, 3.0, 1.0, 1.0], 2)
    assert waits.tolist() == [0.0, 0.0, 1.0, 0.0]
    assert exact_fcfs_waits([], [], 3).tolist() == []
    with pytest.raises(ValueError, match="c must be >= 1"):
        exact_fcfs_waits([0.0], [1.0], 0)
    with pytest.raises(ValueError, match="equal length"):
        exact_fcfs_waits([0.0, 1.0], [1.0], 1)
    with pytest.raises(ValueError, match="non-decreasing"):
        exact_fcfs_waits([1.0, 0.0], [1.0, 1.0], 1)


@pytest.mark.parametrize("c", [1, 3, 8])
def test_replay_reproduces_the_exact_recursion(random_trace, c):
    path, arrivals, service = random_trace
    workload = load_trace(path)
    config = PipelineConfig(concurrency=c, queue_maxsize=None, drain_timeout_s=None)
    result = simulate(workload.scenario(config))
    assert result.summary["items_completed"] == 5000
    assert np.array_equal(result.items["arrival_s"].to_numpy(), arrivals)
    got = result.items["wait_s"].to_numpy()
    want = exact_fcfs_waits(arrivals, service, c)
    assert np.max(np.abs(got - want)) <= 1e-9
    assert np.array_equal(got, want)  # in fact bit for bit


def test_scenario_passes_fields_through(random_trace):
    workload = load_trace(random_trace[0])
    scenario = workload.scenario(PipelineConfig(concurrency=2), seed=5, n_items=10)
    assert isinstance(scenario, Scenario)
    assert (scenario.n_items, scenario.seed, scenario.config.concurrency) == (10, 5, 2)
    assert scenario.failures is workload.failures
    assert workload.scenario(duration_s=3.0).n_items is None
    assert workload.scenario().n_items == 5000


# -- scripted failures -------------------------------------------------------------------------


def test_fails_column_gives_exact_attempt_counts(tmp_path):
    fails = [0, 1, 2, 3, 5, 0, 2]
    rows = [(i * 0.5, 1.0, f) for i, f in enumerate(fails)]
    workload = load_trace(write_csv(tmp_path / "f.csv", "arrival_s,service_s,fails", rows))
    config = PipelineConfig(concurrency=2, max_attempts=3, queue_maxsize=None)
    result = simulate(workload.scenario(config))
    items = result.items
    assert items["attempts"].tolist() == [min(f + 1, 3) for f in fails]
    assert items["outcome"].tolist() == ["completed" if f < 3 else "dead_lettered" for f in fails]
    assert result.summary["attempts_total"] == sum(min(f + 1, 3) for f in fails)
    letters = {d.payload: d for d in result.dead_letters}
    assert sorted(letters) == [3, 4]
    assert all(e.type == "SimulatedFailure" for e in letters[4].errors)


def test_scripted_failures_model():
    model = ScriptedFailures((0, 2))
    assert isinstance(model, FailureModel)
    bound = model.bind(np.random.default_rng(0), 2)
    assert bound.check(0, 1, 1) is None
    first = bound.check(1, 1, 1)
    assert isinstance(first.error, SimulatedFailure) and first.hang_s is None
    assert bound.check(1, 2, 1) is not None
    assert bound.check(1, 3, 1) is None
    assert bound.check(7, 1, 1) is None  # beyond the script: never fails
    assert pickle.loads(pickle.dumps(model)) == model
    assert repr(model) == "ScriptedFailures(fails=(0, 2))"
    assert "12 items" in repr(ScriptedFailures((1,) * 12))
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.fails = ()  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"fails\[1\] must be >= 0"):
        ScriptedFailures((0, -1))
    with pytest.raises(TypeError, match="fails must be a sequence"):
        ScriptedFailures("012")  # type: ignore[arg-type]


def test_workload_checks_lengths():
    with pytest.raises(ValueError, match="one time per arrival"):
        TraceWorkload(Trace([0.0, 1.0]), ServiceTrace((1.0,)), ScriptedFailures((0, 0)))
    with pytest.raises(ValueError, match="one count per arrival"):
        TraceWorkload(Trace([0.0]), ServiceTrace((1.0,)), ScriptedFailures((0, 0)))


def test_scripted_permanent_failure_dead_letters_after_its_scripted_attempts():
    from pipeline import PipelineConfig
    from pipeline.sim import Constant, Scenario, simulate
    from pipeline.sim.workloads.arrivals import Deterministic
    from pipeline.sim.workloads.failures import ScriptedFailures

    failures = ScriptedFailures((0, 1, 2, 1), permanent=frozenset({1}))
    result = simulate(
        Scenario(
            arrivals=Deterministic(1.0),
            service=Constant(0.1),
            config=PipelineConfig(concurrency=1, max_attempts=3, drain_timeout_s=None),
            failures=failures,
            n_items=4,
        )
    )
    assert result.items.attempts.tolist() == [1, 1, 3, 2]
    (letter,) = result.dead_letters
    assert letter.payload == 1 and letter.reason == "not_retryable"
    with pytest.raises(ValueError, match="permanent"):
        ScriptedFailures((0, 1), permanent=frozenset({0}))


# -- TraceRecorder: bounded by default ------------------------------------------------------


def _record_chain(items: int, recorder):
    """Two stages on the virtual clock: fetch 0.01 s, write 0.02 s, exact service times."""
    import asyncio

    from pipeline import Chain, Stage
    from pipeline.sim.vloop import run_virtual

    async def fetch(item):
        await asyncio.sleep(0.01)
        return item

    async def write(item):
        await asyncio.sleep(0.02)

    config = PipelineConfig(concurrency=2, queue_maxsize=10, drain_timeout_s=None)

    async def main():
        recorder.start(0.0)
        stages = [
            Stage("fetch", fetch, config, on_event=recorder.listener("fetch")),
            Stage("write", write, config, on_event=recorder.listener("write")),
        ]
        await Chain(stages).run(range(items))
        recorder.stop()

    run_virtual(main())
    return recorder.trace(configs={"fetch": config, "write": config})


def test_trace_recorder_keeps_the_first_max_events_of_all_stages_together():
    from pipeline.sim import TraceRecorder, calibrate

    whole = TraceRecorder(max_events=None)
    full = _record_chain(2000, whole)
    bounded = TraceRecorder(max_events=3000)
    cut = _record_chain(2000, bounded)
    kept = sum(len(stage.kinds) for stage in cut.stages.values())
    assert kept == 3000
    assert bounded.events_dropped == sum(len(s.kinds) for s in full.stages.values()) - 3000
    # Every stage stops at the same instant: the trace is the run up to the cut.
    assert cut.duration_s == pytest.approx(bounded.cut_s)
    assert cut.duration_s < full.duration_s
    for name, stage in cut.stages.items():
        assert stage.times_s.max() <= cut.duration_s
        same = full.stages[name].times_s[: len(stage.times_s)]
        assert np.array_equal(stage.times_s, same), "the kept events are the run's first ones"
    # A twin fitted from what is kept: the same service times as from the whole run.
    fitted, truth = calibrate(cut, seed=1), calibrate(full, seed=1)
    for name in ("fetch", "write"):
        assert fitted.stages[name].service.mean_s == pytest.approx(
            truth.stages[name].service.mean_s, rel=1e-9
        )


def test_trace_recorder_is_bounded_by_default_and_checks_its_bound():
    from pipeline.sim import TraceRecorder

    assert TraceRecorder().max_events == 1 << 18
    assert TraceRecorder().events_dropped == 0 and TraceRecorder().cut_s is None
    for bad in (0, -1, 1.5, True, "10"):
        with pytest.raises(ValueError, match="max_events must be an integer >= 1 or None"):
            TraceRecorder(max_events=bad)
