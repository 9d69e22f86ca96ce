"""Item classes: validation in one line, reproducible class draws, and the attacks.

Shares summing to anything, one class, a class with share 0, NaN and zero
patience, huge numbers and an empty run; the same draw on every engine.
"""

from __future__ import annotations

import decimal
import math
import warnings

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Constant, Exponential, ItemClass, Poisson, Scenario, StageSpec, simulate
from pipeline.sim.workloads.classes import class_codes


def scenario(classes, **kw):
    kw.setdefault("n_items", 300)
    return Scenario(
        arrivals=Poisson(rate=3.0),
        service=Exponential(mean=0.5),
        config=kw.pop("config", PipelineConfig(concurrency=2, queue_maxsize=None)),
        classes=classes,
        seed=kw.pop("seed", 5),
        **kw,
    )


# -- validation: one line naming the parameter ---------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"name": ""}, ValueError, "class name must be 1 to 64 letters"),
        ({"name": "a.b"}, ValueError, "class name must be"),
        ({"name": "a/b"}, ValueError, "class name must be"),
        ({"name": "-x"}, ValueError, "not starting with '-'"),
        ({"name": "x" * 65}, ValueError, "class name must be"),
        ({"name": 3}, ValueError, "class name must be"),
        ({"name": "hé"}, ValueError, "class name must be"),
        ({"name": "a", "share": -1}, ValueError, "class 'a': share must be >= 0"),
        ({"name": "a", "share": math.nan}, ValueError, "class 'a': share must be finite"),
        ({"name": "a", "share": math.inf}, ValueError, "class 'a': share must be finite"),
        ({"name": "a", "share": decimal.Decimal("NaN")}, ValueError, "share must be finite"),
        ({"name": "a", "share": True}, TypeError, "class 'a': share must be a real number"),
        ({"name": "a", "share": "1"}, TypeError, "share must be a real number"),
        ({"name": "a", "priority": math.nan}, ValueError, "class 'a': priority must be finite"),
        ({"name": "a", "priority": "high"}, TypeError, "class 'a': priority must be a real"),
        ({"name": "a", "priority": 10**400}, ValueError, "class 'a': priority must be"),
        ({"name": "a", "service": 1.0}, TypeError, "class 'a': service must be a distribution"),
        ({"name": "a", "patience": 2.0}, TypeError, "class 'a': patience must be a distribution"),
        ({"name": "a", "patience": Constant(0)}, ValueError, "patience must draw seconds > 0"),
    ],
)
def test_a_bad_class_is_one_line_naming_the_parameter(kwargs, error, message):
    with pytest.raises(error, match=message) as caught:
        ItemClass(**kwargs)
    assert "\n" not in str(caught.value)


def test_nan_patience_is_refused_where_the_distribution_is_built():
    with pytest.raises(ValueError, match="value must be finite"):
        Constant(math.nan)


def test_numbers_of_every_kind_are_taken_as_the_plain_ones():
    c = ItemClass(
        name="a", share=np.float32(0.5), priority=np.int64(3), patience=Constant(value=1.0)
    )
    assert c.share == 0.5 and type(c.share) is float
    assert c.priority == 3 and type(c.priority) is int
    assert ItemClass(name="b", share=decimal.Decimal("0.25")).share == 0.25
    assert ItemClass(name="c", priority=decimal.Decimal("1.5")).priority == 1.5
    assert ItemClass(name="big", priority=2**80).priority == 2**80  # an int key stays exact


@pytest.mark.parametrize(
    ("classes", "error", "message"),
    [
        ([], ValueError, "classes must hold at least one ItemClass"),
        ("high", TypeError, "classes must be a list of ItemClass"),
        ([{"name": "a"}], TypeError, r"classes\[0\] must be an ItemClass"),
        (
            [ItemClass(name="a"), ItemClass(name="a")],
            ValueError,
            "class names must be unique, got 'a' twice",
        ),
        (
            [ItemClass(name="a", share=0), ItemClass(name="b", share=0.0)],
            ValueError,
            "at least one class must have a share > 0, got shares a=0.0, b=0.0",
        ),
    ],
)
def test_a_bad_list_of_classes_is_one_line(classes, error, message):
    with pytest.raises(error, match=message) as caught:
        scenario(classes)
    assert "\n" not in str(caught.value)


def test_classes_and_the_configs_own_priority_or_deadline_do_not_mix():
    for name, value in (("priority", lambda item: 0), ("max_wait_s", 3.0)):
        config = PipelineConfig(concurrency=2, **{name: value})
        with pytest.raises(ValueError, match=f"config.{name} is set, and classes set"):
            scenario([ItemClass(name="a")], config=config)


