"""recovery_map on a scenario modelled on the OSDI 2022 artefact: a client retrying on
timeout against a server that keeps serving what the client gave up on. A short capacity
drop recovers, a longer one at the same depth leaves the system stuck."""

from __future__ import annotations

import inspect
import math
from fractions import Fraction

import pytest

from pipeline import Backoff, PipelineConfig
from pipeline.sim import (
    CapacityDrop,
    Downstream,
    Exponential,
    Gamma,
    LoadSpike,
    Poisson,
    Scenario,
    recovery_map,
)
from pipeline.sim.analysis.recovery_map import MAP_COLUMNS
from pipeline.sim.stats.proportions import proportion_ci
from pipeline.sim.workloads.arrivals import Deterministic
from tests.docs.figures import quoted


def osdi_like(duration_s: float = 50.0) -> Scenario:
    # 100 requests/s against 10 servers of 12.5/s each (80% busy); the client cuts an
    # attempt after 1 s and tries 4 times, 0.1 s apart. At 100/s a 10 s window holds about
    # 1,000 completions (3% noise), so the rule's 10% band judges it reliably.
    config = PipelineConfig(concurrency=10_000, queue_maxsize=None, max_attempts=4,
                            attempt_timeout_s=1.0, drain_timeout_s=None,
                            backoff=Backoff(kind="constant", base_s=0.1))  # fmt: skip
    return Scenario(arrivals=Poisson(rate=100.0), config=config, duration_s=duration_s, seed=3,
                    downstream=Downstream(concurrency=10,
                                          service=Exponential(mean=0.08)))  # fmt: skip


@pytest.mark.slow  # replicated runs on both sides of the boundary, about 6 s
def test_a_short_drop_recovers_and_a_longer_one_sticks():
    # An 80% cut (factor 0.2) at 20 s: for 1 s the backlog (about 90 requests) drains
    # before waits pass the timeout; for 3 s (about 270) every attempt times out, each
    # retry adds its orphan, and the servers stay busy with work for nobody.
    frame = recovery_map(osdi_like(), fault=CapacityDrop(at_s=20.0, for_s=1.0, factor=0.2),
                         factors=[0.2], durations=[1.0, 3.0], replications=2,
                         processes=1)  # fmt: skip
    assert list(frame.columns) == list(MAP_COLUMNS)
    assert frame[["factor", "duration_s"]].values.tolist() == [[0.2, 1.0], [0.2, 3.0]]
    recovering, stuck = frame.to_dict("records")
    assert (recovering["judged"], recovering["stuck"]) == (2, 0)
    assert recovering["stuck_fraction"] == 0.0 and recovering["stuck_low"] == 0.0
    assert recovering["recovery_s_mean"] >= 0.0
    assert (stuck["judged"], stuck["stuck"]) == (2, 2)
    assert stuck["stuck_fraction"] == 1.0 and stuck["stuck_high"] == 1.0
    # Wilson's interval at 2 of 2 (z = 1.96): low = 4 / (4 + 3.8415) = 0.5101.
    assert stuck["stuck_low"] == pytest.approx(2 / (2 + 1.959964**2), rel=1e-5)
    assert math.isnan(stuck["recovery_s_mean"])


def test_recovery_map_validates_before_any_run():
    base = osdi_like()
    fault = CapacityDrop(at_s=20.0, for_s=1.0, factor=0.2)
    with pytest.raises(ValueError, match=r"^factors\[1\] must be > 0"):
        recovery_map(base, fault=fault, factors=[0.2, 0.0], durations=[1.0])
    with pytest.raises(ValueError, match=r"^durations\[0\] must be finite"):
        recovery_map(base, fault=fault, factors=[0.2], durations=[math.nan])
    with pytest.raises(ValueError, match=r"^durations must hold at least one value"):
        recovery_map(base, fault=fault, factors=[0.2], durations=[])
    with pytest.raises(TypeError, match=r"^factors must be a sequence"):
        recovery_map(base, fault=fault, factors="0.2", durations=[1.0])
    with pytest.raises(ValueError, match=r"^replications must be >= 1"):
        recovery_map(base, fault=fault, factors=[0.2], durations=[1.0], replications=0)
    with pytest.raises(TypeError, match=r"^fault must be a CapacityDrop or a LoadSpike"):
        recovery_map(base, fault=0.2, factors=[0.2], durations=[1.0])
    with pytest.raises(ValueError, match=r"^scenario has faults of its own"):
        recovery_map(base.replace(faults=[LoadSpike(at_s=1, for_s=1, factor=2)]), fault=fault,
                     factors=[0.2], durations=[1.0])  # fmt: skip
    with pytest.raises(ValueError, match=r"^engine must be 'auto', 'asyncio' or 'kernel', got"):
        recovery_map(base, fault=fault, factors=[0.2], durations=[1.0], engine="fast")


