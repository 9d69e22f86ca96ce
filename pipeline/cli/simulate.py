"""``python -m pipeline simulate``: run a scenario in virtual time and report.

Usage::

    python -m pipeline simulate --arrivals poisson:rate=3.2 \\
        --service exponential:mean=1.0 --concurrency 4 --maxsize 100 \\
        --on-full block --max-attempts 3 --failure-rate 0.0 \\
        --items 100000 --seed 1 --json
    python -m pipeline simulate scenario.toml --json
    python -m pipeline simulate --trace arrivals.csv --concurrency 4 --out DIR

The flags are the scenario flags (:mod:`pipeline.cli.values`), a scenario
file holds the same settings (:mod:`pipeline.cli.settings`), and ``--json``
prints one JSON object.

A chain of stages is a file with ``[[stages]]`` tables (``sweep`` and ``plan``
take one too, varying a stage through ``STAGE.NAME`` axes),
one per stage in chain order, each with ``name`` and ``service`` and any of
``concurrency``, ``maxsize``, ``on_full``, ``max_attempts``,
``failure_rate``, ``backoff``, ``attempt_timeout``, ``drain_timeout`` and
``fan_out`` (children per item); the top level keeps ``arrivals``, the
length, ``seed`` and the other whole-run keys (:mod:`pipeline.cli.stages`)::

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
replications, ``drain_timed_out`` is true if any replication's drain timed out,
the ``engine`` key names the engine once, and a ``ci95`` object holds the 95%
half-widths. Replications of a replayed ``--trace`` (with nothing random added)
are refused before any run: each would be the same run
(:func:`~pipeline.sim.workloads.randomness.fixed_workload`). Replications long
enough to repay it (a few seconds of work) run on a process pool, with a
progress bar on stderr. Without ``--json`` a short table and the run's
diagnostics are printed; a single run's ``wait_mean_s`` and ``latency_mean_s``
rows show their 95% batch-means half-widths (the summary keys
``wait_mean_ci95_s`` and ``latency_mean_ci95_s``, 10 batches in arrival order,
``null`` below 10,000 items: shorter runs are too short to know their own
precision; replications know it at any length).

On stderr, whatever the output: ``pipeline: warning: ...`` when a drain timed
out (the unfinished items are missing from the latency statistics; the line
says how many and what to change), and, with ``--replications R`` > 1,
``pipeline: advice: ...`` for each of ``latency_mean_s`` and ``latency_p95_s``
whose 95% half-width is above 10% of its mean: about how many replications
would bring it to 10% (``n ~ n0 (h0/h)^2``), and that heavy traffic
(utilisation >= 0.85) needs longer runs. ``--out DIR`` writes
``summary.json`` (the same object), ``items.csv``, ``timeseries.csv`` and
``report.png`` (per-item files and the figure from replication 0).

``--metrics-out FILE`` writes the run (replication 0) as OpenMetrics text
with timestamps, under the metrics contract's names, for
``promtool tsdb create-blocks-from openmetrics FILE DIR``
(:mod:`pipeline.sim.running.openmetrics` says what each series holds):
``--metrics-start UNIX_SECONDS`` is the timestamp of virtual time 0 (default:
the run ends now), ``--metrics-step`` the sampling step (``1s`` by default;
``500ms``, ``2m``, ``1h`` or seconds; a run longer than 5,000 steps is
sampled at a whole multiple of it, said on stderr), ``--metrics-pipeline``
the ``pipeline`` label (default ``sim``). The file is checked (not a folder,
its folder writable) before the run, and written whole at the end.

The ``--json`` path imports neither pandas nor matplotlib.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from .._extras import require
from .output import (
    PROG,
    OutputFolder,
    one_line,
    run_length_notes,
    summary_object,
    summary_table,
    write_out,
)
from .settings import (
    SCENARIO_TABLES,
    add_scenario_flags,
    build_scenario,
    check_warmup,
    read_settings,
    warmup_origin,
)

__all__ = ["add_command"]


def add_command(subparsers: Any) -> None:
    """Register ``simulate`` with the command line's subparsers."""
    parser = subparsers.add_parser(
        "simulate",
        help="run a scenario in virtual time and report",
        description="Run a scenario in virtual time. Flags override the scenario file.",
    )
    add_scenario_flags(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--metrics-out", metavar="FILE", help="write the run as OpenMetrics text (for promtool)"
    )
    parser.add_argument(
        "--metrics-start",
        metavar="UNIX_SECONDS",
        help="timestamp of virtual time 0 in --metrics-out (default: the run ends now)",
    )
    parser.add_argument(
        "--metrics-step",
        metavar="DURATION",
        help="sampling step of --metrics-out: 1s (default), 500ms, 2m, 1h or seconds",
    )
    parser.add_argument(
        "--metrics-pipeline",
        metavar="NAME",
        help="the pipeline label in --metrics-out (default: sim)",
    )
    parser.set_defaults(run=_simulate)