def test_in_a_chain_a_class_has_no_service_and_no_stage_sets_priority_or_deadlines():
    stage = StageSpec(name="s", service=Exponential(mean=0.1))
    with pytest.raises(ValueError, match="class 'a': service applies to one stage") as caught:
        Scenario(
            arrivals=Poisson(rate=1.0),
            stages=[stage],
            classes=[ItemClass(name="a", service=Constant(1.0))],
            n_items=10,
        )
    assert "\n" not in str(caught.value)
    keyed = StageSpec(name="t", service=Exponential(mean=0.1), config=PipelineConfig(max_wait_s=1))
    with pytest.raises(ValueError, match=r"stage 't': config\.max_wait_s is set"):
        Scenario(
            arrivals=Poisson(rate=1.0),
            stages=[stage, keyed],
            classes=[ItemClass(name="a")],
            n_items=10,
        )


def test_without_a_scenario_service_every_class_needs_its_own():
    with pytest.raises(ValueError, match="class 'b' has none"):
        Scenario(
            arrivals=Poisson(rate=1.0),
            classes=[ItemClass(name="a", service=Constant(0.1)), ItemClass(name="b")],
            n_items=10,
        )
    own = Scenario(
        arrivals=Poisson(rate=1.0),
        classes=[
            ItemClass(name="a", service=Constant(0.1), share=1),
            ItemClass(name="b", service=Constant(0.3), share=3),
        ],
        n_items=200,
    )
    assert own.offered_load == pytest.approx(1.0 * (0.25 * 0.1 + 0.75 * 0.3))
    items = simulate(own).items
    service = items["latency_s"] - items["wait_s"]
    for name, seconds in (("a", 0.1), ("b", 0.3)):
        assert np.allclose(service[items["class"] == name], seconds)


# -- the draw ---------------------------------------------------------------------------------


def test_shares_are_relative_weights_whatever_they_sum_to():
    small = [ItemClass(name="a", share=0.25), ItemClass(name="b", share=0.75)]
    large = [ItemClass(name="a", share=1e300), ItemClass(name="b", share=3e300)]
    huge = [ItemClass(name="a", share=1.7e308), ItemClass(name="b", share=1.7e308)]
    codes = class_codes(small, 20_000, 1, 0)
    assert np.array_equal(codes, class_codes(large, 20_000, 1, 0))
    # Two shares near the largest float do not overflow to inf + inf: an even split.
    even = class_codes(huge, 20_000, 1, 0)
    assert abs(even.mean() - 0.5) < 4 * math.sqrt(0.25 / 20_000)
    # Binomial: the share of b is within 4 standard errors of 3/4.
    assert abs(codes.mean() - 0.75) < 4 * math.sqrt(0.75 * 0.25 / 20_000)


def test_a_class_with_share_zero_gets_no_items_and_a_summary_of_none():
    classes = [
        ItemClass(name="none", share=0),
        ItemClass(name="all", share=2),
        ItemClass(name="never", share=0.0),
    ]
    result = simulate(scenario(classes))
    assert set(result.items["class"]) == {"all"}
    for name in ("none", "never"):
        own = result.summary["classes"][name]
        assert own["items"] == own["completed"] == own["expired"] == 0
        assert math.isnan(own["expired_fraction"]) and math.isnan(own["wait_mean_s"])
    assert result.summary["classes"]["all"]["items"] == 300


def test_one_class_is_the_run_without_classes_item_for_item():
    plain = simulate(scenario(None))
    one = simulate(scenario([ItemClass(name="only", share=7, priority=3)]))
    columns = ["arrival_s", "start_s", "finish_s", "outcome"]
    assert plain.items[columns].equals(one.items[columns])
    assert one.summary["classes"]["only"]["items"] == 300
    assert one.summary["classes"]["only"]["wait_mean_s"] == plain.summary["wait_mean_s"]


def test_the_same_seed_draws_the_same_classes_and_a_class_change_leaves_the_others_alone():
    classes = [
        ItemClass(name="a", share=1, service=Exponential(mean=0.2)),
        ItemClass(name="b", share=1, patience=Exponential(mean=0.5)),
    ]
    first, second = simulate(scenario(classes)), simulate(scenario(classes))
    assert first.items.equals(second.items)
    # Another patience for b: the classes and a's own service times are unchanged.
    other = [classes[0], ItemClass(name="b", share=1, patience=Exponential(mean=5.0))]
    third = simulate(scenario(other))
    assert third.items["class"].equals(first.items["class"])
    a = first.items["class"] == "a"
    service = (first.items["latency_s"] - first.items["wait_s"])[a]
    assert np.allclose(service, (third.items["latency_s"] - third.items["wait_s"])[a])


def test_the_kernel_declines_classes_in_one_line_and_auto_runs_the_engine():
    s = scenario([ItemClass(name="a")])
    with pytest.raises(ValueError, match=r"^engine='kernel' does not support item classes"):
        simulate(s, engine="kernel")
    assert simulate(s).summary["engine"] == "asyncio"
    assert simulate(s, replications=2).results[1].summary["engine"] == "asyncio"
    # The same scenario without classes is the kernel's: auto picks it.
    assert simulate(scenario(None)).summary["engine"] == "kernel"