def test_the_map_runs_on_the_engine_it_is_asked_for():
    # "asyncio" runs the reference engine; "auto" the kernel inside its domain: the same map.
    base = osdi_like(duration_s=25.0).replace(arrivals=Poisson(rate=20.0))
    fault = CapacityDrop(at_s=5.0, for_s=1.0, factor=0.5)
    maps = [recovery_map(base, fault=fault, factors=[0.5], durations=[1.0], replications=2,
                         engine=engine) for engine in ("asyncio", "auto")]  # fmt: skip
    assert maps[0].equals(maps[1])


@pytest.mark.slow  # a map twice, once on worker processes: 4 s
def test_a_map_on_worker_processes_gives_the_numbers_of_one_process():
    # The scenario, its downstream and the faults travel to worker processes (pickled).
    base = osdi_like(duration_s=25.0).replace(arrivals=Poisson(rate=20.0))
    fault = CapacityDrop(at_s=5.0, for_s=1.0, factor=0.5)
    here = recovery_map(base, fault=fault, factors=[0.5], durations=[1.0, 2.0],
                        replications=2, processes=1, seed=7)  # fmt: skip
    there = recovery_map(base, fault=fault, factors=[0.5], durations=[1.0, 2.0],
                         replications=2, processes=2, seed=7)  # fmt: skip
    assert here.equals(there)


def osdi_tuned() -> Scenario:
    """The OSDI artefact's shape at a size a test can afford.

    A client sending 100 requests/s at a fixed rate (evenly spaced) to 20 servers of
    10/s each (50% busy, so only a deep cut builds a backlog), whose service times vary
    less than exponential ones (Gamma, cv 0.5); the client cuts an attempt after 4.3 s,
    43 mean service times, and tries 4 times. A drop at 30 s builds a backlog; once it
    holds more than 4.3 s of the cut servers' work, every attempt times out and its
    retry joins the queue 4.3 s later behind its own orphan, so the backlog grows more
    than twice as fast. When the drop ends with more than 4.3 s of the full servers'
    work queued, every new attempt times out too, each item sends 4 (twice what the
    servers can take), and the system stays stuck.

    The boundary is a backlog, so it moves with the drop's length, its depth and the
    load, and in proportion to the timeout (with Poisson arrivals, exponential services
    and a 5 s timeout the 80% cut stuck in 0 of 10 runs at 10.5 s, 5 at 11 s, 8 at
    11.5 s and 10 at 12 s; at 4.3 s, in 0 of 10 at 9 s and 9 of 10 at 10 s). Its width is
    the noise of the arrivals and services in that backlog: with Poisson arrivals and
    exponential services the artefact's 78% cut for 10 s stuck in 3 of 6 runs, on the
    boundary. A fixed-rate client and steadier services narrow it to the artefact's
    two points of depth. At 100/s a 10 s window holds about 1,000 completions, so the
    rule's 10% band judges a recovered run as recovered (at 50/s a window's 500
    Poisson completions vary by 4.5%, and 2 of 10 runs of a cell that had recovered
    failed the band by noise alone).
    """
    config = PipelineConfig(concurrency=10_000, queue_maxsize=None, max_attempts=4,
                            attempt_timeout_s=4.3, drain_timeout_s=None,
                            backoff=Backoff(kind="constant", base_s=0.1))  # fmt: skip
    return Scenario(arrivals=Deterministic(rate=100.0), config=config, duration_s=100.0,
                    seed=3, downstream=Downstream(concurrency=20,
                                                  service=Gamma(mean=0.1, cv=0.5)))  # fmt: skip


