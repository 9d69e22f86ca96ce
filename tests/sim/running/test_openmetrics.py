"""A simulated run written as OpenMetrics text (``result.to_openmetrics``, ``--metrics-out``).

Checked against the run itself: the counters' last samples are the run's
counts, every gauge sample is the step function's value at its moment, the
queue-depth samples' maximum is the summary's ``queue_depth_max``, both
engines write the same bytes, and prometheus_client's OpenMetrics parser
reads the file. That parser (0.26) drops a histogram's bucket samples at a
second timestamp of one label set as "duplicates due to timestamp
truncation", so histograms are parsed one MetricPoint at a time; everything
else is parsed whole. The backfill into a real Prometheus is
``test_openmetrics_prometheus.py``.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.openmetrics import parser as openmetrics_parser

from pipeline import PipelineConfig
from pipeline._metric_names import ATTEMPT_RESULTS, BUCKETS_S, OUTCOMES
from pipeline.sim import (
    DrainTimeoutWarning,
    Exponential,
    IndependentFailures,
    Poisson,
    Scenario,
    StageSpec,
    simulate,
)
from pipeline.sim.running.openmetrics import MAX_STEPS, METRICS, write_openmetrics
from pipeline.sim.workloads.failures import Hangs

START = 1_700_000_000
_LINE = re.compile(r"^([a-z_]+)\{([^}]*)\} (\S+) (\d+\.\d{3})$")


def read(path: Path) -> tuple[dict[tuple[str, str], list[tuple[float, float]]], list[str]]:
    """A strict reading: (series -> [(timestamp, value)], family order); fails on any deviation."""
    text = path.read_text(encoding="utf-8")
    assert text.endswith("# EOF\n") and text.count("# EOF") == 1
    series: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    families: list[str] = []
    for line in text.splitlines()[:-1]:
        if line.startswith("# TYPE "):
            families.append(line.split()[2])
            continue
        if line.startswith("#"):
            assert line.split()[1] in ("HELP", "UNIT") and line.split()[2] == families[-1]
            continue
        match = _LINE.match(line)
        assert match, line
        name, labels, value, stamp = match.groups()
        assert name.startswith(families[-1]), (name, families[-1])
        points = series[(name, labels)]
        timestamp = float(stamp)
        assert not points or timestamp > points[-1][0], f"timestamps not increasing: {line}"
        points.append((timestamp, float(value)))
    return series, families


def parse_with_prometheus_client(path: Path) -> dict[str, object]:
    """Families by name, through prometheus_client (histograms one MetricPoint at a time)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: dict[str, list[str]] = defaultdict(list)
    name = None
    for line in lines[:-1]:
        if line.startswith("# TYPE "):
            name = line.split()[2]
        blocks[name].append(line)
    kinds = {name: kind for name, kind, _ in METRICS.values()}
    whole = [
        line for family, block in blocks.items() if kinds[family] != "histogram" for line in block
    ]
    text = "\n".join(whole) + "\n# EOF\n"
    parsed = {f.name: f for f in openmetrics_parser.text_string_to_metric_families(text)}
    for family, block in blocks.items():
        if kinds[family] != "histogram":
            continue
        head = [line for line in block if line.startswith("#")]
        body = [line for line in block if not line.startswith("#")]
        per_point = len(BUCKETS_S) + 3  # the buckets, +Inf, _count, _sum
        for first in (0, len(body) - per_point):  # the first and last points of each label set
            text = "\n".join([*head, *body[first : first + per_point]]) + "\n# EOF\n"
            (parsed[family],) = openmetrics_parser.text_string_to_metric_families(text)
    return parsed


def _key(labels: dict[str, str]) -> str:
    """The label text of a series: ``pipeline`` (default ``sim``), ``stage``, then the rest."""
    rest = dict(labels)
    pairs = [("pipeline", rest.pop("pipeline", "sim"))]
    if "stage" in rest:
        pairs.append(("stage", rest.pop("stage")))
    pairs += rest.items()
    return ",".join(f'{key}="{value}"' for key, value in pairs)


def last(series, name: str, **labels: str) -> float:
    """The last sample's value of one series."""
    return series[(name, _key(labels))][-1][1]


def scenario(**overrides) -> Scenario:
    base = dict(
        arrivals=Poisson(rate=3.6),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=12, max_attempts=3),
        failures=IndependentFailures(0.15),
        n_items=1500,
        seed=3,
    )
    base.update(overrides)
    return Scenario(**base)


