"""Scenario: bad values are named with what is allowed, including the upper bounds."""

from __future__ import annotations

import math

import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, simulate
from pipeline.sim.workloads.scenario import MAX_ITEM_SIZE_BYTES, MAX_N_ITEMS


def scenario(**kw):
    if "duration_s" not in kw:
        kw.setdefault("n_items", 10)
    return Scenario(arrivals=Poisson(rate=2.0), service=Exponential(mean=1.0), **kw)


def test_the_bounds_leave_room_in_int64():
    # memory_bytes is (items held) x item_size_bytes in int64; at most n_items are held
    assert MAX_N_ITEMS * MAX_ITEM_SIZE_BYTES < 2**63


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"n_items": MAX_N_ITEMS + 1}, r"n_items must be an integer >= 0 and <= 1_000_000_000"),
        ({"n_items": 10**13}, r"got 10000000000000"),
        ({"n_items": -1}, r"n_items must be an integer >= 0"),
        ({"n_items": 2.0}, r"n_items must be an integer"),
        ({"n_items": True}, r"n_items must be an integer"),
        (
            {"item_size_bytes": MAX_ITEM_SIZE_BYTES + 1},
            r"item_size_bytes must be an integer >= 0 and <= 4_294_967_296 \(4 GiB\)",
        ),
        ({"item_size_bytes": 10**20}, r"item_size_bytes must be .* got 100000000000000000000"),
        ({"item_size_bytes": -1}, r"item_size_bytes must be an integer >= 0"),
        ({"n_items": None, "duration_s": math.inf}, r"duration_s must be finite and >= 0"),
        ({"n_items": None, "duration_s": math.nan}, r"duration_s must be finite"),
        (
            {"n_items": None, "duration_s": 10**400},
            r"duration_s must be >= 0 and <= 1.8e\+308 \(seconds\), got 1e\+400",
        ),
        ({"warmup_s": math.inf}, r"warmup_s must be finite and >= 0 \(seconds\), got inf"),
        ({"warmup_s": -1.0}, r"warmup_s must be >= 0 \(seconds\), got -1.0"),
    ],
)
def test_bad_values_are_named(changes, match):
    with pytest.raises(ValueError, match=match):
        scenario().replace(**changes)


def test_the_bounds_themselves_are_allowed():
    assert scenario(n_items=MAX_N_ITEMS).n_items == MAX_N_ITEMS
    assert scenario(item_size_bytes=MAX_ITEM_SIZE_BYTES).item_size_bytes == MAX_ITEM_SIZE_BYTES
    assert scenario(duration_s=5, warmup_s=1).duration_s == 5


def test_the_largest_item_size_gives_exact_memory():
    # drain_timeout_s=None: every item finishes (the 30 s default would leave a few unfinished).
    config = PipelineConfig(concurrency=1, queue_maxsize=None, drain_timeout_s=None)
    result = simulate(scenario(n_items=50, item_size_bytes=MAX_ITEM_SIZE_BYTES, config=config))
    peak = result.summary["memory_peak_bytes"]
    assert peak > 0 and peak % MAX_ITEM_SIZE_BYTES == 0
    assert int(result.timeseries["memory_bytes"].max()) == peak
