"""``python -m pipeline plan``: the cheapest configuration that meets every SLO.

Usage::

    python -m pipeline plan --arrivals poisson:rate=50 \\
        --service lognormal:mean=0.08,cv=2 --failure-rate 0.02 --max-attempts 3 \\
        --item-size 20000 --items 100000 --seed 1 \\
        --search concurrency=1..64 --search maxsize=100,1000 \\
        --slo 'latency_p95_s<=0.5' --slo 'memory_peak_bytes<=200e6' \\
        --confidence 0.95 --json
    python -m pipeline plan scenario.toml --out DIR
    python -m pipeline plan chain.toml --search fetch.concurrency=1..4 \\
        --search write.concurrency=5..40 --slo 'latency_p95_s<=60' --json

Flags, besides every scenario flag of ``simulate``:

- ``--search NAME=VALUES`` (repeatable): a field to vary, ``concurrency=1..64``,
  ``maxsize=100,1000,unbounded``, ``on-full=block,reject``, ``max-attempts=1..5``
  (any field ``sweep`` may vary); values are checked as the flags are. On a
  chain (``[[stages]]``), ``STAGE.NAME`` varies one stage
  (``write.concurrency=5..40``, ``fetch.maxsize=1,10``), as ``sweep``'s
  ``--grid`` does (:mod:`pipeline.cli.axes`), with the same one-line errors.
  With an autoscaler (``[autoscale]``, ``--autoscale``), ``autoscale.KEY``
  varies one of its settings (``autoscale.target=2,5,20``), and ``--cost
  worker_hour=X`` charges its pool's ``worker_seconds`` (see
  :mod:`~pipeline.sim.analysis.planning.cost`). ``autoscale`` puts a fixed pool
  and autoscaled ones in one search: its values are ``--autoscale``'s,
  separated by ``;`` (``'autoscale=none;max_workers=30,target=2'``).
  Configurations are walked in cost order: fewest workers, then the smallest
  queue; on a chain, total workers over the stages searched, then total
  queue slots (unbounded counts as infinite), then each field in turn.
- ``--slo 'METRIC<=LIMIT'`` or ``'METRIC>=LIMIT'`` (repeatable): every one must
  hold. Metrics are the summary keys (``latency_p95_s``, ``memory_peak_bytes``,
  ``utilisation``, ``throughput_per_s``, ...) and the fractions
  ``shed_fraction``, ``dead_letter_fraction``, ``unfinished_fraction``,
  ``completed_fraction``, ``attempts_per_item``. A chain's metrics are its
  end-to-end summary's (``latency_p95_s``, ``items_held_max``, ...,
  :data:`~pipeline.sim.analysis.planning.slo.CHAIN_METRICS`); a stage's own
  (``write.utilisation``) is refused: a plan answers for what the chain
  delivers, and one stage's number can look fine while the chain does not.
- ``--confidence LEVEL``: the one-sided confidence of each verdict (default 0.95).
- ``--replications MIN..MAX`` (default 3..192) or N (exactly N each), or
  ``--max-replications N`` (MIN stays 3): replications per configuration,
  added only where a verdict is still open.
- ``--budget N``: the most simulation runs the plan makes in all (default
  2,000; the headroom's included); the plan says how many it used.
- ``--scheduler ADDRESS|local``: run on a Dask cluster (``local`` starts a
  LocalCluster on this machine); ``--processes N``: local worker processes
  (at most :data:`~pipeline.cli.values.MAX_PROCESSES`).
- ``--json``: one JSON object with ``status`` (chosen, undecided, infeasible),
  ``chosen`` (config fields incl. ``concurrency``; for a chain each stage's,
  ``write.concurrency``; null unless chosen),
  ``binding``, ``fallback``, ``undecided``, ``candidates`` (one object per
  configuration examined) and what was searched.
- ``--out DIR``: writes ``plan.json`` (the same object), ``candidates.csv``,
  ``runs.csv`` (one row per run), ``frontier.png`` and ``report.html`` (one
  self-contained page to share). With ``--check`` every one of them reads
  as a check: the verdict first, one judgement per SLO.
- ``--scenario NAME=FILE[@SHARE]`` (repeatable: ``normal=normal.toml@0.9``,
  ``peak=peak.toml@0.1``, ``incident=...``): a scenario set. One configuration must
  meet every SLO in every scenario (each file gives its workload; the searched
  fields override its config; the scenario flags given override every file);
  the report names the binding scenario and has a table per scenario, the
  JSON ``scenarios`` (per name, ``verdict`` and ``judgements`` at the chosen
  configuration) and ``binding_scenario``. The first is the base: the plan's
  own settings (``search``, ``slo``, ...) are read from its file alone (a
  later file that sets one differently is refused: every scenario is judged
  on the same SLOs).
  ``--headroom`` and ``--sensitivity`` apply to the binding scenario alone
  (the one closest to breaking), named in their output. A scenario file
  given as well is refused, as is a chain mixed with a single stage. With
  ``--check``, the one configuration is judged in every scenario. ``@SHARE``
  is the scenario's share of the hours (peak one hour in ten: ``@0.1``),
  given for every scenario or none (then equal shares), each >= 0, summing
  to 1: with ``--cost``, the cost per hour is the mean over the hours
  (workers, and with ``wait_hour`` each scenario's waiting,
  ``sum share * wait_hour * lambda * W``), and with ``wait_hour`` the plan
  picks the least such total among the configurations meeting every SLO in
  every scenario. A share of 0 keeps the scenario's SLOs but not its cost (an
  incident to survive). Shares without ``--cost`` are refused.
- ``--sensitivity [PCT]``: each input of the chosen configuration moved by
  ±PCT% (default 20), see :mod:`~pipeline.cli.plan_report`.

A scenario file may hold the plan too: ``search = {concurrency = "1..64",
maxsize = [100, 1000]}``, ``slo = ["latency_p95_s<=0.5"]``, ``confidence``,
``replications = "3..192"``, ``max_replications``, ``budget``, ``scheduler``,
``processes``.
Flags override it (``--search`` per field; ``--slo`` replaces the file's list).
``search`` is read as a sweep's ``[grid]`` is: a string, a number or a list
of them per axis; an axis given twice is an error.

A progress bar goes to stderr. Bad input -- a malformed SLO, an unknown metric,
an empty search -- prints one line, ``pipeline: error: ...``, and exits 2.

Exit status: a search exits 0 when it chose a configuration or ended undecided, and
:data:`INFEASIBLE_EXIT` (1, as ``--check`` for a configuration that fails) when nothing
in the search space meets every SLO, after printing the plan as usual; ``--check``
exits 0 meets, 1 fails, 3 undecided.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any

from . import plan_report
from .axes import axis_flag
from .output import write_json
from .plan_settings import (
    DEFAULT_BUDGET,
    DEFAULT_MAX_REPLICATIONS,
    DEFAULT_MIN_REPLICATIONS,
    PlanRequest,
    read_request,
)
from .settings import add_scenario_flags

__all__ = ["INFEASIBLE_EXIT", "add_command"]

INFEASIBLE_EXIT = 1
"""The exit status of a search in which no configuration meets every SLO (``--check``'s
"fails"); a script can tell it from a plan that chose one (0) without reading the JSON."""


def add_command(subparsers: Any) -> None:
    """Register ``plan`` with the command line's subparsers."""
    parser = subparsers.add_parser(
        "plan",
        help="find the cheapest configuration that meets every SLO",
        description=(
            "Search configurations in cost order (fewest workers, then the smallest queue) "
            "for the cheapest one that meets every SLO at the given confidence. "
            "Flags override the scenario file."
        ),
    )
    # Two scenario flags mean something else here: say so in --help.
    add_scenario_flags(
        parser,
        {
            "replications": (
                "MIN..MAX|N",
                f"replications per configuration, added only where a verdict is open "
                f"(default {DEFAULT_MIN_REPLICATIONS}..{DEFAULT_MAX_REPLICATIONS}; "
                "N: exactly N)",
            ),
            "out": (
                "DIR",
                "write plan.json, candidates.csv, runs.csv, frontier.png, report.html "
                "(and sensitivity.png)",
            ),
        },
    )
    parser.add_argument(
        "--search",
        action="append",
        type=axis_flag,
        default=[],
        metavar="NAME=VALUES",
        help=(
            "a field to vary: concurrency=1..64, maxsize=100,1000,unbounded; STAGE.NAME "
            "for a chain's stage, write.concurrency=10..40; autoscale.KEY for the "
            "autoscaler, autoscale.target=2,5,20; whole pools side by side, "
            "'autoscale=none;max_workers=30,target=2' (repeatable)"
        ),
    )
    parser.add_argument(
        "--slo",
        action="append",
        metavar="METRIC<=LIMIT",
        help="an objective, e.g. 'latency_p95_s<=0.5' or 'throughput_per_s>=49' (repeatable)",
    )
    parser.add_argument(
        "--confidence", metavar="LEVEL", help="one-sided confidence of each verdict (0.95)"
    )
    parser.add_argument(
        "--max-replications",
        dest="max_replications",
        metavar="N",
        help=f"most replications per configuration (default {DEFAULT_MAX_REPLICATIONS})",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS|local",
        help="run on a Dask cluster: a scheduler address, or 'local' for a LocalCluster",
    )
    parser.add_argument(
        "--budget",
        metavar="N",
        help=f"most simulation runs the plan makes in all (default {DEFAULT_BUDGET:,})",
    )
    parser.add_argument("--processes", metavar="N", help="local worker processes")
    parser.add_argument(
        "--cost",
        action="append",
        default=[],
        metavar="KEY=PRICE[,KEY=PRICE]",
        help=(
            "prices per hour: worker_hour=X (one worker), wait_hour=Y (one item waiting); "
            "on a chain STAGE.worker_hour=X; with wait_hour, least total cost per hour"
        ),
    )
    parser.add_argument(
        "--headroom",
        action="store_true",
        help="how much more traffic (and slower service) the choice takes before an SLO breaks",
    )
    parser.add_argument(
        "--check",
        metavar="FIELD=VALUE[,FIELD=VALUE]",
        help=(
            "judge this one configuration (e.g. concurrency=8,maxsize=100) instead of "
            "searching: exit 0 meets, 1 fails, 3 undecided"
        ),
    )
    parser.add_argument(
        "--scenario",
        dest="scenario_set",
        action="append",
        default=[],
        metavar="NAME=FILE[@SHARE]",
        help=(
            "a scenario of a set (repeatable: normal=normal.toml@0.9, peak=peak.toml@0.1): one "
            "configuration must meet every SLO in every one; the first is the base; @SHARE, "
            "its share of the hours, weighs the cost per hour (default: equal shares)"
        ),
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--sensitivity",
        nargs="?",
        const=plan_report.DEFAULT_PCT,
        metavar="PCT",
        help="move each input of the chosen configuration by ±PCT%% (default 20) and report "
        "each SLO after; put it after the scenario file",
    )
    # --replications is a scenario flag (an integer for simulate); plan reads it itself.
    parser.set_defaults(run=_plan)