def check_counts(result, series, **labels: str) -> None:
    s = result.summary
    assert last(series, "pipeline_items_offered_total", **labels) == s["items_offered"]
    expected = {
        "completed": s["items_completed"],
        "dead_lettered": s["items_dead_lettered"],
        "shed": s["items_shed"],
        "unfinished": s["items_unfinished"],
        "expired": s["items_expired"],
    }
    for outcome in OUTCOMES:
        got = last(series, "pipeline_items_total", outcome=outcome, **labels)
        assert got == expected[outcome], outcome
    attempts = sum(
        last(series, "pipeline_attempts_total", result=r, **labels) for r in ATTEMPT_RESULTS
    )
    assert attempts == s["attempts_total"]
    assert last(series, "pipeline_attempts_total", result="ok", **labels) == s["items_completed"]
    assert last(series, "pipeline_retries_total", **labels) == s["retries_total"]
    blocked = last(series, "pipeline_producer_blocked_seconds_total", **labels)
    assert blocked == pytest.approx(result.report.statistics.producer_blocked_s, rel=1e-9, abs=1e-9)
    if result.scenario.warmup_s == 0:  # one definition: the summary's is the counter's
        assert s["producer_blocked_s"] == pytest.approx(blocked, rel=1e-9, abs=1e-9)
    depth = [v for _, v in series[("pipeline_queue_depth", _key(labels))]]
    assert max(depth) == s["queue_depth_max"]
    busy = [v for _, v in series[("pipeline_workers_busy", _key(labels))]]
    assert max(busy) == int(result.series.in_flight.max())
    assert last(series, "pipeline_latency_seconds_count", **labels) == s["items_completed"]
    total = last(series, "pipeline_latency_seconds_sum", **labels)
    assert total / s["items_completed"] == pytest.approx(s["latency_mean_s"], rel=1e-9)


def test_expired_items_are_counted_when_they_expire(tmp_path):
    from pipeline.sim import ItemClass

    sc = scenario(
        failures=IndependentFailures(0.0),
        classes=[ItemClass(name="a"), ItemClass(name="b", patience=Exponential(mean=1.0))],
    )
    result = simulate(sc)
    assert result.summary["items_expired"] > 0
    path = tmp_path / "run.om"
    result.to_openmetrics(path, start_s=1e9)
    series, _ = read(path)
    check_counts(result, series)
    # Each counted at its expiry: the count one step before the end is no larger.
    points = series[("pipeline_items_total", _key({"outcome": "expired"}))]
    assert [v for _, v in points] == sorted(v for _, v in points)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {
            "config": PipelineConfig(
                concurrency=3, queue_maxsize=5, on_full="reject", max_attempts=2
            )
        },
        {"failures": IndependentFailures(0.0), "config": PipelineConfig(concurrency=4)},
        {"config": PipelineConfig(concurrency=2, queue_maxsize=8, drain_timeout_s=5.0)},
    ],
    ids=["retries", "shedding", "fcfs", "drain-timeout"],
)
def test_counters_end_at_the_counts_and_both_engines_write_the_same_file(tmp_path, overrides):
    sc = scenario(**overrides)
    files = {}
    for engine in ("kernel", "asyncio"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DrainTimeoutWarning)  # the drain-timeout case's
            result = simulate(sc, engine=engine)
        if sc.config.drain_timeout_s == 5.0:  # the drain-timeout case leaves items unfinished
            assert result.summary["items_unfinished"] > 0
        path = tmp_path / f"{engine}.om"
        assert result.to_openmetrics(path, start_s=START) == 1.0
        series, families = read(path)
        assert families == [name for name, _, _ in METRICS.values()]
        check_counts(result, series)
        files[engine] = path.read_bytes()
    assert files["kernel"] == files["asyncio"]
    parsed = parse_with_prometheus_client(tmp_path / "kernel.om")
    assert {name for name, _, _ in METRICS.values()} <= set(parsed)
    assert parsed["pipeline_queue_depth"].type == "gauge"


