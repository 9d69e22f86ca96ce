"""``python -m pipeline.examples.ingest``: record a real ingestion, fit its twin, verify a what-if.

Example::

    python -m pipeline.examples.ingest --records 2000 --what-if concurrency=40 --json
    python -m pipeline.examples.ingest --records 2000 --what-if api_latency=0.5
    python -m pipeline.examples.ingest --records 5000 --db records.sqlite --no-twin --json

Everything runs on this machine: the partner API on 127.0.0.1 (a child
process, stopped on exit), SQLite in a temporary folder unless ``--db`` names
a file or a ``postgresql://`` DSN. SIGTERM, at any phase, ends the run
cleanly: an ingestion stops intake and drains (the records in hand are
written, the rest are reported as not fetched), fitting and predicting stop,
the temporary folder is removed, and the result so far is printed with
``"ended": "SIGTERM"``. Bad flags, and a ``--db`` whose ``records`` table the
upsert cannot write: one line, ``pipeline: error: ...``, exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import socket
import sys
import time
from typing import NoReturn

__all__ = ["REPEATS", "REPLICATIONS", "TOLERANCE", "main"]

PROG = "pipeline"
REPLICATIONS = 20
"""Simulated runs behind each prediction, by default (``--replications``)."""
REPEATS = 2
"""Real runs of the what-if, by default (``--repeats``): their mean is what is predicted."""
TOLERANCE = 0.25
"""The share of a prediction a measured mean may lie beyond its interval and still
agree, by default (``--tolerance``)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{PROG}: error: {message} (see '{self.prog} --help')\n")


def _positive_int(name: str, most: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if not 1 <= value <= most:
            raise argparse.ArgumentTypeError(f"{name} must be from 1 to {most:,}, got {value}")
        return value

    return parse


def _share(name: str, *, below_one: bool):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        high_ok = value < 1 if below_one else value < math.inf
        if not (value >= 0 and high_ok):
            allowed = "in [0, 1)" if below_one else "a finite number >= 0"
            raise argparse.ArgumentTypeError(f"{name} must be {allowed}, got {text}")
        return value

    return parse


def _seconds(name: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not 0 < value < math.inf:
            raise argparse.ArgumentTypeError(f"{name} must be seconds > 0, got {text}")
        return value

    return parse


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m pipeline.examples.ingest",
        description="Ingest from a local partner API into SQLite (or Postgres), fit the "
        "run's virtual-time twin, predict a what-if and verify it for real.",
    )
    parser.add_argument(
        "--records",
        type=_positive_int("--records", 1_000_000),
        required=True,
        help="records the partner lists",
    )
    parser.add_argument(
        "--what-if",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="concurrency=N (write workers) or api_latency=FACTOR (0.5 halves "
        "the partner's latency); default: double the write workers (at most 10,000); "
        "not with --no-twin",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--db",
        default=None,
        metavar="PATH|DSN",
        help="SQLite file, or a postgresql:// DSN (default: a temporary file)",
    )
    parser.add_argument(
        "--no-twin", action="store_true", help="ingest once and report; no calibration, no what-if"
    )
    parser.add_argument(
        "--concurrency",
        type=_positive_int("--concurrency", 10_000),
        default=1,
        help="write workers of the baseline (default 1)",
    )
    parser.add_argument("--page-size", type=_positive_int("--page-size", 10_000), default=20)
    parser.add_argument(
        "--latency-ms",
        type=_seconds("--latency-ms"),
        default=20.0,
        help="the partner's median latency, ms (p95 is twice it)",
    )
    parser.add_argument(
        "--error-rate",
        type=_share("--error-rate", below_one=True),
        default=0.02,
        help="share of requests answered 503",
    )
    parser.add_argument(
        "--poison-rate",
        type=_share("--poison-rate", below_one=True),
        default=0.01,
        help="share of records that can never be written",
    )
    parser.add_argument(
        "--rate-limit",
        type=_seconds("--rate-limit"),
        default=None,
        help="requests per second the partner answers before 429",
    )
    parser.add_argument(
        "--replications",
        type=_positive_int("--replications", 10_000),
        default=REPLICATIONS,
        help="simulated runs per prediction (>= 2)",
    )
    parser.add_argument(
        "--repeats",
        type=_positive_int("--repeats", 100),
        default=REPEATS,
        help="real runs of the what-if",
    )
    parser.add_argument(
        "--tolerance",
        type=_share("--tolerance", below_one=False),
        default=TOLERANCE,
        help="share of the prediction allowed beyond its interval",
    )
    parser.add_argument(
        "--metrics-port",
        type=_positive_int("--metrics-port", 65_535),
        default=None,
        metavar="PORT",
        help="serve each real run's Prometheus metrics on 127.0.0.1:PORT while it runs "
        "(needs the [metrics] extra)",
    )
    parser.add_argument(
        "--metrics-linger",
        type=_share("--metrics-linger", below_one=False),
        default=0.0,
        metavar="SECONDS",
        help="keep serving this long after each run, so Prometheus takes a last "
        "scrape (your scrape interval; default 0)",
    )
    parser.add_argument("--seed", type=int, default=1)
    return parser


class _Lingering:
    """A run's metrics server, closed ``linger_s`` seconds after the run ends.

    :func:`~pipeline.examples.ingest.chain.ingest` calls ``close`` off the
    event loop, so the wait holds up nothing but the next phase.
    """

    def __init__(self, server: object, linger_s: float) -> None:
        self.server, self.linger_s = server, linger_s

    def close(self) -> None:
        time.sleep(self.linger_s)
        self.server.close()


def _metrics_server(port: int, linger_s: float):
    """``serve_metrics`` for :func:`run_loop`: each run's chain on 127.0.0.1:``port``.

    The port is tried once here, so one in use is an error before any work
    (a race with another process taking it later still fails, at that run).
    """
    import pipeline.metrics

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))

    return lambda chain: _Lingering(pipeline.metrics.serve(chain, port=port), linger_s)


