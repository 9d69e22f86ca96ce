"""Command line: capacity planning without Jupyter (``python -m pipeline COMMAND``).

Usage::

    python -m pipeline simulate --arrivals poisson:rate=3.2 \\
        --service exponential:mean=1.0 --concurrency 4 --maxsize 100 \\
        --items 100000 --seed 1 --json
    python -m pipeline sweep scenario.toml --grid concurrency=4..8 \\
        --grid maxsize=10,100,unbounded --replications 5 --out DIR
    python -m pipeline plan scenario.toml --search concurrency=1..64 \\
        --slo 'latency_p95_s<=0.5' --slo 'memory_peak_bytes<=200e6' --json
    python -m pipeline calibrate query_range.json --format prometheus --out scenario.toml

Every command builds its scenario from the same flags or scenario file and
documents itself in its own module:

- ``simulate`` (:mod:`pipeline.cli.simulate`) runs one scenario, or a chain
  of stages, in virtual time and prints a JSON object or a table;
- ``sweep`` (:mod:`pipeline.cli.sweep`) runs a grid of scenarios x
  replications, locally or on a Dask cluster, and writes ``sweep.csv`` and one
  heatmap per metric;
- ``plan`` (:mod:`pipeline.cli.plan`) finds the cheapest configuration that
  meets every SLO with confidence;
- ``calibrate`` (:mod:`pipeline.cli.calibrate`) fits a scenario file from
  telemetry a team already has (a Prometheus ``query_range`` answer or server).

What they share, one concept per module: :mod:`~pipeline.cli.values` (each
flag's parser and limits, the table of options), :mod:`~pipeline.cli.axes`
(the values a grid or a search tries, ``STAGE.NAME`` for one stage of a
chain, and the one reader of a sweep's ``[grid]`` and a plan's ``search``),
:mod:`~pipeline.cli.stages` and :mod:`~pipeline.cli.classes` (a
scenario file's ``[[stages]]`` and ``[[classes]]`` tables, read by
:mod:`~pipeline.cli.tables`), :mod:`~pipeline.cli.settings` (file
and flags -> settings -> Scenario) and :mod:`~pipeline.cli.output` (JSON,
tables, files, one-line messages). This module holds :func:`main`, the parser
and the registry of commands.

Bad flags, specs or files -- and a run that overflows or runs out of memory --
print one line, ``pipeline: error: ...``, and exit with status 2. Files are
read defensively (:mod:`~pipeline.cli.settings` for scenario files,
:func:`pipeline.sim.workloads.csvcolumn.csv_rows` for CSV files), a stage's
name is checked as a file name when it is parsed, and ``--out`` is checked
before any run and filled at once (:class:`~pipeline.cli.output.OutputFolder`). Numbers
that cannot all hold (``lognormal:mean=0.08,p99=1.2``: a log-normal's p99 is
at most 14.97 times its mean) print one line, ``pipeline: warning: ...``,
saying which fit is used instead, and the run goes on.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Sequence
from typing import NoReturn

from .._extras import MissingExtra
from .._spelling import speaking
from .axes import AXIS_FIELDS, axis_change, parse_axis
from .output import PROG, one_line, one_line_warnings, write_json
from .settings import add_scenario_flags
from .values import (
    CONFIG_FIELDS,
    MAX_ATTEMPTS,
    MAX_CONCURRENCY,
    MAX_MAXSIZE,
    MAX_REPLICATIONS,
    flag_spelling,
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


# The commands, one module each, in the order --help lists them: ``add_command(subparsers)``
# registers the command's parser with ``set_defaults(run=function)``; the module imports
# what it needs to run lazily, so that ``simulate --json`` does not pay for it.
COMMANDS: tuple[str, ...] = ("simulate", "sweep", "plan", "calibrate")


DISTRIBUTION = "pipeline-lab"
"""The distribution whose metadata ``--version`` reads."""


def version() -> str:
    """The installed distribution's version (its metadata), or a sentence saying there is none."""
    from importlib import metadata  # here: only --version reads it

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return f"unknown ({DISTRIBUTION} is not installed: running from a source tree)"


