"""Notebooks 05 and 10: their exercises' checks pass right answers and hint at wrong ones.

The checks compare an answer with the objects of the notebook they run in (its
plans, its model, its own 30 mornings), so these tests run the student notebook's
lesson cells here, answer as a student would in it, and ask otter, with the
notebook's own tests. Every run is seeded virtual time: the lesson's plans and
the answers' plans are the same on every machine. Right answers by more than one
route must pass; each likely slip must get the hint written for it.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest

from pipeline.sim import TimeVarying, plan, simulate
from pipeline.sim.stats import MeanCI, mean_ci, summarise_values
from tests.lessons.test_exercises import ROOT, _hints, _lesson_env

with warnings.catch_warnings():  # as pipeline.lessons.exercises does: ipylab's import warns
    warnings.filterwarnings("ignore", "Traits should be given as instances", DeprecationWarning)
    import otter

NOTEBOOKS = ROOT / "notebooks"
STUDENT_05 = NOTEBOOKS / "05-capacity-planning.ipynb"
STUDENT_10 = NOTEBOOKS / "10-from-your-dashboard-to-a-plan.ipynb"


def _lesson(student, needed):
    with pytest.MonkeyPatch.context() as patch:  # the notebook reads ../data from its folder
        patch.chdir(student.parent)
        return _lesson_env(student, needed)


def _check(student, question, env):
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(student.parent)
        return _hints(otter.Notebook(student.name).check(question, global_env=env))


@pytest.fixture(scope="module")
def lesson_05():
    """Notebook 05's lesson, run here, with each exercise answered the way its text says."""
    needed = {"model", "curve", "p", "priced", "money", "both", "campaign", "question", "runs"}
    env = _lesson(STUDENT_05, needed)
    model, slos, question = env["model"], env["slos"], env["question"]
    twice = TimeVarying(
        rate_fn=lambda t: 2 * model.arrivals.rate_fn(t), max_rate=2 * model.arrivals.max_rate
    )
    doubled = plan(
        model.replace(arrivals=twice),
        {"concurrency": range(4, 9), "queue_maxsize": [25]},
        slos,
        replications=(3, 12),
        progress=False,
    )
    thirty = simulate(model.replace(**question.candidate), replications=30, progress=False)
    shed = thirty.values("items_shed") / thirty.values("items_offered")
    interval = summarise_values(shed)
    alone = plan(
        env["campaign"],
        {"concurrency": range(3, 7), "queue_maxsize": [25]},
        slos,
        cost={"worker_hour": 0.10},
        executor=env["runs"],
        progress=False,
    )
    mixed = 0.9 * env["money"].total + 0.1 * alone.cost_per_hour.total
    env.update(
        twice_arrivals=twice,
        twice_plan=doubled,
        twice_workers="twice",
        twice_p95="shorter",
        thirty_mornings=thirty,
        thirty_interval=interval,
        thirty_settled=not (interval.low < question.slo.limit < interval.high),
        campaign_plan=alone,
        mixed_cost_per_hour=mixed,
        mixed_saving=1 - mixed / env["both"].cost_per_hour.total,
    )
    return env


def test_notebook_05s_right_answers_pass_by_any_route(lesson_05):
    env = dict(lesson_05)
    for question in ("exercise_2", "exercise_3", "exercise_4"):
        assert _check(STUDENT_05, question, env) == [], question
    # Other right routes: the fitted curve itself with doubled rates and a generous bound; the
    # verdict as numpy's bool; the interval from the replications' own method; the costs
    # from the plans' prices.
    model, alone, priced = env["model"], env["campaign_plan"], env["priced"]
    curve = model.arrivals.rate_fn
    doubled_curve = dataclasses.replace(
        curve, base_rate=2 * curve.base_rate, peak_rate=2 * curve.peak_rate
    )
    low, high = env["thirty_interval"].low, env["thirty_interval"].high
    env.update(
        twice_arrivals=TimeVarying(rate_fn=doubled_curve, max_rate=10.0),
        thirty_settled=np.float64(low) > 0.001 or np.float64(high) < 0.001,
        mixed_cost_per_hour=0.10
        * (0.9 * priced.chosen["concurrency"] + 0.1 * alone.chosen["concurrency"]),
        mixed_saving=0.9 * (1 - priced.cost_per_hour.total / env["both"].cost_per_hour.total),
    )
    assert isinstance(env["thirty_settled"], np.bool_)
    for question in ("exercise_2", "exercise_3", "exercise_4"):
        assert _check(STUDENT_05, question, env) == [], question


