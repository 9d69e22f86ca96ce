"""Benchmark: CPU time from moving a lesson widget's slider to its new figure.

Builds each notebook's focused widget (:mod:`pipeline.lessons.widgets`) on the
scenario its notebook builds -- 01 ``burst_widget``, 02 ``knee_widget``, 03
``retry_widget``, 04 ``drain_widget``, 06 ``provider_widget`` on the LLM batch
-- then sets its controls from Python (``widget.controls[name].value = v``,
exactly what a slider's ``change`` does in the kernel). Outside a running
event loop the widget updates at once, so the time of the assignment is the
change-to-new-PNG time. The widgets take turns (one change each per round), so
a burst of load on the shared machine hits them alike.

Every change in the first pass is to settings not seen before, so it
re-simulates; notebook 06's widget keeps the runs of settings it has shown
(``keep_runs``), and a second pass over the same changes times those
revisits separately.

Times are CPU time of this process (``time.process_time()``, user + sys);
"simulate" is the CPU time of the widget's ``run``, "render" the rest
(drawing, the PNG, the summary). Issue 23's target: change to new figure
<= 100 ms median CPU (issue 12's was the explorer's budget, 150 ms). Set
``OPENBLAS_NUM_THREADS=1`` when timing.

Usage: ``python bench/bench_widgets.py [--rounds 1]`` from the repository root.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import pandas as pd

from pipeline import Backoff, PipelineConfig
from pipeline.lessons import widgets as lessons
from pipeline.sim import (
    DrainTimeoutWarning,
    Exponential,
    IndependentFailures,
    LogNormal,
    OnOff,
    Poisson,
    Scenario,
)
from pipeline.sim.workloads.traces.replay import load_trace

TARGET_MS = 100  # issue 23 (issue 12's was 150)
DATA = Path(__file__).resolve().parents[1] / "data" / "llm_batch.csv"

Change = tuple[str, Any]


def notebook_widgets() -> dict[str, tuple[Callable[[], Any], list[Change]]]:
    """name -> (build the widget as its notebook does, changes to distinct settings)."""
    bursts = OnOff(rate_on=8.0, rate_off=1.0, mean_on_s=60, mean_off_s=120)
    bounded = Scenario(  # notebook 01
        arrivals=bursts,
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=50, drain_timeout_s=None),
        n_items=3_000,
        seed=3,
        item_size_bytes=64 * 1024,
    )
    knee = Scenario(  # notebook 02
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=100),
        n_items=10_000,
        seed=1,
    )
    retries = Scenario(  # notebook 03
        arrivals=Poisson(rate=2.0),
        service=Exponential(mean=1.0),
        failures=IndependentFailures(0.3),
        config=PipelineConfig(concurrency=4),
        n_items=4_000,
        seed=3,
    )
    drain = Scenario(  # notebook 04
        arrivals=Poisson(rate=0.16),
        service=LogNormal(mean=20.0, cv=1.5),
        config=PipelineConfig(
            concurrency=4,
            queue_maxsize=100,
            max_attempts=3,
            backoff=Backoff.constant(5.0),
            drain_timeout_s=30.0,
        ),
        failures=IndependentFailures(p=0.2),
        duration_s=600,
        seed=4,
    )
    batch, tokens = load_trace(DATA), pd.read_csv(DATA)["tokens"].to_numpy()
    llm = PipelineConfig(  # notebook 06
        concurrency=8,
        queue_maxsize=200,
        max_attempts=8,
        drain_timeout_s=None,
        backoff=Backoff(base_s=1.0, factor=2.0, cap_s=30.0, jitter=True),
    )
    return {
        "01 burst": (
            lambda: lessons.burst_widget(bounded),
            [("burst_items", v) for v in (600, 900, 150, 1200)]
            + [("maxsize", v) for v in (20.0, 200.0, 1000.0)]
            + [("on_full", "reject"), ("burst_items", 450)],
        ),
        "02 knee": (
            lambda: lessons.knee_widget(knee),
            [("concurrency", v) for v in (5, 6, 8, 3)]
            + [("arrival_rate", v) for v in (2.4, 3.0, 3.6)]
            + [("concurrency", 4), ("arrival_rate", 2.0)],
        ),
        "03 retry": (
            lambda: lessons.retry_widget(retries),
            [("max_attempts", v) for v in (5, 2, 8)]
            + [("p", v) for v in (0.1, 0.5)]
            + [("backoff_s", 1.0), ("jitter", True), ("max_attempts", 3), ("p", 0.3)],
        ),
        "04 drain": (
            lambda: lessons.drain_widget(drain),
            [("drain_timeout_s", v) for v in (60, 10, 120, 0, 180)]
            + [("arrival_rate", v) for v in (0.1, 0.22)]
            + [("drain_timeout_s", v) for v in (30, 90)],
        ),
        "06 provider": (
            lambda: lessons.provider_widget(
                batch, tokens, limit=24, tokens_per_minute=400_000, config=llm
            ),
            # From 16 workers across the knee (about 20) to 64, then the limit moved.
            [("concurrency", v) for v in (20, 24, 32, 48, 64, 28)]
            + [("limit", v) for v in (16, 32, 48)]
            + [("concurrency", 8)],
        ),
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


class Timed:
    """A widget whose ``run`` is timed in CPU seconds, and its changes' times."""

    def __init__(self, widget: Any) -> None:
        self.widget = widget
        self.run_cpu: list[float] = []
        self.totals: list[float] = []
        self.runs: list[float] = []
        run = widget._run

        def timed_run(settings):
            began = time.process_time()
            try:
                return run(settings)
            finally:
                self.run_cpu.append(time.process_time() - began)

        widget._run = timed_run
        widget.debounce_s = 0.0

    def change(self, name: str, value: Any) -> None:
        control = self.widget.controls[name]
        if control.value == value:
            return
        before = len(self.run_cpu)
        began = time.process_time()
        control.value = value
        total = time.process_time() - began
        if self.widget.error:
            print(f"warning: {name}={value!r} failed: {self.widget.error}", file=sys.stderr)
        self.totals.append(total)
        self.runs.append(sum(self.run_cpu[before:]))


