"""Command line: capacity planning without Jupyter (``python -m pipeline simulate``).

Usage::

    python -m pipeline simulate --arrivals poisson:rate=3.2 \\
        --service exponential:mean=1.0 --concurrency 4 --maxsize 100 \\
        --on-full block --max-attempts 3 --failure-rate 0.0 \\
        --items 100000 --seed 1 --json
    python -m pipeline simulate scenario.toml --json
    python -m pipeline simulate --trace arrivals.csv --concurrency 4 --out DIR

Further commands take the same scenario flags and document themselves in
their own modules: ``python -m pipeline sweep`` (:mod:`pipeline.cli_sweep`)
runs a grid of scenarios x replications, locally or on a Dask cluster, and
writes ``sweep.csv`` and one heatmap per metric::

    python -m pipeline sweep --arrivals poisson:rate=3.2 \\
        --service exponential:mean=1.0 --items 20000 \\
        --grid concurrency=4..8 --grid maxsize=10,100,unbounded \\
        --replications 5 --metrics latency_p95_s,memory_peak_bytes --out DIR
    python -m pipeline sweep scenario.toml --scheduler tcp://host:8786 --json

``python -m pipeline plan`` (:mod:`pipeline.cli_plan`) finds the cheapest
configuration that meets every SLO with confidence::

    python -m pipeline plan --arrivals poisson:rate=50 \
        --service lognormal:p50=0.05,p99=1.2 --search concurrency=1..64 \
        --search maxsize=100,1000 --slo 'latency_p95_s<=0.5' \
        --slo 'memory_peak_bytes<=200e6' --item-size 20000 --items 100000 --json

Flags (units in brackets): ``--arrivals SPEC`` (``poisson:rate=R``,
``constant:rate=R``, ``onoff:rate_on=R,rate_off=R,mean_on_s=S,mean_off_s=S``,
``counts:file=FILE.csv,column=NAME,interval_s=S``: Poisson arrivals at the
rate of counts measured per interval, constant within an interval and
repeating), ``--service SPEC`` (``exponential:mean=S``, ``constant:value=S``,
``lognormal:mean=S,cv=C`` or any two of ``mean``, ``cv``, ``p50``, ``p90``,
``p95``, ``p99`` such as ``lognormal:p50=S,p99=S`` or ``lognormal:mean=S,p99=S``,
``gamma:mean=S,cv=C``, ``uniform:low=S,high=S``,
``empirical:file=FILE.csv,column=NAME``: resample measured durations),
``--concurrency N``, ``--maxsize N|unbounded``, ``--on-full block|reject``,
``--max-attempts N``, ``--failure-rate p`` (each attempt fails independently
with probability p), ``--backoff SPEC`` (``exponential:base=S,factor=F,cap=S,jitter=0|1``,
``constant:delay=S,jitter=0|1`` or ``none``), ``--attempt-timeout S|none``,
``--drain-timeout S|none``, ``--items N`` or ``--duration S``, ``--seed N``,
``--warmup S``, ``--item-size BYTES``, ``--replications R``, ``--trace FILE.csv``
(columns ``arrival_s``, ``service_s``, optional ``fails``; replaces
``--arrivals``/``--service``), ``--engine auto|asyncio|kernel`` (default
``auto``: the exact kernel where it applies, else the asyncio engine; the
summary's ``engine`` key says which ran), ``--json``, ``--out DIR``.

Integer flags have upper bounds, far above any real pipeline, so that a typo
fails at once instead of hanging or running out of memory: ``--concurrency``
<= 100,000, ``--maxsize`` <= 10**9, ``--max-attempts`` <= 1,000,
``--replications`` <= 10,000, ``--items`` <= 10**9 and ``--item-size`` <= 2**32
(4 GiB; the last two are :class:`~pipeline.sim.Scenario`'s own bounds).

A scenario file (TOML) holds the same settings; its keys are the flag names
without the dashes (``-`` or ``_`` inside a name), and flags given on the
command line override it. Paths in the file are relative to the file, the
``file=`` of an ``arrivals`` or ``service`` spec too::

    # scenario.toml
    arrivals = "poisson:rate=3.2"
    service = "exponential:mean=1.0"
    concurrency = 4
    maxsize = 100            # or "unbounded"
    on_full = "block"
    max_attempts = 3
    failure_rate = 0.01
    backoff = "exponential:base=0.1,factor=2,cap=30,jitter=1"
    drain_timeout = 30       # or "none"
    items = 100000           # or: duration = 3600
    seed = 1
    replications = 5

A chain of stages (``simulate`` only) is a file with ``[[stages]]`` tables,
one per stage in chain order, each with ``name`` and ``service`` and any of
``concurrency``, ``maxsize``, ``on_full``, ``max_attempts``,
``failure_rate``, ``backoff``, ``attempt_timeout``, ``drain_timeout`` and
``fan_out`` (children per item); the top level keeps ``arrivals``, the
length, ``seed`` and the other whole-run keys (:mod:`pipeline.cli_stages`)::

    arrivals = "poisson:rate=2"      # pages per second
    items = 5000
    [[stages]]
    name = "fetch"
    service = "lognormal:mean=0.5,cv=1"
    concurrency = 2
    maxsize = 10
    fan_out = 100                    # a page becomes 100 records
    [[stages]]
    name = "write"
    service = "exponential:mean=0.08"
    concurrency = 20
    maxsize = 80

Its ``--json`` object is the end-to-end summary (items offered at the
source, completed by the last stage, end-to-end latency, memory of every
stage together) whose ``stages`` key holds each stage's summary by name (the
single-stage keys); the table shows a few rows per stage, and the
diagnostics name the bottleneck. ``--out`` adds ``items-NAME.csv`` and
``timeseries-NAME.csv`` per stage, and ``report.png`` shows the stages side
by side. A per-stage setting at the top level or as a flag, and a bad stage
table, are one-line errors naming the file, the stage and the key.

Output: ``--json`` prints one JSON object with every summary key (NaN as
``null``); with ``--replications R`` > 1 the values are means over the
replications, ``drain_timed_out`` is true if any replication's drain timed
out, the ``engine`` key names the engine once, and a ``ci95`` object holds
the 95% half-widths. Replications long enough to repay it (a few seconds of
work) run on a process pool, with a progress bar on stderr. Without ``--json`` a
short table and the run's diagnostics are printed; a single run's
``wait_mean_s`` and ``latency_mean_s`` rows show their 95% batch-means
half-widths (the summary keys ``wait_mean_ci95_s`` and ``latency_mean_ci95_s``,
20 batches in arrival order, ``null`` below 200 items).

On stderr, whatever the output: ``pipeline: warning: ...`` when a drain timed
out (the unfinished items are missing from the latency statistics; the line
says how many and what to change), and, with ``--replications R`` > 1,
``pipeline: advice: ...`` for each of ``latency_mean_s`` and ``latency_p95_s``
whose 95% half-width is above 10% of its mean: about how many replications
would bring it to 10% (``n ~ n0 (h0/h)^2``), and that heavy traffic
(utilisation >= 0.85) needs longer runs. ``--out DIR`` writes
``summary.json`` (the same object), ``items.csv``, ``timeseries.csv`` and
``report.png`` (per-item files and the figure from replication 0).

Bad flags, specs or files -- and a run that overflows or runs out of memory --
print one line, ``pipeline: error: ...``, and exit with status 2. Numbers
that cannot all hold (``lognormal:mean=0.08,p99=1.2``: a log-normal's p99 is
at most 14.97 times its mean) print one line, ``pipeline: warning: ...``,
saying which fit is used instead, and the run goes on. The ``--json`` path
imports neither pandas nor matplotlib.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import warnings
from collections.abc import Sequence
from typing import NoReturn

from .axes import AXIS_FIELDS, axis_change, parse_axis
from .output import (
    PROG,
    one_line,
    one_line_warnings,
    run_length_notes,
    summary_object,
    summary_table,
    write_json,
    write_out,
)
from .settings import add_scenario_flags, build_scenario, read_settings
from .values import (
    CONFIG_FIELDS,
    MAX_ATTEMPTS,
    MAX_CONCURRENCY,
    MAX_MAXSIZE,
    MAX_REPLICATIONS,
    parse_backoff,
)

__all__ = [
    "AXIS_FIELDS",
    "CONFIG_FIELDS",
    "MAX_ATTEMPTS",
    "MAX_CONCURRENCY",
    "MAX_MAXSIZE",
    "MAX_REPLICATIONS",
    "add_scenario_flags",
    "axis_change",
    "main",
    "parse_axis",
    "parse_backoff",
    "write_json",
]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line: ``pipeline: error: ...``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{PROG}: error: {message} (see '{self.prog} --help')\n")


# Further commands, one module each: ``add_command(subparsers)`` registers the
# command's parser with ``set_defaults(run=function)``; the module imports what
# it needs to run lazily, so that ``simulate --json`` does not pay for it.
_MORE_COMMANDS: tuple[str, ...] = ("pipeline.cli.sweep", "pipeline.cli.plan")


def _build_parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description="Simulate bounded asyncio work pipelines on a virtual clock.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    simulate = commands.add_parser(
        "simulate",
        help="run a scenario in virtual time and report",
        description="Run a scenario in virtual time. Flags override the scenario file.",
    )
    add_scenario_flags(simulate)
    simulate.add_argument("--json", action="store_true", help="print one JSON object")
    simulate.set_defaults(run=_simulate)
    for module in _MORE_COMMANDS:
        importlib.import_module(module).add_command(commands)
    return parser


def _simulate(args: argparse.Namespace) -> int:
    import warnings

    settings = read_settings(args, tables=("stages",))
    scenario = build_scenario(settings)
    from ..sim.running.simulate import DrainTimeoutWarning, simulate

    replications = settings.get("replications", 1)
    engine = settings.get("engine", "auto")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DrainTimeoutWarning)
        if replications == 1:
            results = [simulate(scenario, engine=engine)]
        else:
            results = simulate(scenario, replications=replications, engine=engine).results
    for warning in caught:
        if issubclass(warning.category, DrainTimeoutWarning):
            print(f"{PROG}: warning: {one_line(warning.message)}", file=sys.stderr)
        else:  # not ours to reword: pass it on as it came
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    summary = summary_object(results)
    if scenario.stages is not None:
        # The end-to-end summary's stage count becomes each stage's own summary, by name.
        summary["stages"] = {
            name: summary_object([r.stages[name] for r in results]) for name in results[0].stages
        }
    if len(results) > 1:
        for note in run_length_notes(summary, len(results)):
            print(f"{PROG}: advice: {note}", file=sys.stderr)
    if "out" in settings:
        write_out(settings["out"], summary, results[0])
    if args.json:
        print(json.dumps(summary, allow_nan=False))
    else:
        print(summary_table(summary, scenario))
        from ..sim.analysis.diagnostics import diagnose, format_findings

        which = " (replication 0)" if len(results) > 1 else ""
        print(f"\ndiagnostics{which}:")
        print(format_findings(diagnose(results[0])))
    sys.stdout.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 bad input).

    A ``UserWarning`` (an :class:`~pipeline.sim.InconsistentWorkloadWarning`
    for one) is printed as one line on stderr, ``pipeline: warning: ...``;
    turned into an error (``python -W error``) it is a one-line error, exit 2.
    """
    args = _build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = one_line_warnings(warnings.showwarning)
            return args.run(args)
    except BrokenPipeError:
        # The reader went away (| head): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ValueError, TypeError, OverflowError, MemoryError, OSError, Warning) as exc:
        # Bad input, however deep it is found (building the scenario or running it).
        print(f"{PROG}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
