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
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

from .._extras import require
from . import plan_report
from .axes import Axes, axis_flag, check_axes, gather_axes, parse_axis, replace_fields
from .output import OutputFolder, write_json
from .settings import add_scenario_flags, build_scenario, read_settings
from .values import MAX_REPLICATIONS, parse_int, parse_processes

__all__ = ["INFEASIBLE_EXIT", "add_command"]

INFEASIBLE_EXIT = 1
"""The exit status of a search in which no configuration meets every SLO (``--check``'s
"fails"); a script can tell it from a plan that chose one (0) without reading the JSON."""

# Scenario-file keys the plan reads itself (not scenario settings).
_TABLES = (
    "search",
    "slo",
    "confidence",
    "replications",
    "max_replications",
    "budget",
    "scheduler",
    "processes",
)
# The library's DEFAULT_REPLICATIONS, DEFAULT_BUDGET and MAX_BUDGET (planning.plan and
# planning.rounds), restated: importing them would load numpy before a flag is read.
# A test pins that they agree.
_DEFAULT_MIN_REPLICATIONS = 3
_DEFAULT_MAX_REPLICATIONS = 192
DEFAULT_BUDGET = 2_000
MAX_BUDGET = 10_000_000


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
                f"(default {_DEFAULT_MIN_REPLICATIONS}..{_DEFAULT_MAX_REPLICATIONS}; "
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
            "for a chain's stage, write.concurrency=10..40 (repeatable)"
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
        help=f"most replications per configuration (default {_DEFAULT_MAX_REPLICATIONS})",
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


# -- reading the plan's own settings ------------------------------------------------------------


def _search(file_search: Any, flags: Sequence[tuple[str, list[Any]]], path: str | None) -> Axes:
    """Axis -> values, from the file's ``search`` table and ``--search`` (see
    :func:`~pipeline.cli.axes.gather_axes`)."""
    return gather_axes(
        file_search,
        flags,
        path=path,
        table_name="search",
        flag="--search",
        what="search axis",
        missing=(
            "the search space is empty: give --search NAME=VALUES (e.g. --search concurrency=1..64)"
        ),
    )


def _slos(file_slos: Any, flags: Sequence[str] | None) -> list[str]:
    if flags:
        return list(flags)
    if file_slos is None:
        raise ValueError("give at least one --slo 'METRIC<=LIMIT' (e.g. 'latency_p95_s<=0.5')")
    if isinstance(file_slos, str):
        return [file_slos]
    if not isinstance(file_slos, list) or not all(isinstance(s, str) for s in file_slos):
        raise ValueError(
            f'slo in the scenario file must be a list of strings like ["latency_p95_s<=0.5"], '
            f"got {file_slos!r}"
        )
    return file_slos


def _confidence(text: Any) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ValueError(
            f"--confidence: expected a number >= 0.5 and < 1, got {str(text)!r}"
        ) from None
    if not 0.5 <= value < 1:
        raise ValueError(f"--confidence: expected a number >= 0.5 and < 1, got {str(text)!r}")
    return value


def _replications(text: Any, maximum: Any, origin: str) -> tuple[int, int]:
    """``MIN..MAX``, ``N`` (exactly N) or only ``--max-replications`` -> (min, max)."""
    limit = MAX_REPLICATIONS

    def whole(part: str, what: str) -> int:
        return parse_int(part, at_least=2, at_most=limit, what=what)

    if text is not None:
        if maximum is not None:
            raise ValueError("give --replications or --max-replications, not both")
        low, dots, high = str(text).partition("..")
        try:
            if dots:
                first, last = whole(low, "replications"), whole(high, "replications")
                if last < first:
                    raise ValueError(f"MIN..MAX needs MIN <= MAX, got {str(text)!r}")
                return first, last
            n = whole(low, "replications")
        except ValueError as exc:
            raise ValueError(f"{origin}: {exc}") from None
        return n, n
    if maximum is not None:
        try:
            high = whole(str(maximum), "most replications per configuration")
        except ValueError as exc:
            raise ValueError(f"--max-replications: {exc}") from None
        return min(_DEFAULT_MIN_REPLICATIONS, high), high
    return _DEFAULT_MIN_REPLICATIONS, _DEFAULT_MAX_REPLICATIONS


