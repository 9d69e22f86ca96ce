"""``python -m pipeline calibrate``: fit a scenario from telemetry a team already has.

Usage::

    python -m pipeline calibrate saved_query_range.json --format prometheus --json
    python -m pipeline calibrate http://127.0.0.1:9090 --format prometheus \\
        --start now-1h --step 15s --pipeline orders --out orders.toml
    python -m pipeline plan orders.toml --search concurrency=1..32 --slo 'latency_p95_s<=2'

``FILE`` is read by the reader of ``--format``
(:data:`pipeline.sim.workloads.telemetry.FORMATS`) into an ``Observed``, and
:func:`~pipeline.sim.calibration.telemetry.calibrate_observed` fits the
arrivals, the service time, the failures, the workers and the backlog, each
saying how. Flags:

- ``--format NAME``: the data's format: ``prometheus`` (a saved ``query_range``
  answer, or a server), ``otlp`` (an OTLP/JSON span export, the collector's
  file exporter format), ``locust`` (``--csv``'s ``*_stats_history.csv``) or
  ``k6`` (``--out json``);
- ``--json``: one JSON object: ``arrival_rate_per_s``, ``service_mean_s``,
  ``service_p95_s``, ``failure_rate`` (each with its 95% ``..._interval``
  where known), ``concurrency``, ``backlog``, ``window_s``, then
  ``arrivals``, ``service``, ``failures`` and ``workers``, each with
  ``fitted`` and ``how``, and the reader's ``notes``; ``max_attempts`` (what
  the data shows: 1 when each record is one request) and ``service_fit``:
  ``"service_times"`` (the data's durations are the service's own) or
  ``"response_times_deconvolved"`` (they are response times, the wait for a
  worker included, as k6, Locust and server spans record them: the service is
  fitted so that the twin on ``--concurrency`` workers reproduces them);
- ``--out FILE.toml``: a scenario file for ``simulate``, ``sweep`` and
  ``plan`` (their positional scenario argument); a time-varying arrival rate
  is written beside it as ``FILE.arrivals.csv`` and a bucketed service as
  ``FILE.service.csv``, named in the file relative to it. The run lasts the
  observed window (``duration``); the file's comments say how each part was
  fitted. Checked before any reading, written whole at the end;
- ``--concurrency N``: the workers, when the data does not say (or to override
  it); needed for k6, Locust and server spans, whose client cannot see the
  server's workers: give the real count, since the queueing in the response
  times is taken out on that many workers; ``--seed N``: the scenario's seed
  (default 1);
- Prometheus: ``--start``, ``--end`` (UNIX seconds, RFC 3339, ``now`` or
  ``now-1h``) and ``--step`` (``15s``, ``1m``, ``500ms`` or seconds) for a
  server URL; ``--pipeline NAME`` and ``--stage NAME`` to choose the series;
  ``--arrivals-series``, ``--duration-series`` (a histogram's base name) and
  ``--errors-series`` for a service not built on this engine
  (``'http_requests_total{job="api"}'``);
- OTLP: ``--destination NAME`` (the pipeline or stage, when the export holds
  several), or ``--span-name NAME`` for the server spans of a service not
  built on this engine, with ``--service NAME`` (``service.name``);
- Locust: ``--name NAME`` and ``--method METHOD`` (default: the Aggregated row);
- k6: ``--name NAME`` or ``--url URL`` (the points' tags).

A flag the format's reader does not take (``--step`` for a file another
format reads) is an error. Every problem is one line, ``pipeline: error:
...``, exit status 2, and leaves no ``--out`` file behind.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import re
import sys
import time
from datetime import datetime
from typing import Any

from .output import json_safe
from .values import MAX_CONCURRENCY, parse_int

__all__ = ["add_command"]

# Flags passed on to a reader, when given: flag dest -> the reader's keyword.
_READER_OPTIONS = {
    "start": "start_s",
    "end": "end_s",
    "step": "step_s",
    "pipeline": "pipeline",
    "stage": "stage",
    "arrivals_series": "arrivals_series",
    "duration_series": "duration_series",
    "errors_series": "errors_series",
    "destination": "destination",
    "span_name": "span_name",
    "service": "service",
    "name": "name",
    "method": "method",
    "url": "url",
}
_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def add_command(subparsers: Any) -> None:
    """Register ``calibrate`` with the command line's subparsers."""
    parser = subparsers.add_parser(
        "calibrate",
        help="fit a scenario from telemetry (Prometheus, OTLP, Locust, k6)",
        description="Fit a scenario from telemetry and say how each part was fitted.",
    )
    parser.add_argument("file", metavar="FILE", help="the data (a file, or a server URL)")
    # Checked when the command runs, by the registry (pipeline.sim.workloads.telemetry.FORMATS):
    # building the parser must not import pipeline.sim (--help works without the [sim] extra).
    parser.add_argument("--format", required=True, metavar="NAME", help="the data's format")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--out", metavar="FILE.toml", help="write the scenario file")
    parser.add_argument("--concurrency", metavar="N", help="workers, when the data lacks them")
    parser.add_argument("--seed", metavar="N", help="the scenario's seed (default 1)")
    parser.add_argument("--start", metavar="TIME", help="window start: UNIX s, RFC 3339, now-1h")
    parser.add_argument("--end", metavar="TIME", help="window end (default now)")
    parser.add_argument("--step", metavar="DURATION", help="query step: 15s (default), 1m, 500ms")
    parser.add_argument("--pipeline", metavar="NAME", help="keep series labelled pipeline=NAME")
    parser.add_argument("--stage", metavar="NAME", help="keep series labelled stage=NAME")
    parser.add_argument("--arrivals-series", metavar="SERIES", help="a request counter")
    parser.add_argument("--duration-series", metavar="SERIES", help="a duration histogram's name")
    parser.add_argument("--errors-series", metavar="SERIES", help="an error counter")
    parser.add_argument(
        "--destination", metavar="NAME", help="OTLP: the pipeline or stage (messaging.destination)"
    )
    parser.add_argument("--span-name", metavar="NAME", help="OTLP: server spans of this name")
    parser.add_argument("--service", metavar="NAME", help="OTLP: spans of this service.name")
    parser.add_argument("--name", metavar="NAME", help="Locust: the request name; k6: the name tag")
    parser.add_argument("--method", metavar="METHOD", help="Locust: the request type (GET, POST)")
    parser.add_argument("--url", metavar="URL", help="k6: the url tag")
    parser.set_defaults(run=_calibrate)