def ms(values: list[float], q: float | None = None) -> str:
    if not values:
        return "-"
    value = statistics.median(values) if q is None else percentile(values, q)
    return f"{value * 1000:.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="passes over every change list")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", DrainTimeoutWarning)  # 04's drains time out on purpose

    specs = notebook_widgets()
    timed = {name: Timed(build()) for name, (build, _) in specs.items()}
    start = timed["06 provider"].widget.settings
    for t in timed.values():
        t.widget.update()  # warm-up: fonts, caches (kept as a run, like the notebook's first)
        t.totals.clear()
        t.runs.clear()
    longest = max(len(changes) for _, changes in specs.values())
    for _ in range(args.rounds):
        for i in range(longest):
            for name, (_, changes) in specs.items():
                if i < len(changes):
                    timed[name].change(*changes[i])
    first = {name: (list(t.totals), list(t.runs)) for name, t in timed.items()}
    # Revisits: notebook 06's widget has kept these runs; the others re-run.
    provider = timed["06 provider"]
    for name, control in provider.widget.controls.items():  # back to the start, untimed
        control.value = start[name]
    provider.totals.clear()
    provider.runs.clear()
    for change in specs["06 provider"][1]:
        provider.change(*change)

    print(f"command: `{shlex.join(['python', *sys.argv])}`")
    print(
        f"machine: {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}\n"
    )
    print("| widget (CPU ms of this process) | changes | median | p90 | simulate | render |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (totals, runs) in first.items():
        renders = [t - r for t, r in zip(totals, runs, strict=True)]
        print(
            f"| {name} | {len(totals)} | {ms(totals)} | {ms(totals, 90)} | {ms(runs)} | "
            f"{ms(renders)} |"
        )
    renders = [t - r for t, r in zip(provider.totals, provider.runs, strict=True)]
    print(
        f"| 06 provider, settings shown before (kept runs) | {len(provider.totals)} | "
        f"{ms(provider.totals)} | {ms(provider.totals, 90)} | {ms(provider.runs)} | {ms(renders)} |"
    )
    worst = max(statistics.median(totals) for totals, _ in first.values()) * 1000
    verdict = "meets" if worst <= TARGET_MS else "MISSES"
    print(
        f"\nslowest widget's median change -> figure: {worst:.0f} ms CPU "
        f"({verdict} the <= {TARGET_MS} ms target)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
