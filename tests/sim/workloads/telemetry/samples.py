"""Write one known run as each load or tracing tool would record it: the README's examples.

``python -m tests.sim.workloads.telemetry.samples DIR`` writes ``DIR/run.json``
(k6 ``--out json``), ``DIR/run_stats_history.csv`` (Locust ``--csv run``)
and ``DIR/spans.json`` (the OpenTelemetry Collector's file exporter) of the
run in :mod:`tests.sim.workloads.telemetry.known` (Poisson 20/s, log-normal
service of mean 20 ms and cv 0.8, 5% of attempts failing, up to 3 attempts),
deterministically, so ``calibrate`` on them prints what the README shows; and
``DIR/queued_stats_history.csv``, Locust's record of a service with a queue
(:func:`~tests.sim.workloads.telemetry.known.queued_scenario`: four workers at
60% busy), whose response times hold the wait for a worker.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.sim.workloads.telemetry import known, test_k6, test_locust, test_otlp

__all__ = ["write_samples"]


def write_samples(folder: Path, *, n_items: int = 2000, seed: int = 5) -> list[Path]:
    """The three files of one run of the known scenario, and a queued one, into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    run = known.run(n_items=n_items, seed=seed)
    spans = test_otlp.pipeline_spans(run)
    return [
        test_k6.write(folder / "run.json", test_k6.k6_lines(run)),
        test_locust.write(folder / "run_stats_history.csv", test_locust.history(run)),
        test_otlp.write(folder / "spans.json", test_otlp.export_lines(spans, run.end_ns)),
        test_locust.write(
            folder / "queued_stats_history.csv",
            test_locust.history(known.requests(known.queued_scenario(n_items=6000, seed=seed))),
        ),
    ]


if __name__ == "__main__":
    for path in write_samples(Path(sys.argv[1] if len(sys.argv) > 1 else "samples")):
        print(f"wrote {path}")