# -- running ------------------------------------------------------------------------------------


def _plan(args: argparse.Namespace) -> int:
    request = read_request(args)
    result, sensitivity = _run(request)
    payload = result.to_dict()
    if request.change is not None:
        payload["sensitivity"] = None if sensitivity is None else sensitivity.to_dict()
    if result.check is not None:
        status = result.check.exit_status
    else:
        status = INFEASIBLE_EXIT if result.status == "infeasible" else 0
    if request.out is not None:
        with request.out, request.out.writing() as folder:
            _write_out(folder, payload, result)
            plan_report.write_report_files(folder, result, sensitivity, request.source)
    if args.json:
        print(json.dumps(payload, allow_nan=False))
    else:
        print(result.report())
        if sensitivity is not None:
            print(f"\n{sensitivity.report()}")
    sys.stdout.flush()
    return status


def _run(request: PlanRequest) -> tuple[Any, Any]:
    """The plan (and its sensitivity, when asked for), on the cluster given or here."""
    from ..sim.analysis.planning.plan import plan

    with contextlib.ExitStack() as stack:
        if request.out is not None:
            stack.enter_context(request.out)  # a search that fails leaves no empty folder
        executor = None
        scheduler = request.scheduler
        if scheduler is not None:
            if not isinstance(scheduler, str) or not scheduler.strip():
                raise ValueError(f"--scheduler: expected an address or 'local', got {scheduler!r}")
            from ..sim.executors.cluster import scheduler_executor

            try:
                executor = stack.enter_context(scheduler_executor(scheduler))
            except RuntimeError as exc:  # refused here: say so in one line
                raise ValueError(str(exc)) from None
        result = plan(
            request.base,
            request.search,
            request.slos,
            executor=executor,
            cost=request.cost,
            check=request.check,
            headroom=request.headroom,
            scenarios=request.scenarios,
            shares=request.shares,
            progress=True,
            **request.options,
        )
        sensitivity = plan_report.run_sensitivity(
            result,
            request.change,
            executor=executor,
            processes=request.options["processes"],
        )
    return result, sensitivity


def _write_out(directory: str, payload: dict[str, Any], result: Any) -> None:
    write_json(os.path.join(directory, "plan.json"), payload)
    result.candidates.to_csv(os.path.join(directory, "candidates.csv"), index=False)
    result.runs.to_csv(os.path.join(directory, "runs.csv"), index=False)

    import matplotlib

    matplotlib.use("Agg")
    result.figure().savefig(os.path.join(directory, "frontier.png"), dpi=100)