def _budget(text: Any) -> int | None:
    if text is None:
        return None
    try:
        return parse_int(str(text), at_least=1, at_most=MAX_BUDGET, what="runs")
    except ValueError as exc:
        raise ValueError(f"--budget: {exc}") from None


def _processes(text: Any) -> int | None:
    if text is None:
        return None
    try:
        return parse_processes(str(text))
    except ValueError as exc:
        raise ValueError(f"--processes: {exc}") from None


def _cost(flags: Sequence[str]) -> dict[str, Any] | None:
    """``--cost worker_hour=0.5,wait_hour=20`` (repeatable) -> {key: price}."""
    if not flags:
        return None
    prices: dict[str, Any] = {}
    for flag in flags:
        for part in str(flag).split(","):
            key, eq, text = part.partition("=")
            key = key.strip()
            if not eq or not key:
                raise ValueError(
                    f"--cost: expected KEY=PRICE (worker_hour=0.5, wait_hour=20), got {part!r}"
                )
            if key in prices:
                raise ValueError(f"--cost: {key} is given twice")
            try:
                prices[key] = float(text.strip())
            except ValueError:
                raise ValueError(
                    f"--cost: {key} must be a finite number >= 0 and <= 1e+12 (money per hour), "
                    f"got {text!r}"
                ) from None
    from ..sim.analysis.planning.cost import Cost

    try:
        Cost.parse(prices)
    except ValueError as exc:
        raise ValueError(f"--cost: {exc}") from None
    return prices


def _check_axes(text: str, file_search: Any, flags: Sequence[Any], path: str | None) -> Axes:
    """``--check concurrency=8,maxsize=100`` -> one value per axis, checked like --search."""
    if flags:
        raise ValueError("give --check (judge one configuration) or --search (find one), not both")
    searched = None
    if file_search is not None:
        searched = _search(file_search, [], path)
    pairs: list[tuple[str, list[Any]]] = []
    # "concurrency=8,maxsize=100": a comma followed by NAME= starts the next field.
    for part in str(text).split(","):
        if "=" in part or not pairs:
            pairs.append((part, []))
        else:
            raise ValueError(
                f"--check: expected FIELD=VALUE[,FIELD=VALUE] with one value each, got {text!r}"
            )
    axes = Axes()
    for part, _ in pairs:
        try:
            name, values = parse_axis(part.strip())
        except ValueError as exc:
            raise ValueError(f"--check: {exc}") from None
        if len(values) != 1:
            raise ValueError(f"--check: {part.strip()!r} must give one value, got {len(values)}")
        if name in axes:
            raise ValueError(f"--check: {name} is given twice")
        if searched is not None and name not in searched:
            raise ValueError(
                f"--check: {name} is not searched in {path}; searched: {', '.join(searched)}"
            )
        axes[name] = values
    return axes


