"""The overload controls over virtual time: ``result.controls``, ``result.timeseries`` and the
OpenMetrics file carry what ``statistics()`` shows, at the same virtual times."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from pipeline import AIMD, CircuitBreaker, CoDel, Gradient2, Pipeline, PipelineConfig, RetryBudget
from pipeline.sim import CapacityDrop, Downstream, Exponential, Poisson, Scenario, simulate
from pipeline.sim.running import single
from pipeline.sim.running.recorder import StepSeries
from pipeline.sim.running.scrape import openmetrics_series

# Whole seconds: the file's sampling times (step 1 s from virtual 0, written at UNIX 0).
SAMPLE_TIMES = np.arange(0.0, 60.0)
FIELDS = {
    "retries_denied": "pipeline_retries_denied_total",
    "breaker_calls_refused": "pipeline_breaker_calls_refused_total",
    "concurrency_limit": "pipeline_concurrency_limit",
    "codel_shed": "pipeline_codel_shed_total",
}

CONTROLS = {
    "budget_and_breaker": dict(
        retry_budget=RetryBudget(ratio=0.1, min_retries_per_s=0.5, window_s=5.0),
        breaker=CircuitBreaker(window=20, min_calls=10, open_s=2.0, half_open_calls=2),
    ),
    "aimd": dict(concurrency_limit=AIMD(timeout_s=0.5)),
    "gradient2": dict(concurrency_limit=Gradient2()),
    "codel": dict(codel=CoDel(target_s=0.05, interval_s=0.5), queue_maxsize=None),
}


def overloaded(n_items: int = 1400, **controls) -> Scenario:
    """A downstream that a capacity drop overloads: timeouts, retries, every control busy."""
    config = dict(concurrency=12, max_attempts=4, attempt_timeout_s=0.6, queue_maxsize=200)
    config.update(controls)
    return Scenario(
        arrivals=Poisson(rate=20.0),
        downstream=Downstream(concurrency=4, service=Exponential(mean=0.15)),
        config=PipelineConfig(**config),
        faults=[CapacityDrop(at_s=15.0, for_s=15.0, factor=0.3)],
        n_items=n_items,
        seed=11,
    )


def sampled_run(monkeypatch, scenario: Scenario):
    """``simulate`` on the engine, with ``statistics()`` taken at every sampling time."""
    snapshots: dict[float, object] = {}

    class Sampled(Pipeline):
        async def run(self, source):
            loop = asyncio.get_running_loop()
            for t in SAMPLE_TIMES.tolist():
                loop.call_at(t, lambda t=t: snapshots.setdefault(t, self.statistics()))
            return await super().run(source)

    monkeypatch.setattr(single, "Pipeline", Sampled)
    return simulate(scenario, engine="asyncio"), snapshots


@pytest.mark.parametrize("name", list(CONTROLS))
def test_the_series_and_the_file_are_the_statistics_at_each_time(monkeypatch, tmp_path, name):
    result, snapshots = sampled_run(monkeypatch, overloaded(**CONTROLS[name]))
    controls = result.controls
    times = sorted(t for t in snapshots if t <= result.summary["sim_time_s"])
    assert len(times) >= 50  # the run covers the fault and its aftermath
    result.to_openmetrics(tmp_path / "run.om", start_s=0, step_s=1.0)
    found = openmetrics_series(tmp_path / "run.om")
    frame = result.timeseries
    for field in controls.names:
        expected = [getattr(snapshots[t], field) for t in times]
        if field == "breaker_state":
            assert list(controls.state_names(controls.at(field, times))) == expected
            for state in controls.STATES:
                points = dict(
                    found["pipeline_breaker_state", (("pipeline", "sim"), ("state", state))]
                )
                assert [points[t] for t in times] == [float(e == state) for e in expected]
        else:
            assert controls.at(field, times).tolist() == expected, field
            points = dict(found[FIELDS[field], (("pipeline", "sim"),)])
            assert [points[t] for t in times] == expected, field
        # the table's rows hold the same values (each row until the next)
        rows = np.searchsorted(frame.time_s.to_numpy(), times, side="right") - 1
        assert frame[field].to_numpy()[rows].tolist() == expected, field
        # and the run's end is the summary's (the report's final statistics)
        final = getattr(result.report.statistics, field)
        assert frame[field].iloc[-1] == final
    # each control did something here: the series are not constants
    moved = {field: len(set(frame[field])) > 1 for field in controls.names}
    assert all(moved.values()), moved


def test_each_series_is_there_only_with_its_control(tmp_path):
    assert simulate(overloaded(200), engine="asyncio").controls is None
    budget_only = simulate(overloaded(200, retry_budget=RetryBudget(ratio=0.1)), engine="asyncio")
    assert budget_only.controls.names == ("retries_denied",)
    budget_only.to_openmetrics(tmp_path / "run.om", start_s=0)
    text = (tmp_path / "run.om").read_text()
    assert "pipeline_retries_denied_total" in text
    for absent in ("breaker", "concurrency_limit", "codel"):
        assert absent not in text


def test_without_controls_the_table_and_the_file_are_as_before(tmp_path):
    result = simulate(overloaded(300), engine="asyncio")
    assert list(result.timeseries.columns) == [
        "time_s",
        *StepSeries.COLUMNS,
        "in_system",
        "lag_items",
        "memory_bytes",
    ]
    assert len(result.timeseries) == len(result.series.time_s)
    result.to_openmetrics(tmp_path / "run.om", start_s=0)
    names = {name for name, _ in openmetrics_series(tmp_path / "run.om")}
    assert not {n for n in names if "breaker" in n or "denied" in n or "limit" in n or "codel" in n}


def test_a_chain_stage_with_a_control_carries_its_series(tmp_path):
    from pipeline.sim import IndependentFailures, StageSpec

    flaky = StageSpec(
        name="flaky",
        service=Exponential(mean=0.1),
        config=PipelineConfig(
            concurrency=2,
            max_attempts=1,
            drain_timeout_s=None,
            breaker=CircuitBreaker(window=10, min_calls=10, open_s=2.0),
        ),
        failures=IndependentFailures(0.6),
    )
    plain = StageSpec(name="plain", service=Exponential(mean=0.05))
    scenario = Scenario(arrivals=Poisson(rate=5.0), stages=[flaky, plain], n_items=200, seed=2)
    result = simulate(scenario, engine="asyncio")
    stage = result.stages["flaky"]
    assert stage.controls.names == ("breaker_state", "breaker_calls_refused")
    assert result.stages["plain"].controls is None
    final = stage.report.statistics
    assert stage.timeseries.breaker_calls_refused.iloc[-1] == final.breaker_calls_refused > 0
    assert stage.timeseries.breaker_state.iloc[-1] == final.breaker_state
    result.to_openmetrics(tmp_path / "run.om", start_s=0)
    found = openmetrics_series(tmp_path / "run.om")
    labels = (("pipeline", "sim"), ("stage", "flaky"))
    assert found["pipeline_breaker_calls_refused_total", labels][-1][1] == (
        final.breaker_calls_refused
    )
    assert not any(dict(key)["stage"] == "plain" for name, key in found if "breaker" in name)
