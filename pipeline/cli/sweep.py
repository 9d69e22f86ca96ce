"""``python -m pipeline sweep``: a grid of what-ifs x replications, as a tidy CSV and heatmaps.

Usage::

    python -m pipeline sweep --arrivals poisson:rate=3.2 --service exponential:mean=1.0 \\
        --items 20000 --grid concurrency=4..8 --grid maxsize=10,100,unbounded \\
        --replications 5 --out sweep-out
    python -m pipeline sweep scenario.toml --metrics latency_p95_s,memory_peak_bytes --json
    python -m pipeline sweep scenario.toml --scheduler tcp://SCHEDULER:8786 --out sweep-out
    python -m pipeline sweep chain.toml --grid write.concurrency=10,20,40 \\
        --grid write.maxsize=80,unbounded

Every scenario flag of ``simulate`` is accepted and sets the base scenario;
then:

- ``--grid NAME=VALUES`` (repeatable) is one axis of the grid: ``NAME`` is an
  option name (``concurrency``, ``maxsize``, ``max-attempts``, ``on-full``,
  ``failure-rate``, ``item-size``, ``backoff``, ``attempt-timeout``,
  ``drain-timeout``, ``arrivals``, ``service``, ``autoscale``) and ``VALUES`` is
  ``LOW..HIGH`` (integers, both ends included) or ``V1,V2,...``, each checked
  as the flag's own value is (``maxsize=10,100,unbounded``; specs, which hold
  commas, are separated by ``;``). A scenario file may hold the grid as a
  table, flags replacing its axes of the same name (an axis given twice, by
  two flags or two spellings in the file, is an error)::

      [grid]
      concurrency = "2..8"              # or [2, 4, 8]
      maxsize = [10, 100, "unbounded"]

  A chain (a file with ``[[stages]]``, :mod:`pipeline.cli.stages`) varies
  one stage: ``STAGE.NAME`` with ``NAME`` any key of a stage table but
  ``name`` (``fan-out`` too), checked as the stage tables' values are;
  ``write.concurrency = [10, 20]`` in ``[grid]``. There ``arrivals`` and
  ``item-size`` stay unqualified (the whole run's); any other unqualified
  axis, a stage the chain lacks, or a stage axis on a single-stage scenario
  is an error naming the stages. A pipeline that autoscales varies one of
  its autoscaler's settings as ``autoscale.KEY`` (``autoscale.target=2,5``),
  and ``autoscale`` puts a fixed pool beside autoscaled ones, its values
  ``--autoscale``'s: ``'autoscale=none;max_workers=30,target=2'`` (add
  ``--metrics worker_seconds,...`` for what each pool paid for). The
  output names the axes as given (``write.concurrency``, ``write.maxsize``);
  the CSV equals :func:`~pipeline.sim.sweep` of the ``Scenario.replace``
  fields (``write.queue_maxsize``). Axes are read by :mod:`pipeline.cli.axes`,
  as a plan's search is.

- ``--replications R`` runs per grid point (default 3; replication *r* of every
  point sees the same traffic), ``--engine auto|asyncio|kernel``;
- ``--processes N`` local worker processes (default: one per CPU; at most
  :data:`~pipeline.cli.values.MAX_PROCESSES`), or
  ``--scheduler ADDRESS|local``: the runs go to a Dask distributed scheduler
  (``tcp://host:8786``), or to a LocalCluster started for this sweep;
- ``--metrics m1,m2`` summary keys to report and plot (default
  :data:`DEFAULT_METRICS`, for a chain :data:`DEFAULT_CHAIN_METRICS`: its
  summary is end to end); ``--axes X,Y`` the two grid axes of the heatmaps
  (default: the first two; other axes get one panel per value);
- ``--out DIR`` where the files go. Without it, a new directory
  ``sweep-YYYYMMDD-HHMMSS`` is made in the current directory; its name is
  printed (``out`` in the JSON).

Files: ``sweep.csv`` (one row per grid point and replication: the grid's
columns, ``replication``, then every summary key; ``unbounded`` and ``none``
spelled out) and ``heatmap_<metric>.png`` per metric: the mean over
replications on the grid, each cell annotated ``mean ± 95% half-width`` (a
line plot with error bars for a one-axis grid).

Output: a progress bar on stderr; ``--json`` prints one object, ``grid``
(axis -> values), ``replications``, ``metrics``, ``engine``, ``out``,
``files`` and ``points``: per grid point its ``point`` (axis -> value),
``replications``, ``drain_timed_out`` (how many of its runs hit the drain
timeout), ``drain_cut`` (the metrics among the waits and latencies whose value
leaves out those runs' unfinished items, the slowest tail: empty when none
timed out) and the metrics' ``mean`` and ``ci95`` (95% half-width; null with
one replication). Otherwise a short table, with a ``drain_timed_out`` column
(``K of R`` runs) when some drain timed out, its cut waits and latencies marked
``[cut]`` and a line saying why; the heatmaps hatch those cells. Runs whose drain timed out also
give one line on stderr, ``pipeline: warning: the drain timed out ... in K of
N sweep runs: ...``: their latency statistics leave out the items left
unfinished (``drain_timed_out`` is a column of ``sweep.csv`` too).

Bad input -- a bad grid, an unknown metric, an unwritable ``--out``, a
scheduler that cannot be reached -- is one line, ``pipeline: error: ...``,
exit status 2, before any run starts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
from typing import TYPE_CHECKING, Any

from .axes import (
    Axes,
    axis_flag,
    axis_text,
    axis_value_label,
    check_axes,
    gather_axes,
    replace_fields,
)
from .output import OutputFolder, format_value, json_safe
from .settings import (
    SCENARIO_TABLES,
    add_scenario_flags,
    build_scenario,
    check_warmup,
    read_settings,
    warmup_origin,
)
from .values import parse_processes, quoted

if TYPE_CHECKING:
    import pandas as pd

    from ..sim.workloads.scenario import Scenario

__all__ = ["DEFAULT_CHAIN_METRICS", "DEFAULT_METRICS", "add_command"]

DEFAULT_METRICS = (
    "latency_p95_s",
    "wait_mean_s",
    "throughput_per_s",
    "utilisation",
    "memory_peak_bytes",
)
"""Summary keys the sweep reports and plots unless ``--metrics`` says otherwise."""

DEFAULT_CHAIN_METRICS = (
    "latency_p95_s",
    "latency_mean_s",
    "throughput_per_s",
    "memory_peak_bytes",
    "items_held_max",
)
"""The same for a chain, whose summary is end to end (it has no one wait or utilisation)."""

DEFAULT_REPLICATIONS = 3
"""Runs per grid point without ``--replications``: the fewest that give an interval, plus one."""

MAX_GRID_POINTS = 100_000
"""Grid points one sweep may hold (the product of the axes' lengths)."""

MAX_RUNS = 1_000_000
"""Runs one sweep may hold (grid points x replications): each is a task kept in memory."""


# -- flags ----------------------------------------------------------------------------------


def _metrics_flag(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected METRIC[,METRIC...], got {quoted(text)}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(f"metric(s) {repeated} given twice in {quoted(text)}")
    return names


def _processes_flag(text: str) -> int:
    try:
        return parse_processes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _scheduler_flag(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected 'local' or an address like tcp://host:8786")
    return text.strip()


def _axes_flag(text: str) -> list[str]:
    # As the grid spells them: "-" for "_" in a setting, never in a stage's name.
    names = []
    for name in text.split(","):
        stage, dot, setting = name.strip().rpartition(".")
        names.append(f"{stage}{dot}{setting.strip().replace('-', '_')}")
    if not all(names) or len(names) > 2:
        raise argparse.ArgumentTypeError(f"expected X or X,Y (grid axis names), got {quoted(text)}")
    return names


def add_command(subparsers: Any) -> None:
    """Register ``sweep`` with the command line's subparsers."""
    parser = subparsers.add_parser(
        "sweep",
        help="run a grid of scenarios x replications; write a CSV and heatmaps",
        description=(
            "Run every combination of the --grid axes, each --replications times, on "
            "the base scenario the other flags (or the scenario file) describe. Writes "
            "sweep.csv and heatmap_<metric>.png into --out."
        ),
    )
    # The shared flags' help speaks of simulate; say what they do here.
    add_scenario_flags(
        parser,
        {
            "out": (None, "directory for sweep.csv and the heatmaps (default: a new sweep-* one)"),
            "replications": (
                None,
                f"runs per grid point (default {DEFAULT_REPLICATIONS}; 1 gives no intervals)",
            ),
        },
    )
    parser.add_argument(
        "--grid",
        action="append",
        type=axis_flag,
        default=[],
        metavar="NAME=VALUES",
        help=(
            "one axis: concurrency=2..8 or maxsize=10,100,unbounded; STAGE.NAME for a "
            "chain's stage, write.concurrency=10,20; autoscale.KEY for the autoscaler, "
            "autoscale.target=2,5; pools side by side, 'autoscale=none;max_workers=30,target=2' "
            "(repeat for more axes)"
        ),
    )
    parser.add_argument(
        "--metrics",
        type=_metrics_flag,
        metavar="M1,M2",
        help=f"summary keys to report and plot (default {', '.join(DEFAULT_METRICS)})",
    )
    parser.add_argument(
        "--axes",
        type=_axes_flag,
        metavar="X,Y",
        help="grid axes of the heatmaps (default: the first two; others get panels)",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--processes",
        type=_processes_flag,
        metavar="N",
        help="local worker processes (default: one per CPU; 1 runs here)",
    )
    where.add_argument(
        "--scheduler",
        type=_scheduler_flag,
        metavar="ADDRESS|local",
        help="run on a Dask scheduler (tcp://host:8786), or 'local' for a LocalCluster",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=_run)


# -- the grid: flags and the scenario file's [grid] table ------------------------------------


def _grid(args: argparse.Namespace, settings: Any) -> Axes:
    """Axis (option name, ``STAGE.NAME`` for a stage) -> values: the file's ``[grid]``,
    axes replaced by ``--grid`` flags (:func:`~pipeline.cli.axes.gather_axes`)."""
    grid = gather_axes(
        settings.tables.get("grid"),
        args.grid,
        path=args.scenario,
        table_name="grid",
        flag="--grid",
        what="grid axis",
        missing=(
            "no grid: give --grid NAME=VALUES (e.g. --grid concurrency=2..8) "
            "or a [grid] table in the scenario file"
        ),
    )
    points = math.prod(len(values) for values in grid.values())
    if points > MAX_GRID_POINTS:
        raise ValueError(f"the grid has {points:,} points, more than {MAX_GRID_POINTS:,}")
    return grid


def _plot_axes(grid: dict[str, list[Any]], axes: list[str] | None) -> tuple[str, str | None]:
    """The heatmaps' x and y axes, checked before anything runs."""
    from ..viz.figures.sweep import MAX_PANELS  # the viz package is needed for the heatmaps anyway

    names = list(grid)
    if axes is not None:
        unknown = [a for a in axes if a not in grid]
        if unknown:
            raise ValueError(f"--axes {','.join(unknown)}: not a grid axis; grid axes: {names}")
        if len(axes) == 2 and axes[0] == axes[1]:
            raise ValueError(f"--axes needs two different grid axes, got {axes[0]!r} twice")
        if len(names) >= 2 and len(axes) == 1:
            raise ValueError(f"--axes needs two grid axes X,Y for a grid of {names}")
        if len(names) == 1 and len(axes) == 2:
            raise ValueError(f"--axes: the grid has one axis, {names[0]!r}")
    x, y = (axes or names)[0], None
    if len(names) >= 2:
        x, y = axes if axes is not None else names[:2]
    extra = [a for a in names if a not in (x, y)]
    panels = math.prod(len(grid[a]) for a in extra)
    if panels > MAX_PANELS:
        raise ValueError(
            f"the heatmaps of {x} x {y} would need {panels} panels (one per value of "
            f"{', '.join(extra)}), more than {MAX_PANELS}; choose the two axes with the most "
            "values via --axes X,Y, or sweep fewer values"
        )
    return x, y


# -- metrics and the output directory, checked before the sweep -----------------------------


def _summary_metrics(base: Scenario, backlog: bool = False) -> list[str]:
    """The numeric summary keys, read off a one-item run of the base scenario (a millisecond).

    ``backlog``: some point has an initial backlog (the probe then has one item
    waiting, not the whole backlog, which would take as long as a real run).
    """
    import warnings

    from ..sim.running.class_summary import flatten_classes
    from ..sim.running.result import DrainTimeoutWarning
    from ..sim.running.simulate import simulate

    probe = base.replace(
        n_items=1, duration_s=None, warmup_s=0.0, initial_backlog=1 if backlog else 0
    )
    with warnings.catch_warnings():
        # The probe's one item says nothing of the sweep's runs: the sweep warns for those.
        warnings.simplefilter("ignore", DrainTimeoutWarning)
        summary = flatten_classes(simulate(probe).summary)
    return [
        key
        for key, value in summary.items()
        # A chain's "stages" counts its stages: a number, not a measurement.
        if isinstance(value, int | float) and not isinstance(value, bool) and key != "stages"
    ]


def _grid_metrics(base: Scenario, grid: Axes, backlog: bool) -> list[str]:
    """The numeric summary keys of the grid's runs: the base's, and an autoscaled pool's
    (``worker_seconds``, ...) when the grid's ``autoscale`` axis puts one beside it."""
    allowed = _summary_metrics(base, backlog)
    scaler = next((value for value in grid.get("autoscale", ()) if value is not None), None)
    if scaler is not None and base.config.autoscale is None:
        # a pool inside the autoscaler's bounds: the probe is for the keys, not the numbers
        probe = base.replace(autoscale=scaler, concurrency=scaler.min_workers)
        allowed += [key for key in _summary_metrics(probe, backlog) if key not in allowed]
    return allowed


def _check_metrics(metrics: list[str], allowed: list[str]) -> None:
    unknown = [m for m in metrics if m not in allowed]
    if unknown:
        raise ValueError(f"--metrics: unknown metric(s) {unknown}; allowed: {', '.join(allowed)}")


def _output_directory(given: str | None) -> OutputFolder:
    """The folder the files go to, made (a new ``sweep-*`` one by default) and shown writable."""
    return OutputFolder.new("sweep") if given is None else OutputFolder(given)


# -- running ----------------------------------------------------------------------------------


def _sweep_frame(
    base: Scenario,
    grid: Axes,
    settings: Any,
    args: argparse.Namespace,
) -> pd.DataFrame:
    """Run the sweep; the frame's grid columns are the axes as given, values as
    :func:`~pipeline.cli.axes.axis_value_label`."""
    from ..sim.analysis.sweep import sweep

    replications = settings.get("replications", DEFAULT_REPLICATIONS)
    fields = replace_fields(grid)
    options = {
        "replications": replications,
        "engine": settings.get("engine", "auto"),
        "progress": True,
    }
    if args.scheduler is None:
        frame = sweep(base, fields, processes=args.processes, **options)
    else:
        from ..sim.executors.cluster import scheduler_executor

        try:
            with scheduler_executor(args.scheduler) as executor:
                frame = sweep(base, fields, executor=executor, **options)
        except RuntimeError as exc:  # refused here: one line, exit 2 (Dask missing is main's)
            raise ValueError(f"--scheduler {args.scheduler}: {exc}") from None
        except OSError as exc:  # cannot reach the scheduler, or lost it while running
            raise ValueError(f"--scheduler {args.scheduler}: {exc}") from None
    # Rows come in grid order (the product of the axes, replications innermost): put the
    # option names and their plain values in place of the Scenario fields and objects.
    import pandas as pd

    rows = [combo for combo in itertools.product(*grid.values()) for _ in range(replications)]
    columns = {
        name: pd.Series(
            [axis_value_label(name, row[i]) for row in rows], dtype=object, index=frame.index
        )
        for i, name in enumerate(grid)
    }
    rest = frame.drop(columns=list(fields))
    out = pd.concat([pd.DataFrame(columns), rest], axis=1)
    for name in grid:
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in out[name]):
            out[name] = pd.to_numeric(out[name])
    out.attrs["grid"] = list(grid)
    return out


def _points(frame: pd.DataFrame, grid: list[str], metrics: list[str]) -> list[dict[str, Any]]:
    """Per grid point, in grid order: its values and each metric's mean and 95% half-width."""
    from ..sim.running.drain_warning import drain_cut
    from ..sim.stats.intervals import summarise_values

    groups: dict[tuple[str, ...], list[int]] = {}
    for index, row in enumerate(frame[grid].itertuples(index=False, name=None)):
        groups.setdefault(tuple(repr(v) for v in row), []).append(index)
    points = []
    for rows in groups.values():
        part = frame.iloc[rows]
        point = {name: json_safe(part[name].iloc[0]) for name in grid}
        mean, half = {}, {}
        for metric in metrics:
            stats = summarise_values(part[metric].to_numpy(dtype=float))
            mean[metric], half[metric] = json_safe(stats.mean), json_safe(stats.half_width)
        cut = int(part["drain_timed_out"].astype(bool).sum())
        points.append(
            {
                "point": point,
                "replications": len(rows),
                "drain_timed_out": cut,
                "drain_cut": [m for m in metrics if cut and drain_cut(m)],
                "mean": mean,
                "ci95": half,
            }
        )
    return points


def _write_files(
    directory: str,
    frame: pd.DataFrame,
    metrics: list[str],
    x: str,
    y: str | None,
) -> list[str]:
    """``sweep.csv`` and one heatmap per metric; returns the file names written."""
    csv = frame.copy()
    for name in frame.attrs["grid"]:
        csv[name] = [axis_text(name, v) for v in frame[name]]
    csv.to_csv(os.path.join(directory, "sweep.csv"), index=False)
    written = ["sweep.csv"]

    import matplotlib

    matplotlib.use("Agg")
    from ..viz.figures.sweep import plot_sweep

    for metric in metrics:
        figure = plot_sweep(frame, metric, x=x, y=y)
        name = f"heatmap_{metric}.png"
        figure.savefig(os.path.join(directory, name), dpi=100)
        written.append(name)
    return written


def _table(points: list[dict[str, Any]], grid: list[str], metrics: list[str]) -> str:
    """One line per grid point: its values, then each metric as ``mean ± half-width``;
    when some drain timed out, a last column says in how many of the point's runs,
    each wait and latency it cut is marked ``[cut]``, and a last line says why."""
    from ..sim.running.drain_warning import DRAIN_CUT_TEXT

    cut = any(point["drain_timed_out"] for point in points)
    header = [*grid, *metrics, *(["drain_timed_out"] if cut else [])]
    body = []
    for point in points:
        cells = [str(axis_text(name, point["point"][name])) for name in grid]
        for metric in metrics:
            mean, half = point["mean"][metric], point["ci95"][metric]
            text = format_value(metric, mean)
            if mean is not None and half is not None:
                text += f" ± {format_value(metric, half)}"
            if metric in point["drain_cut"]:
                text += " [cut]"
            cells.append(text)
        if cut:
            cells.append(f"{point['drain_timed_out']} of {point['replications']}")
        body.append(cells)
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *body]
    ]
    if any(point["drain_cut"] for point in points):
        lines.append(f"[cut]: {DRAIN_CUT_TEXT}.")
    return "\n".join(lines)


