"""trace_window: the items of a recorded trace in a window, re-timed to start at 0."""

from __future__ import annotations

import pytest

from pipeline.sim.workloads.traces.replay import load_trace
from pipeline.sim.workloads.traces.window import trace_window


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
