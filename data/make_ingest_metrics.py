"""Record the ingestion example's metrics as a real Prometheus scraped them (notebook 10's data).

Run: ``python data/make_ingest_metrics.py [--out DIR] [--records N]``. It needs
Debian's ``prometheus`` (``apt-get install -y prometheus``) and the
``[metrics]`` extra.

What it does, all on this machine:

1. starts a Prometheus in a temporary folder on a free loopback port, with a
   scrape config pointing at a free port ``P`` and a scrape every 250 ms;
2. runs the ingestion example for real, serving its metrics on ``P``
   (``python -m pipeline.examples.ingest --records N --no-twin
   --latency-ms 8 --metrics-port P --metrics-linger 1 --json``): a quick
   partner and one write worker, so the write stage is the bottleneck and
   its queue fills;
3. waits for a scrape taken after the run, then saves the ``query_range``
   answer for ``{__name__=~"pipeline_.+"}`` over the run's window, every
   250 ms, as ``ingest_prometheus.json``, and the run's own JSON report as
   ``ingest_run.json``, for the notebook to compare;
4. stops Prometheus and removes the folder.

A real run is not deterministic (its timing is this machine's): each run of
the script records a new, equally valid run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the repository root: tests.prometheus_server

from tests.prometheus_server import (  # noqa: E402 (after the path is set)
    free_port,
    query_range,
    running_prometheus,
    scraped_after,
    scraping,
)

SCRAPE_INTERVAL_S = 0.25
"""Seconds between scrapes, and the saved answer's step."""
LINGER_S = 1.0
"""Seconds the exporter serves after the run: several scrapes of the final counts."""
RECORDS = 5000
LATENCY_MS = 8.0
"""The partner's median latency, ms: pages come faster than one worker writes their records."""
PROMETHEUS_FILE = "ingest_prometheus.json"
RUN_FILE = "ingest_run.json"


def record(
    out: Path,
    *,
    records: int = RECORDS,
    prometheus: str = "/usr/bin/prometheus",
    python: str = sys.executable,
) -> tuple[Path, Path]:
    """Run the ingestion under a real Prometheus; write its answer and the run report into ``out``.

    Returns:
        The paths of the ``query_range`` answer and of the run report.

    Raises:
        RuntimeError: the ingestion failed, or Prometheus did not start or scrape.
    """
    with tempfile.TemporaryDirectory(prefix="ingest-prometheus-") as folder:
        port = free_port()
        with running_prometheus(
            prometheus, Path(folder), [f"127.0.0.1:{port}"], scrape_interval_s=SCRAPE_INTERVAL_S
        ) as base:
            scraping(base)  # from the run's first moment on, not seconds into it
            # Whole steps of the grid: every saved point is a multiple of the step.
            start = math.floor(time.time() / SCRAPE_INTERVAL_S) * SCRAPE_INTERVAL_S
            run = subprocess.run(
                [python, "-m", "pipeline.examples.ingest", "--records", str(records),
                 "--no-twin", "--latency-ms", str(LATENCY_MS), "--metrics-port", str(port),
                 "--metrics-linger", str(LINGER_S), "--json"],
                capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600,
                env=dict(os.environ, OPENBLAS_NUM_THREADS="1"),
            )  # fmt: skip
            if run.returncode != 0:
                raise RuntimeError(f"the ingestion failed ({run.returncode}): {run.stderr[-2000:]}")
            report = json.loads(run.stdout)
            # The exporter served the final counts for LINGER_S after the run: a scrape
            # after that moment holds them.
            ended = time.time() - LINGER_S
            scraped_after(base, ended)
            end = math.ceil(time.time() / SCRAPE_INTERVAL_S) * SCRAPE_INTERVAL_S
            answer = query_range(
                base,
                '{__name__=~"pipeline_.+"}',
                start_s=start,
                end_s=end,
                step_s=SCRAPE_INTERVAL_S,
            )
    out.mkdir(parents=True, exist_ok=True)
    metrics_path, run_path = out / PROMETHEUS_FILE, out / RUN_FILE
    # Written beside the target and moved into place: nothing half-written.
    for path, text in (
        (metrics_path, json.dumps(json.loads(answer), separators=(",", ":")) + "\n"),
        (run_path, json.dumps(report, indent=2) + "\n"),
    ):
        partial = path.with_suffix(".partial")
        partial.write_text(text)
        partial.replace(path)
    return metrics_path, run_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write into (data/)")
    parser.add_argument("--records", type=int, default=RECORDS, help="records to ingest")
    parser.add_argument("--prometheus", default="/usr/bin/prometheus", help="the server program")
    args = parser.parse_args(argv)
    if not 1 <= args.records <= 1_000_000:
        parser.exit(2, f"--records must be from 1 to 1,000,000, got {args.records}\n")
    if not os.access(args.prometheus, os.X_OK):
        parser.exit(2, f"--prometheus {args.prometheus}: not an executable program "
                       "(apt-get install -y prometheus)\n")  # fmt: skip
    for path in record(args.out, records=args.records, prometheus=args.prometheus):
        print(f"{path.name}: {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