def test_every_gauge_sample_is_the_step_functions_value_at_its_moment(tmp_path):
    result = simulate(scenario(), engine="kernel")
    result.to_openmetrics(tmp_path / "m.om", start_s=START, step_s=0.25)
    series, _ = read(tmp_path / "m.om")
    s = result.series
    for name, values in (
        ("pipeline_queue_depth", s.queue_depth),
        ("pipeline_workers_busy", s.in_flight),
    ):
        points = series[(name, 'pipeline="sim"')]
        for stamp, value in points:
            # A value held within its millisecond; exactly the value at t when nothing
            # else changes in that millisecond.
            t = round(stamp - START, 3)
            lo = max(np.searchsorted(s.time_s, t - 0.0005, side="right") - 1, 0)
            hi = np.searchsorted(s.time_s, t + 0.0005, side="right")
            assert value in values[lo:hi].tolist(), (name, stamp)
            if hi - lo == 1:
                assert value == values[lo]
    # Without warm-up the file covers the summary's window: the largest depth is there.
    assert (
        max(v for _, v in series[("pipeline_queue_depth", 'pipeline="sim"')])
        == result.summary["queue_depth_max"]
    )
    ages = series[("pipeline_oldest_item_age_seconds", 'pipeline="sim"')]
    assert all(v >= 0 for _, v in ages) and max(v for _, v in ages) > 0
    assert series[("pipeline_workers", 'pipeline="sim"')][-1][1] == 4
    assert series[("pipeline_queue_capacity", 'pipeline="sim"')][-1][1] == 12


def test_timed_out_attempts_are_counted_as_timeouts(tmp_path):
    sc = scenario(
        config=PipelineConfig(
            concurrency=4, queue_maxsize=12, max_attempts=3, attempt_timeout_s=2.0
        ),
        failures=Hangs(p=0.1, hang_s=30.0),
        n_items=600,
    )
    result = simulate(sc)  # attempt timeouts run on the engine only
    result.to_openmetrics(tmp_path / "m.om", start_s=START)
    series, _ = read(tmp_path / "m.om")
    check_counts(result, series)
    assert last(series, "pipeline_attempts_total", result="timeout") > 0
    errors = sum(e.type == "TimeoutError" for letter in result.dead_letters for e in letter.errors)
    assert last(series, "pipeline_attempts_total", result="timeout") >= errors


def test_a_chain_labels_each_stage(tmp_path):
    sc = Scenario(
        arrivals=Poisson(rate=2.0),
        stages=[
            StageSpec(name="fetch", service=Exponential(mean=1.0),
                      config=PipelineConfig(concurrency=3, queue_maxsize=6)),
            StageSpec(name='wr"ite', service=Exponential(mean=0.6),
                      config=PipelineConfig(concurrency=2, queue_maxsize=4, max_attempts=2),
                      failures=IndependentFailures(0.1)),
        ],
        n_items=500,
        seed=2,
    )  # fmt: skip
    files = []
    for engine in ("kernel", "asyncio"):
        result = simulate(sc, engine=engine)
        path = tmp_path / f"{engine}.om"
        result.to_openmetrics(path, start_s=START, pipeline="ingest")
        series, _ = read(path)
        check_counts(result.stages["fetch"], series, pipeline="ingest", stage="fetch")
        check_counts(result.stages['wr"ite'], series, pipeline="ingest", stage='wr\\"ite')
        files.append(path.read_bytes())
    assert files[0] == files[1]
    parse_with_prometheus_client(tmp_path / "kernel.om")


@pytest.mark.parametrize("engine", ["kernel", "asyncio"])
def test_producer_blocked_is_one_quantity_in_the_summary_and_the_file(tmp_path, engine):
    # Overloaded with a small queue: the producer waits for a slot, often before the next
    # item has even arrived (it reserves its slot first). The summary's producer_blocked_s
    # is the counter's last value; after a warm-up, the counter's increase since then.
    for warmup_s in (0.0, 50.0):
        sc = scenario(
            arrivals=Poisson(rate=4.4),
            config=PipelineConfig(concurrency=4, queue_maxsize=3),
            failures=IndependentFailures(0.0),
            n_items=800,
            warmup_s=warmup_s,
        )
        result = simulate(sc, engine=engine)
        path = tmp_path / f"{warmup_s}.om"
        result.to_openmetrics(path, start_s=START)
        series, _ = read(path)
        points = series[("pipeline_producer_blocked_seconds_total", _key({}))]
        at_warmup = dict(points).get(START + warmup_s, 0.0)  # a sampling time: whole seconds
        blocked = result.summary["producer_blocked_s"]
        assert blocked > 100
        assert blocked == pytest.approx(points[-1][1] - at_warmup, rel=1e-9)
        if not warmup_s:
            assert blocked == pytest.approx(result.report.statistics.producer_blocked_s, rel=1e-12)