def _check_measured(frame: pd.DataFrame, warm: float, settings: Any) -> None:
    """Refuse a sweep in which a run ended within the warm-up: it measured nothing (its
    cells would be dashes), whatever the other runs did. Before anything is written."""
    if warm <= 0:
        return
    ended = frame["sim_time_s"]
    empty = int((ended <= warm).sum())
    if empty:
        raise ValueError(
            f"{warmup_origin(settings)} {warm:g} s is not shorter than {empty} of {len(frame)} "
            f"sweep runs (the shortest ended at {float(ended.min()):.4g} s of virtual time): "
            "they measured nothing after the warm-up; give a shorter warm-up or more --items"
        )


def _run(args: argparse.Namespace) -> int:
    settings = read_settings(args, tables=("grid", *SCENARIO_TABLES))
    base = build_scenario(settings)
    grid = _grid(args, settings)
    check_axes(grid, base)
    check_warmup(base, settings)
    runs = math.prod(len(values) for values in grid.values()) * settings.get(
        "replications", DEFAULT_REPLICATIONS
    )
    if runs > MAX_RUNS:
        raise ValueError(
            f"{runs:,} runs (grid points x replications) are more than {MAX_RUNS:,}; "
            "sweep fewer values or fewer replications"
        )
    defaults = DEFAULT_METRICS if base.stages is None else DEFAULT_CHAIN_METRICS
    metrics = args.metrics or list(defaults)
    x, y = _plot_axes(grid, args.axes)
    # Before any run (the metrics' probe too): an unusable --out is found now.
    out = _output_directory(settings.get("out"))
    directory = out.path
    with out:  # a sweep that fails leaves no empty folder behind
        backlog = base.initial_backlog > 0 or any(grid.get("backlog", ()))
        _check_metrics(metrics, _grid_metrics(base, grid, backlog))
        frame = _sweep_frame(base, grid, settings, args)
        _check_measured(frame, base.warmup_s, settings)
        with out.writing() as folder:
            files = _write_files(folder, frame, metrics, x, y)
    points = _points(frame, list(grid), metrics)
    if args.json:
        engines = sorted(set(frame["engine"]))
        summary = {
            "grid": {
                name: [json_safe(axis_value_label(name, v)) for v in grid[name]] for name in grid
            },
            "replications": int(frame["replication"].max()) + 1,
            "metrics": metrics,
            "engine": ",".join(engines),
            "out": directory,
            "files": files,
            "points": points,
        }
        print(json.dumps(summary, allow_nan=False))
    else:
        replications = int(frame["replication"].max()) + 1
        print(f"{len(points)} grid points x {replications} replications (mean ± 95% half-width)")
        print(_table(points, list(grid), metrics))
        print(f"\nwrote {', '.join(files)} to {directory}{os.sep}")
    sys.stdout.flush()
    return 0
