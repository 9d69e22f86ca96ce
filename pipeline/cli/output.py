"""Output: how a command's results leave it -- JSON objects, the table, files, one-line messages.

JSON is strict (NaN and infinities become ``null``, :func:`json_safe`); a
run's summary, or the means and 95% half-widths over its replications, is one
object (:func:`summary_object`); :func:`summary_table` is the same for people.
Files go through :func:`write_json` and :func:`write_out`, into an
:class:`OutputFolder`: ``--out DIR`` is checked (made, shown writable) before
any work, and a command's files are written into a hidden folder inside it
and moved into place together once all are written, so a run that fails half
way leaves none of them half-written. Everything said on
stderr is one line starting ``pipeline:`` (:data:`PROG`): :func:`one_line`
for errors, :func:`one_line_warnings` for warnings.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .._units import scale_bytes

if TYPE_CHECKING:
    from ..sim.running.result import SimulationResult
    from ..sim.workloads.scenario import Scenario

__all__ = [
    "PROG",
    "OutputFolder",
    "file_name_part",
    "format_value",
    "json_safe",
    "one_line",
    "one_line_warnings",
    "run_length_notes",
    "summary_object",
    "summary_table",
    "write_json",
    "write_out",
]

PROG = "pipeline"
"""The program name that starts every line on stderr."""


def json_safe(value: Any) -> Any:
    """A JSON-safe value: NaN and infinities become None."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return json_safe(value.item()) if hasattr(value, "item") else value


def summary_object(results: Sequence[SimulationResult]) -> dict[str, Any]:
    """The JSON object: one run's summary, or means plus ``ci95`` over replications."""
    return _summary_of([r.summary for r in results])