class _Version(argparse.Action):
    """``--version``: ``pipeline (pipeline-lab) 0.1.0`` on stdout, exit 0; the metadata is
    read only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> NoReturn:
        print(f"{PROG} ({DISTRIBUTION}) {version()}")
        parser.exit(0)


def _build_parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description="Simulate bounded asyncio work pipelines on a virtual clock.",
    )
    parser.add_argument("--version", action=_Version, help="print the installed version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").add_command(commands)
    return parser


# Read by numpy's BLAS when numpy is imported. The commands do no linear algebra worth a
# thread pool, and OpenBLAS starts one thread per core at import: on two cores that
# thread cost about 0.05 s of CPU per command, a sixth of a short simulate's.
_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


# The commands that run many simulations in one process, each allocating and freeing the
# same arrays (about 10 MB a run of 100,000 items).
_MANY_RUNS = ("sweep", "plan")
# glibc's mallopt parameters, and what the commands above set them to (see _reuse_freed_memory).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_TRIM_BYTES, _MMAP_BYTES = 256 << 20, 32 << 20


def run_as_command() -> int:
    """``python -m pipeline``: :func:`main` with a single-threaded BLAS unless told otherwise.

    Only the command runs this (``main`` called from Python leaves the
    process's environment alone): a variable the user set is kept, so
    ``OPENBLAS_NUM_THREADS=4 python -m pipeline ...`` still gets four. ``sweep`` and
    ``plan`` also keep freed memory for their next run (:func:`_reuse_freed_memory`).
    """
    if "numpy" not in sys.modules:
        for name in _BLAS_THREADS:
            os.environ.setdefault(name, "1")
    if sys.argv[1:2] and sys.argv[1] in _MANY_RUNS:
        _reuse_freed_memory()
    return main()


def _reuse_freed_memory() -> None:
    """With glibc, keep freed memory (up to 256 MiB) for the next run instead of returning it.

    By default glibc gives a freed block over 128 KiB back to the system (or trims the
    heap's top), and the next run faults the same pages in again: in the planning guide's
    plan, 60,000 more minor page faults (86,000 against 26,000) and about 0.15 s more
    system time, of 1.8 s of CPU (``bench/RESULTS.md``). Blocks of 32 MiB and more are
    still mapped and unmapped one by one, so a huge run's memory is returned as before.
    A ``MALLOC_*`` variable the user set (read by glibc at start-up) is left to rule;
    elsewhere than glibc this does nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    if "MALLOC_TRIM_THRESHOLD_" in os.environ or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return
    import ctypes  # here, not at the top: the other commands gain nothing from it

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt(_M_TRIM_THRESHOLD, _TRIM_BYTES)
    mallopt(_M_MMAP_THRESHOLD, _MMAP_BYTES)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 bad input or a missing extra).

    A command whose extra is not installed (``simulate``, ``sweep`` and
    ``plan`` need ``[sim]``; heatmaps and figures need ``[viz]``, a Dask
    scheduler ``[cluster]``) prints one line naming it and exits 2, before any
    work. A ``UserWarning`` (for one, an
    :class:`~pipeline.sim.workloads.percentiles.InconsistentWorkloadWarning`) is
    printed as one line on stderr, ``pipeline: warning: ...``;
    turned into an error (``python -W error``) it is a one-line error, exit 2.
    """
    try:
        # Parsing is inside: a flag's parser (a distribution, an arrival process) is the
        # first to import pipeline.sim.
        args = _build_parser().parse_args(argv)
        with warnings.catch_warnings(), speaking(flag_spelling):  # messages name the flags
            warnings.showwarning = one_line_warnings(warnings.showwarning)
            return args.run(args)
    except BrokenPipeError:
        # The reader went away (| head): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except MissingExtra as exc:  # "pipeline.sim needs numpy: pip install 'pipeline-lab[sim]'"
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, OverflowError, MemoryError, OSError, Warning) as exc:
        # Bad input, however deep it is found (building the scenario or running it).
        print(f"{PROG}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
