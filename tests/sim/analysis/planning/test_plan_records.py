"""A plan answers with frozen records and a ``str`` enum status, and its JSON is unchanged.

``Plan.binding`` is a :class:`Binding` (with one :class:`CheaperStep` per searched
field), ``Plan.undecided`` a tuple of :class:`OpenQuestion`, ``Plan.status`` a
:class:`PlanStatus` that equals its string. Each record's ``to_dict()`` is the
object ``plan --json`` prints, key for key and in the same order (the CLI's
golden files pin the numbers).
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from pipeline import PipelineConfig
from pipeline.sim import SLO, Exponential, IndependentFailures, Poisson, Scenario, plan, theory
from pipeline.sim.analysis.planning.records import Binding, CheaperStep, OpenQuestion, PlanStatus


def base(**config) -> Scenario:
    return Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=PipelineConfig(**{"concurrency": 4, "queue_maxsize": None, **config}),
        n_items=1000,
        seed=3,
    )


@pytest.fixture(scope="module")
def chosen():
    # The wait limit sits at the geometric mean of Erlang C's waits at 4 and 5 workers,
    # far from both: 5 is chosen, 4 fails; utilisation >= 0.5 holds up to 6 workers.
    limit = math.sqrt(theory.mmc(3.2, 1.0, 4).wait_mean_s * theory.mmc(3.2, 1.0, 5).wait_mean_s)
    return plan(
        base(),
        {"concurrency": range(4, 9), "queue_maxsize": [None]},
        [f"wait_mean_s<={limit}", "utilisation>=0.5"],
        processes=1,
        progress=False,
    )


@pytest.fixture(scope="module")
def undecided():
    # p**k = 0.25 exactly in expectation: a limit right there stays open.
    scenario = base(max_attempts=2).replace(failures=IndependentFailures(0.5))
    return plan(
        scenario,
        {"concurrency": [6]},
        ["dead_letter_fraction<=0.25"],
        replications=(3, 3),
        processes=1,
        progress=False,
    )


def test_the_status_is_an_enum_equal_to_its_string(chosen, undecided):
    assert chosen.status is PlanStatus.CHOSEN and chosen.status == "chosen"
    assert undecided.status is PlanStatus.UNDECIDED and undecided.status == "undecided"
    assert isinstance(chosen.status, str) and f"{chosen.status}" == str(chosen.status) == "chosen"
    assert json.dumps(chosen.status) == '"chosen"'
    assert json.loads(json.dumps(chosen.to_dict()))["status"] == "chosen"
    assert type(chosen.to_dict()["status"]) is str
    assert repr(chosen).startswith("<Plan status=chosen ")
    assert {s.value for s in PlanStatus} == {"chosen", "undecided", "infeasible"}


def test_the_binding_is_a_frozen_record_of_slos(chosen):
    binding = chosen.binding
    assert isinstance(binding, Binding) and binding.slo in chosen.slos
    assert binding.limit == binding.slo.limit and math.isfinite(binding.slack)
    assert binding.slack >= 0  # the choice meets every SLO: each bound is on the safe side
    assert chosen.chosen["concurrency"] == 5
    assert [step.change for step in binding.cheaper] == [{"concurrency": 4}]
    assert (
        binding.cheaper[0].verdict == "fails"
        and binding.cheaper[0].failed[0].metric == "wait_mean_s"
    )
    for step in binding.cheaper:
        assert isinstance(step, CheaperStep) and isinstance(step.failed, tuple)
        assert all(isinstance(slo, SLO) for slo in step.failed)
        assert step.verdict in {"meets", "fails", "undecided", "unstable"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        binding.slack = 0.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        binding.cheaper[0].verdict = "meets"  # type: ignore[misc]
    assert chosen.undecided == ()


def test_open_questions_are_frozen_records(undecided):
    assert undecided.binding is None and undecided.chosen is None
    [question] = undecided.undecided
    assert isinstance(question, OpenQuestion)
    assert question.candidate == {"concurrency": 6}
    assert question.slo == SLO.parse("dead_letter_fraction<=0.25")
    assert question.replications == 3 and question.low <= 0.25 <= question.high
    with pytest.raises(dataclasses.FrozenInstanceError):
        question.advice = ""  # type: ignore[misc]


def test_to_dict_keeps_every_key_in_order(chosen, undecided):
    payload = chosen.to_dict()
    assert list(payload["binding"]) == ["slo", "bound", "limit", "slack", "cheaper"]
    assert payload["binding"]["slo"] == str(chosen.binding.slo)
    [step] = payload["binding"]["cheaper"]
    assert list(step) == ["change", "verdict", "failed", "note"]
    assert all(isinstance(slo, str) for slo in step["failed"])
    [question] = undecided.to_dict()["undecided"]
    assert list(question) == [
        "candidate",
        "slo",
        "replications",
        "mean",
        "low",
        "high",
        "note",
        "advice",
    ]
    assert question["slo"] == "dead_letter_fraction<=0.25"
    json.dumps(payload, allow_nan=False)
    json.dumps(undecided.to_dict(), allow_nan=False)
