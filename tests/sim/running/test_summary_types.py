"""A run's summary is plain data: every value a ``bool``, ``int``, ``float``, ``str`` or None.

No numpy scalar (``np.float64`` compares and prints like a float, but is not
one: ``type(v) is float`` fails, a JSON encoder without numpy support refuses it,
and its repr is ``np.float64(0.8)`` on numpy 2), in every key, recursively: the
stages' summaries of a chain, the classes' summaries, on both engines and with
the options that add keys (a backlog, a warm-up, shedding, deadlines, failures).
"""

from __future__ import annotations

import pytest

from pipeline import PipelineConfig
from pipeline.sim import (
    Exponential,
    IndependentFailures,
    ItemClass,
    Poisson,
    Scenario,
    StageSpec,
    simulate,
)

PLAIN = (bool, int, float, str, type(None))


def not_plain(value, path="summary"):
    """Every place in ``value`` that is not plain data, as 'path: type' strings."""
    if isinstance(value, dict):
        found = [f"{path}: key {key!r}" for key in value if type(key) is not str]
        for key, inner in value.items():
            found += not_plain(inner, f"{path}[{key!r}]")
        return found
    if isinstance(value, list | tuple):
        return [each for i, inner in enumerate(value) for each in not_plain(inner, f"{path}[{i}]")]
    return [] if type(value) in PLAIN else [f"{path}: {type(value).__name__}"]


BASE = Scenario(
    arrivals=Poisson(rate=3.6),
    service=Exponential(mean=1.0),
    config=PipelineConfig(concurrency=4, queue_maxsize=10),
    failures=IndependentFailures(0.1),
    n_items=400,
    seed=3,
)
CLASSES = [
    ItemClass(name="gold", priority=0),
    ItemClass(name="silver", share=2, priority=1, patience=Exponential(mean=3.0)),
]
CHAIN = Scenario(
    arrivals=Poisson(rate=2.0),
    stages=[
        StageSpec(name="fetch", service=Exponential(mean=0.3),
                  config=PipelineConfig(concurrency=2, queue_maxsize=5)),
        StageSpec(name="write", service=Exponential(mean=0.4),
                  config=PipelineConfig(concurrency=2, queue_maxsize=3)),
    ],
    n_items=300,
    seed=2,
)  # fmt: skip
SCENARIOS = {
    "plain": BASE,
    "reject": BASE.replace(on_full="reject"),
    "warm-up": BASE.replace(warmup_s=20.0),
    "warm-up past the end": BASE.replace(warmup_s=1e6),
    "backlog": BASE.replace(initial_backlog=50),
    "deadlines": BASE.replace(max_wait_s=2.0),
    "classes": BASE.replace(classes=CLASSES),
    "drain cut": BASE.replace(arrivals=Poisson(rate=8.0), drain_timeout_s=1.0),
    "one item": BASE.replace(n_items=1),
    "chain": CHAIN,
    "chain with classes": CHAIN.replace(classes=[ItemClass(name="a"), ItemClass(name="b")]),
}


@pytest.mark.filterwarnings("ignore::pipeline.sim.DrainTimeoutWarning")  # "drain cut" is meant
@pytest.mark.parametrize("engine", ["asyncio", "auto"])
@pytest.mark.parametrize("name", SCENARIOS)
def test_every_summary_value_is_plain_data(name, engine):
    result = simulate(SCENARIOS[name], engine=engine)
    if engine == "auto" and name in ("plain", "warm-up", "backlog", "chain", "one item"):
        assert result.engine == "kernel"  # the kernel's summaries are checked too
    assert not_plain(result.summary) == []
    for stage, each in getattr(result, "stages", {}).items():
        assert not_plain(each.summary, f"stages[{stage!r}].summary") == []
    if name == "classes":
        assert set(result.summary["classes"]) == {c.name for c in CLASSES}
