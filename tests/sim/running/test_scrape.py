"""``query_range_answer``: a simulated run as Prometheus answers a range query for it.

The answer is read by the calibration's own reader, on both engines: its
queue depths are values the queue held (never above the summary's
``queue_depth_max``), its counters end at the run's counts. A file that is
not the writer's is one line naming the line.
"""

from __future__ import annotations

import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, simulate
from pipeline.sim.running.scrape import openmetrics_series, query_range_answer
from pipeline.sim.workloads.telemetry.query_range import parse_answers

SCENARIO = Scenario(
    arrivals=Poisson(rate=3.0), service=Exponential(mean=0.3),
    config=PipelineConfig(concurrency=1, queue_maxsize=50), n_items=400, seed=5,
)  # fmt: skip


@pytest.mark.parametrize("engine", ["kernel", "asyncio"])
def test_the_answer_holds_the_runs_peak_depth_and_counts(engine):
    result = simulate(SCENARIO, engine=engine)
    answer = query_range_answer(result, start_s=1.7e9, step_s=1.0, pipeline="orders")
    series = {s.name + str(sorted(s.labels.items())): s for s in parse_answers(answer, "sim")}
    (depth,) = [s for s in series.values() if s.name == "pipeline_queue_depth"]
    (offered,) = [s for s in series.values() if s.name == "pipeline_items_offered_total"]
    assert depth.labels["pipeline"] == "orders"
    assert offered.values[-1] == result.summary["items_offered"] == 400
    # A range query's point is the last sample before it: a value the queue held,
    # never above the run's peak (max_over_time over the raw samples is the peak).
    assert 0 < max(depth.values) <= result.summary["queue_depth_max"]


def test_a_line_not_written_by_the_writer_is_one_line_naming_it(tmp_path):
    path = tmp_path / "bad.om"
    path.write_text('# TYPE x gauge\nx{a="1"} 1 2\nnot a sample\n')
    with pytest.raises(ValueError, match=r"bad.om: line 3: expected"):
        openmetrics_series(path)


@pytest.mark.parametrize("name", ['a"b\\c\nd', "\\n", "end\\", "plain", 'é \\\\ ""'])
def test_label_values_come_back_as_they_were_written(tmp_path, name):
    # The writer escapes \, " and newline (OpenMetrics); the reader undoes exactly that.
    result = simulate(SCENARIO.replace(n_items=20), engine="kernel")
    path = tmp_path / "run.om"
    result.to_openmetrics(path, start_s=1.7e9, pipeline=name)
    series = openmetrics_series(path)
    assert {dict(labels)["pipeline"] for _, labels in series} == {name}
    answer = query_range_answer(result, start_s=1.7e9, step_s=1.0, pipeline=name)
    assert {s["metric"]["pipeline"] for s in answer["data"]["result"]} == {name}