def parse_time(text: str, flag: str, now: float) -> float:
    """UNIX seconds from ``1733050000``, ``2026-12-01T10:00:00Z``, ``now`` or ``now-1h``."""
    value = text.strip()
    found = re.fullmatch(r"now(?:-(.+))?", value)
    if found:
        return now - (parse_duration(found.group(1), flag) if found.group(1) else 0.0)
    try:
        seconds = float(value)
    except ValueError:
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            seconds = math.nan
        else:
            if stamp.tzinfo is None:
                raise ValueError(
                    f"{flag} {text!r}: give a time zone (2026-12-01T10:00:00Z)"
                ) from None
            seconds = stamp.timestamp()
    if not (math.isfinite(seconds) and 0 <= seconds <= 32503680000):
        raise ValueError(
            f"{flag} must be UNIX seconds, an RFC 3339 time (2026-12-01T10:00:00Z), now or "
            f"now-DURATION, got {text!r}"
        )
    return seconds


def parse_duration(text: str, flag: str) -> float:
    """Seconds from ``500ms``, ``15s``, ``2m``, ``1h``, ``1d`` or a number of seconds."""
    value = text.strip()
    unit = next((u for u in ("ms", "s", "m", "h", "d") if value.endswith(u)), "")
    try:
        seconds = float(value[: len(value) - len(unit)]) * _UNITS_S.get(unit, 1.0)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0.001):
        raise ValueError(
            f"{flag} must be a duration of at least 1ms (500ms, 15s, 2m, 1h or seconds), "
            f"got {text!r}"
        )
    return seconds


def _reader_options(args: argparse.Namespace, read: Any) -> dict[str, Any]:
    """The reader's keywords from the flags given; a flag it does not take is an error."""
    accepted = inspect.signature(read).parameters
    now = time.time()
    options: dict[str, Any] = {}
    for dest, keyword in _READER_OPTIONS.items():
        text = getattr(args, dest)
        if text is None:
            continue
        flag = "--" + dest.replace("_", "-")
        if keyword not in accepted:
            raise ValueError(f"{flag} does not apply to --format {args.format}")
        if dest in ("start", "end"):
            options[keyword] = parse_time(text, flag, now)
        elif dest == "step":
            options[keyword] = parse_duration(text, flag)
        else:
            if not text.strip():
                raise ValueError(f"{flag} must not be empty")
            options[keyword] = text
    return options


def _check_out(path: str) -> None:
    """``--out``: a file (not a folder) in a folder that exists and can be written, now."""
    if os.path.isdir(path):
        raise ValueError(f"--out {path}: is a directory; name the scenario file (scenario.toml)")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"--out {path}: folder {folder} does not exist")
    for side in (_side(path, "arrivals"), _side(path, "service")):
        if os.path.isdir(side):
            raise ValueError(f"--out {path}: {side} is a directory; choose another name")
    import tempfile  # only when a scenario file is written (start-up of other commands)

    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ValueError(
            f"--out {path}: cannot write in {folder} ({exc.strerror or exc})"
        ) from None


def _side(path: str, part: str) -> str:
    stem = path[: -len(".toml")] if path.endswith(".toml") else path
    return f"{stem}.{part}.csv"


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a TOML basic string