def test_notebook_05s_wrong_twice_the_traffic_gets_the_hints_that_fit(lesson_05):
    env = dict(lesson_05)
    model, slos, runs = env["model"], env["slos"], env["runs"]
    fitted = model.arrivals.rate_fn
    # The lesson's `curve` runs from midnight: at 08:00 on its clock it is night.
    env.update(
        twice_arrivals=TimeVarying(
            rate_fn=lambda t: 2 * env["curve"](t), max_rate=2 * fitted.peak_rate
        )
    )
    hints = _check(STUDENT_05, "exercise_2", env)
    assert len(hints) == 1 and "on the model's clock (t = 0 is 08:00" in hints[0]
    env.update(
        twice_arrivals=TimeVarying(rate_fn=lambda t: 2 * fitted(t), max_rate=fitted.peak_rate)
    )
    hints = _check(STUDENT_05, "exercise_2", env)
    assert len(hints) == 1 and "max_rate must bound the rate" in hints[0]
    env.update(
        twice_arrivals=TimeVarying(
            rate_fn=lambda t: 2 * math.exp(math.log(fitted(t))), max_rate=2 * fitted.peak_rate
        )
    )
    hints = _check(STUDENT_05, "exercise_2", env)
    assert len(hints) == 1 and "rate_fn must take a numpy array" in hints[0]

    # The plan: today's own, today's traffic, a search that chooses nothing.
    env.update(twice_arrivals=lesson_05["twice_arrivals"], twice_plan=env["p"])
    hints = _check(STUDENT_05, "exercise_2", env)
    assert len(hints) == 3 and "give the plan of twice the traffic its own name" in hints[0]
    assert "Exactly twice" in hints[1] and "did not plan twice the traffic" in hints[2]
    today = plan(
        model,
        {"concurrency": [3], "queue_maxsize": [25]},
        slos,
        replications=(3, 3),
        executor=runs,
        progress=False,
    )
    env.update(twice_plan=today)
    assert "did not plan twice the traffic" in _check(STUDENT_05, "exercise_2", env)[0]
    few = plan(
        model.replace(arrivals=env["twice_arrivals"]),
        {"concurrency": [2], "queue_maxsize": [25]},
        slos,
        replications=(3, 3),
        progress=False,
    )
    env.update(twice_plan=few)
    hints = _check(STUDENT_05, "exercise_2", env)
    assert "The plan chose nothing (status infeasible)" in hints[0]
    assert all("Plan twice the traffic first" in hint for hint in hints[1:])

    # A student who named a plan of their own p: the checks say so, not that the answer is wrong.
    env.update(twice_plan=lesson_05["twice_plan"], p=few)
    hints = _check(STUDENT_05, "exercise_2", env)
    assert len(hints) == 3 and all("p is no longer the lesson's plan" in h for h in hints)
    env.update(p=lesson_05["p"])

    # The verdicts against the plans: six workers are twice three, at a shorter p95.
    env.update(twice_plan=lesson_05["twice_plan"], twice_workers="more", twice_p95="longer")
    hints = _check(STUDENT_05, "exercise_2", env)
    assert len(hints) == 2 and "Not what the plans say" in hints[0] and "Notebook 02" in hints[1]


def test_notebook_05s_wrong_thirty_mornings_get_the_hints_that_fit(lesson_05):
    env = dict(lesson_05)
    model, thirty = env["model"], env["thirty_mornings"]
    env.update(
        thirty_mornings=simulate(
            model.replace(concurrency=3, queue_maxsize=25), replications=3, progress=False
        )
    )
    hints = _check(STUDENT_05, "exercise_3", env)
    assert "3 mornings, not 30" in hints[0]
    other = simulate(
        model.replace(concurrency=4, queue_maxsize=25), replications=30, progress=False
    )
    env.update(thirty_mornings=other)
    assert (
        "not the configuration the plan could not decide"
        in _check(STUDENT_05, "exercise_3", env)[0]
    )

    env.update(thirty_mornings=thirty)
    shed, offered = thirty.values("items_shed"), thirty.values("items_offered")
    for wrong, hint in [
        (summarise_values(shed), "the number of requests shed per morning"),
        (MeanCI(shed.sum() / offered.sum(), 0.0002), "That pools the requests of all mornings"),
        (summarise_values((shed / offered)[:6]), "Not the mean shed fraction of these 30"),
        (mean_ci(shed / offered), "The mean is right, not the half-width"),
        ((0.0009, 0.0004), "Set thirty_interval to summarise_values"),  # a tuple: no mean
    ]:
        env.update(thirty_interval=wrong)
        hints = _check(STUDENT_05, "exercise_3", env)
        assert len(hints) == 1 and hint in hints[0], (wrong, hints)
    env.update(thirty_interval=lesson_05["thirty_interval"], thirty_settled=True)
    hints = _check(STUDENT_05, "exercise_3", env)
    assert len(hints) == 1 and "lies on one side of the limit" in hints[0]
    env.update(thirty_settled="no")
    assert "Set thirty_settled to True or False" in _check(STUDENT_05, "exercise_3", env)[0]
    env.update(thirty_settled=False, question=env["u"])  # the plan, not its open question
    hints = _check(STUDENT_05, "exercise_3", env)
    assert len(hints) == 2 and all("question is no longer" in hint for hint in hints)