_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def _scenario_flags(flags: Sequence[str]) -> tuple[dict[str, str], dict[str, float] | None]:
    """``--scenario NAME=FILE[@SHARE]`` (repeatable) -> ({name: path}, {name: share} or
    None), names distinct, files there, a share for every scenario or for none."""
    found: dict[str, str] = {}
    shares: dict[str, float] = {}
    for flag in flags:
        name, eq, path = str(flag).partition("=")
        name = name.strip()
        if not eq or not name or not path:
            raise ValueError(
                f"--scenario: expected NAME=FILE or NAME=FILE@SHARE (peak=peak.toml@0.1), "
                f"got {flag!r}"
            )
        if not set(name) <= _NAME_CHARACTERS:
            raise ValueError(
                f"--scenario: the name {name!r} may hold only letters, digits, '_', '-' and '.'"
            )
        if name in found:
            raise ValueError(f"--scenario: {name} is given twice")
        file, at, share = path.rpartition("@")
        if at and not os.path.isfile(path):  # a file named with an "@" is a file
            path = file
            try:
                shares[name] = float(share.strip())
            except ValueError:
                shares[name] = math.nan
            if not math.isfinite(shares[name]) or shares[name] < 0:
                raise ValueError(
                    f"--scenario {name}: the share of the hours must be a finite number "
                    f">= 0 (peak=peak.toml@0.1), got {share!r}"
                )
        if not os.path.isfile(path):
            raise ValueError(f"--scenario {name}: no such scenario file {path!r}")
        found[name] = path
    if shares and len(shares) < len(found):
        missing = next(name for name in found if name not in shares)
        raise ValueError(
            f"--scenario {missing}: no share of the hours (NAME=FILE@SHARE); give one for "
            "every scenario, or none (equal shares)"
        )
    if shares:
        total = math.fsum(shares.values())
        if abs(total - 1.0) > 1e-6:
            listed = ", ".join(f"{n}@{v:g}" for n, v in shares.items())
            raise ValueError(
                f"--scenario: the shares of the hours must sum to 1, got {total:.6g} ({listed})"
            )
    return found, shares or None


def _scenario_set(
    args: argparse.Namespace, files: dict[str, str], axes: Axes, plan_tables: dict[str, Any]
) -> dict[str, Any]:
    """Each ``--scenario`` file, overridden by the scenario flags given, as a Scenario,
    every searched field checked against it; a plan setting (``slo``, ``search``, ...)
    in a later file that differs from the first file's is refused, not ignored."""
    scenarios = {}
    first = next(iter(files.values()))
    for name, path in files.items():
        try:
            settings = read_settings(
                argparse.Namespace(**{**vars(args), "scenario": path}),
                tables=(*_TABLES, "stages", "classes"),
            )
            scenarios[name] = build_scenario(settings)
        except ValueError as exc:
            raise ValueError(f"--scenario {name}: {exc}") from None
        for key in _TABLES:
            if key in settings.tables and settings.tables[key] != plan_tables.get(key):
                raise ValueError(
                    f"--scenario {name}: {path} sets {key} = {settings.tables[key]!r}, unlike "
                    f"{first} (the first scenario, whose plan settings the set uses): every "
                    f"scenario is judged on the same SLOs; move {key} to {first} or drop it "
                    f"from {path}"
                )
    chains = [name for name, s in scenarios.items() if s.stages is not None]
    if chains and len(chains) < len(scenarios):
        single = next(name for name in scenarios if name not in chains)
        raise ValueError(
            f"--scenario: {chains[0]} is a chain and {single} a single stage: every scenario "
            "must be a chain, or every one a single stage"
        )
    for name, scenario in scenarios.items():
        try:
            check_axes(axes, scenario)
        except ValueError as exc:
            raise ValueError(f"--scenario {name}: {exc}") from None
    return scenarios


def _pick(flag: Any, tables: dict[str, Any], name: str) -> Any:
    return flag if flag is not None else tables.get(name)


# -- running ------------------------------------------------------------------------------------


