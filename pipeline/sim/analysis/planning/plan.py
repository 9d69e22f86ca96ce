"""``plan()``: the cheapest configuration that meets every SLO, with confidence.

A search space (``{"concurrency": range(1, 65), "queue_maxsize": [100, 1000]}``)
is walked in cost order -- fewest workers first, then the smallest queue (an
unbounded one last), then the other fields in the order given; on a chain,
whose fields are a stage's (``"write.concurrency"``), the fewest workers and
queue slots in total over the stages searched -- and each
configuration examined is simulated a few times, with more replications only
where a verdict is still open. Every SLO (:mod:`~pipeline.sim.analysis.planning.slo`)
is judged by a one-sided bound across replications (Student t, widened for
skew: :func:`~pipeline.sim.stats.intervals.mean_bounds`). The answer is
the first configuration in cost order that meets every SLO while every
cheaper one has been shown to fail one; when the replication budget runs out
first, the plan says "undecided" and why, instead of guessing.

Replication *r* of every configuration uses the random streams of
``(seed, r)`` (common random numbers), so configurations are compared on the
same traffic. The result does not depend on where the runs ran (one process,
a pool, a Dask cluster): which runs to do next depends only on the results so far.

**Verdicts.** For each configuration and SLO, one value per replication;
the SLO *meets* when its one-sided (skew-robust t) bound is on the right side of
the limit, *fails* when the opposite bound is on the wrong side, and is
*undecided* otherwise (see :func:`~pipeline.sim.analysis.planning.judgement.judge`). A
configuration meets when every SLO meets, fails when any SLO fails, and is
undecided otherwise. A verdict may be looked at after each step of the
replication schedule (3, 6, 12, ..., 192 for ``(3, 192)``: L = 7 looks), so each
look uses the level ``1 - (1 - confidence) / L`` (:func:`look_confidence`):
the chance that a configuration gets a wrong verdict on an SLO, over all
its looks, stays at most ``1 - confidence``.
A run whose drain timed out (``drain_timeout_s``) left items unfinished,
missing from its latency and wait statistics: a configuration with such a
run *fails* every SLO on those metrics
(:data:`~pipeline.sim.analysis.planning.slo.DRAIN_CUT_METRICS`), its note says
why, and the plan warns once with how many runs timed out.
Replications that agree exactly leave a t bound no width: a fraction
(``shed_fraction`` ...) is then judged by the exact binomial bound on the
counts pooled over them (no event in N items: about 3/N at 95%), any
other metric by its exact value, and the judgement's note says so.

**Rounds (the stopping rule).** Configurations are ranked by cost (see
``cost``). Each round:

1. the *target* is the cheapest examined configuration that meets (if any);
2. every undecided configuration cheaper than the target (every one, with no
   target) that has fewer than ``max`` replications gets as many more as it
   has (3, 6, 12, 24, ... capped at ``max``), replications ``n .. 2n - 1``;
3. with no target yet, the next ``lookahead`` configurations not yet
   examined get ``min`` replications each; with ``skip_unstable``, ones that
   queueing theory rejects
   (:func:`~pipeline.sim.analysis.diagnostics.stability.unstable_note`) are marked
   ``unstable`` without runs and do not count towards ``lookahead``;
4. the round's runs go out together (in parallel on a pool or ``executor``);
   when a round has nothing to run, the plan stops.

**Scenario sets.** With ``scenarios={"normal": base, "peak": peak}``, one
configuration must meet every SLO in every scenario: each configuration
examined is the searched fields applied to each scenario (each scenario
gives its workload; the searched fields override its config), replication
*r* of every scenario uses that scenario's streams of ``(its seed, r)``
(common random numbers within a scenario), and each (scenario, SLO) pair is
judged on its own. A configuration fails when one pair fails and meets when
every pair meets. To keep the stated confidence over the extra judgements,
the Bonferroni split covers them too: with S scenarios and L looks, each
look judges each pair at ``1 - (1 - confidence) / (L * S)``, so the chance
that any scenario's judgement of an SLO is wrong on any look stays at most
``1 - confidence``, as for one scenario. ``Plan.binding_scenario`` names
the scenario whose bound is closest to its limit at the choice, and
``Plan.scenarios`` holds each scenario's judgements. Every scenario must be
a chain or every one a single stage. ``headroom`` and
:meth:`Plan.sensitivity` apply to the binding scenario alone (the one
closest to breaking; another may break at a different factor); ``base``
need not be one of the set: it only names the plan's starting point.

**Cost over a set.** One configuration runs through every scenario's
hours, so its cost per hour is the mean over the hours:
``sum_s share_s * (workers_s + wait_hour * lambda_s * W_s)``
(:class:`~.cost.Mix`), and items per hour (for the cost per million items)
likewise. ``shares`` gives each scenario's share of the hours
(``{"normal": 0.9, "peak": 0.1}``: peak one hour in ten); without it every
scenario has an equal share, and the report and JSON say the shares were
not given. With ``wait_hour`` the plan then picks, among the configurations
meeting every SLO in every scenario, the one of least mean total cost per
hour. A scenario with share 0 must still meet every SLO (an incident the
service must survive) but adds nothing to the cost.

**Autoscaled pools.** With ``PipelineConfig(autoscale=...)``, ``search`` may vary
the autoscaler's settings as ``"autoscale.NAME"`` fields (``autoscale.target``,
``autoscale.max_workers``, ``autoscale.cold_start_s``, ...; see
:meth:`~pipeline.Autoscaler.replace`), and ``"autoscale"`` itself (None for a
fixed pool) to put fixed and autoscaled pools side by side. An autoscaled pool's
workers cost is what its runs paid for, ``worker_hour * workers_mean`` per
replication (:mod:`~.cost`), so a priced plan then picks the least total cost
per hour among the configurations meeting every SLO, as with ``wait_hour``.

So replications are only ever added to configurations whose verdict is
still open and that could still be the answer; a configuration has
``min * 2**i`` replications, or ``max``.

**The run budget.** Every simulation run the plan makes (its candidates',
the wait-cost search's and the headroom's; a replication of a scenario set
counts one run per scenario) comes out of ``budget``. A round's runs are
taken configuration by configuration, cheapest first, each configuration's
next step of the schedule whole or not at all, so a verdict is only ever
looked at on the schedule and the Bonferroni split above still holds: the
budget only ends the looks early. A configuration the budget left unrun,
or open, counts as undecided. :attr:`Plan.budget` says how many runs were
used of how many allowed and whether the budget ran out.

**Outcome.** ``status`` is ``"chosen"`` when the target exists and every
cheaper configuration fails (or is unstable); ``"undecided"`` when some
cheaper configuration is still undecided at ``max`` replications, or was
left open or unrun by the run budget (then
``plan.chosen`` is None, ``plan.undecided`` says which configuration, SLO
and interval, with advice on run length, and ``plan.fallback`` names the
target, known to meet every SLO but perhaps not the cheapest);
``"infeasible"`` when every configuration in the search fails.

Example:
    >>> p = plan(base, {"concurrency": range(1, 65), "queue_maxsize": [100, 1000]},
    ...          ["latency_p95_s<=0.5", "memory_peak_bytes<=200e6"])
    >>> p.status, p.chosen
    ('chosen', {'concurrency': 6, 'queue_maxsize': 100, 'on_full': 'block', 'max_attempts': 3})
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...executors.pool import check_picklable
from ...running.drain_warning import warn_drain_timeouts
from ...running.workload import shared_draws
from ...workloads.scenario import Scenario
from .arguments import PlanArguments, check_arguments
from .candidate import Candidate, look_confidence, replication_schedule
from .cheapest import least_total_cost
from .check import verdict_of
from .cost import Cost
from .decision import Decision, decide, open_below
from .headroom import Headroom, find_headroom
from .result import Plan
from .rounds import Rounds, RunBar, Runner, pool_size
from .slo import DRAIN_CUT_METRICS, SLO
from .walk import Walk

if TYPE_CHECKING:
    from concurrent.futures import Executor

__all__ = ["DEFAULT_REPLICATIONS", "Plan", "plan"]

DEFAULT_REPLICATIONS = (3, 192)
"""Replications per configuration, ``(min, max)``: 3, doubling while a verdict is open,
up to 192 (7 looks); the plan's run budget (:data:`~.rounds.DEFAULT_BUDGET`) bounds the
total."""


def plan(
    base: Scenario,
    search: Mapping[str, Sequence[Any]],
    slos: Sequence[str | SLO] | str,
    *,
    confidence: float = 0.95,
    replications: int | tuple[int, int] = DEFAULT_REPLICATIONS,
    budget: int | None = None,
    check: bool = False,
    cost: Cost | Mapping[str, Any] | Sequence[str] | None = None,
    order: Sequence[str] | None = None,
    headroom: bool = False,
    scenarios: Mapping[str, Scenario] | None = None,
    shares: Mapping[str, float] | None = None,
    lookahead: int = 4,
    skip_unstable: bool = True,
    executor: Executor | None = None,
    processes: int | None = None,
    engine: str = "auto",
    progress: bool = True,
) -> Plan:
    """The cheapest configuration in ``search`` that meets every SLO with ``confidence``.

    How it decides -- the verdicts, the rounds (:mod:`.walk`), scenario sets, the cost
    over a set, the run budget and the outcome (:mod:`.decision`) -- is in the module
    docstring. In short: configurations are examined in cost order, each simulated a
    few times, with more replications only where a verdict is still open; ``status``
    is ``"chosen"`` when the cheapest configuration meeting every SLO is found with
    every cheaper one shown to fail, ``"undecided"`` when the replication or run
    budget ran out first (``plan.fallback`` then names one known to meet every SLO),
    ``"infeasible"`` when every configuration fails.

    Args:
        base: the scenario every configuration starts from (its ``seed`` seeds
            every run: replication *r* uses the streams of ``(seed, r)``).
        search: field -> values to try; :class:`~pipeline.sim.Scenario` or
            :class:`~pipeline.PipelineConfig` field names (``concurrency``,
            ``queue_maxsize`` with None for unbounded, ``on_full``, ``max_attempts``, ...),
            and an autoscaler's ``"autoscale.NAME"`` (see **Autoscaled pools**).
        slos: expressions like ``"latency_p95_s<=0.5"``, ``"memory_peak_bytes<=200e6"``,
            ``"shed_fraction<=0.01"``, ``"throughput_per_s>=49"``, or
            :class:`~pipeline.sim.analysis.planning.slo.SLO` objects; every one must hold.
        confidence: one-sided confidence level in [0.5, 1).
        replications: ``(min, max)`` replications per configuration (an integer
            N means exactly N, no adaptation); 2 <= min <= max.
        budget: the most simulation runs the plan may make in all (see **The
            run budget**); None: :data:`~.rounds.DEFAULT_BUDGET`.
        check: judge the one configuration ``search`` gives (one value per
            field) instead of searching: :attr:`Plan.check` holds the verdict, one
            judgement per SLO, and the plan's text, JSON and page read as a check
            (:mod:`~.check`).
        cost: prices, ``{"worker_hour": X, "wait_hour": Y}`` (on a chain also
            ``"STAGE.worker_hour"``) or a :class:`~.cost.Cost`: each candidate's cost
            per hour in the tables and JSON, the search in money order, and with
            ``wait_hour`` or an autoscaled pool (its ``worker_seconds`` charged)
            the least total cost per hour among the configurations meeting every
            SLO (:mod:`~.cheapest`). A sequence of field names
            instead is the field order (as ``order``, kept for earlier callers).
        scenarios: name -> scenario, judged together (see **Scenario sets**);
            None judges ``base`` alone.
        shares: with ``scenarios`` and ``cost``, name -> the scenario's share of
            the hours (finite, >= 0, summing to 1; see **Cost over a set**);
            None: equal shares.
        headroom: also find how far the arrival rate (and the mean service time)
            can grow before the choice breaks an SLO (:mod:`~.headroom`):
            :attr:`Plan.headroom`, JSON ``headroom``.
        order: search fields in the order they are minimised (default:
            ``concurrency``, then ``queue_maxsize``, then the others as given).
            Within a field, numbers rank ascending, None (unbounded) last, other
            values in the order given. A chain's default: total workers over
            the searched ``STAGE.concurrency`` fields first, then total queue
            slots over the ``STAGE.queue_maxsize`` fields (unbounded counts as
            infinite), then, among equal totals, each field in turn as above
            (concurrency fields in the order given, then queue sizes, then the
            others): ``{"fetch.concurrency": [1, 2], "write.concurrency": [1, 2]}``
            walks (1, 1), (1, 2), (2, 1), (2, 2), and (1, 3) comes after (2, 1).
        lookahead: configurations examined per round while no target is known
            (more means fewer rounds, each with more parallel runs).
        skip_unstable: reject configurations queueing theory shows cannot keep
            up, without running them (see
            :func:`~pipeline.sim.analysis.diagnostics.stability.unstable_note`).
        executor: a :class:`concurrent.futures.Executor` to run on (e.g. a Dask
            client's ``get_executor()``, see
            :func:`~pipeline.sim.executors.cluster.scheduler_executor`); left open.
        processes: local worker processes when no ``executor`` is given
            (default: one per CPU when the first round would take a few seconds,
            else 1); 1 runs everything in this process.
        engine: ``"auto"``, ``"asyncio"`` or ``"kernel"``, as for
            :func:`~pipeline.sim.simulate`.
        progress: show a progress bar (on stderr).

    Returns:
        A :class:`~pipeline.sim.analysis.planning.result.Plan`: ``status``,
        ``chosen``, ``binding``, ``candidates`` (DataFrame), ``runs``,
        ``figure()``, ``report()``, ``to_dict()``. Everything in it is the same
        whatever ``processes`` or ``executor`` ran the runs.

    Warns:
        DrainTimeoutWarning: once, when some runs' drain timed out, with how
            many runs and how many items they left unfinished.

    Raises:
        TypeError: ``base`` is not a Scenario, or ``search`` is not a dict of sequences.
        ValueError: an empty search (or a field with no values), a value the
            scenario rejects, a bad SLO (malformed, unknown metric, NaN or
            infinite limit, a metric the run's summary does not have: a chain
            has only its end-to-end ones,
            :data:`~pipeline.sim.analysis.planning.slo.CHAIN_METRICS`, and no one
            stage's such as ``write.utilisation``), bad ``confidence``,
            ``replications``, ``budget``, ``cost``, ``shares`` (an unknown or missing
            scenario, a share that is negative, NaN or infinite, shares not
            summing to 1, shares without a set or a cost), ``lookahead``,
            ``processes`` or ``engine``, or a scenario that cannot be pickled for worker processes.

    Example:
        >>> base = Scenario(arrivals=Poisson(rate=50), service=LogNormal(mean=0.08, cv=2),
        ...                 config=PipelineConfig(max_attempts=3), n_items=20_000, seed=1)
        >>> p = plan(base, {"concurrency": range(1, 65), "queue_maxsize": [100, 1000]},
        ...          ["latency_p95_s<=0.5", "memory_peak_bytes<=200e6"])
        >>> print(p)            # the choice, the binding SLO, the candidates
        >>> p.figure()          # each SLO's metric against cost, with bounds and limits
    """
    arguments = check_arguments(
        base,
        search,
        slos,
        confidence=confidence,
        replications=replications,
        budget=budget,
        check=check,
        cost=cost,
        order=order,
        headroom=headroom,
        scenarios=scenarios,
        shares=shares,
        lookahead=lookahead,
        skip_unstable=skip_unstable,
        processes=processes,
        engine=engine,
    )
    return _search(arguments, executor, progress)


def _search(arguments: PlanArguments, executor: Executor | None, progress: bool) -> Plan:
    """Walk the search in rounds, price the choice, find its headroom: the :class:`Plan`."""
    walk = Walk(arguments)
    base, processes, lookahead = arguments.base, arguments.processes, arguments.lookahead
    low, high = arguments.replications
    members = arguments.members
    metrics = tuple(slo.metric for slo in arguments.slos)
    # Every run reports the cost's metrics, priced or not, so that a priced plan finds an
    # unpriced plan's runs in a RunCache (the same task, the same answer).
    extra = Cost().metrics(base)
    # Bonferroni over the looks and, for a set, over its scenarios too (see the docstring).
    looks = len(replication_schedule(low, high)) * max(1, len(members))
    per_look = look_confidence(arguments.level, looks)

    engine = arguments.engine
    workers = pool_size(processes, executor, base, engine, lookahead * low)
    if workers > 1 or executor is not None:
        check_picklable([base, *members.values()], workers, "plan")

    bar = RunBar(progress)
    with contextlib.ExitStack() as stack:
        stack.callback(bar.close)
        # Every candidate's replication r draws the same arrivals and service times: share them.
        stack.enter_context(shared_draws())
        runner = Runner(executor, workers, stack, asked=processes is not None)
        rounds = Rounds(
            runner, bar, engine, metrics, extra, arguments.slos, per_look, budget=arguments.budget
        )
        walk.run(rounds)
        choice = _least_total_cost(walk, rounds, arguments, per_look)
        decision = decide(walk.seen, len(walk.candidates), walk.target, choice)
        found = _headroom(walk, rounds, arguments, decision) if arguments.headroom else None

    seen = walk.seen
    _warn_drain_timeouts(seen, arguments.slos)
    return Plan(
        base=base,
        search={k: list(v) for k, v in arguments.axes.items()},
        cost=list(walk.fields),
        slos=arguments.slos,
        confidence=arguments.level,
        look_confidence=per_look,
        replications=arguments.replications,
        total_candidates=len(walk.candidates),
        examined=tuple(seen),
        decision=decision,
        mix=arguments.mix,
        prices=arguments.prices,
        budget=rounds.budget(),
        headroom=found,
        headroom_asked=arguments.headroom,
        scenario_names=tuple(members),
        check=verdict_of(seen, arguments.slos) if arguments.check else None,
    )


def _least_total_cost(
    walk: Walk, rounds: Rounds, arguments: PlanArguments, per_look: float
) -> Candidate | None:
    """With a wait cost priced, or an autoscaled pool (whose workers cost is measured),
    and the cheapest configuration in workers settled (every cheaper one shown to fail),
    search on for the least total cost per hour (:mod:`~.cheapest`); else None."""
    prices = arguments.prices
    if prices is None or not (prices.wait_hour or _autoscales(arguments, prices)):
        return None
    if walk.target is None or open_below(walk.seen, walk.target):
        return None
    walk.examined, choice = least_total_cost(
        walk.candidates,
        walk.examined,
        functools.partial(walk.run_round, rounds),
        walk.examine,
        cost=prices,
        mix=arguments.mix,
        level=per_look,
        replications=arguments.replications,
        lookahead=arguments.lookahead,
    )
    return choice


def _autoscales(arguments: PlanArguments, prices: Cost) -> bool:
    """Whether some configuration of the search runs an autoscaled pool (its workers
    cost is then measured, as a wait cost is), a chain's stage included."""
    return any(prices.pools(scenario, {}) for scenario in arguments.mix.scenarios) or any(
        value is not None for value in arguments.axes.get("autoscale", ())
    )


def _headroom(
    walk: Walk, rounds: Rounds, arguments: PlanArguments, decision: Decision
) -> Headroom | None:
    """The headroom of the choice (the cheapest configuration meeting every SLO, when no
    wait cost chose), when nothing cheaper is left open; else None."""
    pick = decision.choice or decision.cheapest
    if pick is None or open_below(walk.seen, pick):
        return None
    if arguments.members:  # a set's headroom is its binding scenario's
        pick = pick.of_scenario(pick.binding_scenario())
    return find_headroom(
        pick,
        rounds,
        slos=arguments.slos,
        level=arguments.level,
        replications=arguments.replications,
    )


def _warn_drain_timeouts(examined: Sequence[Candidate], slos: Sequence[SLO]) -> None:
    """Warn once when some runs' drain timed out, with how many runs and items (pointing
    at the caller of :func:`plan`)."""
    drain_cut = any(slo.metric in DRAIN_CUT_METRICS for slo in slos)
    warn_drain_timeouts(
        [
            (c.scenario, {"drain_timed_out": cut, "items_unfinished": left})
            for c in examined
            for cut, left in zip(c.timed_out, c.unfinished, strict=True)
        ],
        what="plan runs",
        then=(
            "; the plan counts those runs as failing every latency and wait SLO"
            if drain_cut
            else ""
        ),
        stacklevel=4,
    )