def test_notebook_05s_wrong_campaign_prices_get_the_hints_that_fit(lesson_05):
    env = dict(lesson_05)
    both, priced = env["both"], env["priced"]
    env.update(campaign_plan=both)  # the scenario set, not the campaign alone
    hints = _check(STUDENT_05, "exercise_4", env)
    assert len(hints) == 1 and "did not plan the campaign morning alone" in hints[0]
    unpriced = plan(
        env["campaign"],
        {"concurrency": range(3, 7), "queue_maxsize": [25]},
        env["slos"],
        executor=env["runs"],
        progress=False,
    )
    env.update(campaign_plan=unpriced)
    hints = _check(STUDENT_05, "exercise_4", env)
    assert "Price it as today's plan was priced" in hints[0]
    assert all("Plan and price the campaign morning first" in hint for hint in hints[1:])

    env.update(campaign_plan=lesson_05["campaign_plan"], priced=env["p"], both=priced)
    hints = _check(STUDENT_05, "exercise_4", env)
    assert len(hints) == 3 and all("priced is no longer" in hint for hint in hints)
    env.update(priced=priced)
    hints = _check(STUDENT_05, "exercise_4", env)
    assert len(hints) == 1 and "both is no longer the lesson's scenario set" in hints[0]
    env.update(both=both)
    normal, extra = priced.cost_per_hour.total, env["campaign_plan"].cost_per_hour.total
    for wrong, hint in [
        (0.1 * normal + 0.9 * extra, "The shares are the wrong way round"),
        (extra, "That is the campaign's configuration every hour"),
        (0.5 * (normal + extra), "Weight each morning's own cost per hour"),
    ]:
        env.update(mixed_cost_per_hour=wrong)
        hints = _check(STUDENT_05, "exercise_4", env)
        assert len(hints) == 1 and hint in hints[0], (wrong, hints)

    env.update(mixed_cost_per_hour=lesson_05["mixed_cost_per_hour"])
    mixed, every_hour = lesson_05["mixed_cost_per_hour"], both.cost_per_hour.total
    for wrong, hint in [
        (100 * (1 - mixed / every_hour), "A fraction, not a percentage"),
        (every_hour - mixed, "That is the saving in money per hour"),
        ((every_hour - mixed) / mixed, "That is a fraction of the mixed cost"),
        (0.9, "Not the saving against the scenario set's choice"),  # the prediction's 9/10
    ]:
        env.update(mixed_saving=wrong)
        hints = _check(STUDENT_05, "exercise_4", env)
        assert len(hints) == 1 and hint in hints[0], (wrong, hints)


def test_notebook_10s_slower_database_gets_the_hints_that_fit():
    env = _lesson(STUDENT_10, {"p", "runs", "listing", "LISTING", "SLO_S", "calibrated_mean_s"})
    listing, runs, p = env["listing"], env["runs"], env["p"]
    slo = [f"sim_time_s<={env['SLO_S']}"]

    def planned(mean_s, workers=range(1, 11)):
        return plan(
            listing(env["LISTING"], mean_s=mean_s),
            {"concurrency": workers},
            slo,
            executor=runs,
            progress=False,
        )

    slower = planned(1.5 * env["calibrated_mean_s"])
    workers = int(slower.chosen["concurrency"])
    env.update(slower_plan=slower, slower_workers=workers)
    assert _check(STUDENT_10, "exercise_1", env) == []
    # The lesson's plan searched 1 to 8 writers: enough here, and a right answer too.
    env.update(slower_plan=planned(1.5 * env["calibrated_mean_s"], range(1, 9)))
    assert _check(STUDENT_10, "exercise_1", env) == []
    assert workers > p.chosen["concurrency"]

    for wrong, hint in [
        (p, "give the slower database's plan its own name"),
        (planned(env["calibrated_mean_s"]), "That is today's database"),
        (planned(env["calibrated_mean_s"] / 1.5), "That is a faster database"),
        (planned(2 * env["calibrated_mean_s"]), "Its writes take 2 times today's"),
        (planned(1.5 * env["calibrated_mean_s"], range(1, 4)), "The plan chose nothing"),
    ]:
        env.update(slower_plan=wrong, slower_workers=workers)
        hints = _check(STUDENT_10, "exercise_1", env)
        assert hint in hints[0], (hint, hints)
    env.update(slower_plan=slower)
    for wrong, hint in [
        (p.chosen["concurrency"], "That is today's choice"),
        (math.ceil(1.5 * p.chosen["concurrency"]), "1.5 times today's writers is a rule of thumb"),
        (1, "Not the plan's choice"),
        (float(workers), "Set slower_workers to the number of write workers"),
    ]:
        env.update(slower_workers=wrong)
        hints = _check(STUDENT_10, "exercise_1", env)
        assert len(hints) == 1 and hint in hints[0], (wrong, hints)
