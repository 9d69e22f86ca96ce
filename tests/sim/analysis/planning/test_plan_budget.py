"""The plan's run budget: open verdicts get more runs, every look stays a planned one.

Replications double while a verdict is open, up to 192 by default (7 looks, each
judged at the Bonferroni share of ``1 - confidence``), and the whole plan stays
within its run budget. Checked here:

- coverage: checks of M/M/10 against a wait SLO 10% either side of Erlang C's
  exact mean wait, over many seeds, give wrong verdicts no more often than the
  stated 5% allows, and end undecided far less often than with the earlier
  ceiling of 30 replications (the same seeds: a paired count);
- the budget: never exceeded, each configuration's replications on the schedule,
  a plan cut short by it undecided and saying so, bad budgets refused.
"""

import json
import math
import pickle
from concurrent.futures import Executor, Future

import pytest

from pipeline import PipelineConfig
from pipeline.cli import main, plan_settings
from pipeline.sim import Exponential, Poisson, Scenario, plan
from pipeline.sim.analysis.planning import rounds
from pipeline.sim.analysis.planning.candidate import replication_schedule
from pipeline.sim.analysis.planning.plan import DEFAULT_REPLICATIONS
from pipeline.sim.analysis.theory import mmc

RATE, SERVERS = 8.0, 10
EXACT_WAIT = mmc(RATE, 1.0, SERVERS).wait_mean_s  # 0.2046 s


def _scenario(seed, items=5000):
    # A 50 s warm-up leaves out the empty start, so each run's mean wait is centred on
    # Erlang C's (measured: 1.000 +- 0.009 of it over 1,000 runs), not a little below.
    return Scenario(
        arrivals=Poisson(rate=RATE),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=SERVERS, queue_maxsize=None, max_attempts=1),
        n_items=items,
        seed=seed,
        warmup_s=50.0,
    )


def _upper_tail(n, p, k):
    """P(X >= k) for X ~ Binomial(n, p)."""
    return math.fsum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


class _EachRunOnce(Executor):
    """Runs each distinct task once, here, and gives every later submission of the same
    task (the same function and arguments: the same scenario and replication) that result.

    A plan's runs are fixed by its scenario's seed and the replication's number (the
    SLO's limit is not among a run's arguments), so the checks of one seed, at both
    ceilings and against both limits, share their runs; simulating them again would
    only give the same numbers again.
    """

    def __init__(self) -> None:
        self.results: dict[bytes, object] = {}
        self.shared = 0  # submissions answered from an earlier run

    def submit(self, fn, /, *args, **kwargs) -> Future:
        key = pickle.dumps((fn.__module__, fn.__qualname__, args, kwargs))
        future: Future = Future()
        if key in self.results:
            self.shared += 1
        else:
            self.results[key] = fn(*args, **kwargs)
        future.set_result(self.results[key])
        return future


@pytest.mark.slow
def test_checks_near_the_limit_decide_more_and_are_wrong_no_more_than_stated():
    """About half a minute of CPU: 2 x 60 checks, each at both replication ceilings (the
    runs a seed's four checks share are simulated once: the same scenario and seed
    under either limit)."""
    seeds = range(60)
    wrong, open_before, open_after, only_after, only_before = 0, 0, 0, 0, 0
    for seed in seeds:
        runs = _EachRunOnce()
        for truth, limit in (("meets", EXACT_WAIT * 1.1), ("fails", EXACT_WAIT * 0.9)):
            verdicts = []
            shared = runs.shared
            for replications in ((3, 30), DEFAULT_REPLICATIONS):
                p = plan(
                    _scenario(5000 + seed),
                    {"concurrency": [SERVERS]},
                    [f"wait_mean_s<={limit}"],
                    replications=replications,
                    check=True,
                    progress=False,
                    executor=runs,
                )
                verdicts.append(p.check.verdict)
                wrong += p.check.verdict not in (truth, "undecided")
            # the pairing: at least the first look's runs are common to the two ceilings
            assert runs.shared - shared >= 3
            before, after = verdicts
            open_before += before == "undecided"
            open_after += after == "undecided"
            only_after += before == "undecided" and after != "undecided"
            only_before += after == "undecided" and before != "undecided"
    checks = 2 * len(seeds)
    # Each check is wrong with probability at most 0.05 (over all its looks); allow the
    # count short of a 1-in-1,000 surprise for 2 x 120 such checks.
    allowed = next(k for k in range(2 * checks + 1) if _upper_tail(2 * checks, 0.05, k + 1) <= 1e-3)
    assert wrong <= allowed, (wrong, allowed)
    # The same seeds share their first 30 runs, so compare pair by pair (a sign test on
    # the checks only one ceiling decided, one-sided at 0.001).
    counts = f"undecided: {open_before} of {checks} at 30 replications, {open_after} at 192"
    assert only_after > only_before, counts
    assert _upper_tail(only_after + only_before, 0.5, only_after) <= 1e-3, counts


def _search(budget, **options):
    return plan(
        _scenario(3, items=2000),
        {"concurrency": range(9, 13)},
        [f"wait_mean_s<={EXACT_WAIT:.6f}"],  # on the limit at c = 10: open for long
        budget=budget,
        progress=False,
        processes=1,
        **options,
    )