def _plan(args: argparse.Namespace) -> int:
    replications_flag, args.replications = args.replications, None
    files, shares = _scenario_flags(args.scenario_set)
    if files and args.scenario is not None:
        raise ValueError(
            f"give a scenario file ({args.scenario}) or --scenario NAME=FILE, not both: "
            "with --scenario the first one is the base"
        )
    if files:
        args.scenario = next(iter(files.values()))  # the base: its plan settings are read
    settings = read_settings(args, tables=(*_TABLES, "stages", "classes"))
    tables = settings.tables
    base = build_scenario(settings)
    if args.check is not None:
        axes = _check_axes(args.check, tables.get("search"), args.search, args.scenario)
    else:
        axes = _search(tables.get("search"), args.search, args.scenario)
    # A set's base is its first scenario: checked with the others, named in any error.
    scenarios = _scenario_set(args, files, axes, tables) if files else None
    if scenarios is None:
        check_axes(axes, base)
    cost = _cost(args.cost)
    if shares is not None and cost is None:
        raise ValueError(
            "--scenario NAME=FILE@SHARE: shares weigh the cost per hour over the scenarios; "
            "give --cost too, or no shares"
        )
    if cost is not None:
        from ..sim.analysis.planning.cost import Cost

        members = {"": base} if scenarios is None else scenarios
        for name, member in members.items():
            try:
                Cost.parse(cost).check(member)
            except ValueError as exc:
                where = f" (scenario {name})" if name else ""
                raise ValueError(f"--cost{where}: {exc}") from None
    search = replace_fields(axes)
    slos = _slos(tables.get("slo"), args.slo)
    confidence_text = _pick(args.confidence, tables, "confidence")
    confidence = 0.95 if confidence_text is None else _confidence(confidence_text)
    origin = "--replications" if replications_flag is not None else "replications"
    replications = _replications(
        _pick(replications_flag, tables, "replications"),
        _pick(args.max_replications, tables, "max_replications"),
        origin,
    )
    processes = _processes(_pick(args.processes, tables, "processes"))
    budget = _budget(_pick(args.budget, tables, "budget"))
    scheduler = _pick(args.scheduler, tables, "scheduler")
    change = plan_report.parse_sensitivity(args.sensitivity)
    if "out" in settings:  # frontier.png: say a missing matplotlib now, not after the search
        require("plan --out", "viz", "matplotlib")
    # An unusable --out is found now, not after the search.
    out = OutputFolder(settings["out"]) if "out" in settings else None

    from ..sim.analysis.planning.plan import plan

    options = dict(
        confidence=confidence,
        replications=replications,
        budget=budget,
        processes=processes,
        engine=settings.get("engine", "auto"),
        progress=True,
    )
    with contextlib.ExitStack() as stack:
        if out is not None:
            stack.enter_context(out)  # a search that fails leaves no empty folder behind
        executor = None
        if scheduler is not None:
            if not isinstance(scheduler, str) or not scheduler.strip():
                raise ValueError(f"--scheduler: expected an address or 'local', got {scheduler!r}")
            from ..sim.executors.cluster import scheduler_executor

            try:
                executor = stack.enter_context(scheduler_executor(scheduler))
            except RuntimeError as exc:  # refused here: say so in one line
                raise ValueError(str(exc)) from None
        result = plan(
            base,
            search,
            slos,
            executor=executor,
            cost=cost,
            check=args.check is not None,
            headroom=args.headroom,
            scenarios=scenarios,
            shares=shares,
            **options,
        )
        sensitivity = plan_report.run_sensitivity(
            result, change, executor=executor, processes=processes
        )

    payload = result.to_dict()
    if change is not None:
        payload["sensitivity"] = None if sensitivity is None else sensitivity.to_dict()
    if result.check is not None:
        status = result.check.exit_status
    else:
        status = INFEASIBLE_EXIT if result.status == "infeasible" else 0
    if out is not None:
        with out, out.writing() as folder:
            _write_out(folder, payload, result)
            source = ", ".join(f"{n}={f}" for n, f in files.items()) if files else args.scenario
            plan_report.write_report_files(folder, result, sensitivity, source)
    if args.json:
        print(json.dumps(payload, allow_nan=False))
    else:
        print(result.report())
        if sensitivity is not None:
            print(f"\n{sensitivity.report()}")
    sys.stdout.flush()
    return status


def _write_out(directory: str, payload: dict[str, Any], result: Any) -> None:
    write_json(os.path.join(directory, "plan.json"), payload)
    result.candidates.to_csv(os.path.join(directory, "candidates.csv"), index=False)
    result.runs.to_csv(os.path.join(directory, "runs.csv"), index=False)

    import matplotlib

    matplotlib.use("Agg")
    result.figure().savefig(os.path.join(directory, "frontier.png"), dpi=100)
