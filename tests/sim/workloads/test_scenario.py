"""Scenario: bad values are named with what is allowed, including the upper bounds."""

from __future__ import annotations

import math

import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, StageSpec, simulate, sweep
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


# -- replace(): a field applies to the value given in the same call -------------------------


def chain(write_mean: float = 0.1, **kw):
    return Scenario(
        arrivals=Poisson(rate=2.0),
        stages=[
            StageSpec(name="fetch", service=Exponential(mean=0.2)),
            StageSpec(
                name="write",
                service=Exponential(mean=write_mean),
                config=PipelineConfig(concurrency=2, queue_maxsize=None),
            ),
        ],
        n_items=kw.pop("n_items", 60),
        seed=3,
        **kw,
    )


def test_a_stage_field_applies_to_the_stages_given_with_it():
    slower = chain(write_mean=0.9).stages
    changed = chain().replace(stages=slower, **{"write.concurrency": 5})
    assert changed.stages[1].service == Exponential(mean=0.9)  # the stages given are kept
    assert changed.stages[1].config.concurrency == 5  # and the field applies to them
    assert changed.stages[1].config.queue_maxsize is None
    assert changed.stages[0] == slower[0]


def test_a_config_field_applies_to_the_config_given_with_it():
    given = PipelineConfig(concurrency=2, queue_maxsize=7, max_attempts=5)
    changed = scenario().replace(config=given, concurrency=9)
    assert changed.config == PipelineConfig(concurrency=9, queue_maxsize=7, max_attempts=5)
    # A stage's config given with one of its fields: the same rule, per stage.
    stage = chain().replace(**{"write.config": given, "write.concurrency": 9}).stages[1]
    assert stage.config == PipelineConfig(concurrency=9, queue_maxsize=7, max_attempts=5)


@pytest.mark.parametrize("engine", ["asyncio", "kernel"])
def test_a_sweep_over_stages_and_a_stage_field_varies_both(engine):
    fast, slow = chain(write_mean=0.1).stages, chain(write_mean=0.6).stages
    frame = sweep(
        chain(),
        {"stages": [fast, slow], "write.concurrency": [1, 3]},
        replications=1,
        processes=1,
        progress=False,
        engine=engine,
    )
    latency = frame["latency_mean_s"].to_numpy()
    # (fast, 1), (fast, 3), (slow, 1), (slow, 3): four different runs.
    assert len(set(latency.tolist())) == 4
    assert latency[2] > latency[0] and latency[3] > latency[1]
    assert set(frame["engine"]) == {engine}
    # Each row is the run of its own scenario.
    one = simulate(chain().replace(stages=slow, **{"write.concurrency": 1}), engine=engine)
    assert one.summary["latency_mean_s"] == pytest.approx(latency[2], rel=1e-12)


@pytest.mark.parametrize("engine", ["asyncio", "kernel"])
def test_a_sweep_over_configs_and_a_config_field_varies_both(engine):
    small = PipelineConfig(queue_maxsize=2, on_full="reject", drain_timeout_s=None)
    large = PipelineConfig(queue_maxsize=50, on_full="reject", drain_timeout_s=None)
    base = scenario(n_items=300).replace(arrivals=Poisson(rate=3.0))
    frame = sweep(
        base,
        {"config": [small, large], "concurrency": [1, 2]},
        replications=1,
        processes=1,
        progress=False,
        engine=engine,
    )
    shed = frame["items_shed"].tolist()
    assert shed[0] > shed[2] and shed[1] > shed[3]  # the small queue sheds more
    assert shed[0] > shed[1]  # and more workers shed less


@pytest.mark.parametrize(
    ("make", "changes", "match"),
    [
        # A chain has no config of its own: which stage's would it be?
        (chain, {"concurrency": 3}, r"^'concurrency' is a stage's setting in a chain; name the"),
        (chain, {"config": PipelineConfig(concurrency=3)}, r"^config \(concurrency=3\) applies"),
        # ... also when the stages come with it, onto a single-stage scenario.
        (scenario, {"stages": "CHAIN", "service": None, "concurrency": 3}, r"stage's setting"),
        # A stage's field needs stages to apply to: those given, else the scenario's.
        (scenario, {"write.concurrency": 3}, r"names a stage, but this scenario has no stages"),
        (
            chain,
            {"stages": None, "service": Exponential(mean=1.0), "write.concurrency": 3},
            r"names a stage, but this scenario has no stages",
        ),
        (chain, {"stages": "ONE", "write.concurrency": 3}, r"no stage named 'write'; stages: a"),
    ],
)
def test_a_field_with_nothing_to_apply_to_is_one_line(make, changes, match):
    changes = dict(changes)
    if changes.get("stages") == "CHAIN":
        changes["stages"] = chain().stages
    elif changes.get("stages") == "ONE":
        changes["stages"] = [StageSpec(name="a", service=Exponential(mean=1.0))]
    with pytest.raises(ValueError, match=match) as caught:
        make().replace(**changes)
    assert "\n" not in str(caught.value)


def test_a_chain_refuses_a_config_of_its_own_as_it_refuses_service_and_failures():
    stages = chain().stages
    with pytest.raises(
        ValueError,
        match=r"^config \(concurrency=3, drain_timeout_s=None\) "
        r"applies to one stage; with stages, give each StageSpec its own config$",
    ):
        Scenario(
            arrivals=Poisson(rate=2.0),
            stages=stages,
            config=PipelineConfig(concurrency=3, drain_timeout_s=None),
            n_items=10,
        )
    # The default config is no config at all: accepted, as before.
    assert (
        Scenario(
            arrivals=Poisson(rate=2.0), stages=stages, config=PipelineConfig(), n_items=10
        ).stages
        == stages
    )