def test_a_long_run_is_sampled_coarser_and_stays_bounded(tmp_path):
    sc = scenario(failures=IndependentFailures(0.0), n_items=None, duration_s=20_000.0,
                  arrivals=Poisson(rate=1.0))  # fmt: skip
    result = simulate(sc, engine="kernel")
    used = result.to_openmetrics(tmp_path / "m.om", start_s=START, step_s=0.5)
    # The smallest whole multiple of 0.5 s within MAX_STEPS steps.
    end = result.summary["sim_time_s"]
    multiple = used / 0.5
    assert multiple == int(multiple) > 1
    assert end / used <= MAX_STEPS < end / (used - 0.5)
    series, _ = read(tmp_path / "m.om")
    points = series[("pipeline_items_offered_total", 'pipeline="sim"')]
    assert len(points) <= MAX_STEPS + 1
    assert len(series[("pipeline_queue_depth", 'pipeline="sim"')]) <= 2 * (MAX_STEPS + 1)
    check_counts(result, series)


def test_the_default_start_ends_the_run_now(tmp_path):
    import time

    result = simulate(scenario(n_items=200), engine="kernel")
    before = time.time()
    result.to_openmetrics(tmp_path / "m.om")
    series, _ = read(tmp_path / "m.om")
    end = series[("pipeline_items_offered_total", 'pipeline="sim"')][-1][0]
    assert before - 2 <= end <= time.time() + 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"step_s": 0}, "step_s must be a finite number >= 0.001"),
        ({"step_s": math.nan}, "step_s must be a finite number"),
        ({"step_s": True}, "step_s must be a number"),
        ({"start_s": -1}, "start_s must be UNIX seconds between 0"),
        ({"start_s": math.inf}, "start_s must be UNIX seconds"),
        ({"start_s": "now"}, "start_s must be UNIX seconds"),
        ({"pipeline": ""}, "pipeline must be a non-empty string"),
    ],
)
def test_bad_arguments_are_refused_and_nothing_is_written(tmp_path, kwargs, message):
    result = simulate(scenario(n_items=50), engine="kernel")
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        write_openmetrics(result, tmp_path / "m.om", **kwargs)
    assert os.listdir(tmp_path) == []


def test_the_command_line_writes_the_file(run_main, tmp_path):
    path = tmp_path / "run.om"
    status, out, err = run_main(
        "simulate", "--arrivals", "poisson:rate=3", "--service", "exponential:mean=1",
        "--concurrency", "4", "--maxsize", "10", "--items", "300", "--seed", "1", "--json",
        "--metrics-out", path, "--metrics-start", START, "--metrics-step", "500ms",
        "--metrics-pipeline", "checkout",
    )  # fmt: skip
    assert status == 0, err
    series, _ = read(path)
    import json

    summary = json.loads(out)
    key = 'pipeline="checkout"'
    assert series[("pipeline_items_offered_total", key)][-1][1] == summary["items_offered"]
    assert series[("pipeline_items_offered_total", key)][1][0] == START + 0.5
    assert max(v for _, v in series[("pipeline_queue_depth", key)]) == summary["queue_depth_max"]
    assert oct(path.stat().st_mode & 0o777) != oct(0o600)


CHAIN_TOML = """
arrivals = "poisson:rate=4.4"
items = 600
seed = 2

[[stages]]
name = "fetch"
service = "exponential:mean=0.2"
concurrency = 2
maxsize = 3

[[stages]]
name = "write"
service = "exponential:mean=1.0"
concurrency = 4
maxsize = 3
"""


