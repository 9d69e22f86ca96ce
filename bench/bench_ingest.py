"""Benchmark: the ingestion example's peak memory against the record count.

Each point is one fresh process that runs the example's command line
(``python -m pipeline.examples.ingest --records N --no-twin --json`` by
default; ``--twin`` runs the whole loop) and then reads its own peak resident
set (``VmHWM`` in ``/proc/self/status``): the client's memory only, not the
partner API's, which is a child process of its own. The partner answers
quickly (``--latency-ms``, large pages), so the run is dominated by the
writes, one SQLite commit per record.

Bounded means flat: the script prints each point's peak and the growth per
record from the smallest run to the largest, and exits 1 when the largest
peak passes ``--limit-mb`` (200 MB, the seed's bound for 400,000 records).

Usage: ``OPENBLAS_NUM_THREADS=1 python bench/bench_ingest.py [--records 50000 400000] [--twin]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = """
import json, sys
from pipeline.examples.ingest.__main__ import main
status = main(sys.argv[1:])
with open("/proc/self/status") as lines:
    fields = dict(line.split(":", 1) for line in lines)
peak_kib = int(fields["VmHWM"].split()[0])
print(json.dumps({"status": status, "peak_bytes": peak_kib * 1024}), file=sys.stderr)
"""


def run(records: int, *, twin: bool, latency_ms: float, page_size: int) -> dict:
    args = ["--records", str(records), "--json", "--latency-ms", str(latency_ms)]
    args += ["--page-size", str(page_size), "--error-rate", "0.01"]
    if not twin:
        args.append("--no-twin")
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1")
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env, cwd=ROOT
    )
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"run of {records:,} records failed:\n{done.stderr}")
    child = json.loads(done.stderr.strip().splitlines()[-1])
    result = json.loads(done.stdout)
    return {
        "records": records,
        "peak_mb": child["peak_bytes"] / 1e6,
        "written": result["accounting"]["written"],
        "balanced": bool(result["accounting"]["balanced"]),
        "wall_s": wall,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--records", type=int, nargs="+", default=[50_000, 100_000, 200_000, 400_000]
    )
    parser.add_argument("--twin", action="store_true", help="the whole loop, not --no-twin")
    parser.add_argument("--latency-ms", type=float, default=1.0)
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--limit-mb", type=float, default=200.0)
    args = parser.parse_args()
    print(
        f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores"
    )
    print(f"{'records':>9} {'peak MB':>8} {'written':>9} balanced {'wall s':>7}")
    points = []
    for records in sorted(args.records):
        point = run(records, twin=args.twin, latency_ms=args.latency_ms, page_size=args.page_size)
        points.append(point)
        print(
            f"{point['records']:>9,} {point['peak_mb']:>8.1f} {point['written']:>9,} "
            f"{point['balanced']!s:>8} {point['wall_s']:>7.1f}",
            flush=True,
        )
    first, last = points[0], points[-1]
    if last["records"] > first["records"]:
        growth = (last["peak_mb"] - first["peak_mb"]) * 1e6 / (last["records"] - first["records"])
        print(
            f"growth: {growth:.1f} bytes per record "
            f"from {first['records']:,} to {last['records']:,}"
        )
    ok = last["peak_mb"] < args.limit_mb and all(p["balanced"] for p in points)
    print(
        f"largest peak {last['peak_mb']:.1f} MB, limit {args.limit_mb:g} MB: "
        f"{'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
