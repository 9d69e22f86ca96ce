"""Capacity-planning helpers: trace windows, daily-curve fits, SLO choices, a 429 provider."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipeline.sim import DailyCurve, daily_curve
from pipeline.sim.planning import (
    fit_daily_curve,
    slo_table,
    smallest_config_meeting,
    trace_window,
)
from pipeline.sim.stats import t_quantile
from pipeline.sim.trace import load_trace


def write_trace(tmp_path, rows: str):
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,service_s,fails\n" + rows)
    return load_trace(path)


def test_trace_window_keeps_the_rows_in_the_window_and_retimes_them(tmp_path) -> None:
    workload = write_trace(tmp_path, "1.0,0.5,0\n5.0,0.6,1\n7.5,0.7,0\n12.0,0.8,2\n")
    window = trace_window(workload, 5.0, 12.0)
    assert window.arrivals.arrival_times.tolist() == [0.0, 2.5]
    assert window.service.times_s == (0.6, 0.7)
    assert window.failures.fails == (1, 0)


def test_trace_window_rejects_an_empty_or_inverted_window(tmp_path) -> None:
    workload = write_trace(tmp_path, "1.0,0.5,0\n")
    with pytest.raises(ValueError, match="no arrival"):
        trace_window(workload, 2.0, 3.0)
    with pytest.raises(ValueError, match="end_s"):
        trace_window(workload, 3.0, 2.0)


def test_fit_daily_curve_recovers_the_curve_that_made_the_arrivals() -> None:
    truth = DailyCurve(0.2, 2.0, peak_hour=10.0, width_h=2.0)
    times = daily_curve(0.2, 2.0, 10.0, width_h=2.0).times(
        np.random.default_rng(1), duration_s=86_400.0
    )
    fitted = fit_daily_curve(times).rate_fn
    assert fitted.base_rate == pytest.approx(truth.base_rate, rel=0.15)
    assert fitted.peak_rate == pytest.approx(truth.peak_rate, rel=0.1)
    assert fitted.peak_hour == pytest.approx(truth.peak_hour, abs=0.2)
    assert fitted.width_h == pytest.approx(truth.width_h, rel=0.15)


def test_fit_daily_curve_start_s_moves_the_clock() -> None:
    times = daily_curve(0.2, 2.0, 10.0, width_h=2.0).times(
        np.random.default_rng(2), duration_s=86_400.0
    )
    plain = fit_daily_curve(times).rate_fn
    shifted = fit_daily_curve(times, start_s=8 * 3600).rate_fn
    assert shifted.peak_hour == pytest.approx(plain.peak_hour - 8.0)
    assert shifted(np.array([0.0]))[0] == pytest.approx(plain(np.array([8 * 3600.0]))[0])


def test_fit_daily_curve_needs_enough_times_within_a_day() -> None:
    with pytest.raises(ValueError, match="at least 100"):
        fit_daily_curve([1.0, 2.0])
    with pytest.raises(ValueError, match="within one day"):
        fit_daily_curve(np.linspace(0, 100_000, 200))


def sweep_frame(values: dict[tuple[int, object], list[float]]) -> pd.DataFrame:
    rows = [
        {"concurrency": c, "queue_maxsize": m, "replication": r, "latency_p95_s": v}
        for (c, m), vs in values.items()
        for r, v in enumerate(vs)
    ]
    frame = pd.DataFrame(rows)
    frame["queue_maxsize"] = pd.Series([row["queue_maxsize"] for row in rows], dtype=object)
    frame.attrs["grid"] = ["concurrency", "queue_maxsize"]
    return frame


def test_slo_table_uses_a_one_sided_student_t_bound() -> None:
    frame = sweep_frame({(2, 50): [10.0, 12.0, 14.0]})
    row = slo_table(frame, "latency_p95_s", 20.0).iloc[0]
    expected = 12.0 + t_quantile(0.95, 2) * 2.0 / math.sqrt(3)
    assert row["mean"] == pytest.approx(12.0)
    assert row["upper"] == pytest.approx(expected)
    assert row["meets"] == (expected <= 20.0)


def test_smallest_config_meeting_prefers_fewer_workers_then_smaller_queues() -> None:
    frame = sweep_frame(
        {
            (2, 50): [100.0, 110.0, 120.0],
            (3, None): [10.0, 11.0, 12.0],
            (3, 200): [10.0, 11.0, 12.0],
            (4, 50): [5.0, 5.5, 6.0],
        }
    )
    choice = smallest_config_meeting(frame, "latency_p95_s", 30.0)
    assert (choice["concurrency"], choice["queue_maxsize"]) == (3, 200)


def test_smallest_config_meeting_returns_none_when_nothing_meets_the_slo() -> None:
    frame = sweep_frame({(2, 50): [100.0, 110.0]})
    assert smallest_config_meeting(frame, "latency_p95_s", 30.0) is None


def test_a_single_replication_gives_no_bound_and_meets_nothing() -> None:
    table = slo_table(sweep_frame({(2, 50): [1.0]}), "latency_p95_s", 30.0)
    assert math.isnan(table["upper"].iloc[0])
    assert not table["meets"].iloc[0]


def test_slo_table_rejects_unknown_metrics_and_confidence_levels() -> None:
    frame = sweep_frame({(2, 50): [1.0, 2.0]})
    with pytest.raises(ValueError, match="unknown metric"):
        slo_table(frame, "nope", 1.0)
    with pytest.raises(ValueError, match="confidence"):
        slo_table(frame, "latency_p95_s", 1.0, confidence=1.0)