@pytest.mark.parametrize("engine", ["kernel", "asyncio"])
def test_the_json_and_the_file_give_one_producer_blocked_time(run_main, tmp_path, engine):
    import json

    single = ["--arrivals", "poisson:rate=4.4", "--service", "exponential:mean=1", "--concurrency",
              "4", "--maxsize", "3", "--items", "800", "--seed", "1"]  # fmt: skip
    chain = tmp_path / "chain.toml"
    chain.write_text(CHAIN_TOML)
    for argv, labels in ((single, {"": ""}), ([chain], {"fetch": ',stage="fetch"',
                                                       "write": ',stage="write"'})):  # fmt: skip
        path = tmp_path / "run.om"
        status, out, err = run_main(
            "simulate", *argv, "--engine", engine, "--json", "--metrics-out", path,
            "--metrics-start", START,
        )  # fmt: skip
        assert status == 0, err
        summary = json.loads(out)
        series, _ = read(path)
        for stage, label in labels.items():
            own = summary["stages"][stage] if stage else summary
            counter = series[("pipeline_producer_blocked_seconds_total", f'pipeline="sim"{label}')]
            assert own["producer_blocked_s"] > 10
            assert own["producer_blocked_s"] == pytest.approx(counter[-1][1], rel=1e-9)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--metrics-out", "{tmp}"], "--metrics-out {tmp}: is a directory"),
        (["--metrics-out", "{tmp}/no/such/m.om"], "folder {tmp}/no/such does not exist"),
        (["--metrics-out", "{tmp}/m.om", "--metrics-step", "0"], "--metrics-step must be"),
        (["--metrics-out", "{tmp}/m.om", "--metrics-step", "1d"], "--metrics-step must be"),
        (["--metrics-out", "{tmp}/m.om", "--metrics-step", "nan"], "--metrics-step must be"),
        (["--metrics-out", "{tmp}/m.om", "--metrics-start", "-5"], "--metrics-start must be"),
        (["--metrics-out", "{tmp}/m.om", "--metrics-start", "inf"], "--metrics-start must be"),
        (["--metrics-out", "{tmp}/m.om", "--metrics-pipeline", ""], "--metrics-pipeline must"),
        (["--metrics-step", "1s"], "need --metrics-out"),
    ],
)
def test_bad_metrics_flags_are_one_line_exit_2_before_the_run(run_main, tmp_path, flags, message):
    argv = [flag.replace("{tmp}", str(tmp_path)) for flag in flags]
    status, out, err = run_main(
        "simulate", "--arrivals", "poisson:rate=3", "--service", "exponential:mean=1",
        "--items", "100000000", *argv,
    )  # fmt: skip  # a run that long would take minutes: the refusal comes first
    assert status == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("pipeline: error: ")
    assert message.replace("{tmp}", str(tmp_path)) in err
    assert os.listdir(tmp_path) == []


def test_an_unwritable_folder_is_refused_before_the_run(run_main):
    # /proc refuses new files to everyone, root included (a read-only folder would not).
    status, out, err = run_main(
        "simulate", "--arrivals", "poisson:rate=3", "--service", "exponential:mean=1",
        "--items", "100000000", "--metrics-out", "/proc/pipeline-metrics.om",
    )  # fmt: skip
    assert (status, out) == (2, "")
    assert err == (
        "pipeline: error: --metrics-out /proc/pipeline-metrics.om: cannot write in /proc "
        "(No such file or directory)\n"
    )


def test_an_empty_run_writes_one_sample_per_series(tmp_path):
    result = simulate(scenario(n_items=0), engine="kernel")
    result.to_openmetrics(tmp_path / "m.om", start_s=0)
    series, families = read(tmp_path / "m.om")
    assert families == [name for name, _, _ in METRICS.values()]
    assert all(len(points) == 1 for points in series.values())
    check = {name: points for (name, _), points in series.items()}
    assert check["pipeline_items_offered_total"] == [(0.0, 0.0)]
    parse_with_prometheus_client(tmp_path / "m.om")


def test_with_replications_the_file_is_replication_0(run_main, tmp_path):
    path = tmp_path / "run.om"
    argv = [
        "simulate", "--arrivals", "poisson:rate=3", "--service", "exponential:mean=1",
        "--concurrency", "4", "--items", "300", "--seed", "5", "--metrics-start", START,
    ]  # fmt: skip
    status, _, err = run_main(*argv, "--replications", "2", "--json", "--metrics-out", path)
    assert status == 0, err
    alone = tmp_path / "alone.om"  # one run of the same seed is replication 0
    status, _, err = run_main(*argv, "--json", "--metrics-out", alone)
    assert status == 0, err
    assert path.read_bytes() == alone.read_bytes()


def test_a_folder_in_the_way_is_an_os_error_and_leaves_nothing(tmp_path):
    result = simulate(scenario(n_items=50), engine="kernel")
    (tmp_path / "m.om").mkdir()
    with pytest.raises(IsADirectoryError):
        result.to_openmetrics(tmp_path / "m.om", start_s=START)
    assert os.listdir(tmp_path) == ["m.om"] and os.listdir(tmp_path / "m.om") == []
    with pytest.raises(FileNotFoundError):
        result.to_openmetrics(tmp_path / "no" / "m.om", start_s=START)
