"""The ``plan`` command's own settings, read from its flags and the scenario file and
checked before any run (one line naming the flag, its value and what is allowed; exit
status 2): the search (or the one configuration ``--check`` judges), the SLOs, the
confidence, replications, budget, processes, prices and a scenario set
(``--scenario NAME=FILE[@SHARE]``). :func:`read_request` gathers them into one
:class:`PlanRequest`. numpy and the simulator are not loaded here before a flag is read
(:mod:`tests.test_lazy_imports`).
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._extras import require
from . import plan_report
from .axes import Axes, check_axes, gather_axes, parse_axis, replace_fields
from .output import OutputFolder
from .settings import SCENARIO_TABLES, build_scenario, read_settings
from .values import MAX_REPLICATIONS, parse_int, parse_processes

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_MAX_REPLICATIONS",
    "DEFAULT_MIN_REPLICATIONS",
    "MAX_BUDGET",
    "PLAN_TABLES",
    "PlanRequest",
    "pick",
    "read_budget",
    "read_check",
    "read_confidence",
    "read_cost",
    "read_processes",
    "read_replications",
    "read_request",
    "read_search",
    "read_slos",
    "scenario_flags",
    "scenario_set",
]

# Scenario-file keys the plan reads itself (not scenario settings).
PLAN_TABLES = (
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
DEFAULT_MIN_REPLICATIONS = 3
DEFAULT_MAX_REPLICATIONS = 192
DEFAULT_BUDGET = 2_000
MAX_BUDGET = 10_000_000


def read_search(file_search: Any, flags: Sequence[tuple[str, list[Any]]], path: str | None) -> Axes:
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


def read_slos(file_slos: Any, flags: Sequence[str] | None) -> list[str]:
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


def read_confidence(text: Any) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ValueError(
            f"--confidence: expected a number >= 0.5 and < 1, got {str(text)!r}"
        ) from None
    if not 0.5 <= value < 1:
        raise ValueError(f"--confidence: expected a number >= 0.5 and < 1, got {str(text)!r}")
    return value


def read_replications(text: Any, maximum: Any, origin: str) -> tuple[int, int]:
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
        return min(DEFAULT_MIN_REPLICATIONS, high), high
    return DEFAULT_MIN_REPLICATIONS, DEFAULT_MAX_REPLICATIONS


def read_budget(text: Any) -> int | None:
    if text is None:
        return None
    try:
        return parse_int(str(text), at_least=1, at_most=MAX_BUDGET, what="runs")
    except ValueError as exc:
        raise ValueError(f"--budget: {exc}") from None


def read_processes(text: Any) -> int | None:
    if text is None:
        return None
    try:
        return parse_processes(str(text))
    except ValueError as exc:
        raise ValueError(f"--processes: {exc}") from None


def read_cost(flags: Sequence[str]) -> dict[str, Any] | None:
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


def read_check(text: str, file_search: Any, flags: Sequence[Any], path: str | None) -> Axes:
    """``--check concurrency=8,maxsize=100`` -> one value per axis, checked like --search."""
    if flags:
        raise ValueError("give --check (judge one configuration) or --search (find one), not both")
    searched = None
    if file_search is not None:
        searched = read_search(file_search, [], path)
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


def scenario_flags(flags: Sequence[str]) -> tuple[dict[str, str], dict[str, float] | None]:
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


def scenario_set(
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
                tables=(*PLAN_TABLES, *SCENARIO_TABLES),
            )
            scenarios[name] = build_scenario(settings)
        except ValueError as exc:
            raise ValueError(f"--scenario {name}: {exc}") from None
        for key in PLAN_TABLES:
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


def pick(flag: Any, tables: dict[str, Any], name: str) -> Any:
    return flag if flag is not None else tables.get(name)


@dataclass
class PlanRequest:
    """Everything the ``plan`` command was asked, read and checked (see :func:`read_request`).

    ``options`` are :func:`~pipeline.sim.analysis.planning.plan.plan`'s keyword
    arguments ``confidence``, ``replications``, ``budget``, ``processes`` and
    ``engine``; ``source`` names the scenario file(s) for the report; ``out`` is
    the output folder, or None; ``change`` is ``--sensitivity``'s (None without it).
    """

    base: Any
    search: dict[str, Any]
    slos: list[str]
    options: dict[str, Any]
    cost: dict[str, Any] | None
    shares: dict[str, float] | None
    scenarios: dict[str, Any] | None
    scheduler: Any
    change: float | None
    out: OutputFolder | None
    source: str | None
    check: bool
    headroom: bool


def read_request(args: argparse.Namespace) -> PlanRequest:
    """The ``plan`` command's flags and scenario file(s), every one checked before a run.

    Raises:
        ValueError: a bad flag or setting, in one line naming it.
    """
    replications_flag, args.replications = args.replications, None
    files, shares = scenario_flags(args.scenario_set)
    if files and args.scenario is not None:
        raise ValueError(
            f"give a scenario file ({args.scenario}) or --scenario NAME=FILE, not both: "
            "with --scenario the first one is the base"
        )
    if files:
        args.scenario = next(iter(files.values()))  # the base: its plan settings are read
    settings = read_settings(args, tables=(*PLAN_TABLES, *SCENARIO_TABLES))
    tables = settings.tables
    base = build_scenario(settings)
    if args.check is not None:
        axes = read_check(args.check, tables.get("search"), args.search, args.scenario)
    else:
        axes = read_search(tables.get("search"), args.search, args.scenario)
    # A set's base is its first scenario: checked with the others, named in any error.
    scenarios = scenario_set(args, files, axes, tables) if files else None
    if scenarios is None:
        check_axes(axes, base)
    cost = read_cost(args.cost)
    if shares is not None and cost is None:
        raise ValueError(
            "--scenario NAME=FILE@SHARE: shares weigh the cost per hour over the scenarios; "
            "give --cost too, or no shares"
        )
    if cost is not None:
        _check_cost(cost, {"": base} if scenarios is None else scenarios)
    search = replace_fields(axes)
    slos = read_slos(tables.get("slo"), args.slo)
    options = _plan_options(args, tables, replications_flag)
    options["engine"] = settings.get("engine", "auto")
    scheduler = pick(args.scheduler, tables, "scheduler")
    change = plan_report.parse_sensitivity(args.sensitivity)
    if "out" in settings:  # frontier.png: say a missing matplotlib now, not after the search
        require("plan --out", "viz", "matplotlib")
    # An unusable --out is found now, not after the search.
    out = OutputFolder(settings["out"]) if "out" in settings else None
    source = ", ".join(f"{n}={f}" for n, f in files.items()) if files else args.scenario
    return PlanRequest(
        base,
        search,
        slos,
        options,
        cost,
        shares,
        scenarios,
        scheduler,
        change,
        out,
        source,
        check=args.check is not None,
        headroom=args.headroom,
    )


def _check_cost(cost: dict[str, Any], members: dict[str, Any]) -> None:
    """The prices apply to every scenario (a chain's per-stage prices name its stages)."""
    from ..sim.analysis.planning.cost import Cost

    for name, member in members.items():
        try:
            Cost.parse(cost).check(member)
        except ValueError as exc:
            where = f" (scenario {name})" if name else ""
            raise ValueError(f"--cost{where}: {exc}") from None


def _plan_options(
    args: argparse.Namespace, tables: dict[str, Any], replications_flag: Any
) -> dict[str, Any]:
    """``confidence``, ``replications``, ``budget`` and ``processes``: flag, else file."""
    confidence_text = pick(args.confidence, tables, "confidence")
    confidence = 0.95 if confidence_text is None else read_confidence(confidence_text)
    origin = "--replications" if replications_flag is not None else "replications"
    replications = read_replications(
        pick(replications_flag, tables, "replications"),
        pick(args.max_replications, tables, "max_replications"),
        origin,
    )
    processes = read_processes(pick(args.processes, tables, "processes"))
    budget = read_budget(pick(args.budget, tables, "budget"))
    return dict(
        confidence=confidence,
        replications=replications,
        budget=budget,
        processes=processes,
    )