def test_auto_in_a_sweep_never_runs_the_kernel_on_classes():
    from pipeline.sim import sweep

    s = scenario([ItemClass(name="a")], n_items=50)
    frame = sweep(
        s,
        {"concurrency": [1, 2], "classes": [None, s.classes]},
        replications=1,
        processes=1,
        progress=False,
    )
    engines = dict(zip(frame["classes"].map(lambda v: v is None), frame["engine"], strict=True))
    assert engines == {True: "kernel", False: "asyncio"}
    with pytest.raises(ValueError, match="does not support item classes"):
        sweep(s, {"concurrency": [1]}, engine="kernel", processes=1, progress=False)


# -- patience ---------------------------------------------------------------------------------


def test_a_patience_draw_of_zero_is_one_line_naming_the_class_and_item():
    from pipeline.sim import Empirical

    patience = Empirical([0.0, 1.0])
    s = scenario([ItemClass(name="z", patience=patience)], n_items=50)
    with pytest.raises(ValueError, match=r"class 'z': patience .* drew 0.0 seconds for item \d+"):
        simulate(s)


def test_huge_patience_never_expires_and_huge_service_finishes_in_virtual_time():
    classes = [
        ItemClass(name="slow", share=1, priority=-1e308, service=Constant(1e300)),
        ItemClass(name="calm", share=1, priority=1e308, patience=Constant(1e307)),
    ]
    s = scenario(
        classes,
        n_items=6,
        config=PipelineConfig(concurrency=1, queue_maxsize=None, drain_timeout_s=None),
    )
    result = simulate(s)
    assert result.summary["items_expired"] == 0
    assert result.summary["items_completed"] == 6
    assert result.report.balanced


def test_an_empty_run_has_class_summaries_of_nothing():
    classes = [ItemClass(name="a", patience=Exponential(mean=1.0)), ItemClass(name="b")]
    result = simulate(scenario(classes, n_items=0))
    assert result.summary["items_offered"] == 0
    assert math.isnan(result.summary["expired_fraction"])
    assert result.summary["classes"]["a"]["items"] == 0
    assert list(result.items["class"]) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        simulate(scenario(classes, duration_s=0.0, n_items=None))


def test_the_backlog_belongs_to_classes_too():
    classes = [ItemClass(name="a", priority=1), ItemClass(name="b", priority=0)]
    result = simulate(scenario(classes, n_items=20, initial_backlog=30))
    assert result.summary["classes"]["a"]["items"] + result.summary["classes"]["b"]["items"] == 50
    items = result.items
    backlog = items[items["backlog"]]
    # Non-preemptive priority: once both workers are busy at 0, every b in the backlog starts
    # before every a still waiting in it.
    waiting = backlog[backlog["start_s"] > 0]
    assert waiting[waiting["class"] == "b"]["start_s"].max() <= (
        waiting[waiting["class"] == "a"]["start_s"].min()
    )


# -- what-ifs over one class --------------------------------------------------------------------


def test_replace_changes_one_field_of_one_class_and_names_what_is_wrong():
    base = scenario([ItemClass(name="high", share=1), ItemClass(name="low", share=2, priority=1)])
    more = base.replace(**{"classes.high.share": 3, "classes.low.patience": Constant(2.0)})
    assert [c.share for c in more.classes] == [3.0, 2.0]
    assert more.classes[1].patience == Constant(2.0) and more.classes[1].priority == 1
    for key, message in (
        ("classes.mid.share", "no class named 'mid'; classes: high, low"),
        ("classes.high.colour", "unknown class field 'colour'; allowed: share, priority"),
        ("classes.high.name", "unknown class field 'name'"),
    ):
        with pytest.raises(ValueError, match=message):
            base.replace(**{key: 1})
    with pytest.raises(ValueError, match="class 'high': share must be >= 0"):
        base.replace(**{"classes.high.share": -1})
    with pytest.raises(ValueError, match="this scenario has no classes"):
        scenario(None).replace(**{"classes.high.share": 1})


def test_a_sweep_varies_one_class_and_replications_read_its_keys():
    from pipeline.sim import sweep

    base = scenario(
        [ItemClass(name="high"), ItemClass(name="low", priority=1, patience=Constant(0.5))],
        n_items=400,
    )
    frame = sweep(
        base,
        {"classes.low.patience": [Constant(0.2), Constant(5.0)]},
        replications=2,
        processes=1,
        progress=False,
    )
    short, long = (
        part["classes.low.expired_fraction"].mean()
        for _, part in frame.groupby(frame["classes.low.patience"].map(repr))
    )
    assert {"classes.high.wait_mean_s", "classes.low.expired"} <= set(frame.columns)
    runs = simulate(base, replications=3, processes=1, progress=False)
    values = runs.values("classes.low.expired_fraction")
    assert list(values) == [r.summary["classes"]["low"]["expired_fraction"] for r in runs.results]
    assert "classes.high.wait_p95_s" in runs.summary.index
    expired = [r.summary["classes"]["low"]["expired"] for r in runs.results]
    assert runs.interval("classes.low.expired").mean == pytest.approx(np.mean(expired))
    # The groups in the order of their reprs: patience 0.2 s, then 5 s.
    assert short > long