#: The tuned map's cells, the artefact's: an 80% cut (factor 0.2) for 9 s recovers and for
#: 10 s sticks; a 78% cut (factor 0.22) for 10 s recovers; 30% less load (70/s) moves the
#: stuck cell.
CUT, SHALLOW_CUT, SHORT_S, LONG_S, LIGHTER_RATE = 0.2, 0.22, 9.0, 10.0, 70.0
#: Runs per cell, and the side of which each cell's 95% Wilson interval must lie.
MAP_REPLICATIONS, BOUNDARY = 10, 0.5


@pytest.mark.slow
def test_the_osdi_shape_a_sharp_boundary_that_a_shallower_cut_or_less_load_moves():
    # Each cell's stuck fraction over 10 replications, with its 95% Wilson interval: a
    # cell "recovers" when the whole interval is below 1/2 (at most 1 stuck run of 10),
    # "sticks" when it is above 1/2 (at least 9 of 10). Fixed seeds: the runs are the same
    # on every machine.
    fault = CapacityDrop(at_s=30.0, for_s=SHORT_S, factor=CUT)
    options = dict(replications=MAP_REPLICATIONS, processes=2)
    frame = recovery_map(osdi_tuned(), fault=fault, factors=[CUT, SHALLOW_CUT],
                         durations=[SHORT_S, LONG_S], **options)  # fmt: skip
    cells = {(row.factor, row.duration_s): row for row in frame.itertuples()}
    assert all(row.judged == MAP_REPLICATIONS for row in cells.values())
    # An 80% cut: 9 s recovers, 10 s (the next duration of the map) sticks.
    assert cells[CUT, SHORT_S].stuck_high < BOUNDARY < cells[CUT, LONG_S].stuck_low
    # A cut two points shallower (78%) for the same 10 s recovers.
    assert cells[SHALLOW_CUT, LONG_S].stuck_high < BOUNDARY
    # The stuck cell with 30% less load recovers.
    lighter = osdi_tuned().replace(arrivals=Deterministic(rate=LIGHTER_RATE))
    moved = recovery_map(lighter, fault=fault, factors=[CUT], durations=[LONG_S], **options)
    assert moved.stuck_high.iloc[0] < BOUNDARY


def test_the_overload_guide_quotes_the_map_the_slow_test_holds():
    """The guide's sentence on the tuned map: its scenario as :func:`osdi_tuned` sets it,
    and the cells, replications and boundary the test above holds it to."""
    said = quoted(
        "docs/guide/overload.md",
        r"With (\d+) servers half busy \(service times of cv ([\d.]+)\), a client sending at a"
        r" fixed rate and a ([\d.]+) s timeout \((\d+) service times\), an (\d+)% cut for"
        r" (\d+) s recovers and for (\d+) s sticks; a (\d+)% cut for (\d+) s recovers,"
        r" and so does the (\d+) s cut with (\d+)% less traffic\. `[^`]+` holds that map to"
        r" (\d+) replications a cell, each cell's (\d+)% Wilson interval on its side of (1/2)\.",
    )
    scenario = osdi_tuned()
    servers, mean_s = scenario.downstream.concurrency, scenario.downstream.service.mean
    timeout_s = scenario.config.attempt_timeout_s
    assert scenario.arrivals.rate * mean_s / servers == pytest.approx(0.5)  # half busy
    assert isinstance(scenario.arrivals, Deterministic)  # a fixed rate
    shown = [float(value) for value in said.groups()[:-1]]
    assert shown == pytest.approx([
        servers, scenario.downstream.service.cv, timeout_s, timeout_s / mean_s,
        100 * (1 - CUT), SHORT_S, LONG_S, 100 * (1 - SHALLOW_CUT), LONG_S, LONG_S,
        100 * (1 - LIGHTER_RATE / scenario.arrivals.rate), MAP_REPLICATIONS,
        100 * inspect.signature(proportion_ci).parameters["level"].default,
    ]), said[0]  # fmt: skip
    assert Fraction(said.groups()[-1]) == BOUNDARY, said[0]