def _summary_of(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One summary made JSON-safe, or several combined; nested ones (``classes``) alike."""
    if len(summaries) == 1:
        return {
            key: _summary_of([value]) if isinstance(value, dict) else json_safe(value)
            for key, value in summaries[0].items()
        }
    from ..sim.stats.intervals import summarise_values

    out: dict[str, Any] = {"replications": len(summaries)}
    ci95: dict[str, Any] = {}
    for key, first in summaries[0].items():
        values = [summary[key] for summary in summaries]
        if isinstance(first, dict):
            # Per class: each class's keys as means with their own ci95, by name.
            out[key] = {name: _summary_of([v[name] for v in values]) for name in first}
            for nested in out[key].values():
                del nested["replications"]
            continue
        if isinstance(first, str):
            out[key] = first if all(v == first for v in values) else ",".join(sorted(set(values)))
            continue
        if key == "recovered" or any(v is None for v in values):
            # A run the recovery rule could not judge (no fault) has None: the mean is over
            # the runs that have a value (for recovered, the fraction that recovered).
            values = [float(v) for v in values if v is not None]
            if not values:
                out[key] = None
                continue
        elif isinstance(first, bool):
            out[key] = any(values)
            continue
        mean, half = summarise_values([float(v) for v in values])
        out[key] = json_safe(mean)
        ci95[key] = json_safe(half)
    out["ci95"] = ci95
    return out


_CLASS_COUNTS = ("items", "completed", "expired", "shed", "dead_lettered")  # a class's counts


def format_value(key: str, value: Any) -> str:
    """A summary value for people, its unit read off the key (``_s``, ``_bytes``, ``_per_s``)."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.endswith("_bytes"):
        return f"{value:,.0f} B"
    if (
        key.startswith(("items_", "attempts_", "retries_"))
        or key.endswith("_max")
        or key in _CLASS_COUNTS
    ):
        return f"{value:,.6g}"
    if key.endswith("_per_s"):
        return f"{value:.4g} /s"
    if key.endswith("_s"):
        return f"{value:.4g} s"
    return f"{value:.4g}"


# Means whose one-run 95% batch-means half-width the summary carries, shown on one row.
_BATCH_MEANS_KEYS = {"wait_mean_s": "wait_mean_ci95_s", "latency_mean_s": "latency_mean_ci95_s"}


def _config_line(config: Any) -> str:
    maxsize = "unbounded" if config.queue_maxsize is None else config.queue_maxsize
    return (
        f"concurrency {config.concurrency}, maxsize {maxsize}, on_full {config.on_full}, "
        f"max_attempts {config.max_attempts}"
    )


# A chain stage's rows in the table: enough to see which stage is the bottleneck.
_STAGE_TABLE_KEYS = (
    "items_completed",
    "items_dead_lettered",
    "wait_mean_s",
    "latency_p95_s",
    "utilisation",
    "queue_depth_mean",
    "producer_blocked_s",
)


# A class's rows in the table (JSON has every key of its summary).
_CLASS_TABLE_KEYS = (
    "items",
    "completed",
    "expired",
    "expired_fraction",
    "wait_mean_s",
    "wait_p95_s",
    "latency_mean_s",
    "latency_p95_s",
)


def summary_table(summary: dict[str, Any], scenario: Scenario) -> str:
    """The summary as a short table: the configuration, one row per key, a block per stage."""
    reps = f", {summary['replications']} replications (mean ± 95%)" if "ci95" in summary else ""
    if scenario.stages is None:
        lines = [f"{_config_line(scenario.config)}, seed {scenario.seed}{reps}"]
    else:
        names = " -> ".join(stage.name for stage in scenario.stages)
        lines = [f"chain {names}, seed {scenario.seed}{reps}; end to end:"]
    lines += _rows(summary)
    for name, block in summary.get("classes", {}).items():
        lines.append(f"class {name}:")
        shown = {key: block[key] for key in _CLASS_TABLE_KEYS}
        lines += _rows({**shown, "ci95": block.get("ci95", {})})
    for spec in scenario.stages or ():
        stage = summary["stages"][spec.name]
        fan = f", fan_out {spec.fan_out}" if spec.fan_out > 1 else ""
        lines.append(f"stage {spec.name}: {_config_line(spec.config)}{fan}")
        keys = (*_STAGE_TABLE_KEYS, *_BATCH_MEANS_KEYS.values())
        shown = {key: stage[key] for key in keys if key in stage}
        lines += _rows({**shown, "ci95": stage.get("ci95", {})})
    return "\n".join(lines)


def _rows(summary: dict[str, Any]) -> list[str]:
    """One line per summary key (value ± its 95% half-width when known)."""
    lines = []
    ci = summary.get("ci95", {})
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        if key in ("ci95", "replications", "stages") or key in _BATCH_MEANS_KEYS.values():
            continue
        if key == "classes":
            continue  # a block of its own, below
        text = format_value(key, value)
        half = ci.get(key)
        if half is not None and value is not None:
            text += f" ± {format_value(key, half)}"
        elif not ci and _BATCH_MEANS_KEYS.get(key) in summary and value is not None:
            # One run: its own batch-means interval (replications show theirs instead).
            half = summary.get(_BATCH_MEANS_KEYS[key])
            # With a backlog the summary withholds them (its drain is no steady state).
            why = (
                "the backlog's drain is no steady state"
                if "items_backlog" in summary
                else "too few items for batch means: under 10,000"
            )
            text += (
                f" ± ? ({why})"
                if half is None
                else f" ± {format_value(key, half)} (95%, batch means)"
            )
        lines.append(f"  {key:<{width}}  {text}")
    return lines


def _report_figure(result: SimulationResult) -> Any:
    """A 2x2 report: queue/in flight/backlog, latency histogram, memory, cumulative outcomes."""
    import numpy as np
    from matplotlib.figure import Figure

    ts, items = result.timeseries, result.items
    t = ts["time_s"].to_numpy()
    fig = Figure(figsize=(12, 8), layout="constrained")
    (ax1, ax2), (ax3, ax4) = fig.subplots(2, 2)
    for column, label in (
        ("queue_depth", "queue depth"),
        ("in_flight", "in flight"),
        ("upstream_backlog", "upstream backlog"),
    ):
        ax1.step(t, ts[column], where="post", label=label, linewidth=0.8)
    ax1.set(title="Items over time", xlabel="virtual time (s)", ylabel="items")
    ax1.legend(loc="upper left")

    latency = items.loc[items["outcome"] == "completed", "latency_s"].to_numpy()
    if latency.size:
        ax2.hist(latency, bins=60, color="0.6")
        for q, style in ((50, "-"), (95, "--"), (99, ":")):
            value = float(np.percentile(latency, q))
            ax2.axvline(value, color="C3", linestyle=style, label=f"p{q} = {value:.3g} s")
        ax2.legend()
    ax2.set(title="Latency of completed items", xlabel="latency (s)", ylabel="items")

    memory = ts["memory_bytes"].to_numpy()
    scale, unit = scale_bytes(float(memory.max()))
    ax3.step(t, memory / scale, where="post", color="C4", linewidth=0.8)
    ax3.set(title="Modelled memory", xlabel="virtual time (s)", ylabel=unit)

    ax4.step(t, ts["completed"], where="post", label="completed")
    ax4.step(t, ts["dead_letters"], where="post", label="dead letters")
    ax4.set(title="Cumulative outcomes", xlabel="virtual time (s)", ylabel="items")
    ax4.legend(loc="upper left")
    fig.suptitle(repr(result))
    return fig


class OutputFolder:
    """The folder a command writes its files to: checked before any work, filled at once.

    Made if missing (with its parents) and shown writable by creating a
    temporary file in it (``os.access`` says yes to root, whom a read-only or
    full filesystem still refuses). :meth:`writing` gives a hidden staging
    folder inside it; when the block ends without an error every file in it
    is moved into place (``os.replace``, one filesystem, so each move is
    atomic), and on an error the staging folder is removed and nothing of
    this run is left. :meth:`discard` removes the folder again when this run
    made it and left it empty (the run failed); so does a ``with`` block
    around the run that ends in an error.

    Args:
        path: the folder.
        flag: the option it came from, for messages.

    Raises:
        ValueError: ``path`` exists and is not a folder.
        OSError: it cannot be made or written (a path under a regular file,
            a read-only or full filesystem, no permission).
    """

    def __init__(self, path: str, *, flag: str = "--out") -> None:
        if os.path.exists(path) and not os.path.isdir(path):
            raise ValueError(f"{flag} {path}: exists and is not a directory")
        self.path = path
        self.flag = flag
        self.made = not os.path.isdir(path)
        os.makedirs(path, exist_ok=True)
        # Writable? Found now, not after an hour of runs.
        import tempfile  # only a command that writes files needs it (start-up)

        with tempfile.TemporaryFile(dir=path):
            pass

    @classmethod
    def new(cls, prefix: str, *, flag: str = "--out") -> OutputFolder:
        """A folder that did not exist, ``PREFIX-YYYYmmdd-HHMMSS`` (``-2``, ``-3``... if taken)."""
        import itertools
        import time

        stamp = time.strftime("%Y%m%d-%H%M%S")
        for attempt in itertools.count(1):
            path = f"{prefix}-{stamp}" + ("" if attempt == 1 else f"-{attempt}")
            try:
                os.makedirs(path)
            except FileExistsError:
                continue
            folder = cls(path, flag=flag)
            folder.made = True
            return folder
        raise AssertionError("unreachable")  # pragma: no cover

    def __repr__(self) -> str:
        return f"<OutputFolder {self.path!r}>"

    def __enter__(self) -> OutputFolder:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """Leaving on an error: :meth:`discard`."""
        if kind is not None:
            self.discard()

    @contextlib.contextmanager
    def writing(self) -> Iterator[str]:
        """A staging folder to write every file into; they move into :attr:`path` at the end."""
        import shutil
        import tempfile

        staging = tempfile.mkdtemp(prefix=".partial-", dir=self.path)
        try:
            yield staging
            names = sorted(os.listdir(staging))
            # Checked before the first move, so that no move can fail half way through.
            for name in names:
                if os.path.isdir(os.path.join(self.path, name)):
                    raise ValueError(
                        f"{self.flag} {self.path}: {name} is a directory there; "
                        "remove it or choose another folder"
                    )
            for name in names:
                os.replace(os.path.join(staging, name), os.path.join(self.path, name))
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def discard(self) -> None:
        """Remove the folder if this run made it and nothing is in it (a run that failed)."""
        if self.made:
            with contextlib.suppress(OSError):
                os.rmdir(self.path)


def file_name_part(name: str, what: str) -> str:
    """``name`` (a stage's) if it can be part of a file name (``items-NAME.csv``), else ValueError.

    Allowed: up to 200 bytes in UTF-8, no ``/`` or ``\\``, no control
    characters. Nothing is rewritten, so two names can never land in one file.
    """
    import unicodedata

    bad = sorted({c for c in name if c in "/\\" or unicodedata.category(c).startswith("C")})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        raise ValueError(
            f"{what} {name!r} names files written by --out (items-NAME.csv), so it cannot "
            f"hold {shown} (a path separator or a control character)"
        )
    if len(name.encode("utf-8", "surrogatepass")) > 200:
        raise ValueError(
            f"{what} must be at most 200 bytes in UTF-8 (it names files written by --out), "
            f"got {len(name.encode('utf-8', 'surrogatepass'))} bytes: {name[:40]!r}..."
        )
    return name


def write_json(path: str, payload: dict[str, Any]) -> None:
    """``payload`` as indented JSON (NaN refused: pass it through :func:`json_safe` first),
    in a directory made if missing."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=2, allow_nan=False)
        f.write("\n")


def write_out(directory: str, summary: dict[str, Any], result: SimulationResult) -> None:
    """``--out``: summary.json, items.csv, timeseries.csv (and per stage) and report.png.

    ``directory`` should be an :meth:`OutputFolder.writing` staging folder, so
    that a failure half way leaves nothing behind.
    """
    stages = getattr(result, "stages", None) if not hasattr(result, "columns") else None
    for name in stages or {}:
        file_name_part(name, "stage name")  # before the first file, not after some
    write_json(os.path.join(directory, "summary.json"), summary)
    result.items.to_csv(os.path.join(directory, "items.csv"), index=False)
    result.timeseries.to_csv(os.path.join(directory, "timeseries.csv"), index=False)
    for name, stage in (stages or {}).items():
        stage.items.to_csv(os.path.join(directory, f"items-{name}.csv"), index=False)
        stage.timeseries.to_csv(os.path.join(directory, f"timeseries-{name}.csv"), index=False)

    import matplotlib

    matplotlib.use("Agg")
    if stages is not None:
        from ..viz.figures.stages import plot_stages

        fig = plot_stages(result)
        fig.savefig(os.path.join(directory, "report.png"), dpi=100)
        return
    try:
        from ..viz.figures.run import report_figure  # type: ignore[import-not-found]
    except ImportError:
        report_figure = _report_figure
    fig = report_figure(result)
    fig.savefig(os.path.join(directory, "report.png"), dpi=100)
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close(fig)


# Summary keys whose replication intervals get run-length advice: latency is never near 0
# (it includes the service time), so a share of its mean is a fair precision target.
_ADVICE_METRICS = ("latency_mean_s", "latency_p95_s")


def run_length_notes(summary: dict[str, Any], replications: int) -> list[str]:
    """Run-length advice for the replication intervals wider than 10% of their mean."""
    from ..sim.stats.runlength import run_length_advice

    notes = []
    for key in _ADVICE_METRICS:
        mean, half = summary.get(key), summary.get("ci95", {}).get(key)
        if mean is None or half is None:
            continue
        advice = run_length_advice(
            mean, half, replications, metric=key, utilisation=summary.get("utilisation")
        )
        if advice is not None:
            notes.append(advice)
    return notes


def one_line(exc: BaseException) -> str:
    """What went wrong, on one line, for ``pipeline: error: ...``."""
    if isinstance(exc, OSError) and exc.filename is not None:
        text = f"cannot use {exc.filename}: {exc.strerror or exc}"
    elif isinstance(exc, MemoryError):
        text = f"out of memory ({exc or 'no detail'}); simulate fewer items or a shorter duration"
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def one_line_warnings(show_others: Callable[..., None]) -> Callable[..., None]:
    """A ``warnings.showwarning`` printing user-facing warnings as ``pipeline: warning: ...``.

    Other categories (a numpy ``RuntimeWarning``) go to ``show_others``, as Python shows them.
    """

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if issubclass(category, UserWarning):
            print(f"{PROG}: warning: {' '.join(str(message).split())}", file=sys.stderr)
        else:
            show_others(message, category, filename, lineno, file, line)

    return show