@pytest.mark.parametrize("budget", [2, 3, 7, 20, 60])
def test_the_budget_is_never_exceeded_and_every_look_is_planned(budget):
    p = _search(budget, headroom=True)
    used = p.budget.runs_used
    assert used <= budget and p.to_dict()["budget"]["runs_used"] == used
    looks = {0, *replication_schedule(*DEFAULT_REPLICATIONS)}
    assert set(p.candidates["replications"]) <= looks
    assert used >= p.runs_total
    if p.budget.exhausted:
        assert "used up" in p.report()
    if p.status == "chosen":
        cheaper = p.candidates[p.candidates["concurrency"] < p.chosen["concurrency"]]
        assert set(cheaper["verdict"]) <= {"fails", "unstable"}


def test_a_plan_the_budget_cuts_short_is_undecided_and_says_so():
    p = _search(7)  # 4 candidates x 3 runs do not fit: two examined, two unrun
    assert p.budget.exhausted and p.budget.runs_used == 6
    assert p.status == "undecided" and p.chosen is None
    assert p.unrun == ({"concurrency": 11}, {"concurrency": 12})
    text = p.report()
    assert "not run, the plan's run budget used up first: concurrency=11; concurrency=12" in text
    assert "budget: 6 of 7 runs used -- used up" in text
    assert p.to_dict()["unrun"] == [{"concurrency": 11}, {"concurrency": 12}]


def test_the_default_budget_leaves_room_and_says_so():
    p = _search(None)
    assert p.budget.runs_allowed == rounds.DEFAULT_BUDGET and not p.budget.exhausted
    assert f"budget: {p.budget.runs_used:,} of 2,000 runs used" in p.report()


@pytest.mark.parametrize("budget", [0, -1, 1.5, math.nan, True, "10", 10**8])
def test_a_bad_budget_is_refused(budget):
    with pytest.raises(ValueError, match="budget must be an integer number of runs"):
        _search(budget)


def test_the_command_line_restates_the_librarys_defaults():
    assert (
        plan_settings.DEFAULT_MIN_REPLICATIONS,
        plan_settings.DEFAULT_MAX_REPLICATIONS,
    ) == DEFAULT_REPLICATIONS
    assert (plan_settings.DEFAULT_BUDGET, plan_settings.MAX_BUDGET) == (
        rounds.DEFAULT_BUDGET,
        rounds.MAX_BUDGET,
    )


_FLAGS = "plan --arrivals poisson:rate=8 --service exponential:mean=1 --items 1000 --processes 1"


@pytest.mark.parametrize("value", ["0", "-3", "1.5", "many", "10000001"])
def test_a_bad_budget_flag_is_one_line_and_exit_2(capsys, tmp_path, value):
    out = tmp_path / "out"
    argv = [*_FLAGS.split(), "--search", "concurrency=9..12", "--slo", "wait_mean_s<=0.5"]
    status = main([*argv, "--budget", value, "--out", str(out)])
    captured = capsys.readouterr()
    assert status == 2 and captured.out == "" and not out.exists()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "--budget" in lines[0] and value in lines[0], captured.err


def test_the_budget_flag_reaches_the_plan(capsys):
    argv = [*_FLAGS.split(), "--search", "concurrency=9..12", "--slo", "wait_mean_s<=0.5"]
    assert main([*argv, "--budget", "50", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["budget"]["runs_allowed"] == 50
    assert payload["budget"]["runs_used"] == payload["runs"] <= 50


def test_a_scenario_set_counts_one_run_per_scenario_against_the_budget():
    normal, peak = (
        _scenario(4, items=1000),
        _scenario(5, items=1000).replace(arrivals=Poisson(rate=RATE * 1.1)),
    )
    p = plan(
        normal,
        {"concurrency": range(10, 14)},
        ["wait_mean_s<=0.5"],
        scenarios={"normal": normal, "peak": peak},
        budget=15,  # 2 scenarios x 3 replications = 6 a configuration: two fit, not three
        progress=False,
        processes=1,
    )
    assert p.budget.runs_used == p.runs_total <= 15
    assert p.runs_total % 6 == 0


@pytest.mark.slow  # a plan and its headroom: 2 s of a core
def test_headroom_stops_where_the_budget_ends_and_says_so():
    base = _scenario(6, items=1000)
    slos = ["wait_mean_s<=0.5"]
    free = plan(base, {"concurrency": [11]}, slos, headroom=True, progress=False, processes=1)
    assert free.status == "chosen" and not free.budget.exhausted
    # The plan's own runs, then a few of the headroom's: the search stops short.
    budget = free.runs_total + 6
    p = plan(base, {"concurrency": [11]}, slos, headroom=True, budget=budget, progress=False)
    assert p.status == "chosen" and p.budget.exhausted and p.budget.runs_used <= budget
    h = p.headroom.arrival_rate
    assert "run budget was used up" in (h.note or "") + (p.headroom.service_time.note or "")
    assert h.factor == h.low and all(v != "unexamined" for _, v, _ in h.points)