def main(argv: list[str] | None = None) -> int:
    from .chain import IngestConfig
    from .server import PartnerConfig
    from .sink import SinkError
    from .twin import WhatIf, default_what_if, run_loop

    parser = _parser()
    args = parser.parse_args(argv)
    if args.replications < 2:
        parser.error("--replications must be >= 2")
    try:
        # Only what runs is checked: --no-twin runs no what-if, so it has none to check
        # (an explicit one is parsed, then refused as having no effect).
        what_if = WhatIf.parse(args.what_if) if args.what_if else None
        if args.no_twin and what_if is not None:
            parser.error("--what-if needs the twin: drop --no-twin, or drop --what-if")
        config = IngestConfig(page_size=args.page_size)
        config = dataclasses.replace(
            config, write=dataclasses.replace(config.write, concurrency=args.concurrency)
        )
        if what_if is None and not args.no_twin:
            what_if = default_what_if(config)
        partner = PartnerConfig(
            records=args.records,
            page_size=args.page_size,
            latency_p50_s=args.latency_ms / 1e3,
            latency_p95_s=2 * args.latency_ms / 1e3,
            error_rate=args.error_rate,
            poison_rate=args.poison_rate,
            rate_limit_per_s=args.rate_limit,
            seed=max(0, args.seed),
        )
    except (TypeError, ValueError) as error:
        parser.error(str(error))
    serve_metrics = None
    if args.metrics_port is not None:
        try:
            serve_metrics = _metrics_server(args.metrics_port, args.metrics_linger)
        except ImportError as error:  # the [metrics] extra is missing
            parser.error(str(error))
        except OSError as error:
            parser.error(
                f"--metrics-port {args.metrics_port}: 127.0.0.1 cannot listen there: "
                f"{error.strerror or error}"
            )
    elif args.metrics_linger:
        parser.error("--metrics-linger needs --metrics-port")
    try:
        result = asyncio.run(
            run_loop(
                args.records,
                what_if,
                partner=partner,
                config=config,
                database=args.db,
                replications=args.replications,
                repeats=args.repeats,
                tolerance=args.tolerance,
                seed=args.seed,
                stop_on_sigterm=True,
                twin=not args.no_twin,
                serve_metrics=serve_metrics,
            )
        )
    except SinkError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:
        print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 1
    except OSError as error:  # the metrics port is in use (serve names host:port)
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, allow_nan=False))
    else:
        print(_table(result))
    return 0


def _number(value: float | None, spec: str) -> str:
    """``value`` formatted by ``spec``, or ``n/a`` where the run has none (JSON null)."""
    return "n/a" if value is None else format(value, spec)


def _table(result: dict) -> str:
    """The result as a few lines of text; any number may be null (nothing written, say)."""
    lines = [
        f"{result['records']:,} records into {result['database']} "
        f"({result['writers']} writer(s)); ended: {result['ended']}"
    ]
    if "comparison" not in result:
        m = result["measured"]
        lines.append(
            f"measured: {_number(m['throughput_per_s'], '.0f')} records/s, p95 "
            f"{_number(m['latency_p95_s'], '.3f')} s, write queue peak "
            f"{_number(m['queue_depth_max'], '.0f')}"
        )
        lines.append(f"accounting: {result['accounting']}")
        return "\n".join(lines)
    lines.append(f"what-if: {result['what_if']}")
    lines.append(f"{'metric':<18}{'measured':>12}{'predicted (95% interval)':>36}{'error':>9}")
    for key, row in result["comparison"].items():
        low, high = result["predicted"][f"{key}_interval"]
        interval = (
            f"{_number(row['predicted'], '.4g')} [{_number(low, '.4g')}, {_number(high, '.4g')}]"
        )
        verdict = "agrees" if row["agrees"] else "DIFFERS"
        lines.append(
            f"{key:<18}{_number(row['measured'], '.4g'):>12}{interval:>36}"
            f"{_number(row['relative_error'], '+.1%'):>9}  {verdict}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