def scenario_file(fit: Any, path: str) -> tuple[str, dict[str, str]]:
    """The scenario file's text for ``fit``, and the CSV files beside it (path -> text)."""
    from ..sim.workloads.arrivals import Poisson
    from ..sim.workloads.distributions import Empirical, Exponential, Gamma, LogNormal

    files: dict[str, str] = {}
    arrivals = fit.arrivals.process
    if isinstance(arrivals, Poisson):
        arrivals_spec = f"poisson:rate={arrivals.rate!r}"
    else:  # counts per interval: TimeVarying.from_counts
        side = _side(path, "arrivals")
        files[side] = "count\n" + "".join(f"{c!r}\n" for c in fit.arrivals.counts)
        name, interval = os.path.basename(side), fit.arrivals.interval_s
        arrivals_spec = f"counts:file={name},column=count,interval_s={interval!r}"
    service = fit.service.distribution
    if isinstance(service, LogNormal):
        service_spec = f"lognormal:mean={service.mean!r},cv={service.cv!r}"
    elif isinstance(service, Gamma):
        service_spec = f"gamma:mean={service.mean!r},cv={service.cv!r}"
    elif isinstance(service, Exponential):
        service_spec = f"exponential:mean={service.mean!r}"
    elif isinstance(service, Empirical):
        side = _side(path, "service")
        files[side] = "service_s\n" + "".join(f"{s!r}\n" for s in service.samples)
        service_spec = f"empirical:file={os.path.basename(side)},column=service_s"
    else:  # pragma: no cover - the fit makes no other
        raise ValueError(f"cannot write a service of {service!r} to a scenario file")
    lines = [
        f"# Fitted by python -m pipeline calibrate from {fit.source}, a {fit.window_s:g} s window."
    ]
    lines += [
        f"# {part}: {fit.how[part]}"
        for part in ("arrivals", "service", "failures", "workers", "attempts")
    ]
    lines += [
        f"arrivals = {_toml_string(arrivals_spec)}",
        f"service = {_toml_string(service_spec)}",
        f"concurrency = {fit.concurrency}",
        f"max_attempts = {fit.max_attempts}",
        f"backoff = {_toml_string(_backoff_spec(fit.backoff))}",
        f"failure_rate = {fit.failure_rate.estimate if fit.failure_rate else 0.0!r}",
        f"duration = {fit.window_s!r}",
        f"seed = {fit.scenario.seed}",
    ]
    if fit.backlog is not None:
        lines.append(f"# backlog: {fit.how['backlog']}")
        lines.append(f"backlog = {fit.backlog}")
    return "\n".join(lines) + "\n", files


def _backoff_spec(backoff: Any) -> str:
    """``--backoff``'s spelling of a :class:`~pipeline.Backoff` (no jitter: none is fitted)."""
    if backoff.kind == "constant":
        return f"constant:delay={backoff.base_s!r}"
    return f"exponential:base={backoff.base_s!r},factor={backoff.factor!r},cap={backoff.cap_s!r}"


def _write_all(path: str, text: str, files: dict[str, str]) -> None:
    """Every file staged beside its place, then moved in: the scenario file last."""
    import tempfile

    folder = os.path.dirname(os.path.abspath(path))
    staged: list[tuple[str, str]] = []
    try:
        for target, content in [*files.items(), (path, text)]:
            handle, temporary = tempfile.mkstemp(prefix=".partial-", dir=folder)
            staged.append((temporary, target))
            with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as f:
                f.write(content)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
        for temporary, target in staged:
            os.replace(temporary, target)
    finally:
        for temporary, _ in staged:
            if os.path.exists(temporary):
                os.unlink(temporary)


def _calibrate(args: argparse.Namespace) -> int:
    from ..sim.workloads.telemetry import reader

    try:
        module = reader(args.format)
    except ValueError as exc:
        raise ValueError(f"--format: {exc}") from None
    options = _reader_options(args, module.read)
    concurrency = None
    if args.concurrency is not None:
        concurrency = parse_int(
            args.concurrency, at_least=1, at_most=MAX_CONCURRENCY, what="workers"
        )
    seed = 1 if args.seed is None else parse_int(args.seed, at_least=0, what="seed")
    if args.out is not None:
        _check_out(args.out)  # before any reading: an unusable --out is found now
    if not args.file.startswith(("http://", "https://")):
        if not os.path.exists(args.file):
            raise ValueError(f"{args.file}: no such file")
        if os.path.isdir(args.file):
            raise ValueError(f"{args.file}: is a directory; give the {args.format} data file")
    from ..sim.calibration.telemetry import calibrate_observed

    observed = module.read(args.file, **options)
    fit = calibrate_observed(observed, concurrency=concurrency, seed=seed)
    if fit.concurrency > MAX_CONCURRENCY:
        raise ValueError(
            f"{args.file}: {fit.concurrency} workers is more than a scenario file takes "
            f"({MAX_CONCURRENCY:,}); give --concurrency N"
        )
    if args.out is not None:
        text, files = scenario_file(fit, args.out)
        _write_all(args.out, text, files)
    if args.json:
        payload = {"format": args.format, **fit.to_dict()}
        if args.out is not None:
            payload["out"] = args.out
        print(json.dumps(_safe(payload), allow_nan=False))
    else:
        print(fit)
        if args.out is not None:
            print(
                f"wrote {args.out}"
                + "".join(f", {name}" for name in scenario_file(fit, args.out)[1])
            )
    sys.stdout.flush()
    return 0


def _safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_safe(v) for v in value]
    return json_safe(value)
