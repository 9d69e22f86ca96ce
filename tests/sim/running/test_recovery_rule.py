"""The recovery rule on synthetic completions: 10 s windows after the last fault, within
10% of the pre-fault goodput, and every later window too."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import CapacityDrop, Constant, Downstream, Poisson, Scenario, simulate
from pipeline.sim.running.recovery import first_recovered, recovery


def _steady(rate_per_s, start_s, end_s):
    """Completions at an exact rate: one every 1/rate seconds in [start, end)."""
    return np.arange(start_s, end_s, 1.0 / rate_per_s)


@pytest.mark.parametrize(
    ("goodputs", "expected"),
    [([100, 100, 100], 0), ([0, 50, 95, 105, 100], 2), ([0, 50, 95, 130, 100], 4),
     ([100, 100, 80], None), ([], None), ([110.0, 90.0], 0), ([110.1, 100], 1)],
)  # fmt: skip
def test_the_first_window_from_which_every_window_is_within_ten_percent(goodputs, expected):
    assert first_recovered(100.0, goodputs) == expected


def test_a_run_that_returns_to_its_goodput_recovers_at_the_first_good_window():
    # 20/s before a fault on [30, 40), nothing during it, 10/s for 20 s after, then 20/s.
    done = np.concatenate([_steady(20, 0, 30), _steady(10, 40, 60), _steady(20, 60, 100)])
    found = recovery(done, first_fault_s=30.0, last_fault_end_s=40.0, traffic_end_s=100.0)
    assert found.baseline_per_s == 20.0
    assert (found.recovered, found.recovery_s) == (True, 20.0)


def test_a_run_that_stays_low_is_stuck():
    done = np.concatenate([_steady(20, 0, 30), _steady(5, 40, 100)])
    found = recovery(done, first_fault_s=30.0, last_fault_end_s=40.0, traffic_end_s=100.0)
    assert (found.recovered, found.recovery_s) == (False, None)


def test_a_catch_up_burst_above_the_band_delays_recovery():
    # The backlog drains at 30/s for 10 s (50% above): not "within 10%" of 20/s.
    done = np.concatenate([_steady(20, 0, 30), _steady(30, 40, 50), _steady(20, 50, 90)])
    found = recovery(done, first_fault_s=30.0, last_fault_end_s=40.0, traffic_end_s=90.0)
    assert (found.recovered, found.recovery_s) == (True, 10.0)


def test_a_relapse_after_a_good_window_counts_from_after_it():
    done = np.concatenate(
        [_steady(20, 0, 30), _steady(20, 40, 50), _steady(2, 50, 60), _steady(20, 60, 80)]
    )
    found = recovery(done, first_fault_s=30.0, last_fault_end_s=40.0, traffic_end_s=80.0)
    assert (found.recovered, found.recovery_s) == (True, 20.0)


def test_only_whole_windows_before_the_end_of_the_traffic_count():
    # Traffic ends at 65: windows [40,50) [50,60); the drain after 65 is not judged.
    done = np.concatenate([_steady(20, 0, 30), _steady(20, 40, 65), _steady(1, 65, 90)])
    found = recovery(done, first_fault_s=30.0, last_fault_end_s=40.0, traffic_end_s=65.0)
    assert (found.recovered, found.recovery_s) == (True, 0.0)


def test_a_completion_on_a_window_edge_belongs_to_the_later_window():
    # 10 completions in [0, 10): baseline 1/s. After a fault ending at 10, one window
    # [10, 20) and a completion at exactly 20 (outside it).
    done = np.concatenate([np.arange(10.0), np.arange(10.0, 20.0), [20.0, 20.0]])
    found = recovery(done, first_fault_s=10.0, last_fault_end_s=10.0, traffic_end_s=20.0)
    assert (found.recovered, found.recovery_s) == (True, 0.0)


def test_the_rule_cannot_judge_without_a_baseline_or_a_window():
    done = _steady(20, 0, 100)
    assert recovery(done, first_fault_s=0.0, last_fault_end_s=5.0, traffic_end_s=100.0)[:2] == (
        None,
        None,
    )
    short = recovery(done, first_fault_s=30.0, last_fault_end_s=95.0, traffic_end_s=100.0)
    assert short.recovered is None and short.recovery_s is None


def test_the_summary_keys_with_and_without_faults():
    config = PipelineConfig(concurrency=100, attempt_timeout_s=5.0)
    base = Scenario(arrivals=Poisson(rate=20.0), config=config, duration_s=60.0, seed=1,
                    downstream=Downstream(concurrency=4, service=Constant(0.05)))  # fmt: skip
    plain = simulate(base).summary
    # No fault: nothing to recover from (None, JSON null); goodput over [0, sim_time_s].
    assert (plain["recovered"], plain["recovery_s"]) == (None, None)
    assert plain["goodput_per_s"] == plain["items_completed"] / plain["sim_time_s"]
    shallow = simulate(base.replace(faults=[CapacityDrop(at_s=20, for_s=1, factor=0.5)])).summary
    assert shallow["recovered"] in (True, False)
    assert shallow["recovery_s"] is None or shallow["recovery_s"] % 10 == 0