_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _metrics_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """--metrics-* checked before the run: the file, its start, step and label, or None."""
    given = [args.metrics_start, args.metrics_step, args.metrics_pipeline]
    if args.metrics_out is None:
        if any(value is not None for value in given):
            raise ValueError(
                "--metrics-start, --metrics-step and --metrics-pipeline need --metrics-out"
            )
        return None
    import math
    import os
    import tempfile

    path = args.metrics_out
    if os.path.isdir(path):
        raise ValueError(f"--metrics-out {path}: is a directory; name a file")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"--metrics-out {path}: folder {folder} does not exist")
    try:
        with tempfile.TemporaryFile(dir=folder):  # writable? found now, not after the run
            pass
    except OSError as exc:
        raise ValueError(
            f"--metrics-out {path}: cannot write in {folder} ({exc.strerror or exc})"
        ) from None
    start = None
    if args.metrics_start is not None:
        try:
            start = float(args.metrics_start)
        except ValueError:
            start = math.nan
        if not (math.isfinite(start) and 0 <= start <= 32503680000):
            raise ValueError(
                f"--metrics-start must be UNIX seconds from 0 to 32503680000 (year 3000), "
                f"got {args.metrics_start!r}"
            )
    step = 1.0
    if args.metrics_step is not None:
        text = args.metrics_step.strip()
        unit = next((u for u in ("ms", "s", "m", "h") if text.endswith(u)), "")
        try:
            step = float(text[: len(text) - len(unit)]) * _UNITS_S.get(unit, 1.0)
        except ValueError:
            step = math.nan
        if not (math.isfinite(step) and step >= 0.001):
            raise ValueError(
                f"--metrics-step must be a duration of at least 1ms (500ms, 1s, 2m, 1h or "
                f"seconds), got {args.metrics_step!r}"
            )
    name = "sim" if args.metrics_pipeline is None else args.metrics_pipeline
    if not name:
        raise ValueError("--metrics-pipeline must not be empty")
    return {"path": path, "start_s": start, "step_s": step, "pipeline": name}


def _check_warmup_after(results: list[Any], settings: Any) -> None:
    """A run in which no item arrived after the warm-up measured nothing: say so, as an error.

    Whether it does depends on the run (the arrivals' times), so this is known only after
    it; the summary would be a table of dashes, and a caller's script would read nulls.
    """
    warm = results[0].scenario.warmup_s
    if warm <= 0:
        return
    for index, result in enumerate(results):
        first = next(iter(result.stages.values())) if hasattr(result, "stages") else result
        arrivals = first.columns.arrival_s
        if not (arrivals >= warm).any():
            last = float(arrivals.max()) if len(arrivals) else 0.0
            which = f" of replication {index}" if len(results) > 1 else ""
            raise ValueError(
                f"{warmup_origin(settings)} {warm:g} s is longer than the arrivals{which} "
                f"(the last came at {last:.4g} s; the run ended at "
                f"{result.summary['sim_time_s']:.4g} s): no item arrived after the warm-up, so "
                "nothing was measured; give a shorter warm-up or more --items"
            )


def _simulate(args: argparse.Namespace) -> int:
    settings = read_settings(args, tables=SCENARIO_TABLES)
    if "out" in settings:  # report.png comes from pipeline.viz: say a missing [viz] now
        require("simulate --out", "viz")
    scenario = build_scenario(settings)
    check_warmup(scenario, settings)
    # Here, not at the top: the command line checks its flags before it loads the simulator.
    from ..sim.workloads.randomness import check_replications

    replications = settings.get("replications", 1)
    check_replications(scenario, replications, f"--replications {replications}")
    metrics = _metrics_options(args)
    # An unusable --out is found now, not after the run.
    out = OutputFolder(settings["out"]) if "out" in settings else None
    with out if out is not None else contextlib.nullcontext():
        return _run(args, settings, scenario, out, metrics)


def _run(
    args: argparse.Namespace,
    settings: Any,
    scenario: Any,
    out: OutputFolder | None,
    metrics: dict[str, Any] | None,
) -> int:
    import warnings

    from ..sim.running.result import DrainTimeoutWarning
    from ..sim.running.simulate import simulate

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
    _check_warmup_after(results, settings)  # before anything is printed or written
    summary = summary_object(results)
    if scenario.stages is not None:
        # The end-to-end summary's stage count becomes each stage's own summary, by name.
        summary["stages"] = {
            name: summary_object([r.stages[name] for r in results]) for name in results[0].stages
        }
    if len(results) > 1:
        for note in run_length_notes(summary, len(results)):
            print(f"{PROG}: advice: {note}", file=sys.stderr)
    if out is not None:
        with out.writing() as folder:
            write_out(folder, summary, results[0])
    if metrics is not None:
        from ..sim.running.openmetrics import write_openmetrics

        asked = metrics["step_s"]
        used = write_openmetrics(
            results[0],
            metrics["path"],
            start_s=metrics["start_s"],
            step_s=asked,
            pipeline=metrics["pipeline"],
        )
        if used != asked:
            print(
                f"{PROG}: warning: --metrics-step {args.metrics_step or '1s'} would take more "
                f"than 5,000 steps for this run; sampled every {used:g} s instead",
                file=sys.stderr,
            )
    if args.json:
        print(json.dumps(summary, allow_nan=False))
    else:
        print(summary_table(summary, scenario))
        from ..sim.analysis.diagnostics.diagnose import diagnose, format_findings

        which = " (replication 0)" if len(results) > 1 else ""
        print(f"\ndiagnostics{which}:")
        print(format_findings(diagnose(results[0])))
    sys.stdout.flush()
    return 0
